"""Median script run time of every page on recorded data, and its ratio to a one-line Streamlit page
measured in the same run (AppTest, warm caches: what a reader's rerun costs). Goal: ratio <= 3.

    .venv/bin/python benchmarks/bench_pages.py [--runs 15] [--json benchmarks/out/pages.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "streamlit_app.py")
PAGES = [None, *(f"pages/{p.name}" for p in sorted((ROOT / "pages").glob("*.py")))]
GOAL = 3.0


def _timed(at: AppTest, runs: int, lang: str) -> float:
    at.query_params["lang"] = lang
    at.run()  # warm-up: imports, caches
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        at.run()
        times.append(time.perf_counter() - t0)
        assert not at.exception, at.exception[0].message
    return statistics.median(times)


def baseline(runs: int) -> float:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write('import streamlit as st\nst.write("hello")\n')
    return _timed(AppTest.from_file(f.name, default_timeout=60), runs, "en")


def page_time(path: str | None, runs: int, lang: str) -> float:
    at = AppTest.from_file(APP, default_timeout=60)
    if path:
        at.switch_page(path)
    return _timed(at, runs, lang)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--lang", default="en", choices=("en", "ja"))
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    base = baseline(a.runs)
    rows = [{"page": "one-line page", "median_ms": base * 1e3, "ratio": 1.0}]
    for path in PAGES:
        t = page_time(path, a.runs, a.lang)
        rows.append({"page": path or "streamlit_app.py", "median_ms": t * 1e3, "ratio": t / base})
    width = max(len(r["page"]) for r in rows)
    print(f"{'page':<{width}}  median ms  ratio  (goal <= {GOAL:g}x, {a.runs} runs each)")
    for r in rows:
        flag = "" if r["ratio"] <= GOAL else "  over goal"
        print(f"{r['page']:<{width}}  {r['median_ms']:9.1f}  {r['ratio']:5.2f}{flag}")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(rows, indent=2))
    return 0 if all(r["ratio"] <= GOAL for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
