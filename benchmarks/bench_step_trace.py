"""Where a slider step's time goes in the browser: Chromium's trace of each chapter's step (bench_slider's sliders)
and of the one-line page's, the page's main-thread tasks from the key press until the step is over.

Streamlit 1.67's frontend draws every element of a page again whenever the run's state changes (each element reads
scriptRunState, scriptRunId and the fragments of the run from one React context): as the rerun is asked for,
starts and ends. Each of those is one long task on the main thread, as long as the page is large; the one-line
page's are a millisecond or two. So the table gives, per page: its elements (Streamlit's element containers in the
DOM, the sidebar's included), a step's time, the main thread's busy time within it, how many of its tasks took
5 ms or more and how long they took together, and the longest. Medians over the traced steps; no ratio, so read it
beside bench_slider's table, not as a goal.

Run: .venv/bin/python benchmarks/bench_step_trace.py --steps 8 [--markdown docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_slider import BASELINE_PAGE, CHAPTERS, CHART, _app, reset, step  # noqa: E402
from benchmarks.doc_tables import Section, add_option, table  # noqa: E402
from harness.server import CHROMIUM, CHROMIUM_ARGS, streamlit_server  # noqa: E402

LONG_MS = 5.0  # a task this long or longer is a drawing of the page (the one-line page has none)
TASKS = ("RunTask", "ThreadControllerImpl::RunTask")  # the renderer main thread's top-level tasks
# the categories whose events hold the main thread's tasks (devtools.timeline alone gave none here)
CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8.execute"]
ELEMENTS_JS = "() => document.querySelectorAll(\"[data-testid='stElementContainer']\").length"


def main_thread_tasks(trace: bytes) -> list[float]:
    """The renderer main thread's top-level task durations (ms) in a Chromium trace."""
    data = json.loads(trace)
    events = data["traceEvents"] if isinstance(data, dict) else data
    mains = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("name") == "thread_name" and e["args"].get("name") == "CrRendererMain"
    }
    return [
        e.get("dur", 0) / 1e3
        for e in events
        if (e.get("pid"), e.get("tid")) in mains and e.get("ph") == "X" and e.get("name") in TASKS
    ]


def traced(browser, url: str, index: int, watch: str, steps: int) -> dict:
    """Median figures over `steps` traced steps of the index-th slider on `url`, after three untimed ones."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    reset(page, url, index)
    for k in range(3):
        step(page, index, "ArrowRight" if k % 2 == 0 else "ArrowLeft", watch)
    rows = []
    for k in range(steps):
        browser.start_tracing(page=page, categories=CATEGORIES)
        wall = step(page, index, "ArrowRight" if k % 2 == 0 else "ArrowLeft", watch)
        tasks = main_thread_tasks(browser.stop_tracing())
        long = [t for t in tasks if t >= LONG_MS]
        rows.append((wall * 1e3, sum(tasks), len(long), sum(long), max(tasks, default=0.0)))
    elements = page.evaluate(ELEMENTS_JS)
    page.close()
    return {
        "elements": elements,
        **{
            k: statistics.median(r[i] for r in rows)
            for i, k in enumerate(("step", "busy", "long", "long_ms", "largest"))
        },
    }


def main() -> int:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    add_option(ap)
    a = ap.parse_args()
    section = Section(a.markdown, "bench_step_trace")
    with (
        streamlit_server({"KVCORE_READ_ONLY": "1"}) as site,
        streamlit_server(app_dir=_app(BASELINE_PAGE, "bench-trace-")) as baseline,
        sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        pages = {"one-line page with a slider": (str(baseline), 0, CHART)}
        pages |= {name: (f"{site}/{path}", i, w) for name, (path, i, w) in CHAPTERS.items()}
        found = {name: traced(browser, url, i, w, a.steps) for name, (url, i, w) in pages.items()}
        browser.close()
    heads = [
        "slider",
        "elements on the page",
        "step",
        "main thread busy",
        f"tasks ≥ {LONG_MS:.0f} ms",
        "their time",
        "longest task",
    ]
    rows = [
        [
            name,
            f"{r['elements']}",
            f"{r['step']:.0f} ms",
            f"{r['busy']:.0f} ms",
            f"{r['long']:.0f}",
            f"{r['long_ms']:.0f} ms",
            f"{r['largest']:.1f} ms",
        ]
        for name, r in found.items()
    ]
    for row in rows:
        print("  ".join(row))
    section.write(table(heads, rows, right=(1, 2, 3, 4, 5, 6)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
