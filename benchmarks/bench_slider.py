"""What a reader feels: one step of a slider in Chromium until the page's charts are repainted, on every chapter
with a slider, against a one-line page that has a slider and a chart, measured in one run; beside them a control, the
one-line page with 30 captions more, says what each element a step re-sends costs on this machine, and a second,
the least a chapter's step shows (a section of a slider, a 300-point line, three numbers and a note), what any chapter
costs before the rest of what it shows.

Design (the machine is shared and noisy, so only ratios in one run count): servers for the site as configured, the
one-line page (one slider and one two-point chart) and the two controls, one headless Debian Chromium tab for each
page. A page's rounds come together (schedule(): a warm-up round first, untimed): each presses an arrow once on the
page's slider and then on the one-line page's, right in even rounds and left in odd ones, so the two tabs of a pair
are stepped equally often. A step is timed from the key press until the server has finished the rerun and what the
step changes is repainted: the chart the slider drives (its SVG), or, where a step leaves its chart as it was, the
numbers it changes (the calculator's memory chart is one drawing for every context up to 128K; its metrics move).
The result per page is the median of the paired ratios page / one-line page with the interquartile range. The site
runs read-only on the bundled recordings; live mode is never touched.

Run: .venv/bin/python benchmarks/bench_slider.py --rounds 30 [--markdown docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.doc_tables import Section, add_option, table  # noqa: E402
from harness.server import CHROMIUM, CHROMIUM_ARGS, streamlit_server, wait_ready  # noqa: E402

# chapter URL path and query -> which slider to step (its label's position among the page's sliders), and what the
# step repaints: the element its section draws with that key (Streamlit gives a keyed element the class st-key-<key>),
# a chart, or the calculator's numbers (its memory chart is one drawing for every context up to 128K)
CHAPTERS = {
    "1 Mechanism (prompt tokens)": ("Mechanism?lang=en", 0, ".st-key-mech_chart"),
    "2 The .nbytes trap (tokens)": ("Nbytes_trap?lang=en", 0, ".st-key-trap_chart"),
    "3 Linear growth (context)": ("Linear_growth?lang=en", 0, ".st-key-growth_chart"),
    "4 Decode slowdown (share of peak)": ("Decode_slowdown?lang=en", 0, ".st-key-whatif_chart"),
    "6 Savings (memory)": ("Savings?lang=en", 1, ".st-key-fits_chart"),
    "7 Many conversations (users)": ("Many_conversations?lang=en", 0, ".st-key-servers_users"),
    "8 Calculator (context, log scale)": ("Calculator?lang=en", 0, ".st-key-calc_numbers"),
}
CHART = "[data-testid='stVegaLiteChart']"  # the one-line pages' one chart
BASELINE_PAGE = """import altair as alt
import pandas as pd
import streamlit as st

v = st.slider("value", 0, 1000, 500)
st.altair_chart(alt.Chart(pd.DataFrame({"x": [0, 1], "y": [0, v]})).mark_line().encode(x="x", y="y"), width="stretch")
"""
# a control beside the chapters: the one-line page and 30 captions, what each element a step re-sends costs
CONTROL = "one-line page and 30 captions (control)"
CONTROL_PAGE = BASELINE_PAGE + 'for i in range(30):\n    st.caption(f"line {i}")\n'
# a second control: the least a chapter's step shows, a section (st.fragment) of one slider, a 300-point line, three
# numbers and a note; what any chapter costs before the rest of what it shows
LEAST = "a section of a slider, a 300-point line, 3 numbers, a note (control)"
LEAST_PAGE = """import altair as alt
import pandas as pd
import streamlit as st


@st.fragment
def section():
    v = st.slider("value", 0, 1000, 500)
    data = pd.DataFrame({"x": range(300), "y": [i * v for i in range(300)]})
    st.altair_chart(alt.Chart(data).mark_line().encode(x="x", y="y"), width="stretch")
    numbers = st.container(horizontal=True)
    for i in range(3):
        numbers.metric(f"number {i}", f"{v + i:,} GiB")
    st.caption("a note")


section()
"""
# What a step changed, read at most once an animation frame, once the run is over, and only after the DOM around
# what is watched changed:
# a MutationObserver armed before the key press on the watched element's parent (its section) marks it dirty, and
# the wait, which polls every frame, hashes that one element when it is dirty. Hashing a chapter's charts every
# animation frame took the page's own time; so did an observer of the whole page that hashed every chart around
# every mutation (~6 ms a step on Savings' five charts, a Chromium profile of 7 December), and one that hashed the
# watched chart at every mutation (~5 ms a step on Many conversations' chart, 7 December): more for a large chart
# than for the one-line page's.
ARM_JS = """(selector) => {
  window.__kvSig = () => {
    const el = document.querySelector(selector);
    if (!el) return '';
    const s = el.innerHTML; let h = 0;
    for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) | 0;
    return h + ':' + s.length;
  };
  window.__kvBefore = window.__kvSig();
  if (window.__kvWatch) window.__kvWatch.disconnect();
  window.__kvDirty = false;
  window.__kvWatch = new MutationObserver(() => { window.__kvDirty = true; });
  const watched = document.querySelector(selector);
  window.__kvWatch.observe(watched.parentElement,
    {subtree: true, childList: true, attributes: true, characterData: true});
}"""
# hashed only once the run is over (a large chart's SVG, Many conversations' 72 KB, takes ~0.7 ms a hash; the
# one-line page's hardly any): the step ends at the first frame where the run is over and the element changed
CHANGED_JS = (
    "() => document.querySelector(\"[data-testid='stApp']\").dataset.testScriptState === 'notRunning'"
    " && window.__kvDirty && !(window.__kvDirty = false) && window.__kvSig() !== window.__kvBefore"
)


def schedule(names: list[str], rounds: int, order: str) -> list[tuple[int, str]]:
    """(round, page) in the order they are stepped, round 0 a warm-up; each step is paired with one of the one-line
    page's. By page (the default), a page's rounds come together, so the two tabs of a pair are stepped equally often:
    by round, the one-line page's tab was stepped once for every page, nine times as often as any page's, and the
    pages measured slower against it (7 December, one run after the other on the same code: Mechanism 1.53 by
    round, 1.32 by page; Savings 2.08 and 1.72)."""
    if order == "round":
        return [(r, name) for r in range(rounds + 1) for name in names]
    return [(r, name) for name in names for r in range(rounds + 1)]


def step(page, index: int, key: str = "ArrowRight", watch: str = CHART) -> float:
    """Seconds from one arrow press on the index-th slider until the rerun is over and what `watch` selects
    repainted."""
    page.evaluate(ARM_JS, watch)
    thumb = page.locator("[data-testid='stSlider'] input[type='range']").nth(index)
    thumb.focus()
    t0 = time.perf_counter()
    page.keyboard.press(key)
    page.wait_for_function(CHANGED_JS, polling="raf", timeout=60_000)
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-script-state='notRunning']", timeout=60_000
    )
    return time.perf_counter() - t0


def reset(page, url: str, index: int = 0) -> None:
    """Open `url` and make its index-th slider visible: a slider the chapter keeps one click below, in an expander
    (Decode's what-if, Savings' fits), is opened as a reader opens it, before any step is timed."""
    page.goto(url)
    wait_ready(page)
    slider = page.locator("[data-testid='stSlider']").nth(index)
    if not slider.is_visible():
        slider.locator("xpath=ancestor::details[1]/summary").click()
        slider.wait_for(state="visible")
        wait_ready(page)


def _app(code: str, prefix: str) -> Path:
    """A one-file app in a new folder, with the site's Streamlit settings."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    (folder / "streamlit_app.py").write_text(code, encoding="utf-8")
    (folder / ".streamlit").mkdir()
    (folder / ".streamlit" / "config.toml").write_text(
        (ROOT / ".streamlit" / "config.toml").read_text(), encoding="utf-8"
    )
    return folder


def main() -> int:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument(
        "--order",
        choices=("page", "round"),
        default="page",
        help="page: each page's rounds together, its steps and the one-line page's in turn (both tabs stepped "
        "as often); round: every page once a round, the one-line page after each",
    )
    add_option(ap)
    a = ap.parse_args()
    section = Section(a.markdown, "bench_slider")
    base_dir, control_dir, least_dir = (
        _app(BASELINE_PAGE, "bench-slider-"),
        _app(CONTROL_PAGE, "bench-slider-control-"),
        _app(LEAST_PAGE, "bench-slider-least-"),
    )
    steps = {**CHAPTERS, CONTROL: ("", 0, CHART), LEAST: ("", 0, CHART)}
    times: dict[str, list[float]] = {name: [] for name in [*steps, "one-line page with a slider"]}
    ratios: dict[str, list[float]] = {name: [] for name in steps}
    with (
        streamlit_server({"KVCORE_READ_ONLY": "1"}) as site,
        streamlit_server(app_dir=base_dir) as baseline,
        streamlit_server(app_dir=control_dir) as control,
        streamlit_server(app_dir=least_dir) as least,
        sync_playwright() as pw,
    ):
        controls = {CONTROL: f"{control}/", LEAST: f"{least}/"}
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        tabs = {}
        for name, (path, index, _) in steps.items():
            tabs[name] = browser.new_page(viewport={"width": 1400, "height": 1000})
            reset(tabs[name], controls.get(name, f"{site}/{path}"), index)
        base = browser.new_page(viewport={"width": 1400, "height": 1000})
        reset(base, str(baseline))
        for r, name in schedule(list(steps), a.rounds, a.order):
            _, index, watch = steps[name]
            # one step right, one back: a select_slider of five options never reaches its end
            key = "ArrowRight" if r % 2 == 0 else "ArrowLeft"
            t_page, t_base = step(tabs[name], index, key, watch), step(base, 0, key)
            if r == 0:
                continue  # warm-up round
            times[name].append(t_page)
            times["one-line page with a slider"].append(t_base)
            ratios[name].append(t_page / t_base)
        browser.close()
    print(f"{'page':<36} {'median ms':>9} {'x one-line page (median of paired ratios, IQR)':>48}")
    rows = []
    for name, values in times.items():
        q = statistics.quantiles(ratios[name], n=4) if name in ratios else None
        paired = f"{statistics.median(ratios[name]):.2f} (IQR {q[0]:.2f}-{q[2]:.2f})" if q else "1"
        print(f"{name:<36} {statistics.median(values) * 1e3:9.0f} {paired:>48}")
        paired_md = f"{statistics.median(ratios[name]):.2f} ({q[0]:.2f}–{q[2]:.2f})" if q else "1"
        rows.append([name, f"{statistics.median(values) * 1e3:.0f} ms", paired_md])
    heads = [
        "slider",
        "median",
        f"× one-line page (median of {a.rounds} paired ratios, IQR; order: {a.order})",
    ]
    section.write(table(heads, rows, right=(1,)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
