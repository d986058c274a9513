"""Every page in Japanese in Chromium: no run of five or more English words anywhere a reader looks (page text,
expanders opened, chart SVG text, the uploader's own words), proper nouns aside (tests/browser/english_runs.py)."""

from __future__ import annotations

import pytest

from english_runs import PAGE_TEXT_JS, english_runs
from harness.server import PAGES, wait_ready


def test_the_scanner_finds_english_and_keeps_names():
    assert english_runs("モデルは Qwen3-32B です。the cache grows with every token") == [
        "the cache grows with every token"
    ]
    assert not english_runs(
        "M3 Max (40-core GPU) · Llama-3.3-70B · mlx-lm、「Slow Speed Issue in the MLX table」"
    )
    assert not english_runs(
        "https://github.com/ggml-org/llama.cpp/pull/10541 と `c.offset * kv_heads * rows`"
    )


@pytest.fixture(scope="module")
def tab(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900}, device_scale_factor=1)
    yield context.new_page()
    context.close()


@pytest.mark.parametrize("name", list(PAGES))
def test_a_japanese_page_has_no_english_sentence(server, tab, name):
    tab.goto(f"{server}/{PAGES[name]}?lang=ja")
    wait_ready(tab)
    for summary in tab.locator(
        "[data-testid='stExpander'] summary"
    ).all():  # tables and downloads are inside
        summary.click()
        wait_ready(tab)
    tab.wait_for_function(
        """() => [...document.querySelectorAll("[data-testid='stVegaLiteChart']")]
                                     .every(c => c.querySelector('svg.marks g.role-frame'))""",
        timeout=30_000,
    )
    text = tab.evaluate(PAGE_TEXT_JS)
    assert "⟨" not in text
    assert not english_runs(text), english_runs(text)
