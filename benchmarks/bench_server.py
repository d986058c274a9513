"""What a reader waits for on a real server: the round trip of one rerun, from the rerun request on the
websocket to the script_finished message, for every page, in one run, on three servers:

- this app as configured (.streamlit/config.toml: runner.postScriptGC = false),
- this app with Streamlit's default runner.postScriptGC = true: a full gc.collect(2) after every
  script run, which holds the GIL while it walks every object of the process (pandas, Altair's schema,
  pyarrow, ...) and so delays the run's own messages, already queued, until it is done,
- a one-line page on its own server, for scale.

    .venv/bin/python benchmarks/bench_server.py [--runs 20] [--markdown docs/benchmarks.md]

Part of every round trip here is TCP, not Streamlit: the server's sockets (uvicorn under Streamlit 1.67)
have Nagle's algorithm on (TCP_NODELAY 0, seen from inside the server), so when a run's messages leave
in more than one flush the later ones wait for the client's delayed ACK, ~30-40 ms; both app servers pay
it alike, and the one-line page, whose messages leave in one flush, does not.

Each round reruns every page on each server in turn (one websocket session per server, as a reader
clicking). Browser rendering is not included. Memory: each server's resident set after the warm-up and
after all runs, so that turning the per-run collection off is seen not to let memory build up (Python's
generational collector still runs). Context for bench_pages.py, whose goal is judged on script run time.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from websockets.sync.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.doc_tables import Section, add_option, table  # noqa: E402
from harness.server import PAGES, streamlit_server  # noqa: E402

ONE_LINE = 'import streamlit as st\nst.write("hello")\n'


def rerun(ws, page: str, query: str = "lang=en") -> float:
    """Seconds from the rerun request to the script_finished message."""
    msg = BackMsg()
    msg.rerun_script.query_string = query
    msg.rerun_script.page_name = page
    t0 = time.perf_counter()
    ws.send(msg.SerializeToString())
    while ForwardMsg.FromString(ws.recv(timeout=60)).WhichOneof("type") != "script_finished":
        pass
    return time.perf_counter() - t0


def _socket(base: str) -> socket.socket:
    """A connection with Nagle's algorithm off, as browsers open theirs: otherwise a small frame written in
    two pieces waits for the server's delayed ACK (~40 ms) and the round trip measures TCP, not Streamlit."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    add_option(ap)
    a = ap.parse_args()
    section = Section(a.markdown, "bench_server")
    servers = {"configured": {}, "postScriptGC on": {"STREAMLIT_RUNNER_POST_SCRIPT_GC": "true"}}
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        Path(tmp, "streamlit_app.py").write_text(ONE_LINE, encoding="utf-8")
        bases = {
            name: stack.enter_context(streamlit_server(env=env)) for name, env in servers.items()
        }
        bases["one-line page"] = stack.enter_context(streamlit_server(app_dir=Path(tmp)))
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
        pages = {
            name: PAGES if name != "one-line page" else {"one-line page": ""} for name in bases
        }
        for name in bases:  # warm-up: imports, caches, the first session
            for page in pages[name].values():
                rerun(ws[name], page)
        rss0 = {name: rss_mib(base.pid) for name, base in bases.items()}
        t = {(name, page): [] for name in bases for page in pages[name]}
        for _ in range(a.runs):
            for name in bases:
                for page, path in pages[name].items():
                    t[name, page].append(rerun(ws[name], path))
        rss1 = {name: rss_mib(base.pid) for name, base in bases.items()}
    med = {key: statistics.median(v) * 1e3 for key, v in t.items()}
    one = med["one-line page", "one-line page"]
    print(
        f"{a.runs} reruns each, websocket round trip (no browser); one-line page on its own server: {one:.1f} ms"
    )
    print(f"{'page':<16} {'configured ms':>13} {'postScriptGC on ms':>18} {'on / configured':>15}")
    for page in PAGES:
        on, conf = med["postScriptGC on", page], med["configured", page]
        print(f"{page:<16} {conf:13.1f} {on:18.1f} {on / conf:15.2f}")
    for name in bases:
        print(
            f"resident memory, {name}: {rss0[name]:.0f} MiB after warm-up, {rss1[name]:.0f} MiB after the runs"
        )
    rows = [
        [
            page,
            f"{med['configured', page]:.1f} ms",
            f"{med['postScriptGC on', page]:.1f} ms",
            f"{med['postScriptGC on', page] / med['configured', page]:.2f}",
        ]
        for page in PAGES
    ]
    heads = ["page", "configured (postScriptGC off)", "Streamlit's default (on)", "on / off"]
    memory = "; ".join(f"{name} {rss0[name]:.0f} → {rss1[name]:.0f} MiB" for name in bases)
    section.write(
        table(heads, rows, right=(1, 2, 3))
        + f"\n\nMedian of {a.runs} reruns a page. A one-line page on its own server: {one:.1f} ms. "
        f"Resident memory after the warm-up → after the runs: {memory}."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
