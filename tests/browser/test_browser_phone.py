"""What a reader trips over on a phone (issue 36), read in Chromium: every page's title below Streamlit's opaque
header (up to 768 px), no select's value cut mid-word, legend symbols in their points' colours, the Prefill chapter's
chart and its one chip in its first screen, the Recordings tabs' labels clear of a table's toolbar."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from harness.server import PAGES, wait_ready
from kvcore.timing import hardware
from kvsite import i18n

PHONE, TABLET, DESKTOP = (
    390,
    768,
    1400,
)  # px: an iPhone's CSS width; the widest Streamlit draws its header opaque
PHONE_SCREEN, SCREEN = 844, 900  # px: an iPhone 12-15's height; a laptop's window
CHIPS = [c.chip for c in hardware.chips()]

# The title's box against the header's, and every select whose value (an input element, which cannot wrap) is wider
# than its box; every legend symbol's fill, stroke width and size.
PAGE_JS = """() => {
  const header = document.querySelector("[data-testid='stHeader']").getBoundingClientRect();
  const title = document.querySelector("[data-testid='stMain'] h1").getBoundingClientRect();
  const cut = [...document.querySelectorAll("[data-testid='stMain'] [data-testid='stSelectbox'] input")]
      .filter(i => i.clientWidth > 0 && i.scrollWidth > i.clientWidth + 1)
      .map(i => `${i.value} (${i.scrollWidth} px in ${i.clientWidth})`);
  const symbols = [...document.querySelectorAll("g.role-legend-symbol path")].map(p => ({
      fill: p.getAttribute('fill'), outline: p.getAttribute('stroke'),
      stroke: parseFloat(p.getAttribute('stroke-width') || '0'),
      size: p.getBoundingClientRect().width}));
  return {header: header.bottom, title: title.top, cut, symbols};
}"""


@pytest.fixture(scope="module")
def tab(browser):
    context = browser.new_context(viewport={"width": PHONE, "height": PHONE_SCREEN})
    page = context.new_page()
    yield page
    context.close()


def load(tab, server, name: str, lang: str, width: int, height: int, query: str = "") -> None:
    tab.set_viewport_size({"width": width, "height": height})
    tab.goto(f"{server}/{PAGES[name]}?lang={lang}{query}")
    wait_ready(tab)
    tab.wait_for_function(
        """() => [...document.querySelectorAll("[data-testid='stVegaLiteChart']")]
                 .every(c => c.querySelector('svg.marks g.role-frame'))""",
        timeout=30_000,
    )
    tab.wait_for_timeout(300)  # Vega sizes to its container after drawing


@pytest.mark.parametrize("name", list(PAGES))
@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
@pytest.mark.parametrize("width", [PHONE, TABLET])
def test_every_page_reads_on_a_phone(server, tab, width, lang, name):
    """The title's first line below the header; each select's value whole (the longest chip where a page offers
    chips); each legend symbol shows its colour (a 4-px black outline on a 10-px point hid it)."""
    load(tab, server, name, lang, width, PHONE_SCREEN, "&chip=" + quote(max(CHIPS, key=len)))
    seen = tab.evaluate(PAGE_JS)
    assert seen["title"] >= seen["header"], (
        f"the title starts at {seen['title']} px, under the header"
    )
    assert not seen["cut"], f"selects cut: {seen['cut']}"
    coloured = [s for s in seen["symbols"] if s["fill"] not in (None, "transparent", "none")]
    outlined = [s for s in coloured if s["outline"] not in (None, "none", s["fill"])]
    hidden = [s for s in outlined if s["stroke"] * 4 > s["size"]]
    assert not hidden, f"legend symbols covered by their outline: {hidden[:3]}"


CHIP_NAME = re.compile(r"\b(M[1-9](?: (?:Pro|Max|Ultra))?|NVIDIA [A-Z]+\d+)\b")
# Every text the first screen shows (page text, chart text, input values) in the main column above `bottom`
FIRST_SCREEN_JS = """(bottom) => {
  const main = document.querySelector("[data-testid='stMain']");
  const shown = el => { const r = el.getBoundingClientRect(); return r.height > 0 && r.top < bottom; };
  const texts = [...main.querySelectorAll("p, h1, h2, h3, h4, h5, li, span, text")]
      .filter(e => !e.children.length && shown(e)).map(e => e.textContent);
  const inputs = [...main.querySelectorAll("input")].filter(shown).map(i => i.value);
  const charts = [...main.querySelectorAll("[data-testid='stVegaLiteChart']")].filter(shown).map(c => {
    const plot = c.querySelector("svg.marks g.role-frame.root > g > path.background");
    return plot ? plot.getBoundingClientRect().bottom : null;
  });
  return {text: [...texts, ...inputs].join(" | "), charts};
}"""


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
@pytest.mark.parametrize("width,height", [(PHONE, PHONE_SCREEN), (DESKTOP, SCREEN)])
def test_the_prefill_chapters_first_screen_shows_its_chart_on_one_chip(
    server, tab, lang, width, height
):
    """The roofline's plot whole in the first screen, and one chip named there: the roof's, whose measured runs are
    drawn under it (an M3 Ultra source, an M4 Max roof and Article A's M5 Pro points shared it)."""
    load(tab, server, "prefill_decode", lang, width, height)
    first = tab.evaluate(FIRST_SCREEN_JS, height)
    assert first["charts"] and first["charts"][0] is not None, "no chart in the first screen"
    assert first["charts"][0] <= height, f"the plot ends at {first['charts'][0]:.0f} px"
    chips = set(CHIP_NAME.findall(first["text"]))
    assert len(chips) == 1, f"chips named on the first screen: {sorted(chips)}"


TOOLBAR_JS = """() => {
  const tabs = [...document.querySelectorAll("[data-testid='stTabs'] [role='tab']")]
      .map(t => t.getBoundingClientRect());
  const bar = document.querySelector("[data-testid='stTabs'] [data-testid='stElementToolbar']");
  const r = bar.getBoundingClientRect();
  const over = tabs.filter(t => t.left < r.right && r.left < t.right && t.top < r.bottom && r.top < t.bottom);
  return {over: over.length, visible: getComputedStyle(bar).opacity};
}"""


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_a_tables_toolbar_leaves_the_recordings_tab_labels_readable(server, tab, lang):
    load(tab, server, "recordings", lang, PHONE, PHONE_SCREEN)
    table = tab.locator("[data-testid='stTabs'] [data-testid='stDataFrame']").first
    table.scroll_into_view_if_needed()
    table.hover()  # a touch shows the toolbar as a hover does
    tab.wait_for_timeout(500)
    seen = tab.evaluate(TOOLBAR_JS)
    assert seen["visible"] == "1" and seen["over"] == 0, seen


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
@pytest.mark.parametrize("src", ["", "&src=measured-linux-cpu-llama-server-smollm2-135m"])
def test_many_conversations_first_phone_screen_holds_its_claim_and_whole_plot(
    server, tab, lang, src
):
    """Issue 34: the chapter's claim and its recorded chart's plot in a phone's first screen, both languages, for
    either server's recording (llama-server's offers a conversation picker, drawn under the chart)."""
    load(tab, server, "conversations", lang, PHONE, PHONE_SCREEN, src)
    first = tab.evaluate(FIRST_SCREEN_JS, PHONE_SCREEN)
    assert first["charts"] and first["charts"][0] is not None, "no chart in the first screen"
    assert first["charts"][0] <= PHONE_SCREEN, f"the plot ends at {first['charts'][0]:.0f} px"
