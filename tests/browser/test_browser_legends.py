"""Legends read whole: at a phone's 390 px and a desktop's 1400 px no legend entry ends in "…" (Vega's cut at
labelLimit) and none runs past its chart's right edge (cut mid-character by the page). Run names are made short
where they are made (Recording.short_name), not cut by the renderer."""

from __future__ import annotations

import pytest

from harness.server import PAGES, wait_ready

LEGENDS_JS = """() => [...document.querySelectorAll("[data-testid='stVegaLiteChart']")].flatMap(chart => {
  const right = chart.getBoundingClientRect().right;
  return [...chart.querySelectorAll("g.role-legend-label text, g.role-legend text")].map(t => ({
    text: t.textContent, over: Math.round(t.getBoundingClientRect().right - right)}));
})"""


@pytest.fixture(scope="module")
def tab(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, device_scale_factor=1)
    yield context.new_page()
    context.close()


@pytest.mark.parametrize(
    "name",
    [
        "mechanism",
        "nbytes_trap",
        "linear_growth",
        "decode_slowdown",
        "prefill_decode",
        "savings",
        "calculator",
        "recordings",
    ],
)
@pytest.mark.parametrize("lang", ["ja", "en"])
@pytest.mark.parametrize("width", [390, 1400])
def test_legend_entries_are_whole(server, tab, width, lang, name):
    legends_are_whole(server, tab, width, f"{PAGES[name]}?lang={lang}")


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_the_calculators_decode_legend_for_several_sequences_is_whole(server, tab, lang):
    legends_are_whole(server, tab, 390, f"{PAGES['calculator']}?lang={lang}&seq=4")


def legends_are_whole(server, tab, width: int, path: str) -> None:
    tab.set_viewport_size({"width": width, "height": 900})
    tab.goto(f"{server}/{path}")
    wait_ready(tab)
    tab.wait_for_function(
        """() => [...document.querySelectorAll("[data-testid='stVegaLiteChart']")]
                                     .every(c => c.querySelector('svg.marks g.role-frame'))""",
        timeout=30_000,
    )
    tab.wait_for_timeout(500)
    labels = tab.evaluate(LEGENDS_JS)
    assert labels, "no legend drawn"
    cut = [label["text"] for label in labels if label["text"].endswith("…")]
    over = [(label["text"], label["over"]) for label in labels if label["over"] > 0]
    assert not cut, cut
    assert not over, over


SIDEBAR_PICKER_JS = """() => {
  const input = document.querySelector("[data-testid='stSidebar'] [data-testid='stSelectbox'] input");
  return input ? {text: input.value, scroll: input.scrollWidth, client: input.clientWidth} : null;
}"""


@pytest.mark.parametrize("lang", ["ja", "en"])
@pytest.mark.parametrize(
    "src", ["published-article-a-m5-pro", "published-rapid-mlx-586-m3-ultra-llama-3.1-8b-4bit"]
)
def test_the_sidebar_picker_shows_the_whole_run_name(server, tab, lang, src):
    tab.set_viewport_size({"width": 1400, "height": 900})
    tab.goto(f"{server}/{PAGES['decode_slowdown']}?lang={lang}&src={src}")
    wait_ready(tab)
    shown = tab.evaluate(SIDEBAR_PICKER_JS)
    assert shown and "·" in shown["text"], shown
    assert shown["scroll"] <= shown["client"], shown  # nothing hidden behind an ellipsis
