"""What each kind of element on a page costs a slider step, in Chromium: a section (st.fragment) of one slider and a
two-point chart, alone and then with 40 elements of one kind beside it, each page against the one-line page of
benchmarks/bench_slider.py, paired in one run. It says which of a chapter's elements a step pays for although the step
sends them nothing: Streamlit 1.67's frontend draws every element on the page again when a run starts and ends (each
element reads the run's state, scriptRunState and scriptRunId, from one React context), so an element outside the
slider's section is drawn again at each step, and some kinds cost far more than others to draw.

Design: bench_slider's step (a key press until the rerun is over and the chart repainted) on one server per page,
one Chromium tab each; a page's rounds together (a warm-up round first), each step paired with one of the one-line
page's (bench_slider.schedule). The
result per page: the median of its paired ratios page / one-line page with their IQR, and what one element adds, the
difference from the section alone over 40, in ms of the one-line page's median step.

Run: .venv/bin/python benchmarks/bench_elements.py --rounds 15 [--markdown docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_slider import BASELINE_PAGE, CHART, _app, reset, schedule, step  # noqa: E402
from benchmarks.doc_tables import Section, add_option, table  # noqa: E402
from harness.server import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402

COUNT = 40  # elements of one kind beside the section
SECTION = """import altair as alt
import pandas as pd
import streamlit as st


@st.fragment
def section():
    v = st.slider("value", 0, 1000, 500)
{inside}
    st.altair_chart(alt.Chart(pd.DataFrame({{"x": [0, 1], "y": [0, v]}})).mark_line().encode(x="x", y="y"),
                    width="stretch")


section()
for i in range({count}):
    {outside}
"""
ALONE = "the section alone"
# page -> (code outside the section, run COUNT times; code inside it, run COUNT // 4 times): the kinds a chapter holds
KINDS = {
    ALONE: ("pass", ""),
    "markdown paragraphs": ('st.markdown(f"Paragraph {i}: some **bold** text.")', ""),
    "metrics": ('st.metric(f"Number {i}", f"{i} GiB")', ""),
    "select boxes": ('st.selectbox(f"Choice {i}", ["a", "b"], key=f"s{i}")', ""),
    "page links": ('st.page_link("https://example.com/", label=f"Chapter {i}")', ""),
    "buttons": ('st.button(f"Data {i}", key=f"b{i}", type="tertiary")', ""),
    "expanders (a paragraph in each)": (
        'st.expander(f"Question {i}").markdown(f"Answer {i}.")',
        "",
    ),
    "popovers (a paragraph in each)": ('st.popover(f"Source {i}").markdown(f"Answer {i}.")', ""),
    "charts (two 100-point lines, a legend that selects)": (
        "chart(i)",
        "",
    ),
    "select boxes inside the section (10)": (
        "pass",
        '    for i in range(10):\n        st.selectbox(f"Choice {i}", ["a", "b"], key=f"s{i}")',
    ),
}
CHART_DEF = """

def chart(k):
    df = pd.DataFrame({"x": list(range(100)) * 2, "y": [i * (k + 1) for i in range(200)], "s": ["a"] * 100 + ["b"] * 100})
    pick = alt.selection_point(fields=["s"], bind="legend")
    c = alt.Chart(df).mark_line().encode(x="x", y="y", color="s", opacity=alt.condition(pick, alt.value(1), alt.value(0.2)))
    st.altair_chart(c.add_params(pick), width="stretch", on_select="rerun", key=f"c{k}")
"""


def page_code(kind: str) -> str:
    outside, inside = KINDS[kind]
    charts = outside.startswith("chart(")
    count = 4 if charts else (1 if outside == "pass" else COUNT)
    code = SECTION.format(inside=inside, count=count, outside=outside)
    return code.replace("\n\n@st.fragment", CHART_DEF + "\n\n@st.fragment") if charts else code


def count_of(kind: str) -> int:
    outside, inside = KINDS[kind]
    return (
        10 if inside else 4 if outside.startswith("chart(") else 0 if outside == "pass" else COUNT
    )


def main() -> int:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    add_option(ap)
    a = ap.parse_args()
    section = Section(a.markdown, "bench_elements")
    ratios: dict[str, list[float]] = {kind: [] for kind in KINDS}
    base_times: list[float] = []
    with ExitStack() as stack, sync_playwright() as pw:
        servers = {
            kind: stack.enter_context(streamlit_server(app_dir=_app(page_code(kind), "bench-el-")))
            for kind in KINDS
        }
        baseline = stack.enter_context(
            streamlit_server(app_dir=_app(BASELINE_PAGE, "bench-el-base-"))
        )
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        tabs = {}
        for kind, url in servers.items():
            tabs[kind] = browser.new_page(viewport={"width": 1400, "height": 1000})
            reset(tabs[kind], f"{url}/")
        base = browser.new_page(viewport={"width": 1400, "height": 1000})
        reset(base, f"{baseline}/")
        for r, kind in schedule(list(tabs), a.rounds, "page"):  # a page's rounds together
            key = "ArrowRight" if r % 2 == 0 else "ArrowLeft"
            t_page, t_base = step(tabs[kind], 0, key, CHART), step(base, 0, key)
            if r:  # round 0 warms up
                ratios[kind].append(t_page / t_base)
                base_times.append(t_base)
        browser.close()
    base_ms = statistics.median(base_times) * 1e3
    alone = statistics.median(ratios[ALONE])
    rows = []
    print(f"one-line page: {base_ms:.0f} ms a step (median)")
    for kind, values in ratios.items():
        q = statistics.quantiles(values, n=4)
        med = statistics.median(values)
        n = count_of(kind)
        each = f"{(med - alone) * base_ms / n:+.2f} ms" if n else "—"
        print(f"{kind:<52} {med:5.2f} ({q[0]:.2f}-{q[2]:.2f})  each {each}")
        rows.append([kind, str(n) if n else "—", f"{med:.2f} ({q[0]:.2f}–{q[2]:.2f})", each])
    heads = [
        "beside the section",
        "how many",
        f"× one-line page (median of {a.rounds} paired ratios, IQR)",
        f"one element, ms (one-line page {base_ms:.0f} ms)",
    ]
    section.write(table(heads, rows, right=(1, 3)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
