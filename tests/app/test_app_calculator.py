"""The calculator page: the same numbers as `python -m kvcore calc --json`, levers that hold, verdict thresholds."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from app_helpers import ROOT, charts, texts
from app_helpers import page as site_page

from kvcore.capacity import calculator as calc
from kvcore.capacity.memory_fit import plan_allowance
from kvcore.errors import KvError
from kvcore.inputs.preset_files import load_preset
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import KvSpec, mlx_cache_formats
from kvcore.memory.formulas import kv_bytes, weights_bytes
from kvcore.runtimes.registry import RUNTIMES, get_runtime
from kvcore.units import GIB, fmt_bytes
from kvcore.views import what_if
from kvsite import i18n
from kvsite.sections.calc.compute import NUMBERS

CALC = "pages/8_Calculator.py"
LAZY = ("plan_open", "formula_open", "whatif_open")  # the expanders drawn only while open


def page(path: str, lang: str = "en", **params):
    """The page with the Calculator's lazy expanders open: what these tests read sits inside them."""
    return site_page(path, lang, state=dict.fromkeys(LAZY, True), **params)


def cli_json(model, ctx, seq, k, v, w, rt="mlx_lm"):
    args = [
        "calc",
        "--runtime",
        rt,
        "--model",
        model,
        "--context",
        str(ctx),
        "--sequences",
        str(seq),
        "--k-format",
        k,
        "--v-format",
        v,
        "--weights-format",
        w,
        "--json",
    ]
    r = subprocess.run(
        [sys.executable, "-m", "kvcore", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(r.stdout)


def numbers_rows(at, lang: str = "en") -> list[list[str]]:
    """The numbers table's cells (a markdown table under the formula): name, readable size, exact bytes."""
    table = next(
        m.value
        for m in at.markdown
        if m.value.startswith("| " + i18n.translate(lang, "calc.col_quantity") + " |")
    )
    return [
        [c.strip() for c in line.strip().strip("|").split("|")] for line in table.splitlines()[2:]
    ]


def numbers(at) -> dict:
    """{quantity key: exact bytes}, read back through the English quantity names."""
    names = {i18n.translate("en", f"calc.q_{q}"): q for q in NUMBERS}
    names[i18n.translate("en", "calc.q_kv_bytes_per_token_window")] = (
        "kv_bytes_per_token"  # a sliding-window model's row
    )
    average = i18n.translate("en", "calc.q_kv_bytes_per_token_average", n="{n}").split("{n}")[0]
    return {
        names[name]: int(exact.replace(",", ""))
        for name, _, exact in numbers_rows(at)
        if not name.startswith(average)
    }


def marks_in(spec: dict) -> list[str]:
    """Every mark type in a (possibly nested) layered Vega-Lite spec."""
    mark = spec.get("mark")
    own = [mark["type"] if isinstance(mark, dict) else mark] if mark else []
    return own + [m for layer in spec.get("layer", []) for m in marks_in(layer)]


def metric(at, label_start: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label_start))


def geometry(name):
    return preset_geometry(name)


@pytest.mark.parametrize(
    "model, ctx, seq, k, v, w, rt",
    [
        ("llama-3.1-8b", 131072, 1, "fp16", "fp16", "mlx-q4", "mlx_lm"),  # GQA
        ("smollm2-1.7b", 8192, 4, "mlx-q8", "mlx-q8", "bf16", "mlx_lm"),  # MHA
        ("smollm2-1.7b", 8192, 4, "mlx-q8", "mlx-q4", "bf16", "reference"),  # a K/V pair
        ("deepseek-v3", 65536, 1, "fp8", "fp8", "fp8", "reference"),  # MLA
        ("gemma-3-27b", 100000, 2, "q8_0", "q4_0", "mlx-q4", "reference"),  # sliding window
        ("qwen3-next-80b-a3b", 262144, 1, "turbo3", "turbo3", "mlx-q4", "reference"),
    ],  # hybrid linear attention
)
def test_page_numbers_equal_the_cli(rec_dir, model, ctx, seq, k, v, w, rt):
    at = page(CALC, model=model, ctx=ctx, seq=seq, k=k, v=v, w=w, rt=rt)
    assert not at.exception and at.selectbox(key="rt").value == rt
    out = cli_json(model, ctx, seq, k, v, w, rt)
    shown = numbers(at)
    for key in (
        "kv_bytes",
        "kv_bytes_per_sequence",
        "kv_bytes_per_token",
        "kv_prefill_peak_bytes",
        "weights_bytes",
    ):
        assert shown[key] == out[key], key
    formula = next(  # written out the way Article A writes it, multiplied out to the same total
        c.value
        for c in at.code
        if not c.value.startswith("Peak memory")  # (mlx_lm's plan: its log line)
    )
    assert formula.splitlines()[0].endswith(
        f"= {out['kv_bytes']:,} bytes ({k} K and V)"
        if k == v
        else f"= {out['kv_bytes']:,} bytes (K {k}, V {v})"
    )


@pytest.mark.parametrize(
    "model, ctx, gib",
    [
        ("llama-3.1-70b", 131072, 48),
        ("gemma-3-27b", 1_000_000, 24),
        ("qwen3-next-80b-a3b", 1_000_000, 60),
    ],
)
def test_levers_fit_and_one_more_does_not(rec_dir, model, ctx, gib):
    at = page(CALC, model=model, ctx=ctx, chip="custom", gib=gib)
    assert not at.exception and at.error  # it does not fit
    g, available = geometry(model), int(gib * GIB)
    weights = weights_bytes(g, "mlx-q4")

    def fits(t, s, fmt="fp16"):
        """The line the levers are solved against: the runtime's plan fits where it has one for the model; else
        weights + KV within the memory (Qwen3-Next's linear attention: no plan, the levers are upper bounds)."""
        spec = KvSpec(fmt, fmt)
        plan = get_runtime("mlx_lm").memory_plan(g, t, spec, s, None, weights)
        if plan is None:
            return calc.verdict(weights + kv_bytes(g, t, spec, s), available).status != "no"
        allowance = plan_allowance(plan)
        return calc.verdict(plan["total_bytes"], available, allowance).status == "fits"

    unplanned = not get_runtime("mlx_lm").plan_covers(g)
    titles = [h.value for h in at.subheader]
    assert (i18n.translate("en", "calc.levers_title_unplanned") in titles) == unplanned
    assert any(m.label.endswith("at most") for m in at.metric) == unplanned
    t = metric(at, "Longest context")
    if t != "—":
        t = int(t.replace(",", ""))
        assert fits(t, 1) and not fits(t + 1, 1)
    s = metric(at, "Most sequences")
    if s != "—":
        s = int(s.replace(",", ""))
        assert fits(ctx, s) and not fits(ctx, s + 1)
    formats = metric(at, "KV formats")
    assert t != "—" or s != "—" or formats != "—"
    for fmt in [] if formats == "—" else formats.split(", "):
        assert fits(ctx, 1, fmt)


def test_verdict_changes_at_its_stated_thresholds(rec_dir):
    # mlx_lm: its plan (generate_step's peak) with the transient parts' measured tolerance, no flat margin
    r = calc.calculate(geometry("llama-3.1-8b"), 32768, 1, KvSpec(), "mlx-q4")
    need, allowance = r.need_bytes, r.fit_allowance_bytes
    assert need == r.plan["total_bytes"] > r.weights_bytes + r.kv_bytes
    assert page(CALC, chip="custom", gib=round((need + allowance) / GIB + 0.01, 2)).success
    assert page(CALC, chip="custom", gib=round((need + allowance) / GIB - 0.01, 2)).warning
    assert page(CALC, chip="custom", gib=round((need - allowance) / GIB + 0.01, 2)).warning
    assert page(CALC, chip="custom", gib=round((need - allowance) / GIB - 0.01, 2)).error
    at = page(CALC)
    assert "25%" in texts(at) and any(c.value.startswith("Peak memory: ") for c in at.code)


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_each_runtimes_plan_says_what_it_leaves_out(rec_dir, lang):
    """Under the plan's log lines: what the runtime's plan does not count, in the page's language (llama.cpp's --fit
    and CPU_REPACK; mlx_lm's in-flight estimate and what it does not plan)."""
    for rt, key in (
        ("mlx_lm", "calc.plan_not_planned_mlx"),
        ("llama.cpp", "calc.plan_not_planned"),
    ):
        at = page(CALC, lang, rt=rt)
        assert not at.exception
        said = i18n.translate(lang, key)
        assert said != key and any(c.value == said for c in at.caption), (rt, lang)
        assert ("--fit" in said) == (rt == "llama.cpp")


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_without_a_plan_weights_and_kv_that_fit_are_not_called_a_fit(rec_dir, lang):
    """The reference runtime (and mlx_lm with a model its plan does not know) counts weights + KV only: at 95 % of
    the memory the page says they fit, that nothing else is counted and why, in an info box, never "fits"; at 101 %
    it does not fit. The levers are labelled upper bounds."""
    g = preset_geometry("llama-3.1-8b", "reference")
    need = calc.calculate(g, 32768, 1, KvSpec(), "mlx-q4").need_bytes
    t = i18n.translator(lang)
    at = page(CALC, lang, rt="reference", chip="custom", gib=round(need / 0.95 / GIB, 2))
    assert not at.exception and not at.success and not at.error and not at.warning
    (info,) = [el.value for el in at.info]
    assert info.startswith(t("calc.verdict_unplanned").split("：" if lang == "ja" else ":")[0])
    assert "95%" in info and t("calc.unplanned_runtime") in info
    assert t("calc.levers_title_unplanned") in [h.value for h in at.subheader]
    assert t("calc.thresholds") in [c.value for c in at.caption]
    over = page(CALC, lang, rt="reference", chip="custom", gib=round(need / 1.01 / GIB, 2))
    (error,) = [el.value for el in over.error]
    assert "101%" in error and not over.success
    assert not [el for el in over.info if t("calc.unplanned_runtime") in el.value]
    # DeepSeek-V3's MLA under mlx_lm: its plan does not know the layers, the page says so in the same way
    mla = page(CALC, lang, model="deepseek-v3", ctx=4096, w="mlx-q4", chip="custom", gib=1000)
    (info,) = [el.value for el in mla.info]
    assert t("calc.unplanned_model", runtime="mlx_lm") in info


def test_decode_what_if_equals_the_engine_prediction(rec_dir):
    at = page(CALC, model="qwen3-8b", ctx=65536, chip="M4 Max (40-core GPU)", ram=128)
    eff = what_if.efficiency(
        __import__("kvcore.recordings.store", fromlist=["load_all"]).load_all([rec_dir])[0]
    )
    want = what_if.predict_decode(
        geometry("qwen3-8b"), [65536], KvSpec(), "mlx-q4", "M4 Max (40-core GPU)", eff.share
    )[0]
    assert metric(at, "Predicted decode") == f"{want['tokens_per_s']:,.1f} tok/s"
    assert "M5 Pro · Llama-3.2-1B · mlx_lm" in texts(
        at
    )  # the efficiency names the runs it came from, as the site does
    decode = charts(at)[-1]["data"]
    row = decode[decode["context"] == 1048576].iloc[0]
    g = geometry("qwen3-8b")
    assert row["tokens_per_s"] == pytest.approx(
        what_if.predict_decode(g, [1048576], KvSpec(), "mlx-q4", "M4 Max (40-core GPU)", eff.share)[
            0
        ]["tokens_per_s"]
    )


def test_a_mac_uses_its_default_gpu_limit_and_an_override(rec_dir):
    at = page(CALC, chip="M4", ram=16)
    assert metric(at, "Available") == "10.67 GiB"
    assert metric(page(CALC, chip="M4", ram=16, limit=14), "Available") == "14.00 GiB"


def test_a_url_with_parameters_reproduces_the_view(rec_dir):
    at = page(
        CALC,
        model="qwen3-4b",
        ctx=200000,
        seq=3,
        k="mlx-q8",
        v="mlx-q8",
        w="bf16",
        chip="M3 Pro",
        ram=36,
    )
    assert at.selectbox(key="model").value == "qwen3-4b"
    assert at.number_input(key="ctx").value == 200000 and at.number_input(key="seq").value == 3
    assert at.selectbox(key="k").value == "mlx-q8"  # mlx_lm: one box, K and V
    assert (
        numbers(at)["kv_bytes"]
        == cli_json("qwen3-4b", 200000, 3, "mlx-q8", "mlx-q8", "bf16")["kv_bytes"]
    )


@pytest.mark.parametrize("lang", i18n.LANGUAGES)
def test_mlx_lm_offers_its_own_caches_in_one_box_and_says_what_a_link_asked_for(rec_dir, lang):
    """mlx_lm: one box for K and V (one kv_bits quantizes both) holding what its cache classes hold. A link
    with V apart from K, or a format mlx_lm does not store, says in the reader's language what the page shows
    instead; the reference runtime keeps both boxes and every format. The engine refuses the pair itself
    (tests/test_cli.py)."""
    at = page(CALC, lang)
    boxes = {el.key: el for el in at.selectbox}
    assert boxes["k"].options == list(mlx_cache_formats()) and "v" not in boxes
    assert boxes["k"].label == i18n.translate(lang, "calc.kv_one_format")
    mlx_lm = get_runtime("mlx_lm")

    def note(
        k, v, shown
    ):  # the runtime's own refusal of the link's formats, then what the page shows
        with pytest.raises(KvError) as e:
            mlx_lm.check_kv(KvSpec(k, v))
        message = i18n.error_text(lang, e.value)
        return i18n.translate(lang, "calc.link_refused", message=message, shown=shown)

    both = i18n.translator(lang)
    pair = page(CALC, lang, k="mlx-q8", v="mlx-q4")
    assert [el.value for el in pair.warning] == [
        note("mlx-q8", "mlx-q4", both("growth.f_same_format", k="mlx-q8"))
    ]
    kv = cli_json("llama-3.1-8b", 32768, 1, "mlx-q8", "mlx-q8", "mlx-q4")["kv_bytes"]
    assert f"{kv:,}" in {row[2] for row in numbers_rows(pair, lang)}  # K and V both in mlx-q8
    old_link = page(CALC, lang, k="q8_0", v="q8_0")
    assert [el.value for el in old_link.warning] == [
        note("q8_0", "q8_0", both("growth.f_same_format", k="fp16"))
    ] and {el.key: el.value for el in old_link.selectbox}["k"] == "fp16"
    assert ", ".join(mlx_cache_formats()) in old_link.warning[0].value  # what mlx_lm's caches hold
    unknown = page(CALC, lang, k="q9_x", v="q9_x", rt="reference")  # a name kvcore does not know
    assert len(unknown.warning) == 1 and "'q9_x'" in unknown.warning[0].value
    ref = page(CALC, lang, k="q8_0", v="q4_0", rt="reference")
    assert not ref.warning and {"k", "v"} <= {el.key for el in ref.selectbox}


def test_log_slider_and_exact_entry_drive_one_context(rec_dir):
    at = page(CALC)
    at.select_slider(key="ctx_log").set_value(1_048_576).run()
    assert at.number_input(key="ctx").value == 1_048_576
    at.number_input(key="ctx").set_value(5000).run()
    assert numbers(at)["kv_bytes"] == kv_bytes(geometry("llama-3.1-8b"), 5000)


def test_pasted_config_is_computed_and_a_bad_one_is_named(rec_dir):
    at = page(CALC, msrc="config")
    assert not at.exception and at.info  # asks for a config
    config = dict(load_preset("qwen3-4b")["config"])
    at.text_area(key="pasted").input(json.dumps(config)).run()
    assert numbers(at)["kv_bytes"] == kv_bytes(geometry("qwen3-4b"), 32768)
    del config["num_hidden_layers"]
    at.text_area(key="pasted").input(json.dumps(config)).run()
    assert not at.exception and "num_hidden_layers" in at.error[0].value
    at.text_area(key="pasted").input("{not json").run()
    assert not at.exception and "not valid JSON" in at.error[0].value
    at.text_area(key="pasted").input('{"a": "' + "x" * 1_100_000 + '"}').run()
    assert not at.exception and "larger than" in at.error[0].value
    at.text_area(key="pasted").input(
        json.dumps(load_preset("llama-3.2-1b")["config"])
    ).run()  # and the page keeps working
    assert not at.error and numbers(at)["kv_bytes_per_token"] == 32768


def test_a_bad_config_is_named_in_japanese_on_the_japanese_page(rec_dir):
    at = page(CALC, "ja", msrc="config")
    config = dict(load_preset("qwen3-4b")["config"])
    del config["num_hidden_layers"]
    at.text_area(key="pasted").input(json.dumps(config)).run()
    assert (
        not at.exception
        and "config.json にフィールド 'num_hidden_layers' がありません" in at.error[0].value
    )
    at.text_area(key="pasted").input("{not json").run()
    assert (
        "config.json は正しい JSON ではありません（1 行 2 列目で読めなくなります）"
        in at.error[0].value
    )
    assert (
        "Expecting" not in at.error[0].value
    )  # Python's English parser message stays out of the Japanese sentence


def test_the_plan_formula_and_what_if_are_sent_only_while_open(rec_dir):
    """Closed (as a page opens), each is one element; opened, its inside is drawn: a slider step above them
    (the context) re-sends none of it while they are closed."""
    closed = site_page(CALC, "en", model="llama-3.1-8b", rt="llama.cpp")
    assert not closed.code  # the plan's log and the formula's lines
    assert not any(m.label.startswith("Predicted decode") for m in closed.metric)
    assert len(charts(closed)) == 1  # the memory chart; the what-if's is not sent
    opened = page(CALC, "en", model="llama-3.1-8b", rt="llama.cpp")
    assert len(opened.code) == 2
    assert any(m.label.startswith("Predicted decode") for m in opened.metric)
    assert len(charts(opened)) == 2
    linked = site_page(CALC, "en", chip="custom", schip="M3 Max (30-core GPU)")
    # a link naming its chip opens it
    assert any(m.label.startswith("Predicted decode") for m in linked.metric)
    for key in LAZY:  # each opens on its own
        one = site_page(CALC, "en", state={key: True}, model="llama-3.1-8b", rt="llama.cpp")
        assert (len(one.code), len(charts(one))) == {
            "plan_open": (1, 1),
            "formula_open": (1, 1),
            "whatif_open": (0, 2),
        }[key]


def test_the_per_layer_table_opens_with_one_row_per_layer(rec_dir):
    at = page(CALC, "en", model="gemma-3-4b", ctx=32768)
    assert not any(
        "layer" in d.value.columns for d in at.dataframe
    )  # a lazy expander: sent only while open
    at.session_state["layers_open"] = True
    at.run()
    table = next(d.value for d in at.dataframe if "layer" in d.value.columns)
    g = geometry("gemma-3-4b")
    assert len(table) == len(g.layers)
    assert set(table["kind"]) == {"full attention", "sliding window"}


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_numbers_table_names_each_quantity_in_the_pages_language_with_readable_sizes(
    rec_dir, lang
):
    at = page(CALC, lang, ctx=32768)
    rows = numbers_rows(at, lang)
    assert [name for name, _, _ in rows] == [i18n.translate(lang, f"calc.q_{q}") for q in NUMBERS]
    out = cli_json("llama-3.1-8b", 32768, 1, "fp16", "fp16", "mlx-q4")
    for (name, size, exact), q in zip(rows, NUMBERS):
        assert exact == f"{out[q]:,}" and size == fmt_bytes(
            out[q]
        )  # e.g. "4,294,967,296" and "4.00 GiB (4.29 GB)"
    shown = texts(at)
    assert not any(q in shown for q in NUMBERS)  # no internal key names in what the reader sees


@pytest.mark.parametrize(
    "lang, said",
    [
        ("en", "its context at 131,072 tokens (max_position_embeddings"),
        ("ja", "文脈長は 131,072 トークンです（config.json の max_position_embeddings"),
    ],
)
def test_a_context_past_the_models_limit_is_said_and_marked_on_both_charts(rec_dir, lang, said):
    at = page(CALC, lang, ctx=200_000)
    assert not at.exception
    assert any(said in w.value and "200,000" in w.value for w in at.warning)
    label = i18n.translate(lang, "common.model_limit", n="131,072")
    for chart in charts(at):  # memory and decode: a rule at the limit, labelled
        rule = chart["data"][chart["data"].get("label", pd.Series(dtype=str)) == label]
        assert list(rule["context"]) == [131072]
        assert "rule" in marks_in(chart["spec"])
    within = page(CALC, lang, ctx=131_072)
    assert not any("max_position_embeddings" in w.value for w in within.warning)


def test_the_decode_chart_marks_the_readers_context_with_its_value(rec_dir):
    at = page(CALC, ctx=50_000, chip="M4 Max (40-core GPU)", ram=128)
    shown = metric(at, "Predicted decode")
    assert "point" in marks_in(charts(at)[-1]["spec"])
    decode = charts(at)[-1]["data"]
    mark = (
        decode[decode["label"].fillna("").str.startswith("50,000: ")]
        if "label" in decode
        else decode.iloc[0:0]
    )
    assert len(mark) == 1 and mark["context"].iloc[0] == 50_000
    assert (
        f"{mark['tokens_per_s'].iloc[0]:,.1f} tok/s"
        == shown
        == mark["label"].iloc[0].split(": ")[1]
    )


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_no_speed_is_predicted_where_it_does_not_fit_and_the_reason_is_given(rec_dir, lang):
    at = page(CALC, lang, model="llama-3.1-70b", ctx=131072, chip="custom", gib=48)
    assert not at.exception and at.error  # does not fit
    assert not any("tok/s" in m.value for m in at.metric)
    g = geometry("llama-3.1-70b")
    fits_to = calc.max_context(g, KvSpec(), 1, weights_bytes(g, "mlx-q4"), 48 * GIB)
    reason = next(i.value for i in at.info if f"{fits_to:,}" in i.value)
    assert "131,072" in reason and "48.00 GiB" in reason
    assert (
        i18n.translate(lang, "calc.counted_plan") in reason
    )  # mlx_lm's whole plan, not weights + KV
    decode = charts(at)[-1]["data"]
    assert decode["context"].max() == fits_to  # the curve stops where it stops fitting
    nothing = page(
        CALC, lang, model="llama-3.1-405b", chip="custom", gib=16
    )  # the weights alone do not fit
    assert not nothing.exception and not any("tok/s" in m.value for m in nothing.metric)
    assert len(charts(nothing)) == 1 and any(
        "16.00 GiB" in i.value for i in nothing.info
    )  # the memory chart only


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_mlx_lms_prefill_step_is_a_setting_and_a_smaller_one_is_offered_where_it_alone_makes_it_fit(
    rec_dir, lang
):
    """Llama-3.1-8B, 4-bit weights and cache, 131,072 tokens, 18 GiB: mlx_lm's plan at its default 2,048-token
    prefill step does not fit (a converted quantized cache attends unfused: the scores are heads x step x keys); the
    page offers `--prefill-step-size 512` in mlx_lm's words with that plan's total, and the widget set to 512 gives
    that plan and a fit. The widget is there under mlx_lm only, its range the setting's."""
    params = dict(model="llama-3.1-8b", ctx=131072, k="mlx-q4", chip="custom", gib=18)
    t = i18n.translator(lang)
    at = page(CALC, lang, **params)
    assert not at.exception and at.error  # it does not fit
    box = at.selectbox(
        key="mstep"
    )  # powers of two, 64 to 2^20 (every one planned without a long walk)
    assert (box.label, box.value) == (t("calc.prefill_step_size"), 2048)
    assert [int(o.replace(",", "")) for o in box.options] == [1 << b for b in range(6, 21)]
    rt, g = get_runtime("mlx_lm"), geometry("llama-3.1-8b")
    spec, w, available = KvSpec("mlx-q4", "mlx-q4"), weights_bytes(g, "mlx-q4"), 18 * GIB

    def plan(step):
        return rt.memory_plan(g, 131072, spec, 1, rt.options(1, prefill_step=step), w)

    def fits(p):
        return calc.verdict(p["total_bytes"], available, plan_allowance(p)).status == "fits"

    said = t(
        "calc.lever_chunk_prefill_step",
        said="--prefill-step-size 512",
        need=fmt_bytes(plan(512)["total_bytes"]),
    )
    assert said in [c.value for c in at.caption]
    assert fits(plan(512)) and not fits(plan(1024)) and not fits(plan(2048))
    # the verdict names the part where the plan passes the limit, in the runtime's words
    from kvcore.capacity.memory_fit import Limit, fit

    part = fit(plan(2048), Limit(available, "")).blocking
    assert part and t("calc.verdict_part", part=part, runtime="mlx_lm") in at.error[0].value
    at = page(CALC, lang, **params, mstep=512)
    assert not at.exception and not at.error and at.success
    assert metric(at, t("calc.total_plan")) == fmt_bytes(plan(512)["total_bytes"], decimal=False)
    assert not [c for c in at.caption if "--prefill-step-size" in c.value]  # it fits: no lever
    at = page(CALC, lang, **params, mstep=2048, rt="reference")
    assert not at.exception and not [n for n in at.selectbox if n.key == "mstep"]
    odd = page(CALC, lang, **params, mstep=100)  # a link with a step the box does not offer
    assert not odd.exception and odd.selectbox(key="mstep").value == 2048


def test_llama_cpp_is_offered_a_smaller_micro_batch_where_it_makes_the_plan_fit(rec_dir):
    """The same lever under llama.cpp, in its words: Llama-3.1-8B Q4_K_M at -c 131072 -ub 2048 on 21.4 GiB does not
    fit (flash attention as llama.cpp's default), -ub 1024 fits: the page says `-ub 1024` with that plan's total."""
    params = dict(
        model="llama-3.1-8b", ctx=131072, rt="llama.cpp", w="gguf-q4_k_m", ub=2048, build="CPU"
    )
    at = page(CALC, "en", **params, chip="custom", gib=21.4)
    assert not at.exception and at.error
    rt, g = get_runtime("llama.cpp"), preset_geometry("llama-3.1-8b", "llama.cpp")
    w, available = weights_bytes(g, "gguf-q4_k_m"), int(21.4 * GIB)

    def plan(ub):
        return rt.memory_plan(g, 131072, KvSpec(), 1, rt.options(1, ubatch=ub, backend="cpu"), w)

    def fits(p):
        return calc.verdict(p["total_bytes"], available, plan_allowance(p)).status == "fits"

    assert fits(plan(1024)) and not fits(plan(2048))
    said = i18n.translate(
        "en", "calc.lever_chunk_ubatch", said="-ub 1024", need=fmt_bytes(plan(1024)["total_bytes"])
    )
    assert said in [c.value for c in at.caption]


# ---------------------------------------------------------------- llama.cpp as the runtime (issue 11)


def test_llama_cpp_runtime_prints_its_own_log_lines_with_its_options(rec_dir):
    at = page(CALC, "en", model="gpt-oss-20b", ctx=131072, rt="llama.cpp", k="fp16", v="fp16")
    assert not at.exception
    log = next(c.value for c in at.code)
    assert (
        "size = 3072.00 MiB (131072 cells,  12 layers,  1/1 seqs)" in log
    )  # non-SWA, as llama.cpp logs it
    assert (
        "size =   18.00 MiB (   768 cells,  12 layers,  1/1 seqs)" in log
    )  # SWA: 128-token window + 512 micro-batch
    assert numbers(at)["kv_bytes"] == (3072 + 18) * 2**20
    at = page(CALC, "en", model="gpt-oss-20b", ctx=131072, rt="llama.cpp", ub=2048)
    assert "size =   54.00 MiB (  2304 cells" in next(
        c.value for c in at.code
    )  # the micro-batch widens the SWA cache


def test_llama_cpp_unified_cache_changes_the_streams(rec_dir):
    split = page(CALC, "en", model="gemma-2-2b", ctx=8192, rt="llama.cpp", seq=4)
    unified = page(CALC, "en", model="gemma-2-2b", ctx=8192, rt="llama.cpp", seq=4, uni="True")
    assert "(  2048 cells,  13 layers,  4/4 seqs)" in next(c.value for c in split.code)
    assert "size =  416.00 MiB (  8192 cells,  13 layers,  4/1 seqs)" in next(
        c.value for c in unified.code
    )


def test_llama_cpp_offers_only_its_own_cache_types(rec_dir):
    at = page(CALC, "en", rt="llama.cpp")
    assert "mlx-q4" not in at.selectbox(key="k").options and "q5_1" in at.selectbox(key="k").options
    assert "mlx-q4" in page(CALC, "en").selectbox(key="k").options


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_same_model_under_each_runtime_says_why_they_differ(rec_dir, lang):
    at = page(CALC, lang, model="mistral-7b-v0.1", ctx=10000)
    at.session_state["cmp_open"] = True
    at.run()
    table = next(
        m.value
        for m in at.markdown
        if m.value.startswith("| " + i18n.translate(lang, "calc.runtime") + " |")
    )
    rows = {line.split("|")[1].strip().strip("`"): line for line in table.splitlines()[2:]}
    assert set(rows) == set(RUNTIMES)  # every runtime the registry names
    assert "10,240" in rows["llama.cpp"]  # 10,000 cells padded to 256
    assert "4,096" in rows["reference"]  # the config's own window, which mlx_lm ignores
    assert not at.exception


def test_the_memory_chart_draws_formats_of_equal_cost_as_one_named_line(rec_dir):
    data = charts(page(CALC, "en"))[0]["data"]
    curves = data[data["format"] != i18n.translate("en", "calc.available_line")]
    lines = curves.groupby("format")["gib"].apply(tuple)
    assert lines.nunique() == len(
        lines
    )  # no line hidden under another (mlx-q8 and q8_0 once drew on top of each other)
    assert {"mlx-q8 = q8_0", "mlx-q4 = q4_0"} <= set(curves["format"])


def test_the_memory_chart_is_one_drawing_for_every_context_up_to_128k(rec_dir):
    """It is drawn to 1M tokens with no mark at the reader's context, so it is cached by its end (calc_sections
    .chart_end), not by the context: a context step below 128K reuses it; past 128K its end moves and it changes."""
    spec = {
        ctx: json.dumps(charts(page(CALC, "en", ctx=ctx))[0]["spec"], sort_keys=True)
        for ctx in (1024, 65536, 131072, 262144)
    }
    assert spec[1024] == spec[65536] == spec[131072] != spec[262144]
    # issue 36: within the model's limit the chart stops there (Llama-3.1-8B: 131,072), not at 2M tokens
    assert charts(page(CALC, "en", ctx=32768))[0]["data"]["context"].max() == 131072


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_unified_slots_show_each_slots_speed_and_the_total_each_named(rec_dir, lang):
    # issue 17: gpt-oss-20b, 131,072, llama.cpp, 4 slots on one unified cache, M4 Pro: the KV is one slot's, and so
    # is each slot's speed; the total is four times that, and the page says which figure is which
    four = page(
        CALC,
        lang,
        model="gpt-oss-20b",
        ctx=131072,
        rt="llama.cpp",
        seq=4,
        uni="True",
        chip="M4 Pro",
        ram=48,
    )
    one = page(
        CALC, lang, model="gpt-oss-20b", ctx=131072, rt="llama.cpp", seq=1, chip="M4 Pro", ram=48
    )
    assert not four.exception and not one.exception
    t = i18n.translator(lang, "calc.")
    each = next(m for m in four.metric if t("decode_each_slot") in m.label)
    total = next(m for m in four.metric if m.label == t("decode_at_total", n=4))
    alone = next(
        m for m in one.metric if m.label.startswith(t("decode_at", n="131,072", chip="M4 Pro"))
    )
    speed = lambda m: float(m.value.split()[0].replace(",", ""))  # noqa: E731
    assert speed(each) == pytest.approx(speed(alone), rel=0.02)
    assert speed(total) == pytest.approx(4 * speed(each), rel=0.01)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_sliding_window_models_per_token_row_says_until_the_windows_are_full_and_gives_the_average(
    rec_dir, lang
):
    # issue 17: Gemma-3-27B at 131,072 showed 496 KiB per token beside a 10.41 GiB total (83 KiB per token on average)
    at = page(CALC, lang, model="gemma-3-27b", ctx=131072)
    assert not at.exception
    rows = {name: exact for name, _, exact in numbers_rows(at, lang)}
    t = i18n.translator(lang, "calc.")
    cli = cli_json("gemma-3-27b", 131072, 1, "fp16", "fp16", "mlx-q4")
    assert int(rows[t("q_kv_bytes_per_token_window")].replace(",", "")) == cli["kv_bytes_per_token"]
    average = int(rows[t("q_kv_bytes_per_token_average", n="131,072")].replace(",", ""))
    assert average == round(cli["kv_bytes"] / 131072) and average < cli["kv_bytes_per_token"] / 5
    assert (
        t("q_kv_bytes_per_token") not in rows
    )  # the bare row would read as what every token costs


@pytest.mark.parametrize("value", ["1", "4096", "32768", "10000000"])
def test_the_context_in_the_url_comes_back_exactly(rec_dir, value):
    """?ctx=1 is the number input's minimum: Streamlit's own binding took it for the default and showed 32,768."""
    at = page(CALC, ctx=value)
    assert at.number_input(key="ctx").value == int(value)
    at.number_input(key="ctx").set_value(
        1
    ).run()  # and a reader's 1 goes into the URL, to come back from it
    assert at.query_params["ctx"] == ["1"] or at.query_params["ctx"] == "1"


# ---------------------------------------------------------------- the registries reach the page (issue 15)


def test_a_throwaway_format_and_runtime_reach_the_pages_choices_and_a_wrong_format_says_what_is_wrong(
    rec_dir, monkeypatch
):
    """Added to kvcore's registries alone (monkeypatched: nothing written into the repository), a format and a
    runtime are the page's choices and its numbers; a 256-value-block format on 64-value rows is refused in words."""
    from kvcore.memory import formats
    from kvcore.memory.formats import CacheFormat
    from kvcore.runtimes import registry as runtimes
    from kvcore.runtimes.token import TokenRuntime

    monkeypatch.setitem(
        formats.FORMATS, "q6_test", CacheFormat("q6_test", "block", 6, 32, 26, llamacpp=True)
    )
    monkeypatch.setitem(
        formats.FORMATS, "q6_k", CacheFormat("q6_k", "block", 6, 256, 210, llamacpp=True)
    )
    rt = TokenRuntime(
        "throwaway_rt", "throwaway_rt (a test's runtime)", "sliding_ignored", windows="reference"
    )
    monkeypatch.setitem(runtimes.RUNTIMES, rt.name, rt)
    at = page(CALC, "en", rt="llama.cpp")
    assert {"q6_test", "q6_k"} <= set(
        at.selectbox(key="k").options
    ) and "throwaway_rt" in at.selectbox(key="rt").options
    at = page(
        CALC,
        "en",
        model="mistral-7b-v0.1",
        ctx=10007,
        rt="throwaway_rt",
        k="q6_test",
        v="q6_test",
        w="bf16",
    )
    assert not at.exception and at.selectbox(key="rt").value == "throwaway_rt"
    g = preset_geometry("mistral-7b-v0.1", "throwaway_rt")
    assert (
        numbers(at)["kv_bytes"] == kv_bytes(g, 10007, KvSpec("q6_test", "q6_test"))
        and g.count("sliding") == 32
    )
    wrong = page(CALC, "en", model="llama-3.2-1b", k="q6_k", v="q6_k", rt="reference")
    assert not wrong.exception and "26.25" not in texts(wrong)
    assert any(
        "whole blocks of 256 values and does not pad them: a 64-value row" in e.value
        for e in wrong.error
    )


# ---------------------------------------------------------------- a GGUF file: its header, llama.cpp's rules


def _tiny_gguf(tmp_path, preset: str):
    sys.path.insert(0, str(ROOT / "tests"))
    import gguf_files

    return gguf_files.preset_file(tmp_path, preset)


def test_a_gguf_path_gives_llamacpps_cache_lines_and_the_files_weights(tmp_path):
    path = _tiny_gguf(tmp_path, "gpt-oss-20b")
    at = page(CALC, msrc="gguf", ctx=131072)
    at.text_input(key="gguf_path").set_value(str(path)).run()
    assert not at.exception and not at.error
    log = next(c.value for c in at.code if c.value.startswith("llama_kv_cache"))
    plan_log = next(c.value for c in at.code if c.value.startswith("load_tensors"))
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvcore",
            "calc",
            "--model",
            str(path),
            "--context",
            "131072",
            "--runtime",
            "llama.cpp",
            "--backend",
            "metal",  # the page's default build for a Mac reader
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert log.splitlines() == json.loads(cli.stdout)["log_lines"]
    assert (
        plan_log.splitlines() == json.loads(cli.stdout)["plan"]["log_lines"]
    )  # what llama.cpp will print
    assert (
        numbers(at)["weights_bytes"] == json.loads(cli.stdout)["weights_bytes"]
    )  # the file's own tensors
    at.expander(key="cmp_open").open = True  # the runtimes compared: llama.cpp's only, for a GGUF
    at.session_state["cmp_open"] = True
    at.run()
    table = next(
        m.value
        for m in at.markdown
        if m.value.startswith("|") and "`llama.cpp`" in m.value and "`mlx_lm`" not in m.value
    )
    assert table.count("\n") == 2 and not at.exception


def test_a_path_that_is_not_gguf_gets_one_sentence_in_japanese(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_text('{"model_type": "llama"}')
    at = page(CALC, lang="ja", msrc="gguf")
    at.text_input(key="gguf_path").set_value(str(bad)).run()
    assert (
        not at.exception
        and len(at.error) == 1
        and "GGUF ファイルではありません" in at.error[0].value
    )


def test_gguf_weight_formats_are_choosable_and_give_the_clis_bytes(rec_dir):
    at = page(CALC, "en", model="llama-3.1-8b", ctx=8192, rt="llama.cpp", w="gguf-q4_k_m")
    assert not at.exception
    assert "gguf-q4_k_m" in next(s for s in at.selectbox if s.key == "w").options
    out = cli_json("llama-3.1-8b", 8192, 1, "fp16", "fp16", "gguf-q4_k_m")
    assert numbers(at)["weights_bytes"] == out["weights_bytes"]


def test_the_link_format_warning_needs_a_link_and_is_given_once(rec_dir):
    """No warning without a cause: the link's refused formats are said on the first run only (not again on each
    rerun), and a runtime the reader switches is not a link."""
    at = page(CALC, "en", k="q8_0", v="q8_0")
    assert len(at.warning) == 1 and "This link asks for formats" in at.warning[0].value
    at.number_input(key="ctx").set_value(5000).run()
    assert not at.warning
    at = page(CALC, "en", rt="reference", k="q8_0", v="q4_0")
    assert not at.warning
    at.selectbox(key="rt").select(
        "mlx_lm"
    ).run()  # q8_0 is no mlx_lm format: the box shows fp16, said by no link
    assert not at.warning


# ---------------------------------------------------------------- issue 35 and 36: builds, weights, labels, logs


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_llama_cpp_offers_its_own_weights_and_builds_metal_first_and_mlx_lm_its_own(rec_dir, lang):
    """Weights follow the runtime (llama.cpp's GGUF types, Q4_K_M first; mlx_lm no GGUF), the plan is Metal's
    by default for a Mac reader (MTL0 buffers) and the CPU build's on request; no two widgets share a label."""
    at = page(CALC, lang, model="llama-3.1-8b", ctx=32768, rt="llama.cpp")
    assert not at.exception
    w = at.selectbox(key="w")
    assert w.value == "gguf-q4_k_m" and "mlx-q4" not in w.options
    assert at.selectbox(key="build").value == "Metal"  # the build by its name, which the link holds
    plan = next(e.value for e in at.markdown if "compute buffer" in e.value.lower())
    assert "MTL0" in plan
    cpu = page(CALC, lang, model="llama-3.1-8b", ctx=32768, rt="llama.cpp", build="CPU")
    plan_cpu = next(e.value for e in cpu.markdown if "compute buffer" in e.value.lower())
    assert "MTL0" not in plan_cpu and plan_cpu != plan
    mlx = page(CALC, lang, model="llama-3.1-8b")
    assert mlx.selectbox(key="w").value == "mlx-q4"
    assert not any(o.startswith("gguf-") for o in mlx.selectbox(key="w").options)
    labels = [x.label for x in [*at.selectbox, *at.get("segmented_control")]]
    assert len(labels) == len(set(labels)), labels


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_limit_names_its_macos_and_the_mac_that_printed_it(rec_dir, lang):
    """24 GB on macOS 15 or earlier: 16.00 GiB, the thread of the Mac that printed it; macOS 26 at 128 GB:
    107.52 GiB; 48 GB: an estimate, said as one."""
    from kvcore.timing.working_set import working_set

    def reason(chip="M4 Pro", **params):
        at = page(CALC, lang, model="llama-3.2-1b", chip=chip, **params)
        assert not at.exception
        return next(c.value for c in at.caption if "GiB" in c.value and "macOS" in c.value)

    said = reason(ram=24)
    assert "16.00 GiB" in said and working_set(24).report.url in said
    assert "107.52 GiB" in reason("M4 Max (40-core GPU)", ram=128, macos="26")
    assert "96.00 GiB" in reason("M4 Max (40-core GPU)", ram=128)  # macOS 15 or earlier: the rule
    est = reason(ram=48)
    assert "36.00 GiB" in est and ("estimate" in est or "見積も" in est)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_turbo3_line_says_why_it_is_not_article_bs_figure_and_links_to_savings(lang):
    """Issue 36: the chart's turbo3 line is the fork's block layout (3.12 GiB for Llama-3.1-8B at 131,072 tokens)
    where Article B says 3.72: said under the chart, with a link to the Savings chapter that shows the three."""
    from kvcore.views.savings import turbo3_claims

    claims = turbo3_claims().set_index("claim")
    at = page(CALC, lang)
    note = next(c.value for c in at.caption if "turbo3" in c.value)
    assert f"{claims.loc['article_b', 'gib']:g} GiB" in note
    assert f"{claims.loc['block_layout', 'gib']:.2f} GiB" in note
    assert f"](Savings?lang={lang})" in note


def test_the_macos_choice_is_offered_for_a_mac_only():
    """A Mac's GPU limit depends on its macOS (kvcore.timing.working_set); a discrete GPU's is its own memory, so no
    macOS is asked there."""
    mac = page(CALC, "en", chip="M4 Pro")
    nvidia = page(CALC, "en", chip="NVIDIA A100 80 GB SXM")
    assert "macos__w" in {s.key for s in mac.selectbox}  # url_choice keys its widget so
    assert "macos__w" not in {s.key for s in nvidia.selectbox} and not nvidia.exception
