"""The .nbytes trap chapter's third line: mlx_lm's measured peak beside kvcore's plan, allocated and used, in both
languages, drawn from the bundled recording and the plan (real Streamlit, AppTest)."""

from __future__ import annotations

import pytest
from app_helpers import chart_labels, charts, english_label, english_runs, page, source_texts, texts

from kvcore.recordings.store import load
from kvcore.runtimes import mlx_lm_plan
from kvcore.units import MIB
from kvcore.views import peaks
from kvsite import i18n

PEAKS = "measured-linux-cpu-mlx-lm-peaks"
TRAP = "pages/2_Nbytes_trap.py"


def peak_chart(at) -> dict:
    """The section's chart: the one whose x axis is the prompt."""
    title = i18n.translate(at.query_params["lang"], "trap.peak_x")
    found = [c for c in charts(at) if title in chart_labels(c["spec"])]
    assert len(found) == 1, [chart_labels(c["spec"]) for c in charts(at)]
    return found[0]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_third_line_is_drawn_from_the_recording_and_the_plan(rec_dir, lang):
    at = page(TRAP, lang)
    assert not at.exception
    t = i18n.translator(lang)
    shown = texts(at)
    assert t("trap.peak_title") in shown
    # the lead says the one thing: at a 256 boundary the peak is above what .nbytes says
    assert t("trap.peak_lead", step=256).split("`")[0] in shown
    rec = load(rec_dir / f"{PEAKS}.yaml")
    chart = peak_chart(at)
    data = chart["data"]
    series, tokens, mib = "series", "tokens", "mib"
    step = max(peaks.prefill_steps(rec))  # mlx_lm's default, 2,048, opens
    rows = peaks.plain_rows(rec, step)
    measured = data[data[series] == t("trap.peak_measured")].set_index(tokens)[mib]
    assert measured.to_dict() == {r["prompt_tokens"]: r["peak_mib"] for r in rows}
    plan = data[data[series] == t("trap.peak_plan")].set_index(tokens)[mib]
    g = peaks.geometry(rec)
    for r in rows:
        want = mlx_lm_plan.plan(
            g, r["prompt_tokens"], peaks._spec(rec, "fp32"), 0, r["generated"], "cpu", step
        )
        assert plan[r["prompt_tokens"]] == want["total_bytes"] / MIB
    allocated = data[data[series] == t("trap.peak_allocated")].set_index(tokens)[mib]
    assert {r["prompt_tokens"]: r["allocated_mib"] for r in rows} == pytest.approx(
        {r["prompt_tokens"]: allocated[r["prompt_tokens"]] for r in rows}
    )
    # the numbers either side of the boundary, and the plan's fit, are said under the chart
    near = peaks.boundary(rec, step)
    assert f"{near['b']['peak']:.2f}" in shown and f"{near['b']['allocated']:.2f}" in shown
    assert rec.data["provenance"]["command"] in shown  # how the run was made, to run it yourself
    # the badge of the run the chart draws: a Linux CPU run, never Apple Silicon, and what carries over to a Mac
    assert t("badge.not_apple_peak") in shown


def test_the_prefill_step_redraws_the_chart_from_its_own_runs(rec_dir):
    at = page(TRAP, "en", pstep=512)
    assert not at.exception
    data = peak_chart(at)["data"]
    rec = load(rec_dir / f"{PEAKS}.yaml")
    rows = peaks.plain_rows(rec, 512)
    measured = data[data["series"] == "peak, measured"]
    assert sorted(measured["tokens"]) == [r["prompt_tokens"] for r in rows]
    assert set(measured["mib"]) == {r["peak_mib"] for r in rows}
    assert set(measured["mib"]) != {r["peak_mib"] for r in peaks.plain_rows(rec, 2048)}


def test_a_changed_measurement_moves_the_points(rec_dir):
    """The points are read from the recording: another measurement in the same file draws other points."""
    import yaml

    from kvcore.recordings import store

    path = rec_dir / f"{PEAKS}.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for row in data["sections"]["peak"]:
        row["peak_mib"] = round(row["peak_mib"] + 7.0, 6)
    path.write_text(store.dump_text(data), encoding="utf-8")
    at = page(TRAP, "en")
    chart = peak_chart(at)["data"]
    measured = chart[chart["series"] == "peak, measured"]
    want = {r["prompt_tokens"]: r["peak_mib"] for r in peaks.plain_rows(load(path), 2048)}
    assert dict(zip(measured["tokens"], measured["mib"])) == want


def test_the_japanese_section_speaks_japanese(rec_dir):
    at = page(TRAP, "ja")
    chart = peak_chart(at)
    names = {"MiB", "KV", "mlx_lm", ".nbytes", "offset", "kvcore"}
    english = [x for x in chart_labels(chart["spec"]) if english_label(x, names)]
    assert not english, english
    assert set(chart["data"]["series"]) == {
        i18n.translate("ja", f"trap.peak_{s}") for s in peaks.SERIES
    }
    t = i18n.translator("ja")
    section = [
        str(e.value)
        for e in (*at.markdown, *at.caption)
        if t("trap.peak_title") in str(e.value) or "MiB" in str(e.value)
    ]
    runs = [r for s in section for r in english_runs(s, source_texts(rec_dir))]
    assert not runs, runs


def test_without_a_peak_recording_the_section_says_so(rec_dir):
    (rec_dir / f"{PEAKS}.yaml").unlink()
    at = page(TRAP, "en")
    assert not at.exception
    assert i18n.translate("en", "trap.peak_none") in [str(e.value) for e in at.info]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_recordings_page_shows_the_peak_run(rec_dir, lang):
    at = page("pages/9_Recordings.py", lang, rec=PEAKS)
    assert not at.exception
    shown = texts(at)
    t = i18n.translator(lang)
    assert t("recordings.section_peak") in " ".join(str(tab.label) for tab in at.tabs)
    assert t("badge.not_apple") in shown
    assert "mlx_peak_sweep.py" in shown  # the command, on the run's card
