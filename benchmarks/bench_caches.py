"""Is the site's own cache worth keeping? What a reader waits for, the round trip of one rerun, with
kvsite.data.cache.section_cache (the site as it is) against the same site whose section_cache is plain
st.cache_resource (same max_entries, the same cheap hash_funcs for recordings and geometries), in one run.

    .venv/bin/python benchmarks/bench_caches.py [--rounds 15] [--markdown docs/benchmarks.md]

Two servers, both with Nagle's algorithm off (deploy/nodelay, as the replicas run; otherwise a ~40 ms TCP wait
hides the difference) and the project's settings; the second runs a copy of the repository in a temporary
folder with only kvsite/data/cache.py's section_cache replaced. One websocket session each, warmed up on every page;
then each round reruns every page on both servers, the order of the two swapped every other round, so a busy
machine's drift lands on both alike. Per page: the median of the paired ratios plain / section_cache over the
rounds with their interquartile range, and each server's median ms. Also each server's CPU time per rerun (all
threads, from /proc), what bounds many readers at once (bench_load.py).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_server import _socket, rerun  # noqa: E402

from benchmarks.doc_tables import Section, add_option, table  # noqa: E402
from harness.server import PAGES, ROOT, streamlit_server  # noqa: E402

NODELAY = {"PYTHONPATH": str(ROOT / "deploy" / "nodelay"), "KVCORE_READ_ONLY": "1"}
PLAIN = '''

def section_cache(max_entries: int = 64):
    """bench_caches.py: plain st.cache_resource in place of the site's own cache."""
    return st.cache_resource(max_entries=max_entries, show_spinner=False, hash_funcs=HASH_FUNCS)
'''


def plain_copy(folder: Path) -> Path:
    """The repository's site in `folder`, its section_cache replaced by st.cache_resource."""
    for name in ("kvcore", "kvsite", "pages", "recordings", ".streamlit"):
        shutil.copytree(
            ROOT / name, folder / name, ignore=shutil.ignore_patterns("__pycache__", "local")
        )
    shutil.copy(ROOT / "streamlit_app.py", folder)
    cache = folder / "kvsite" / "data" / "cache.py"
    text = cache.read_text(encoding="utf-8")
    cache.write_text(
        text[: text.index("def section_cache(")].rstrip() + "\n" + PLAIN, encoding="utf-8"
    )
    return folder


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of the process, all threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100  # utime, stime in clock ticks (USER_HZ = 100)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    add_option(ap)
    a = ap.parse_args()
    section = Section(a.markdown, "bench_caches")
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        dirs = {"section_cache": ROOT, "st.cache_resource": plain_copy(Path(tmp))}
        bases = {
            name: stack.enter_context(streamlit_server(env=NODELAY, app_dir=d))
            for name, d in dirs.items()
        }
        ws = {
            name: stack.enter_context(
                connect(
                    base.replace("http", "ws", 1) + "/_stcore/stream",
                    sock=_socket(base),
                    subprotocols=["streamlit"],
                    max_size=None,
                )
            )
            for name, base in bases.items()
        }
        for name in bases:  # warm-up: imports, caches, the session
            for _ in range(2):
                for path in PAGES.values():
                    rerun(ws[name], path)
        t = {(name, page): [] for name in bases for page in PAGES}
        cpu0 = {name: cpu_s(base.pid) for name, base in bases.items()}
        for r in range(a.rounds):
            order = list(bases) if r % 2 == 0 else list(bases)[::-1]
            for page, path in PAGES.items():
                for name in order:
                    t[name, page].append(rerun(ws[name], path) * 1e3)
        cpu = {
            name: (cpu_s(base.pid) - cpu0[name]) / (a.rounds * len(PAGES)) * 1e3
            for name, base in bases.items()
        }
    print(
        f"{a.rounds} paired rounds, one rerun of every page per server per round, websocket round trip (no browser)"
    )
    print(
        f"{'page':<16} {'section_cache ms':>16} {'st.cache_resource ms':>20} {'plain / own, median (IQR)':>28}"
    )
    ratios_all, rows = [], []
    for page in PAGES:
        own, plain = t["section_cache", page], t["st.cache_resource", page]
        ratios = [p / o for p, o in zip(plain, own)]
        ratios_all += ratios
        q1, q2, q3 = quartiles(ratios)
        print(
            f"{page:<16} {statistics.median(own):16.1f} {statistics.median(plain):20.1f} "
            f"{q2:>12.2f} ({q1:.2f}-{q3:.2f})"
        )
        rows.append(
            [
                page,
                f"{statistics.median(own):.1f}",
                f"{statistics.median(plain):.1f}",
                f"×{q2:.2f} ({q1:.2f}–{q3:.2f})",
            ]
        )
    q1, q2, q3 = quartiles(ratios_all)
    print(f"{'every page':<16} {'':16} {'':20} {q2:>12.2f} ({q1:.2f}-{q3:.2f})")
    print(
        f"server CPU per rerun (all threads): section_cache {cpu['section_cache']:.1f} ms, "
        f"st.cache_resource {cpu['st.cache_resource']:.1f} ms"
    )
    rows.append(["every page", "", "", f"**×{q2:.2f}** ({q1:.2f}–{q3:.2f})"])
    heads = [
        "page",
        "section_cache, median ms",
        "plain st.cache_resource, median ms",
        "plain ÷ section_cache: median of the paired ratios (IQR)",
    ]
    section.write(
        table(heads, rows, right=(1, 2))
        + f"\n\n{a.rounds} paired rounds, a rerun's websocket round trip. Server CPU per rerun, "
        f"all threads: section_cache {cpu['section_cache']:.1f} ms, plain "
        f"{cpu['st.cache_resource']:.1f} ms."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
