"""How much memory one hosted replica holds at its peak: a read-only `streamlit run` server (the hosted demo's
settings, deploy/kvsite@.service) visited in headless Debian Chromium on every page in both languages, then on the
heaviest links a reader can send (the longest context, the smallest prefill step, a sliding-window model, the
trap's longest update list, the Recordings page), each to the end of its rerun. Reported: the server's resident
memory after start-up, after the pages, and its high-water mark (VmHWM in /proc), which deploy/kvsite@.service's
`MemoryMax=` is chosen from (docs/hosting.md says how).

Run: .venv/bin/python benchmarks/bench_replica_memory.py [--markdown docs/hosting.md]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.doc_tables import Section, add_option, table  # noqa: E402
from harness.server import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    PAGES,
    memory_mib,
    streamlit_server,
    wait_ready,
)

# the heaviest links a reader can send, each within the site's bounds (kvcore.limits)
HEAVY = (
    "Calculator?lang=en&model=gemma-3-4b&ctx=100000000&mstep=64&k=mlx-q4&v=mlx-q4",
    "Calculator?lang=ja&model=llama-3.1-405b&ctx=100000000&rt=llama.cpp&ub=4096",
    "Nbytes_trap?lang=en&updates=1x4096",
    "Linear_growth?lang=en&ctx=1048576",
    "Recordings?lang=ja",
)


def main() -> int:
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_option(ap, "the replica's memory")
    a = ap.parse_args()
    section = Section(a.markdown, "bench_replica_memory")
    rows = []
    with streamlit_server({"KVCORE_READ_ONLY": "1"}) as site, sync_playwright() as pw:
        started = memory_mib(site.pid)
        rows.append(
            ["after start-up", f"{started['VmRSS']:.0f} MiB", f"{started['VmHWM']:.0f} MiB"]
        )
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        for lang in ("en", "ja"):
            for path in PAGES.values():
                page.goto(f"{site}/{path.lstrip('/')}?lang={lang}")
                wait_ready(page)
        visited = memory_mib(site.pid)
        rows.append(
            [
                f"after every page in both languages ({2 * len(PAGES)} visits)",
                f"{visited['VmRSS']:.0f} MiB",
                f"{visited['VmHWM']:.0f} MiB",
            ]
        )
        for link in HEAVY:
            page.goto(f"{site}/{link}")
            wait_ready(page)
            now = memory_mib(site.pid)
            rows.append([f"after `/{link}`", f"{now['VmRSS']:.0f} MiB", f"{now['VmHWM']:.0f} MiB"])
        browser.close()
    for row in rows:
        print(" | ".join(row))
    section.write(
        table(["the replica", "resident (VmRSS)", "high-water mark (VmHWM)"], rows, right=(1, 2))
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
