"""Each chapter's first screen (1400 x 900, expanders closed, both languages): a whole chart in its first 900 px,
and no page taller than four screens (3,600 px). At a phone's 390 px: the same content in the same order (the
claim, the chart, the end-of-chapter links), nothing cut at the right edge."""

from __future__ import annotations

import pytest

from harness.server import PAGES, wait_ready
from kvsite import i18n

DESKTOP, PHONE, SCREEN = 1400, 390, 900
MOST = 4 * SCREEN  # px: four screens

# Where the page's blocks sit, measured from the top of the main column's content (Streamlit scrolls inside its own
# container): the first chart's box, the content's height, the order of headings / charts / page links.
LAYOUT_JS = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  const top = main.getBoundingClientRect().top - main.scrollTop;
  const charts = [...main.querySelectorAll("[data-testid='stVegaLiteChart']")]
      .filter(c => c.getBoundingClientRect().height > 0)
      .map(c => { const r = c.getBoundingClientRect(); return {top: r.top - top, bottom: r.bottom - top}; });
  const order = [...main.querySelectorAll("h1, [data-testid='stVegaLiteChart'], [data-testid='stPageLink']")]
      .filter(e => e.getBoundingClientRect().height > 0)
      .map(e => e.matches("h1") ? "h1" : e.matches("[data-testid='stPageLink']") ? "link" : "chart");
  const wide = [...main.querySelectorAll("[data-testid='stMainBlockContainer'] *")]
      .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1 && e.getBoundingClientRect().width > 0
                   && !e.closest("details:not([open]), [role='tablist']") && !e.matches("input[type='range']")
                   && !e.closest("[data-testid='stDataFrame'], table, pre, .stCodeBlock, [data-testid='stMarkdownContainer'] div[style*='overflow']"))
      .map(e => e.tagName + "." + (e.getAttribute("data-testid") || e.className)).slice(0, 5);
  return {charts, height: main.scrollHeight, order, wide};
}"""


@pytest.fixture(scope="module")
def tab(browser):
    context = browser.new_context(
        viewport={"width": DESKTOP, "height": SCREEN}, device_scale_factor=1
    )
    page = context.new_page()
    yield page
    context.close()


def layout(tab, server, name: str, lang: str, width: int) -> dict:
    tab.set_viewport_size({"width": width, "height": SCREEN})
    tab.goto(f"{server}/{PAGES[name]}?lang={lang}")
    wait_ready(tab)
    tab.wait_for_function(
        """() => [...document.querySelectorAll("[data-testid='stVegaLiteChart']")]
                 .filter(c => c.getBoundingClientRect().height > 0)
                 .every(c => c.querySelector('svg.marks g.role-frame'))""",
        timeout=30_000,
    )
    tab.wait_for_timeout(500)  # Vega sizes to its container after drawing
    return tab.evaluate(LAYOUT_JS)


CHAPTERS = [name for name in PAGES if name != "home"]


@pytest.mark.parametrize("name", CHAPTERS)
@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_each_chapter_shows_a_whole_chart_in_its_first_screen_and_is_at_most_four_screens(
    server, tab, lang, name
):
    desk = layout(tab, server, name, lang, DESKTOP)
    assert desk["charts"], "no chart drawn"
    first = desk["charts"][0]
    assert first["bottom"] <= SCREEN, f"the first chart ends at {first['bottom']:.0f} px"
    assert desk["height"] <= MOST, f"{desk['height']} px tall"
    phone = layout(tab, server, name, lang, PHONE)
    assert phone["order"] == desk["order"], "the phone shows the blocks in another order"
    assert not phone["wide"], f"cut at the right edge: {phone['wide']}"


@pytest.fixture(scope="module")
def tab_with_japanese(browser_type, tmp_path_factory):
    """A page in a Chromium that draws Japanese with real glyphs (the Noto Sans CJK JP the site ships for its exports):
    without a Japanese font Chromium draws boxes, whose widths are not the text's."""
    import os

    import noto_cjk_sans_jp_regular as noto

    from harness.server import CHROMIUM, CHROMIUM_ARGS

    folder = tmp_path_factory.mktemp("fonts")
    conf = folder / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?><fontconfig><include ignore_missing="yes">/etc/fonts/fonts.conf</include>'
        f"<dir>{noto.FONT_PATH.parent}</dir><cachedir>{folder}</cachedir></fontconfig>",
        encoding="utf-8",
    )
    env = {**os.environ, "FONTCONFIG_FILE": str(conf)}
    browser = browser_type.launch(
        executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, env=env
    )
    page = browser.new_page(viewport={"width": DESKTOP, "height": SCREEN}, device_scale_factor=1)
    yield page
    browser.close()


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_homes_four_numbers_share_one_row_on_a_desktop(server, tab_with_japanese, lang):
    """The home page's key numbers side by side at 1400 px: none wraps onto a row of its own."""
    tab = tab_with_japanese
    layout(tab, server, "home", lang, DESKTOP)
    tops = tab.evaluate(
        """() => [...document.querySelectorAll("[data-testid='stMetric']")]
                 .map(m => Math.round(m.getBoundingClientRect().top))"""
    )
    assert len(tops) == 4 and len(set(tops)) == 1, tops


VERDICT_JS = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  const top = main.getBoundingClientRect().top - main.scrollTop;
  const alert = [...main.querySelectorAll("[data-testid='stAlert']")]
      .find(a => a.getBoundingClientRect().height > 0 && /GiB/.test(a.innerText));
  if (!alert) return null;
  const r = alert.getBoundingClientRect();
  return {top: r.top - top, bottom: r.bottom - top, text: alert.innerText};
}"""


@pytest.mark.parametrize("width", [DESKTOP, PHONE])
@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_calculators_verdict_is_in_its_first_screen_and_names_the_mac(
    server, tab_with_japanese, lang, width
):
    """Issue 36 item 6: fits or not, by how much, on which Mac, above the fold at 1400 x 900 and at 390 px."""
    tab = tab_with_japanese
    tab.set_viewport_size({"width": width, "height": SCREEN})
    tab.goto(f"{server}/{PAGES['calculator']}?lang={lang}")
    wait_ready(tab)
    tab.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=stAlert]')]"
        ".some(a => /GiB/.test(a.innerText))",
        timeout=30_000,
    )
    verdict = tab.evaluate(VERDICT_JS)
    assert verdict and verdict["bottom"] <= SCREEN, verdict
    assert "M4 Pro" in verdict["text"] and "%" in verdict["text"]  # which Mac, and by how much
