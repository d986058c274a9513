"""Sections that rerun alone (st.fragment) in Chromium: a widget inside one still writes its URL state (a reload
restores it), what lies outside it is left as it was, and a change above a section (its model) still reaches it."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import expect

CHARTS_JS = (
    "() => Array.from(document.querySelectorAll(\"[data-testid='stVegaLiteChart'] svg\")).map(s => {"
    "let h = 0; for (const c of s.innerHTML) h = (h * 31 + c.charCodeAt(0)) | 0; return h; })"
)


def _query(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def _step(page, ready, label: str) -> None:
    thumb = page.get_by_role("slider", name=label)
    thumb.focus()
    page.keyboard.press("ArrowRight")
    ready(page)


def test_a_slider_in_a_section_writes_the_url_and_a_reload_restores_it(server, page, ready):
    page.goto(f"{server}/Mechanism?lang=en")
    ready(page)
    before = page.evaluate(CHARTS_JS)
    _step(page, ready, "Prompt tokens")
    expect(page).to_have_url(re.compile(r"[?&]prompt=17(&|$)"))
    after = page.evaluate(CHARTS_JS)
    assert after[0] != before[0]  # the section's chart was redrawn
    assert after[1:] == before[1:]  # the measured section below it was not touched
    page.get_by_text(
        "work per step"
    ).click()  # a url_choice radio inside the section: its callback writes the URL
    ready(page)
    expect(page).to_have_url(re.compile(r"[?&]view=per_step(&|$)"))
    assert _query(page) == {"lang": "en", "prompt": "17", "view": "per_step"}
    page.reload()
    ready(page)
    expect(page.get_by_role("slider", name="Prompt tokens")).to_have_value("17")
    expect(page.get_by_role("radio", name="work per step")).to_be_checked()
    assert page.locator("[data-testid='stException']").count() == 0


def test_a_change_above_a_section_reaches_it_and_the_sections_own_state_stays(server, page, ready):
    page.goto(f"{server}/Savings?lang=en")
    ready(page)
    _step(page, ready, "Memory (GiB)")  # the fits section's own slider: only it reruns
    expect(page).to_have_url(re.compile(r"[?&]mem=37(&|$)"))
    fits_chart = page.locator("[data-testid='stVegaLiteChart']").nth(2)
    before = fits_chart.inner_html()
    box = page.get_by_role("combobox", name="Model").first  # above every section: the page reruns
    box.click()
    page.keyboard.type("qwen3-4b")
    page.get_by_role("option").filter(has_text="qwen3-4b").first.click()
    ready(page)
    expect(page).to_have_url(re.compile(r"[?&]model=qwen3-4b(&|$)"))
    assert _query(page)["mem"] == "37"
    assert fits_chart.inner_html() != before  # the fits section drew the new model
    expect(page.get_by_role("slider", name="Memory (GiB)")).to_have_value("37")
    assert page.locator("[data-testid='stException']").count() == 0
