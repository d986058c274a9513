"""Hostile input in Chromium against a real server (issue 29): an uploaded run's markdown shows as text (no image
is requested, no link is made), and a link's odd numbers open the page with one sentence, never a traceback."""

from __future__ import annotations

import shutil
from urllib.parse import quote_plus, urlsplit

from playwright.sync_api import expect

from harness.reader import Reader
from harness.server import ROOT, streamlit_server, upload_recording
from kvsite import i18n
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


# ---------------------------------------------------------------- issue 38: markdown from a link, tracebacks

EVIL = "[click here](https://evil.example/login) ![px](https://evil.example/p.png)"


def _evil(url: str) -> bool:
    return (urlsplit(url).hostname or "").endswith("evil.example")


def _nothing_from_evil(page, requested: list[str], where) -> None:
    """No link to, no image from evil.example in the DOM, none requested, no traceback element."""
    assert page.locator("a[href*='evil.example']").count() == 0, where
    assert page.locator("img[src*='evil.example']").count() == 0, where
    assert page.locator("[data-testid='stException']").count() == 0, where
    assert "Traceback" not in page.inner_text("body"), where
    assert requested == [], where


def test_markdown_in_a_link_is_shown_as_text(server, page, ready):
    """?src= on a chapter with a source picker rendered a live link and a remote image inside the site's own
    warning; ?updates= and ?k= through quote(). Each is shown as typed, a short prefix of it."""
    requested = []
    page.on("request", lambda r: requested.append(r.url) if _evil(r.url) else None)
    for path, key in [
        ("Decode_slowdown", "src"),
        ("Nbytes_trap", "updates"),
        ("Calculator", "k"),
    ]:
        page.goto(f"{server}/{path}?lang=en&{key}={quote_plus(EVIL + 'x' * 20_000)}")
        ready(page)
        said = page.locator(
            "[data-testid='stAlertContentWarning'], [data-testid='stAlertContentError']"
        )
        expect(said.first).to_contain_text("[click here](https", timeout=30_000)
        text = said.first.inner_text().replace("\u2060", "")
        assert "[click here](https://evil.example/login)" in text and len(text) < 700, text
        _nothing_from_evil(page, requested, (path, key))


def test_an_uploads_short_label_is_text_in_the_decode_run_table(server, page, ready):
    data = measured_recording()
    data["provenance"]["machine"]["chip"] = "Apple M4 Max"  # a Mac run: in the table at once
    data["short_label"] = "[x](https://evil.example) ![i](https://evil.example/p.png)"[:35]
    requested = []
    page.on("request", lambda r: requested.append(r.url) if _evil(r.url) else None)
    page.goto(f"{server}/Recordings?lang=en")
    ready(page)
    upload_recording(page, "label.yaml", data)
    ready(page)
    expect(page.locator("[data-testid='stAlertContentSuccess']")).to_be_visible(timeout=30_000)
    page.get_by_role("link", name="4 · Decode slowdown").first.click()  # the same session
    ready(page)
    page.get_by_text(
        i18n.translate("en", "decode.sb_details")
    ).click()  # the run table, one click below
    ready(page)
    expect(page.locator("table").filter(has_text="[x](https").first).to_be_visible(timeout=30_000)
    _nothing_from_evil(page, requested, "decode run table")


FAILING_PAGE = """import streamlit as st
from kvsite.frame.page import setup

f = setup("mechanism")


def fail():
    raise OverflowError("/srv/kvsite/kvcore/secret.py line 1: cannot convert float infinity")


@st.fragment
def part():
    if st.button("Fail inside", key="inside"):
        fail()
    st.button("Fail in a callback", key="callback", on_click=fail)


part()
"""


def test_a_fragment_rerun_that_fails_shows_one_sentence(page, ready, tmp_path):
    """A widget inside an st.fragment reruns in a new script context, which the guard installed for the page's run
    did not reach: its exception (in the fragment or in the widget's callback) showed the raw traceback. Here, in
    a copy of the site whose first chapter raises one naming a server path on a click."""
    shutil.copytree(
        ROOT / "pages", tmp_path / "pages", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "streamlit_app.py", tmp_path)
    (tmp_path / "pages" / "1_Mechanism.py").write_text(FAILING_PAGE, encoding="utf-8")
    failed = i18n.translate("en", "site.failed")
    with streamlit_server(env={"PYTHONPATH": str(ROOT)}, app_dir=tmp_path) as base:
        for button in ("Fail inside", "Fail in a callback"):
            page.goto(f"{base}/Mechanism?lang=en")
            ready(page)
            page.get_by_role("button", name=button).click()
            ready(page)
            expect(page.locator("[data-testid='stAlertContentError']")).to_have_text(
                failed, timeout=30_000
            )
            assert page.locator("[data-testid='stException']").count() == 0, button
            assert "/srv/" not in page.inner_text("body"), button


def test_a_component_value_nested_5000_deep_is_one_sentence(server):
    """The GGUF picker's trigger value is JSON that Streamlit decodes before the page runs: nested 5,000 deep it
    raised a RecursionError with its traceback. Sent as a browser would (a websocket rerun of its fragment)."""
    from streamlit.components.v2.bidi_component.main import _make_trigger_id
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    with Reader(server, "Calculator") as r:
        r.rerun("Calculator", "lang=en&msrc=gguf")
        (component,) = [
            e.bidi_component for e in r.elements if e.WhichOneof("type") == "bidi_component"
        ]
        trigger = WidgetState(
            id=_make_trigger_id(component.id, "events"), json_trigger_value="[" * 5000 + "]" * 5000
        )
        shown = r.send("Calculator", "lang=en&msrc=gguf", [trigger], r.fragment_of[component.id])
        assert [e.WhichOneof("type") for e in shown if e.WhichOneof("type") == "exception"] == []
        assert [e.alert.body for e in shown if e.WhichOneof("type") == "alert"] == [
            i18n.translate("en", "site.nested")
        ]
        r.rerun("Calculator", "lang=en&msrc=gguf")  # the session goes on
