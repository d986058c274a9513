"""Median script run time of every page on recorded data, and its ratio to a one-line Streamlit page
measured in the same run (AppTest, warm caches: a reader's rerun with unchanged inputs). Goal: ratio <= 3.

    .venv/bin/python benchmarks/bench_pages.py [--runs 30] [--seed 1] [--json benchmarks/out/pages.json]
        [--markdown docs/benchmarks.md]

Design. Every script goes through the same harness: AppTest in one process, one warm-up run each. Then
--runs rounds, each visiting every script in a shuffled (seeded) order; a visit is an untimed run and then
the timed run, so the run before a timed one is always the same script's, as in a reader's session. This
matters: Python's garbage collector runs when allocations cross a threshold, so a run pays for collecting
whatever the run before it left; timed right after a big page, the one-line page measures ~15-25 % slower
(an earlier version of this benchmark timed it after the Recordings page every round, which inflated the
baseline and flattered every ratio). Ratio = median of the script's runs / median of the one-line page's.
Columns:
- "median ms": the median of AppTest.run(), what the goal is judged on; it includes the harness's own
  ~1.5 ms a run (a script thread and its event loop, parsing the output), which the server has its own
  version of (a ScriptRunner and thread per rerun, serializing every message).
- "script ms": the median time inside ScriptRunner._run_script alone (the one-line page: ~0.5 ms).
- "elements": the deltas one run sends (elements and blocks); Streamlit's cost is per element.
Two calibration rows, run from a copy of the app with two extra pages, show where a page's floor is:
a one-line page inside this multipage app (the navigation Streamlit rebuilds on every run of a
multipage app), and a page holding only the shared frame (page config, language switch, the eight
translated page links, data-source picker and provenance badge).

Like the server, which compiles a script once per process, the harness keeps one bytecode cache for all
runs; AppTest alone builds a fresh one per run and so recompiles (with Streamlit's "magic" AST pass) the
entry point and the page every time, 1.5-3.5 ms a run that a reader never waits for.

What a page costs (2-core machine): Streamlit's fixed cost per element, ~0.1 ms per markdown, ~0.15 per
page link, ~0.2 per download button, ~0.15-0.3 per input widget, ~0.3 per chart or st.dataframe, ~0.05
per column block. Every section's data, chart spec (with its Arrow data), tables and numbers come from
one kvsite.data.cache.section_cache call keyed on a tuple of the arguments; nothing is recomputed, hashed as a
DataFrame or serialized again on a rerun. What the pages send was cut without hiding anything a reader
sees first: each chart's table and CSV/PNG/SVG buttons sit in one lazy expander (sent only while open),
readers' questions are one markdown element with an anchor per question, small tables among prose are
markdown tables, adjacent headings and paragraphs are one element, rows of inputs and metrics are one
horizontal block. The page links stay st.page_link: markdown links would save ~1 ms but reload the whole
page on every click and drop the session, a running live measurement included.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import streamlit.runtime.scriptrunner.script_runner as _script_runner
import streamlit.testing.v1.app_test as _app_test
import streamlit.testing.v1.local_script_runner as _runner
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.doc_tables import Section, add_option, table  # noqa: E402
from kvsite.frame.chapters import CHAPTERS  # noqa: E402

APP = str(ROOT / "streamlit_app.py")
PAGES = [None, *(chapter.path for chapter in CHAPTERS)]
BASELINE = "one-line page"


def share_bytecode() -> None:
    """One bytecode cache for every AppTest run, as the server's runtime keeps one (see the docstring)."""
    cache = ScriptCache()
    _app_test.ScriptCache = _runner.ScriptCache = lambda: cache


class ScriptClock:
    """Seconds spent in ScriptRunner._run_script (the script thread's run) during the last AppTest.run()."""

    def __init__(self) -> None:
        self.last = 0.0
        run = _script_runner.ScriptRunner._run_script
        clock = self

        def timed(runner, rerun_data):
            t0 = time.perf_counter()
            try:
                run(runner, rerun_data)
            finally:
                clock.last = time.perf_counter() - t0

        _script_runner.ScriptRunner._run_script = timed


CALIBRATION = {  # extra pages in a copy of the app: the floor every page stands on
    "calibration: one-line page in this multipage app": (
        "90_one_line.py",
        'import streamlit as st\nst.write("hello")\n',
    ),
    "calibration: the shared frame alone": (
        "91_frame.py",
        'from kvsite.frame.page import setup\nsetup("recordings").pick_source("decode")\n',
    ),
}


def _app_copy(folder: Path) -> str:
    """streamlit_app.py and pages/ copied into `folder` with the calibration pages; kvsite, kvcore and the
    recordings still come from the repository (its navigation links the repository's pages, as the real
    app's does)."""
    folder.mkdir()
    shutil.copy(ROOT / "streamlit_app.py", folder)
    shutil.copytree(ROOT / "pages", folder / "pages", ignore=shutil.ignore_patterns("__pycache__"))
    for name, text in CALIBRATION.values():
        (folder / "pages" / name).write_text(text, encoding="utf-8")
    return str(folder / "streamlit_app.py")


def _apps(lang: str, folder: Path) -> dict[str, AppTest]:
    """The one-line baseline, every page, and the calibration pages, each warmed up once (imports, caches)."""
    (folder / "one_line.py").write_text(
        'import streamlit as st\nst.write("hello")\n', encoding="utf-8"
    )
    apps = {BASELINE: AppTest.from_file(str(folder / "one_line.py"), default_timeout=60)}
    for path in PAGES:
        apps[path or "streamlit_app.py"] = at = AppTest.from_file(APP, default_timeout=60)
        if path:
            at.switch_page(path)
    copy = _app_copy(folder / "app")
    for label, (name, _) in CALIBRATION.items():
        apps[label] = AppTest.from_file(copy, default_timeout=60).switch_page(f"pages/{name}")
    for at in apps.values():
        at.query_params["lang"] = lang
        at.run()
        assert not at.exception, at.exception[0].message
    return apps


def _elements(at: AppTest) -> int:
    count, stack = 0, [at._tree]
    while stack:
        node = stack.pop()
        children = list(getattr(node, "children", {}).values())
        count += len(children)
        stack += children
    return count


def measure(runs: int, lang: str, seed: int = 1) -> list[dict]:
    """Per script: median AppTest.run() and script-thread ms, elements, ratio to the one-line page."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))  # the calibration copy imports kvsite from here
    clock = ScriptClock()
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        apps = _apps(lang, Path(tmp))
        t = {name: [] for name in apps}
        script = {name: [] for name in apps}
        for _ in range(runs):
            order = list(apps)
            rng.shuffle(order)
            for name in order:
                apps[
                    name
                ].run()  # the run before a timed run is the same script's (see the docstring)
                t0 = time.perf_counter()
                apps[name].run()
                t[name].append(time.perf_counter() - t0)
                script[name].append(clock.last)
                assert not apps[name].exception, apps[name].exception[0].message
        base = statistics.median(t[BASELINE])
        return [
            {
                "page": name,
                "median_ms": statistics.median(t[name]) * 1e3,
                "script_ms": statistics.median(script[name]) * 1e3,
                "elements": _elements(at),
                "ratio": statistics.median(t[name]) / base,
                "calibration": name in CALIBRATION,
            }
            for name, at in apps.items()
        ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--lang", default="en", choices=("en", "ja"))
    ap.add_argument("--json", help="also write the results here")
    add_option(ap)
    ap.add_argument("--seed", type=int, default=1, help="the order of the scripts in each round")
    ap.add_argument(
        "--compile-each-run",
        action="store_true",
        help="AppTest's default: recompile the scripts on every run",
    )
    a = ap.parse_args()
    section = Section(a.markdown, "bench_pages")
    if not a.compile_each_run:
        share_bytecode()
    rows = measure(a.runs, a.lang, a.seed)
    width = max(len(r["page"]) for r in rows)
    mode = (
        "scripts compiled every run" if a.compile_each_run else "bytecode cached as in the server"
    )
    print(
        f"{'page':<{width}}  median ms  script ms  elements  ratio  ({a.runs} runs each, {mode}; no goal: readers wait for the round trip, see bench_server.py)"
    )
    for r in rows:
        print(
            f"{r['page']:<{width}}  {r['median_ms']:9.1f}  {r['script_ms']:9.1f}  {r['elements']:8d}  {r['ratio']:5.2f}"
        )
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(rows, indent=2))
    heads = ["page", "median ms", "script thread ms", "elements", "× one-line page"]
    cells = [
        [
            r["page"],
            f"{r['median_ms']:.1f}",
            f"{r['script_ms']:.1f}",
            r["elements"],
            f"{r['ratio']:.2f}",
        ]
        for r in rows
    ]
    section.write(
        table(heads, cells, right=(1, 2, 3, 4))
        + f"\n\n{a.runs} runs each, {mode}, pages in {a.lang}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
