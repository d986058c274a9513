"""The Decode chapter plots the run the reader chose, or says why it cannot draw its bytes line (issue 17)."""

import pytest
from app_helpers import charts, page

from kvsite import i18n
from kvsite.sections.shared import source_names

DECODE = "pages/4_Decode_slowdown.py"
ARTICLE = "published-article-a-m5-pro"
NO_GEOMETRY = {
    "published-ds4-706-m1-ultra-deepseek-v4-flash": "unusual",
    "published-rapid-mlx-1853-m3-ultra-qwen3.5-4b-mlx-lm": "hybrid",
    "published-rapid-mlx-1853-m3-ultra-qwen3.5-4b-omlx": "hybrid",
    "published-rapid-mlx-1853-m3-ultra-qwen3.5-4b-ollama": "hybrid",
}


def colours(spec: dict) -> dict:
    """{series name: colour} from the chart's colour scale (every layer shares it)."""
    found = {}

    def walk(node):
        if isinstance(node, dict):
            scale = node.get("scale")
            if isinstance(scale, dict) and "domain" in scale and "range" in scale:
                found.update(zip(scale["domain"], scale["range"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    return found


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("src", sorted(NO_GEOMETRY))
def test_a_run_without_a_geometry_is_plotted_and_the_page_says_why_and_article_a_keeps_its_colour(
    rec_dir, lang, src
):
    at = page(DECODE, lang, src=src)
    alone = page(DECODE, lang, src=ARTICLE)
    assert not at.exception and not alone.exception
    from kvcore.recordings import store as recordings

    recs = {r.id: r for r in recordings.load_all([recordings.BUNDLED_DIR])[0]}
    names = source_names(list(recs.values()), lang)
    chart = charts(at)[0]
    assert names[src] in set(chart["data"]["series"])  # the chosen run's measured points are drawn
    rows = recs[src].rows("decode")
    drawn = chart["data"][chart["data"]["series"] == names[src]]
    assert sorted(drawn["tokens_per_s"].dropna().unique()) == sorted(
        r["tokens_per_s"] for r in rows
    )
    why = i18n.translate(lang, f"decode.no_fit_{NO_GEOMETRY[src]}", run=names[src])
    assert any(why == i.value for i in at.info)
    assert (
        colours(chart["spec"])[names[ARTICLE]] == colours(charts(alone)[0]["spec"])[names[ARTICLE]]
    )


def y_axes(spec: dict) -> list[dict]:
    out = []

    def walk(node):
        if isinstance(node, dict):
            y = (
                node.get("encoding", {}).get("y")
                if isinstance(node.get("encoding"), dict)
                else None
            )
            if isinstance(y, dict) and y.get("scale", {}).get("type") == "log":
                out.append(y)
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk({k: v for k, v in spec.items() if k not in ("datasets", "data")})
    return out


@pytest.mark.parametrize(
    "params",
    [{}, {"model": "llama-3.1-70b", "chip": "M4 Pro"}, {"model": "qwen3-8b", "chip": "M2"}],
)
def test_every_log_axis_on_the_decode_page_labels_around_every_curve(rec_dir, params):
    # issue 17: the what-if chart labelled only 6-10 tok/s with a curve at ~17; Article A's 292 sat above the top tick
    at = page(DECODE, "en", **params)
    assert not at.exception
    for chart in charts(at)[:2]:  # the chosen run (Article A by default) and the what-if
        values = chart["data"]["tokens_per_s"].dropna()
        for y in y_axes(chart["spec"]):
            ticks = y["axis"]["values"]
            assert ticks[0] <= values.min() and ticks[-1] >= values.max(), (
                ticks,
                values.min(),
                values.max(),
            )
            assert all(b / a <= 2.5 for a, b in zip(ticks, ticks[1:]))
            assert y["scale"]["domain"] == [ticks[0], ticks[-1]]
