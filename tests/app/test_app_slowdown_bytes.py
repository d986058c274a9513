"""The decode page's "every run against the bytes model" section: every run with a model and two points is on
the chart, in both languages, with its values from the engine frame and the identity line."""

from __future__ import annotations

import pytest
from app_helpers import charts, page, texts

from kvcore.fits import decode as decode_runs
from kvcore.recordings import store as recordings


def _runs(folder, lang: str) -> list[str]:
    """Every run the engine frame holds, by the name the site gives it in `lang` (legends, pickers)."""
    from kvsite.sections.shared import source_names

    recs, errors = recordings.load_all([folder])
    assert not errors
    names = source_names(recs, lang)
    return [names[rid] for rid in dict.fromkeys(decode_runs.slowdown_vs_bytes(recs)["recording"])]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_section_shows_every_run_in_both_languages(rec_dir, lang):
    at = page("pages/4_Decode_slowdown.py", lang)
    assert not at.exception, [e.message for e in at.exception]
    expected = _runs(rec_dir, lang)
    assert (
        len(expected) >= 9
    )  # 8 bundled published and measured runs with a model, plus the test fixture's run
    chart = next(c for c in charts(at) if "predicted_slowdown" in c["data"])
    data = chart["data"].dropna(subset=["run"])
    assert list(dict.fromkeys(data["run"])) == expected
    first = data.loc[data.groupby("run", sort=False)["context"].idxmin()]
    assert (first["measured_slowdown"] == 1).all() and (first["predicted_slowdown"] == 1).all()
    legend = chart["spec"]["layer"][1]["encoding"]["color"]["legend"]
    assert legend["orient"] == "bottom"  # phones: the long run names under the plot, not beside it
    shown = texts(at)
    assert all(run in shown for run in expected)  # the table under the chart names every run
    title = {
        "en": "Every run against the bytes model",
        "ja": "すべての実行をバイト数のモデルと比べる",
    }[lang]
    assert title in shown
    assert ("PR #13583" in shown) and (
        ("kernel, not the bytes" in shown) if lang == "en" else ("カーネル" in shown)
    )


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_recordings_page_badge_links_a_published_run_to_its_source(rec_dir, lang):
    at = page(
        "pages/9_Recordings.py", lang, rec="published-mlx-examples-1029-m3-max-llama-3.3-70b-4bit"
    )
    assert not at.exception, [e.message for e in at.exception]
    badge = next(
        c.value for c in [*at.caption, *at.markdown] if "mlx-examples/issues/1029" in c.value
    )  # the full card
    assert "chigkim" in badge and "2024-12-15" in badge and "mlx-lm 0.20.4, MLX 0.21.1" in badge
    assert (
        "](https://github.com/ml-explore/mlx-examples/issues/1029)" in badge
    )  # the citation links its source


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_every_run_chart_colours_at_most_eight_runs_and_greys_the_rest(rec_dir, lang):
    """Past about eight colours a reader cannot tell runs apart: the picker names the runs in colour (the published
    and Mac runs by default), every other run is drawn grey behind them under one legend entry."""
    from kvsite import i18n

    at = page("pages/4_Decode_slowdown.py", lang)
    picker = at.multiselect(key="sb_runs")
    assert 0 < len(picker.value) <= 8 and len(picker.options) > len(picker.value)
    chart = next(c for c in charts(at) if "measured_slowdown" in c["data"].columns)
    other = i18n.translate(lang, "decode.sb_other")
    shown = set(chart["data"]["shown"].dropna())
    assert shown == set(picker.value) | {other}
    assert set(chart["data"]["run"].dropna()) == set(picker.options)  # every run is still drawn
    picker.set_value(picker.options[-1:]).run()
    chart = next(c for c in charts(at) if "measured_slowdown" in c["data"].columns)
    assert set(chart["data"]["shown"].dropna()) == {picker.options[-1], other}
