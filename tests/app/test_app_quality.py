"""The real model's bundled recording on the Savings and Mechanism pages, in both languages: bytes per token against
KL and top-1 agreement on one chart, the published quality figures with their sources, the same question answered
through two caches side by side, and the mechanism on real text beside the published 5.21x."""

from __future__ import annotations

import json

import pytest
from app_helpers import charts, page, texts

from kvcore.recordings import store as recordings
from kvcore.units import fmt_small
from kvcore.views import memory as views
from kvcore.views import savings as savings_views
from kvsite import i18n

REC = "measured-linux-cpu-smollm2-135m"
LLAMACPP_REC = "measured-linux-cpu-llamacpp-smollm2-135m-quality"
SAVINGS = "pages/6_Savings.py"


def bundled(rec: str = REC):
    return recordings.load(recordings.BUNDLED_DIR / f"{rec}.yaml")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_savings_shows_bytes_per_token_against_quality_from_the_recording(rec_dir, lang):
    at = page(SAVINGS, lang)
    assert not at.exception, [e.message for e in at.exception]
    quality = next(
        c
        for c in charts(at)
        if "kl_vs_baseline" in c["data"].to_json()
        or any("KL" in str(col) for col in c["data"].columns)
    )
    trade = savings_views.quality_trade(
        [bundled(), bundled(LLAMACPP_REC)]
    )  # two runtimes, one model
    quantized = trade[trade["kl_vs_baseline"] > 0]
    assert len(quality["data"]) == len(
        quantized
    )  # every format that moved is a point; each run's baseline sits in the table
    shown = texts(at)
    for row in trade.itertuples():
        assert fmt_small(row.kl_vs_baseline) in shown and f"{row.top1_agreement:.1%}" in shown
    assert (
        "https://github.com/ggml-org/llama.cpp/pull/7412" in shown
        and "https://arxiv.org/abs/2401.18079" in shown
    )
    assert ("head_dim 64" in shown) and ("PR #1555" in shown)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_same_question_is_answered_through_two_caches_side_by_side(rec_dir, lang):
    answers = savings_views.quality_answers(bundled())
    prompt = next(iter(answers))
    rows = answers[prompt]
    for row in rows[1:]:
        from kvsite.sections.quality import format_label

        at = page(SAVINGS, lang, qprompt=prompt, qfmt=format_label(row, lang))
        assert not at.exception, [e.message for e in at.exception]
        code = [c.value for c in at.code]
        assert rows[0]["answer"] in code and row["answer"] in code
        words = texts(at)
        if "first_divergence" in row:
            assert "part at" in words or "分かれます" in words
        else:
            assert "Identical" in words or "同じです" in words


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_mechanism_on_real_text_shows_the_text_and_both_times(rec_dir, lang):
    at = page("pages/1_Mechanism.py", lang, src=REC)
    assert not at.exception, [e.message for e in at.exception]
    real = views.mechanism_text(bundled())
    assert any(real["generated"] in c.value and real["prompt"] in c.value for c in at.code)
    assert "5.21×" in texts(at)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_llamacpps_cache_types_sit_beside_mlx_lms_on_the_same_model(rec_dir, lang):
    """The llama.cpp quality run of the same GGUF joins the chart and the table, each format named with its
    runtime, and a note sets the two runtimes' figures at the same bit width side by side."""
    at = page(SAVINGS, lang)
    assert not at.exception, [e.message for e in at.exception]
    quality = next(c for c in charts(at) if "kl_vs_baseline" in c["data"].columns)
    names = set(quality["data"]["format"])
    assert any(n.startswith("llama.cpp · q4_0") for n in names)
    assert any(n.startswith("mlx_lm · mlx-q4") for n in names)
    shown = texts(at)
    rows = {r["kv_format"]: r for r in bundled(LLAMACPP_REC).rows("quality")}
    for fmt in ("q8_0", "q4_0"):
        assert fmt_small(rows[fmt]["kl_vs_baseline"]) in shown
        assert f"{rows[fmt]['top1_agreement']:.1%}" in shown
    assert "ggml-cpu/ops.cpp" in shown and "0c1e570" in shown  # why the runtimes differ, cited
    assert ("8-bit:" in shown) if lang == "en" else ("8 ビットでは" in shown)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_llamacpp_run_picked_as_the_source_keeps_the_mlx_lm_run_beside_it(rec_dir, lang):
    at = page(SAVINGS, lang, src=LLAMACPP_REC)
    assert not at.exception, [e.message for e in at.exception]
    quality = next(c for c in charts(at) if "kl_vs_baseline" in c["data"].columns)
    assert set(quality["data"]["runtime"]) == {"llama.cpp", "mlx_lm"}
    answers = savings_views.quality_answers(bundled(LLAMACPP_REC))
    baseline = next(iter(answers.values()))[0]
    assert baseline["label"] == "f16 (baseline)"  # the baseline context's own answer, shown as such
    assert baseline["answer"] in [c.value for c in at.code]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_default_question_shows_what_the_agreement_table_says(rec_dir, lang):
    """The page opens on a question where 8 bits keeps the baseline's answer and 4 bits changes it (as the table's
    top-1 agreement orders them), not on the one question where even mlx-q8 moved; every question's count is said."""
    answers = savings_views.quality_answers(bundled())
    at = page(SAVINGS, lang)
    prompt = at.selectbox(key="qprompt").value
    rows = {r["label"]: r for r in answers[prompt]}
    assert "first_divergence" not in rows["mlx-q8 (group 64)"]
    assert "first_divergence" in rows["mlx-q4 (group 64)"]
    words = texts(at)
    mlx_q8, total = sum("first_divergence" not in q[2] for q in answers.values()), len(answers)
    assert (
        f"mlx-q8 (group 64) {mlx_q8} of {total}" if lang == "en" else f"{total} 問中 {mlx_q8} 問"
    ) in words


@pytest.mark.parametrize("rec", [REC, LLAMACPP_REC])
def test_every_question_the_answers_ask_the_baseline_answers_right(rec):
    """A wrong baseline could not show what a cache does to an answer ("Neptune ... actually Uranus" was the default):
    each question is one kvcore.measure.mlx_quality.DEMO_QUESTIONS holds with what a right answer says."""
    from kvcore.measure.mlx_quality import DEMO_QUESTIONS

    for question, rows in savings_views.quality_answers(bundled(rec)).items():
        assert DEMO_QUESTIONS[question] in rows[0]["answer"], (question, rows[0]["answer"])


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_default_questions_baseline_is_right_and_the_page_says_what_answers_cannot_show(
    rec_dir, lang
):
    from kvcore.measure.mlx_quality import DEMO_QUESTIONS

    at = page(SAVINGS, lang)
    prompt = at.selectbox(key="qprompt").value
    baseline = savings_views.quality_answers(bundled())[prompt][0]["answer"]
    assert DEMO_QUESTIONS[prompt] in baseline and baseline in [c.value for c in at.code]
    words = texts(at)
    assert "1,024" in words and "98.9%" in words  # beside the answers: the rate they cannot give
    assert ("how often" if lang == "en" else "頻度") in words


def test_the_quality_charts_legend_marks_can_be_told_apart(rec_dir):
    """The colour legend draws swatches large and without the points' black outline (a small dot inside a thick
    outline could not be told from its neighbours); the runtime's shapes have no legend of their own, each colour's
    label naming its runtime."""
    at = page(SAVINGS, "en")
    spec = next(c["spec"] for c in charts(at) if "kl_vs_baseline" in c["data"].columns)
    points = next(
        layer for layer in spec["layer"] if (layer.get("mark") or {}).get("type") == "point"
    )
    colour = points["encoding"]["color"]["legend"]
    assert colour["symbolStrokeWidth"] == 0 and colour["symbolSize"] >= 100
    assert points["encoding"]["shape"]["legend"] is None
    data = next(c["data"] for c in charts(at) if "kl_vs_baseline" in c["data"].columns)
    shape, colour = points["encoding"]["shape"]["field"], points["encoding"]["color"]["field"]
    assert data[shape].nunique() > 1  # two runtimes drawn, the legend names each
    assert all(r[shape] in r[colour] for r in data.to_dict("records"))


LONG_RECS = sorted(p.stem for p in recordings.BUNDLED_DIR.glob("measured-*long-context.yaml"))


def _both_quantized(row: dict) -> bool:
    from kvcore.memory.formats import get_format

    names = (row["kv_format"], row.get("v_format", row["kv_format"]))
    return all(get_format(n).kind != "plain" for n in names)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_savings_draws_the_price_against_context_length_with_the_published_figures_beside_it(
    rec_dir, lang
):
    """Below the quality chart: each runtime's quantized caches (K and V both quantized, as mlx_lm's are; a
    llama.cpp pair with an f16 half only in the table), their mean KL, its 99th percentile and top-1 agreement
    at every recorded length (a choice inside the chart), each runtime its own dash, the retrieval answers,
    and the published long-context figures for larger models in a table of their own, each with its address,
    none on the chart's lines."""
    from kvcore.recordings.published import figures

    at = page(SAVINGS, lang)
    assert not any("metric" in c["data"].columns for c in charts(at))  # one click below
    at.toggle(key="long").set_value(True).run()
    assert not at.exception, [e.message for e in at.exception]
    chart = next(c for c in charts(at) if "metric" in c["data"].columns)
    recs = [bundled(name) for name in LONG_RECS]
    windows = [
        r
        for rec in recs
        for r in rec.rows("long_context")
        if r["scope"] == "window" and r["kl_mean"] > 0
    ]
    drawn = [r for r in windows if _both_quantized(r)]
    assert len(chart["data"]) == 3 * len(drawn)  # three metrics a point
    assert set(chart["data"]["context"]) == {r["end"] for r in drawn}
    assert set(chart["data"]["metric"]) == set(savings_views.LONG_METRICS)
    runtimes = {savings_views.quality_runtime(rec) for rec in recs}
    assert set(chart["data"]["runtime"]) == runtimes
    assert all(r["runtime"] in r["series"] for r in chart["data"].to_dict("records"))
    spec = json.dumps(chart["spec"], ensure_ascii=False)
    assert "binding_radio" in spec or '"input": "radio"' in spec
    assert '"strokeDash"' in spec
    published = figures()["kv_quality_long"]
    shown = texts(at)
    assert all(p["url"] in shown for p in published)
    assert not any(p["model"] in set(chart["data"].astype(str).values.ravel()) for p in published)
    for rec in recs:
        for row in rec.rows("retrieval"):
            assert row["answer"].replace("\n", " ") in shown
        reach = savings_views.baseline_reach(rec)
        if reach:  # where the unquantized run stops naming the fact, said beside its answers
            said = i18n.translate(
                lang, "savings.long_retrieval_reach", right=f"{reach[0]:,}", wrong=f"{reach[1]:,}"
            )
            assert said in shown
    for row in windows:  # every cache in the table, those left off the chart too
        assert f"{row['start']:,}–{row['end']:,}" in shown


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_where_the_baseline_stops_naming_the_fact_the_page_says_so(lang):
    """A run whose unquantized cache misses the fact at 2,048 tokens (the bundled run's baseline, changed here
    to miss it): its answers come with the sentence that from there the check shows the model's limit."""
    import copy

    from kvcore.recordings.store import Recording
    from kvsite.sections import quality

    path = recordings.BUNDLED_DIR / "measured-linux-cpu-smollm2-135m-long-context.yaml"
    data = copy.deepcopy(recordings.load(path).data)
    rows = data["sections"]["retrieval"]
    base = rows[0]["label"]
    assert quality._retrieval_reach(Recording(path, data), lang) == ""  # right at every length
    for r in rows:
        if r["label"] == base and r["context"] == 2048:
            r["correct"] = 0
    rec = Recording(path, data)
    assert savings_views.baseline_reach(rec) == (1024, 2048)
    said = quality._retrieval_reach(rec, lang)
    assert said == i18n.translate(
        lang, "savings.long_retrieval_reach", right="1,024", wrong="2,048"
    )
    assert "1,024" in said and "2,048" in said
    for r in rows:
        if r["label"] == base:
            r["correct"] = 0  # missed already at the first length
    rec = Recording(path, data)
    assert savings_views.baseline_reach(rec) == (0, 1024)
    never = i18n.translate(lang, "savings.long_retrieval_never", right="0", wrong="1,024")
    assert quality._retrieval_reach(rec, lang) == never and "1,024" in never
