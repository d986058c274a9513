"""Every page, both languages, on a phone (390 px) and a desktop (1400 px), each read whole from one load: each
chart keeps room to plot and no axis label or title is cut; no legend entry is cut; and on a phone no table,
paragraph or code block is cut at the right edge.

The plot area is what Vega draws the data into: the background of the chart's root group (Vega sizes it to the
view's width; with `autosize: fit` a legend on the right takes its width from it), or, for a concatenated or
faceted chart, each cell's background. On a phone a right-hand legend can squeeze it to nothing (issue 9).
Legends: no entry ends in "…" (Vega's cut at labelLimit) and none runs past its chart's right edge (cut
mid-character by the page). Run names are made short where they are made (Recording.short_name), not cut by the
renderer. A Japanese page at 1400 px, every expander opened, has no run of five or more English words anywhere a
reader looks (page text, chart SVG text, the uploader's own words), proper nouns aside (english_runs.py).
"""

from __future__ import annotations

import pytest
from english_runs import PAGE_TEXT_JS, english_runs

from harness.server import PAGES, wait_ready
from kvsite import i18n

PHONE, DESKTOP = 390, 1400  # px: an iPhone 12-15's CSS width; a laptop's browser window
MIN_PLOT = {
    PHONE: 230,
    DESKTOP: 400,
}  # px of plot a reader can read values from (390: two-thirds of the 358-px column, less a label's width: Savings'
# bars kept 198 px beside their labels and axis title, issue 36; 1400: about half the main column)

# Per chart: its plot cells' widths, the svg's right edge, the chart's label, and any axis label or title drawn
# past the chart's own box or the screen (cut: issue 19's last x label), read from the drawn SVG.
PLOTS_JS = """() => [...document.querySelectorAll("[data-testid='stVegaLiteChart']")].map((chart, i) => {
  const svg = chart.querySelector('svg.marks');
  if (!svg) return {i, drawn: false};
  const width = el => el.getBoundingClientRect().width;
  const cells = [...svg.querySelectorAll('g.role-scope')]
      .filter(g => /concat_\\d+_group|child__|cell/.test(g.getAttribute('class') || ''));
  const groups = cells.length ? cells : [svg.querySelector('g.role-frame.root')];
  const plots = groups.map(g => {
    const bg = g.querySelector(':scope > g > path.background');
    return bg ? Math.round(width(bg)) : 0;
  });
  const label = (svg.querySelector("g.role-axis[aria-label^='X-axis']") || svg).getAttribute('aria-label') || '';
  const box = svg.getBoundingClientRect();
  const cut = [...svg.querySelectorAll('g.role-axis-label text, g.role-axis-title text, g.role-title text')]
      .map(t => [t.textContent, t.getBoundingClientRect()])
      .filter(([_, r]) => r.width && (r.right > Math.min(box.right, innerWidth) + SLACK || r.left < box.left - SLACK))
      .map(([text, r]) => `${text} (x ${Math.round(r.left)}-${Math.round(r.right)})`);
  return {i, drawn: true, plots, right: Math.round(box.right), label: label.slice(0, 60), cut,
          box: `${Math.round(box.left)}-${Math.round(box.right)}`};
})""".replace(
    "SLACK", "3"
)  # px: a rotated title's box pokes a pixel or two out of a drawing that fits


# Blocks of text whose content is wider than their box (scrollWidth > clientWidth) while the box shows no scroll
# affordance (overflow-x visible: the content spills past the column and the screen cuts it; hidden or clip: it is
# cut at the box). A box that scrolls (overflow-x auto or scroll, as a code block does) is fine. Hidden boxes (the
# folded sidebar, a closed expander) have no width and are skipped.
CUT_JS = """() => {
  const main = document.querySelector("[data-testid='stMain']");
  const sel = "[data-testid='stMarkdownContainer'], [data-testid='stMarkdownContainer'] table, "
            + "[data-testid='stCaptionContainer'], [data-testid='stTable'], [data-testid='stCode'] pre, "
            + "[data-testid='stAlertContentInfo'], [data-testid='stMetric']";
  return [...main.querySelectorAll(sel)].filter(el => el.clientWidth > 0).map(el => {
    const ox = getComputedStyle(el).overflowX;
    const cut = el.scrollWidth > el.clientWidth + 1 && !(ox === 'auto' || ox === 'scroll');
    return cut ? {what: el.tagName.toLowerCase() + ' ' + (el.getAttribute('data-testid') || ''),
                  content: el.scrollWidth, box: el.clientWidth,
                  text: el.innerText.replace(/\\s+/g, ' ').slice(0, 70)} : null;
  }).filter(Boolean);
}"""


LEGENDS_JS = """() => [...document.querySelectorAll("[data-testid='stVegaLiteChart']")].flatMap(chart => {
  const right = chart.getBoundingClientRect().right;
  return [...chart.querySelectorAll("g.role-legend-label text, g.role-legend text")].map(t => ({
    text: t.textContent, over: Math.round(t.getBoundingClientRect().right - right)}));
})"""


@pytest.fixture(scope="module")
def tab(browser):
    """One browser tab for the whole file (a new context per page would cost a second each)."""
    context = browser.new_context(viewport={"width": DESKTOP, "height": 900}, device_scale_factor=1)
    page = context.new_page()
    yield page
    context.close()


@pytest.mark.parametrize("name", list(PAGES))
@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_every_page_reads_whole(server, tab, width, lang, name):
    """One load per page, language and width, read three or four ways (a load of its own for each cost ~3 s)."""
    load_drawn(tab, f"{server}/{PAGES[name]}?lang={lang}", width)
    charts = settled(tab, PLOTS_JS)
    problems = chart_problems(charts, width)
    assert name == "home" or charts, "no chart drawn"
    if name != "home":  # every chapter's charts have a legend
        problems += legend_problems(tab)
    if width == PHONE:
        problems += cut_text(tab)
    if width == DESKTOP and lang == "ja":
        problems += english_on_a_japanese_page(tab)
    assert not problems, f"{name}?lang={lang} at {width} px:\n" + "\n".join(problems)


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
def test_the_calculators_decode_legend_for_several_sequences_is_whole(server, tab, lang):
    load_drawn(tab, f"{server}/{PAGES['calculator']}?lang={lang}&seq=4", PHONE)
    settled(tab, PLOTS_JS)
    assert not (problems := legend_problems(tab)), problems


SOURCE_PICKER_JS = """() => {
  const input = document.querySelector("[data-testid='stMain'] [data-testid='stSelectbox'] input");
  return input ? {text: input.value, scroll: input.scrollWidth, client: input.clientWidth} : null;
}"""


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
@pytest.mark.parametrize(
    "src", ["published-article-a-m5-pro", "published-rapid-mlx-586-m3-ultra-llama-3.1-8b-4bit"]
)
def test_the_source_picker_is_in_the_page_body_and_shows_the_whole_run_name(server, tab, lang, src):
    """In the body, where a phone shows it (its sidebar is folded away); at a desktop's width, whole."""
    tab.set_viewport_size({"width": DESKTOP, "height": 900})
    tab.goto(f"{server}/{PAGES['decode_slowdown']}?lang={lang}&src={src}")
    wait_ready(tab)
    shown = tab.evaluate(SOURCE_PICKER_JS)
    assert shown and "·" in shown["text"], shown
    assert shown["scroll"] <= shown["client"], shown  # nothing hidden behind an ellipsis
    tab.set_viewport_size({"width": PHONE, "height": 900})
    wait_ready(tab)
    box = tab.locator("[data-testid='stMain'] [data-testid='stSelectbox']").first
    assert box.is_visible() and box.bounding_box()["x"] + box.bounding_box()["width"] <= PHONE


def load_drawn(tab, url: str, width: int) -> None:
    """The page at `url` in a `width`-px viewport, run and every chart drawn, with no exception shown."""
    tab.set_viewport_size({"width": width, "height": 900})
    tab.goto(url)
    wait_ready(tab)
    tab.wait_for_function(
        """() => [...document.querySelectorAll("[data-testid='stVegaLiteChart']")]
                                     .every(c => c.querySelector('svg.marks g.role-frame'))""",
        timeout=30_000,
    )
    exceptions = tab.locator("[data-testid='stException']")
    assert exceptions.count() == 0, exceptions.first.inner_text()[:500]


def settled(tab, js: str, tries: int = 10):
    """`js`'s reading once two in a row agree: Vega resizes to its container after drawing."""
    now, before = tab.evaluate(js), None
    for _ in range(tries):
        if now == before:
            break
        tab.wait_for_timeout(250)
        now, before = tab.evaluate(js), now
    return now


def chart_problems(charts: list[dict], width: int) -> list[str]:
    problems = []
    for c in charts:
        if not c["drawn"]:
            problems.append(f"chart {c['i']} not drawn")
            continue
        if min(c["plots"]) < MIN_PLOT[width]:
            problems.append(
                f"chart {c['i']} ({c['label']}): plot {c['plots']} px < {MIN_PLOT[width]} px"
            )
        if c["right"] > width:
            problems.append(
                f"chart {c['i']} ({c['label']}): drawn to x = {c['right']} px, past the {width} px screen"
            )
        if c["label"].startswith("X-axis for"):  # Vega's description of an axis drawn with no title
            problems.append(f"chart {c['i']} ({c['label']}): its x axis has no title")
        if c["cut"]:
            problems.append(
                f"chart {c['i']} ({c['label']}): cut at its edges (the chart spans x {c['box']}): "
                + "; ".join(c["cut"])
            )
    return problems


def legend_problems(tab) -> list[str]:
    labels = settled(tab, LEGENDS_JS)
    if not labels:
        return ["no legend drawn"]
    cut = [label["text"] for label in labels if label["text"].endswith("…")]
    over = [(label["text"], label["over"]) for label in labels if label["over"] > 0]
    return [f"legend entries cut: {cut}"] * bool(cut) + [
        f"legend entries past the chart: {over}"
    ] * bool(over)


def cut_text(tab) -> list[str]:
    """Issue 19: at 390 px the decode runs' table lost its last column, Savings' published-quality table its code
    spans, the trap's update-pattern table its right-hand columns. Every expander is opened first (its tables are
    sent only while open)."""
    open_every_expander(tab, "[data-testid='stMain']")
    return [
        f"cut at the right edge: {c['what']}: {c['content']} px of content in {c['box']} px: {c['text']}"
        for c in tab.evaluate(CUT_JS)
    ]


def test_screenshot_script_makes_the_viewport_hold_the_whole_page(server, tab):
    """scripts/screenshot.py --all: Streamlit scrolls inside its own container, so the viewport is grown to the
    content; the page's last block (Savings' FAQ, its longest page) must then lie inside it."""
    import importlib.util

    from harness.server import ROOT

    spec = importlib.util.spec_from_file_location("screenshot", ROOT / "scripts" / "screenshot.py")
    shot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shot)
    tab.set_viewport_size({"width": PHONE, "height": 900})
    tab.goto(f"{server}/{PAGES['savings']}?lang=ja")
    wait_ready(tab)
    height = shot.fit_to_content(tab, PHONE, 900)
    last = tab.locator("[data-testid='stMarkdownContainer']").last
    bottom = tab.evaluate("el => el.getBoundingClientRect().bottom", last.element_handle())
    assert height > 3600 and bottom <= height, (height, bottom)


def english_on_a_japanese_page(tab) -> list[str]:
    """Every expander opened (tables and downloads are inside), then no English sentence in what a reader sees."""
    open_every_expander(tab, "[data-testid='stApp']")
    tab.wait_for_function(
        """() => [...document.querySelectorAll("[data-testid='stVegaLiteChart']")]
                                     .every(c => c.querySelector('svg.marks g.role-frame'))""",
        timeout=30_000,
    )
    text = tab.evaluate(PAGE_TEXT_JS)
    return ["a missing i18n key (⟨…⟩)"] * ("⟨" in text) + [
        f"English on a Japanese page: {run}" for run in english_runs(text)
    ]


def open_every_expander(tab, within: str) -> None:
    """Every closed expander inside `within` clicked open, then one wait for the reruns they ask for (a wait after
    each click cost a second per expander on the longest page); a rerun that answers an earlier click can close one
    clicked meanwhile, so the closed ones are clicked again, a few rounds at most. Each must then show what it holds."""
    closed = f"{within} [data-testid='stExpander'] details:not([open]) > summary"
    for _ in range(5):
        clicked = tab.evaluate(
            """(closed) => [...document.querySelectorAll(closed)]
                 .filter(s => s.getClientRects().length).map(s => s.click()).length""",
            closed,
        )
        if not clicked:
            break
        wait_ready(tab)
    empty = tab.evaluate(
        """(within) => [...document.querySelectorAll(within + " [data-testid='stExpander'] details")]
             .filter(d => d.getClientRects().length && (!d.open ||
                          !d.querySelector("[data-testid='stExpanderDetails'] [data-testid]")))
             .map(d => d.querySelector('summary').innerText.slice(0, 60))""",
        within,
    )
    assert not empty, f"expanders not open or empty after a click: {empty}"


TABLE_JS = """() => Array.from(document.querySelectorAll("[data-testid='stMain'] [data-testid='stMarkdownContainer'] table"))
  .map(t => ({scroll: t.scrollWidth, client: t.clientWidth, heads: t.rows[0].cells.length}))"""


@pytest.mark.parametrize("lang", list(i18n.LANGUAGES))
@pytest.mark.parametrize("server_name", ["mlx_lm.server", "llama-server"])
def test_the_server_levers_table_shows_every_column_at_a_desktops_width(
    server, tab, lang, server_name
):
    """The levers table of Many conversations (a markdown table, which scrolls inside its own box rather than past
    the screen): at 1400 px every column in view, its Japanese headings included (they once ran past its right
    edge, the seconds hidden)."""
    load_drawn(tab, f"{server}/{PAGES['conversations']}?lang={lang}&server={server_name}", DESKTOP)
    tab.wait_for_selector(
        "[data-testid='stMain'] [data-testid='stMarkdownContainer'] table", timeout=30_000
    )
    tables = settled(tab, TABLE_JS)
    assert any(t["heads"] == 6 for t in tables), (
        tables
    )  # the levers: option, two sizes, three counts
    assert tables and all(t["scroll"] <= t["client"] for t in tables), tables
