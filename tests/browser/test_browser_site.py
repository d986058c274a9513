"""The site in Debian's Chromium against a real server: cold deep links, language, legend, CSV, read-only."""

from __future__ import annotations

import csv
import io
import re

import pytest
from playwright.sync_api import expect

from harness.reader import Reader
from harness.server import PAGES as PATHS
from harness.server import streamlit_servers
from kvcore.inputs.presets import preset_geometry

JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def _open(page, url, ready):
    page.goto(url)
    ready(page)
    page.wait_for_timeout(300)


@pytest.fixture(scope="module")
def cold_tabs(browser):
    """A fresh server per page, started together, and a tab per page sent to its server's deep link at once (the
    fresh server's first request): their start-ups and first runs overlap. Each test reads its page's tab."""
    with streamlit_servers(len(PATHS)) as bases:
        context = browser.new_context()
        tabs = {}
        for name, base in zip(PATHS, bases):
            tabs[name] = context.new_page()
            tabs[name].goto(f"{base}/{PATHS[name]}", wait_until="commit")
        yield tabs
        context.close()


@pytest.mark.parametrize("name", list(PATHS))
def test_cold_deep_link_renders_the_page_with_the_shared_frame(cold_tabs, ready, name):
    page = cold_tabs[name]
    ready(page)
    page.wait_for_timeout(300)
    assert page.locator("[data-testid='stException']").count() == 0
    sidebar = page.locator("[data-testid='stSidebar']")
    expect(sidebar.get_by_text("Home", exact=True)).to_be_visible()  # our frame's navigation
    expect(sidebar.get_by_text("日本語")).to_be_visible()  # the language switch
    assert page.locator("h1").first.inner_text().strip()


def test_language_switch_and_locale(server, page, ready, browser):
    _open(page, f"{server}/Nbytes_trap", ready)
    assert not JAPANESE.search(page.locator("h1").first.inner_text())
    page.locator("[data-testid='stSidebar']").get_by_text("日本語").click()
    ready(page)
    expect(page.locator("h1").first).to_contain_text("罠")
    assert "lang=ja" in page.url
    page.locator("[data-testid='stSidebar']").get_by_text(
        "3 · 線形に増えるメモリ"
    ).click()  # the language follows
    ready(page)
    expect(page.locator("h1").first).to_contain_text("線形")
    ctx = browser.new_context(locale="ja-JP")  # default from the browser's locale
    p2 = ctx.new_page()
    _open(p2, f"{server}/Decode_slowdown", ready)
    expect(p2.locator("h1").first).to_contain_text("decode が遅くなる理由")
    ctx.close()


def test_legend_click_changes_the_selection(server, page, ready):
    _open(page, f"{server}/Nbytes_trap?lang=en", ready)
    chart = page.locator("[data-testid='stVegaLiteChart']").first
    chart.locator("svg").wait_for()
    assert page.get_by_text("Selected in the legend").count() == 0
    chart.locator("g.role-legend text", has_text="used (offset)").first.click()
    ready(page)
    expect(page.get_by_text("Selected in the legend: used (offset)")).to_be_visible()


def test_csv_download_matches_the_chart(server, page, ready):
    from kvcore.views import memory as views

    _open(page, f"{server}/Nbytes_trap?lang=en&tokens=300", ready)
    chart = page.locator("[data-testid='stVegaLiteChart']").first
    legend = {t.text_content() for t in chart.locator("g.role-legend text").all()}
    assert (
        page.locator("[data-testid='stDownloadButton']").count() == 0
    )  # sent only once the reader opens the expander
    page.get_by_text("Numbers behind the chart · CSV, PNG, SVG").first.click()
    ready(page)
    with page.expect_download() as info:
        page.locator("[data-testid='stDownloadButton']").filter(has_text="CSV").first.click()
    data = open(info.value.path(), "rb").read()
    assert data.startswith(b"\xef\xbb\xbf")  # UTF-8 as Excel on a Japanese Mac reads it
    records = list(csv.reader(io.StringIO(data.decode("utf-8-sig"))))
    header = [r[1] for r in records if r[0] == "#"]
    assert (
        header[0]
        == "The .nbytes trap: allocated vs used KV cache memory, token by token (Llama-3.2-1B)"
    )
    assert any(
        line.startswith("Source: ") for line in header
    )  # the CSV says where its numbers come from
    table = [r for r in records if r[0] != "#"]
    rows = [dict(zip(table[0], r)) for r in table[1:]]
    series = {r["Series"] for r in rows}  # the CSV's columns carry the page's column titles
    assert series <= legend  # every series in the file is one the chart's legend shows
    engine = views.trap_curve(preset_geometry("llama-3.2-1b"), 300)
    sim = [r for r in rows if r["Source"].startswith("kvcore")]
    assert len(sim) == len(engine)
    assert [float(r["MiB"]) for r in sim] == pytest.approx(
        list(engine["mib"]), rel=1e-3
    )  # 4 significant figures
    assert max(int(r["Tokens"]) for r in rows) == 300


def test_whole_site_in_read_only_mode_on_an_unwritable_folder(readonly_server, page, ready):
    """Every page run by the unprivileged server on a folder it cannot write, each through Streamlit's websocket as
    a browser asks for it (harness.reader: what the server does is what is tested here; Chromium draws every page
    in test_browser_widths.py), then the model-free probe in Chromium: no exception, the read-only note, and
    nothing written."""
    base, folder = readonly_server
    before = sorted(str(p) for p in folder.rglob("*"))
    with Reader(base) as reader:
        for name, path in PATHS.items():
            reader.rerun(path, "lang=en")  # PageError if the page shows an exception
            shown = " ".join(
                e.markdown.body for e in reader.elements if e.WhichOneof("type") == "markdown"
            )
            assert "Read-only mode: nothing is saved" in shown, name
    _open(
        page, f"{base}/Nbytes_trap?lang=en&src=live&tokens=300", ready
    )  # the model-free probe still runs
    page.get_by_text("Run the trap on real mlx_lm caches").click()
    ready(page)
    expect(page.get_by_text("Measured on the real mlx_lm caches")).to_be_visible(timeout=30_000)
    assert sorted(str(p) for p in folder.rglob("*")) == before


def _h1(page) -> str:
    return page.locator("h1").first.inner_text().strip()


def test_back_returns_to_the_previous_page(server, page, ready):
    """The chapter-end links and the sidebar's move through the browser's history: Back returns to the page the
    reader came from, and Forward goes again."""
    _open(page, f"{server}/?lang=en", ready)
    home = _h1(page)
    page.locator("[data-testid='stMain']").get_by_text("Next: 1 · Mechanism").click()
    ready(page)
    expect(page.locator("h1").first).to_contain_text("Mechanism")
    page.locator("[data-testid='stMain']").get_by_text("Next: 2 · The .nbytes trap").click()
    ready(page)
    expect(page.locator("h1").first).to_contain_text(".nbytes")
    page.go_back()
    ready(page)
    expect(page.locator("h1").first).to_contain_text("Mechanism")
    assert page.url.endswith("/Mechanism?lang=en")
    page.go_back()
    ready(page)
    expect(page.locator("h1").first).to_have_text(home)
    page.go_forward()
    ready(page)
    expect(page.locator("h1").first).to_contain_text("Mechanism")


@pytest.mark.xfail(
    strict=True,
    reason="Streamlit 1.67's frontend pushes a history entry of the old page without its widget-bound URL "
    "parameters when the page changes (handlePageInfoChanged pushes before the new page's path is pushed), so "
    "one Back shows the previous page in its default state; a second Back restores it",
)
def test_back_returns_to_the_previous_page_in_the_state_the_reader_left(server, page, ready):
    _open(page, f"{server}/Nbytes_trap?lang=en&tokens=604", ready)
    page.locator("[data-testid='stMain']").get_by_text("Next: 3 · Linear growth").click()
    ready(page)
    expect(page.locator("h1").first).to_contain_text("Linear growth")
    page.go_back()
    ready(page)
    page.wait_for_timeout(500)
    assert "tokens=604" in page.url
