"""Median script run time of every page on recorded data, and its ratio to a one-line Streamlit page
measured in the same run (AppTest, warm caches: what a reader's rerun costs). Goal: ratio <= 3.

    .venv/bin/python benchmarks/bench_pages.py [--runs 15] [--json benchmarks/out/pages.json] [--compile-each-run]

Baseline and pages go through the same harness: AppTest in one process, one warm-up run each, then the
median of --runs reruns, taken in interleaved rounds. Like the server, which compiles a script once per process, the harness keeps
one bytecode cache for all runs; AppTest alone builds a fresh one per run and so recompiles (with
Streamlit's "magic" AST pass) the entry point and the page every time, 1.5-3.5 ms a run that a reader
never waits for and that the two-line baseline hardly pays. --compile-each-run measures AppTest as it is.

What is left on a page is Streamlit's own cost per element (proto, widget registration, message hash),
and the shared frame: multipage navigation, a sidebar of a language switch and eight page links, the
data-source picker and badge. Every chapter's data, chart spec (with its Arrow data), tables and numbers
come from one cached call per section (kvsite/sections.py); nothing is recomputed, hashed as a DataFrame
or serialized again on a rerun. A chapter shows 40-90 elements against the baseline's one (each chart
brings CSV/PNG/SVG buttons, columns and a table), so on a 2-core machine the chapters measured 3.7-4.9x
and the home page 2.6x (30 runs): the goal of 3x is met by the home page only. The rest is the price of
what the chapters show, not of work repeated per rerun; it shrinks only by showing less.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import streamlit.testing.v1.app_test as _app_test
import streamlit.testing.v1.local_script_runner as _runner
from streamlit.runtime.scriptrunner.script_cache import ScriptCache
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "streamlit_app.py")
PAGES = [None, *(f"pages/{p.name}" for p in sorted((ROOT / "pages").glob("*.py")))]
GOAL = 3.0


def share_bytecode() -> None:
    """One bytecode cache for every AppTest run, as the server's runtime keeps one (see the docstring)."""
    cache = ScriptCache()
    _app_test.ScriptCache = _runner.ScriptCache = lambda: cache


def _apps(lang: str) -> dict[str, AppTest]:
    """The one-line baseline and every page, each warmed up once (imports, caches)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write('import streamlit as st\nst.write("hello")\n')
    apps = {"one-line page": AppTest.from_file(f.name, default_timeout=60)}
    for path in PAGES:
        apps[path or "streamlit_app.py"] = at = AppTest.from_file(APP, default_timeout=60)
        if path:
            at.switch_page(path)
    for at in apps.values():
        at.query_params["lang"] = lang
        at.run()
        assert not at.exception, at.exception[0].message
    return apps


def medians(runs: int, lang: str) -> dict[str, float]:
    """Median seconds per rerun; rounds interleave the pages, so load on a shared machine hits all alike."""
    apps = _apps(lang)
    times: dict[str, list[float]] = {name: [] for name in apps}
    for _ in range(runs):
        for name, at in apps.items():
            t0 = time.perf_counter()
            at.run()
            times[name].append(time.perf_counter() - t0)
            assert not at.exception, at.exception[0].message
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--lang", default="en", choices=("en", "ja"))
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--compile-each-run", action="store_true", help="AppTest's default: recompile the scripts on every run")
    a = ap.parse_args()
    if not a.compile_each_run:
        share_bytecode()
    times = medians(a.runs, a.lang)
    base = times["one-line page"]
    rows = [{"page": name, "median_ms": t * 1e3, "ratio": t / base} for name, t in times.items()]
    width = max(len(r["page"]) for r in rows)
    mode = "scripts compiled every run" if a.compile_each_run else "bytecode cached as in the server"
    print(f"{'page':<{width}}  median ms  ratio  (goal <= {GOAL:g}x, {a.runs} runs each, {mode})")
    for r in rows:
        flag = "" if r["ratio"] <= GOAL else "  over goal"
        print(f"{r['page']:<{width}}  {r['median_ms']:9.1f}  {r['ratio']:5.2f}{flag}")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(rows, indent=2))
    return 0 if all(r["ratio"] <= GOAL for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
