"""Hostile input in Chromium against a real server (issue 29): an uploaded run's markdown shows as text (no image
is requested, no link is made), and a link's odd numbers open the page with one sentence, never a traceback."""

from __future__ import annotations

from playwright.sync_api import expect

from harness.server import upload_recording
from tests.app.app_helpers import measured_recording

IMAGE = "https://example.com/pixel.png"


def test_an_uploaded_runs_markdown_is_shown_as_text(server, page, ready):
    data = measured_recording()
    data["title"] = f"![pixel]({IMAGE}) **bold** [click](https://example.com/)"
    data["label"] = f"Apple M9 Hostile ![x]({IMAGE})"
    data["provenance"]["machine"]["chip"] = f"Apple M9 ![y]({IMAGE})"
    requested = []
    page.on("request", lambda r: requested.append(r.url) if "example.com" in r.url else None)
    page.goto(f"{server}/Recordings?lang=en")
    ready(page)
    upload_recording(page, "hostile.yaml", data)
    ready(page)
    success = page.locator("[data-testid='stAlertContentSuccess']")
    expect(success).to_contain_text("**bold**", timeout=30_000)
    seen = success.inner_text().replace(
        "\u2060", ""
    )  # the word joiner that keeps an address from linking
    assert f"![pixel]({IMAGE}) **bold** [click](https://example.com/)" in seen, seen
    page.get_by_role("combobox", name="Recording", exact=True).click()
    page.keyboard.type("M9 Hostile")  # the list is long: filter it as a reader would
    page.get_by_role("option").filter(has_text="Apple M9 Hostile").first.click()
    ready(page)
    expect(page.get_by_text("Apple M9 ![y](").first).to_be_visible()
    assert f"Apple M9 ![y]({IMAGE})" in page.inner_text("body").replace("\u2060", "")
    assert page.locator("img[src*='example.com']").count() == 0
    assert page.locator("a[href*='example.com']").count() == 0
    assert page.locator("[data-testid='stException']").count() == 0
    assert requested == []


def test_a_links_odd_numbers_open_the_page_with_one_sentence(server, page, ready):
    for path, key, value in [
        ("Calculator", "seq", "1e400"),
        ("Calculator", "ctx", "9" * 5000),
        ("Prefill_and_decode", "prompt", "inf"),
        ("Linear_growth", "seqs", "1e309"),
    ]:
        page.goto(f"{server}/{path}?lang=ja&{key}={value}")
        ready(page)
        warning = page.locator("[data-testid='stAlertContentWarning']")
        expect(warning.first).to_contain_text("リンクの", timeout=30_000)
        assert warning.count() == 1, path
        assert page.locator("[data-testid='stException']").count() == 0, (path, key)
        assert "Traceback" not in page.inner_text("body")
