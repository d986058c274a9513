"""Many readers at once on one `streamlit run` server, against a one-line Streamlit page under the same load,
in one run. Every reader is a websocket session opened as a browser opens it (the page's HTTP request, then
Streamlit's websocket) and visits every page with varied URL state, read-only (KVCORE_READ_ONLY=1); no
browser renders anything. Reports, each as the median of paired ratios over interleaved rounds with their range:

- load: N concurrent readers, each doing back-to-back reruns: throughput (reruns/s), p50 and p95 of a rerun's
  round trip, errors, resident memory per open session;
- interactions: one reader's slider steps on the chapters with a slider, each sent as a browser sends it (a rerun of
  the slider's st.fragment only), server CPU per step against a one-line page's rerun, and a full rerun beside it;
- soak: >= 10,000 reruns by N sessions kept open on the app server, resident memory sampled every ~1,000;
- live: the same load with and without one live decode sweep running in another session of the same server
  (started by its button, as a reader would), readers' p95 with / without; on a server of its own that is not
  read-only (the read-only demo offers no live decode, issue 19), with the same readers' visits;
- one reader's round trip (a page's rerun), direct and through deploy/nginx-kvsite.conf, app page and one-line
  page, each on a server as Streamlit starts it and on one with Nagle's algorithm off (deploy/nodelay: Streamlit
  1.67 binds its socket with proto 0, so asyncio leaves TCP_NODELAY off on every connection it accepts).

Both servers run with the project's settings (.streamlit/config.toml, runner.postScriptGC off): the pages differ,
not the server. A third, the one-line page on Streamlit's default (postScriptGC on: a full gc.collect(2) after every
run), is a reference row. Per rerun: the server's CPU time (/proc, every thread) and the bytes it sent.

    .venv/bin/python benchmarks/bench_load.py [--readers 40] [--rounds 4] [--reruns 6] [--soak 10000] [--steps 20]
        [--parts load,interactions,trip,soak,live] [--markdown docs/benchmarks.md]

`--markdown PATH` writes the parts run, as tables, with their provenance into the bench_load section
of PATH (benchmarks/doc_tables.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks.doc_tables import Section, add_option, table  # noqa: E402
from harness.reader import Reader  # noqa: E402
from harness.server import ROOT, nginx_server, streamlit_server  # noqa: E402

ONE_LINE = 'import streamlit as st\nst.write("hello")\n'
APP_ENV = {"KVCORE_READ_ONLY": "1"}
NODELAY = {"PYTHONPATH": str(ROOT / "deploy" / "nodelay")}
PARTS = ("load", "interactions", "trip", "soak", "live")
SAME_RUNNER = (
    "--runner.postScriptGC=false",
)  # the project's setting, for the one-line page's server too
# every page with URL state readers share (ja and en, sliders, models, formats, chips, sources)
APP_VISITS = [
    ("", "lang=ja"),
    ("", "lang=en"),
    ("Mechanism", "lang=en"),
    ("Mechanism", "lang=ja&prompt=512&new=200&view=per_step"),
    ("Nbytes_trap", "lang=ja"),
    ("Nbytes_trap", "lang=en&tokens=300&fmt=mlx-q4"),
    ("Nbytes_trap", "lang=en&tokens=1024&fmt=mlx-q8"),
    ("Linear_growth", "lang=en"),
    ("Linear_growth", "lang=ja&model=llama-3.1-8b&ctx=131072&kv=mlx-q4&seqs=4"),
    ("Decode_slowdown", "lang=ja"),
    ("Decode_slowdown", "lang=en&chip=M4+Max+%2840-core+GPU%29&eff=0.6"),
    ("Decode_slowdown", "lang=en&src=measured-linux-cpu-demo-mlx-cpu"),
    ("Savings", "lang=en"),
    ("Savings", "lang=ja&model=qwen3-4b&ctx=32768&mem=64"),
    ("Calculator", "lang=ja"),
    ("Calculator", "lang=en&chip=M3+Max+%2840-core+GPU%29&ctx=65536"),
    ("Recordings", "lang=en"),
    ("Recordings", "lang=ja&rec=measured-linux-cpu-demo-mlx-cpu"),
]
ONE_VISITS = [("", "lang=ja"), ("", "lang=en"), ("", "x=1"), ("", "x=2")]
# a reader's interaction: one slider step (page, the slider's key), as bench_slider.py presses them in a browser
SLIDERS = [
    ("Mechanism", "prompt"),
    ("Nbytes_trap", "tokens"),
    ("Linear_growth", "ctx"),
    ("Decode_slowdown", "eff"),
    ("Savings", "mem"),
    ("Calculator", "ctx_log"),
]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """The process's CPU seconds so far (user + system, every thread)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


class Load:
    """N readers doing `reruns` visits each, all at once: (reruns/s, latencies in ms, errors, MiB per reader)."""

    def __init__(
        self,
        base: str,
        pid: int,
        visits: list,
        readers: int,
        reruns: int,
        seed: int = 0,
        keep: list | None = None,
    ):
        self.base, self.pid, self.visits, self.n, self.reruns, self.seed = (
            base,
            pid,
            visits,
            readers,
            reruns,
            seed,
        )
        self.keep = keep  # readers opened before, left open afterwards (the soak); else new sessions, closed after

    def run(self) -> dict:
        rss0 = rss_mib(self.pid)
        readers = (
            self.keep
            if self.keep is not None
            else [Reader(self.base, timeout_s=120) for _ in range(self.n)]
        )
        lat, errors, lock = [], [], threading.Lock()
        go = threading.Barrier(self.n + 1)

        def reader(i: int, r: Reader):
            go.wait()
            for k in range(self.reruns):
                page, query = self.visits[(self.seed + i * 7 + k) % len(self.visits)]
                try:
                    t = r.rerun(page, query)
                    with lock:
                        lat.append(t * 1e3)
                except Exception as e:  # counted, never hidden
                    with lock:
                        errors.append(f"{page}?{query}: {e!r}")

        threads = [
            threading.Thread(target=reader, args=(i, r), daemon=True) for i, r in enumerate(readers)
        ]
        for t in threads:
            t.start()
        bytes0 = sum(r.bytes_received for r in readers)
        cpu0 = cpu_s(self.pid)
        go.wait()
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        cpu = cpu_s(self.pid) - cpu0
        rss1 = rss_mib(self.pid)  # every session still open
        for r in readers if self.keep is None else ():
            r.close()
        n = max(1, len(lat))
        return {
            "throughput": len(lat) / wall,
            "p50": pct(lat, 0.5),
            "p95": pct(lat, 0.95),
            "errors": errors,
            "mib_per_reader": (rss1 - rss0) / self.n,
            "wall_s": wall,
            "cpu_ms": cpu * 1e3 / n,
            "kib": (sum(r.bytes_received for r in readers) - bytes0) / 1024 / n,
        }


def interaction_cpu(
    base: str, pid: int, page: str, key: str | None, steps: int
) -> tuple[float, float]:
    """(server CPU ms per slider step, per full rerun of the same page) for one reader on a fresh session: `steps`
    steps forward from the slider's default, each sent as a browser sends it (the slider's fragment only, when it
    is in one), once untimed and then timed (warm caches, like the full reruns), and as many full reruns. key None:
    the one-line page, whose interaction is a full rerun."""
    with Reader(base, timeout_s=120) as r:
        r.rerun(page, "lang=en")
        cpu0 = cpu_s(pid)
        for _ in range(steps):
            r.rerun(page, "lang=en")
        full = (cpu_s(pid) - cpu0) * 1e3 / steps
        if key is None:
            return full, full
        wid, value, step, top, options = r.slider(key)
        room = max(
            1, int((top - value) / step)
        )  # steps up to the slider's end; then back to its start, and on
        values = [value + (k % (room + 1)) * step for k in range(1, steps + 1)]
        values = (
            [options[int(v)] for v in values] if options else values
        )  # a select_slider: by label
        for (
            v
        ) in values:  # once untimed: each value's sections computed (the full reruns are warm too)
            r.rerun(page, "lang=en", slider=(wid, v))
        cpu0 = cpu_s(pid)
        for v in values:
            r.rerun(page, "lang=en", slider=(wid, v))
        return (cpu_s(pid) - cpu0) * 1e3 / steps, full


def spread(values: list[float]) -> str:
    return f"×{statistics.median(values):.2f} (range {min(values):.2f}–{max(values):.2f})"


def round_trip(base: str, page: str, runs: int) -> float:
    """Median ms of one reader's rerun (nobody else on the server)."""
    with Reader(base) as r:
        for _ in range(3):
            r.rerun(page, "lang=en")
        return statistics.median(r.rerun(page, "lang=en") for _ in range(runs)) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readers", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--reruns", type=int, default=6, help="visits per reader and round")
    ap.add_argument("--soak", type=int, default=10_000)
    ap.add_argument("--trip-runs", type=int, default=30)
    ap.add_argument(
        "--steps", type=int, default=20, help="slider steps per page and round (interactions)"
    )
    ap.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"the parts to run, comma-separated, among {','.join(PARTS)} (default: all)",
    )
    add_option(ap, "the parts' tables")
    a = ap.parse_args()
    section = Section(a.markdown, "bench_load")
    parts = a.parts.split(",")
    if unknown := [p for p in parts if p not in PARTS]:
        ap.error(f"unknown part {', '.join(unknown)}: choose among {', '.join(PARTS)}")
    out, md = [], []  # what is printed; the markdown for the docs page

    def say(line: str = "") -> None:
        print(line, flush=True)
        out.append(line)

    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        Path(tmp, "one").mkdir()
        Path(tmp, "one", "streamlit_app.py").write_text(ONE_LINE, encoding="utf-8")
        if set(parts) - {"live"}:  # the read-only app server and the one-line pages' servers
            app, one, one_default = warm_servers(tmp, stack, say)
        if "load" in parts:
            servers = {
                "app": (app, APP_VISITS),
                "one-line page": (one, ONE_VISITS),
                "one-line, GC on": (one_default, ONE_VISITS),
            }
            load_part(a, servers, say, md)
        if "interactions" in parts:
            interactions_part(a, app, one, say, md)
        if "trip" in parts:
            trip_part(a, app, one, tmp, stack, say, md)
        if "soak" in parts:
            soak_part(a, app, say, md)
        if "live" in parts:
            # on a server of its own that is not read-only: the hosted demo offers no live decode
            live = stack.enter_context(streamlit_server(env={"KVCORE_READ_ONLY": ""}))
            with Reader(live) as r:  # warm-up, as the app's
                for page, query in APP_VISITS:
                    r.rerun(page, query)
            live_part(a, live, say, md)
    section.write("\n\n".join(md))
    return 0


def warm_servers(tmp: str, stack: ExitStack, say) -> tuple:
    """The app as the hosted demo (read-only) and the one-line page, with the project's settings and with
    Streamlit's default, each warmed up."""
    app = stack.enter_context(streamlit_server(env=APP_ENV))
    one = stack.enter_context(streamlit_server(app_dir=Path(tmp, "one"), args=SAME_RUNNER))
    one_default = stack.enter_context(
        streamlit_server(app_dir=Path(tmp, "one"))
    )  # Streamlit's postScriptGC on
    with Reader(app) as r:  # warm-up: imports, caches, every visit once
        for page, query in APP_VISITS:
            r.rerun(page, query)
    for base in (one, one_default):
        with Reader(base) as r:
            r.rerun("", "lang=en")
    say(
        f"resident memory after warm-up: app {rss_mib(app.pid):.0f} MiB, one-line page {rss_mib(one.pid):.0f} MiB"
    )
    return app, one, one_default


def load_part(a, servers: dict, say, md: list) -> None:
    # ---- load: interleaved rounds, the order alternating
    res = {name: [] for name in servers}
    for k in range(a.rounds):
        for name in list(servers) if k % 2 == 0 else list(servers)[::-1]:  # alternating order
            base, visits = servers[name]
            res[name].append(Load(base, base.pid, visits, a.readers, a.reruns, seed=k).run())
    app_r, one_r = res["app"], res["one-line page"]
    say(f"\nload: {a.readers} readers × {a.reruns} reruns, {a.rounds} interleaved rounds")
    for name, rs in res.items():
        say(
            f"  {name:<14} {statistics.median(x['throughput'] for x in rs):6.1f} reruns/s, p50 {statistics.median(x['p50'] for x in rs):6.1f} ms, "
            f"p95 {statistics.median(x['p95'] for x in rs):6.1f} ms, errors {sum(len(x['errors']) for x in rs)}, "
            f"{statistics.median(x['mib_per_reader'] for x in rs):.2f} MiB per reader, "
            f"server CPU {statistics.median(x['cpu_ms'] for x in rs):.1f} ms and {statistics.median(x['kib'] for x in rs):.1f} KiB sent per rerun"
        )
    say(
        f"  throughput app / one-line: {spread([x['throughput'] / y['throughput'] for x, y in zip(app_r, one_r)])}"
    )
    say(
        f"  p50 app / one-line:        {spread([x['p50'] / y['p50'] for x, y in zip(app_r, one_r)])}"
    )
    say(
        f"  p95 app / one-line:        {spread([x['p95'] / y['p95'] for x, y in zip(app_r, one_r)])}"
    )
    gc_on = res["one-line, GC on"]
    say(
        f"  against the one-line page on Streamlit's default (postScriptGC on): throughput "
        f"{spread([x['throughput'] / y['throughput'] for x, y in zip(app_r, gc_on)])}, p95 {spread([x['p95'] / y['p95'] for x, y in zip(app_r, gc_on)])}"
    )
    for name, rs in res.items():
        for e in sorted({e for x in rs for e in x["errors"]})[:5]:
            say(f"  error ({name}): {e}")

    def med(rs: list, key: str) -> float:
        return statistics.median(x[key] for x in rs)

    def ratio(
        key: str,
    ) -> str:  # "—" where the one-line page's figure is 0 (below the clock's tick)
        pairs = list(zip(app_r, one_r))
        return spread([x[key] / y[key] for x, y in pairs]) if all(y[key] for _, y in pairs) else "—"

    rows = [
        [
            "throughput",
            f"{med(app_r, 'throughput'):.1f} reruns/s",
            f"{med(one_r, 'throughput'):.1f} reruns/s",
            ratio("throughput"),
        ],
        [
            "p50 of a rerun",
            f"{med(app_r, 'p50'):,.0f} ms",
            f"{med(one_r, 'p50'):,.0f} ms",
            ratio("p50"),
        ],
        [
            "p95 of a rerun",
            f"{med(app_r, 'p95'):,.0f} ms",
            f"{med(one_r, 'p95'):,.0f} ms",
            ratio("p95"),
        ],
        ["errors", sum(len(x["errors"]) for x in app_r), sum(len(x["errors"]) for x in one_r), ""],
        [
            "resident memory per open session",
            f"{med(app_r, 'mib_per_reader'):.2f} MiB",
            f"{med(one_r, 'mib_per_reader'):.2f} MiB",
            "",
        ],
        [
            "server CPU per rerun (all threads)",
            f"{med(app_r, 'cpu_ms'):.1f} ms",
            f"{med(one_r, 'cpu_ms'):.1f} ms",
            ratio("cpu_ms"),
        ],
        [
            "bytes sent per rerun",
            f"{med(app_r, 'kib'):.1f} KiB",
            f"{med(one_r, 'kib'):.1f} KiB",
            "",
        ],
    ]
    heads = [
        f"{a.readers} readers at once",
        "app",
        "one-line page",
        f"app / one-line (median of {a.rounds} paired rounds, range)",
    ]
    md.append(
        table(heads, rows)
        + f"\n\n{a.readers} readers × {a.reruns} reruns, {a.rounds} interleaved rounds. "
        "Against the one-line page on Streamlit's default settings (postScriptGC on): throughput "
        f"{spread([x['throughput'] / y['throughput'] for x, y in zip(app_r, gc_on)])}, p95 "
        f"{spread([x['p95'] / y['p95'] for x, y in zip(app_r, gc_on)])}."
    )


def interactions_part(a, app, one, say, md: list) -> None:
    # ---- one reader's interactions: server CPU per slider step against a one-line page's rerun, interleaved
    steps = {name: [] for name, _ in SLIDERS}
    full = {name: [] for name, _ in SLIDERS}
    ones = []
    for k in range(a.rounds):
        for page, key in SLIDERS:
            ones.append(interaction_cpu(one, one.pid, "", None, a.steps)[0])
            step_ms, full_ms = interaction_cpu(app, app.pid, page, key, a.steps)
            steps[page].append(step_ms / ones[-1])
            full[page].append(full_ms / ones[-1])
    say(
        f"\none reader's slider steps ({a.steps} per page and round, {a.rounds} interleaved rounds): server CPU per step "
        f"against a one-line page's rerun ({statistics.median(ones):.1f} ms, median of paired ratios, range)"
    )
    for page, key in SLIDERS:
        say(
            f"  {page:<16} {key:<7} step {spread(steps[page])}; a full rerun of the page {spread(full[page])}"
        )
    rows = [
        [f"{page} ({key})", spread(steps[page]), f"×{statistics.median(full[page]):.2f}"]
        for page, key in SLIDERS
    ]
    heads = [
        "slider",
        "server CPU per step × one-line page's rerun (range)",
        "a full rerun of the page",
    ]
    md.append(
        f"One reader at a time, {a.steps} slider steps per page and round (the one-line page's "
        f"full rerun: {statistics.median(ones):.1f} ms of CPU), median of {a.rounds} interleaved "
        "rounds:\n\n" + table(heads, rows)
    )


def trip_part(a, app, one, tmp: str, stack: ExitStack, say, md: list) -> None:
    # ---- one reader's round trip: direct and through nginx, app page and one-line page, Nagle on and off
    variants = {
        ("app", "Nagle on"): app,
        ("one-line page", "Nagle on"): one,
        ("app", "Nagle off"): stack.enter_context(streamlit_server(env={**APP_ENV, **NODELAY})),
        ("one-line page", "Nagle off"): stack.enter_context(
            streamlit_server(env=NODELAY, app_dir=Path(tmp, "one"), args=SAME_RUNNER)
        ),
    }
    proxied = {
        key: stack.enter_context(
            nginx_server(
                Path(stack.enter_context(tempfile.TemporaryDirectory())),
                [int(base.rsplit(":", 1)[1])],
            )
        )
        for key, base in variants.items()
    }
    trips = {(*key, via): [] for key in variants for via in ("direct", "nginx")}
    for _ in range(3):
        for key, base in variants.items():
            page = "Nbytes_trap" if key[0] == "app" else ""
            trips[(*key, "direct")].append(round_trip(base, page, a.trip_runs // 3))
            trips[(*key, "nginx")].append(round_trip(proxied[key], page, a.trip_runs // 3))
    say(
        "\none reader's rerun round trip (median ms; app: the .nbytes trap page; 3 interleaved rounds)"
    )
    for (name, nagle, via), v in trips.items():
        say(f"  {name:<14} {nagle:<9} {via:<6} {statistics.median(v):6.1f} ms")
    for nagle in ("Nagle on", "Nagle off"):
        for via in ("direct", "nginx"):
            say(
                f"  app / one-line, {nagle}, {via}: "
                f"{spread([x / y for x, y in zip(trips['app', nagle, via], trips['one-line page', nagle, via])])}"
            )
    say(
        f"  app, Nagle off / on, direct: {spread([x / y for x, y in zip(trips['app', 'Nagle off', 'direct'], trips['app', 'Nagle on', 'direct'])])}"
    )

    def cells(nagle: str, via: str) -> list:
        app_v, one_v = trips["app", nagle, via], trips["one-line page", nagle, via]
        return [
            f"{statistics.median(app_v):.1f}",
            f"{statistics.median(one_v):.1f}",
            spread([x / y for x, y in zip(app_v, one_v)]),
        ]

    rows = [
        [label, *cells(nagle, "direct"), *cells(nagle, "nginx")]
        for nagle, label in (
            ("Nagle on", "as Streamlit starts it (Nagle on)"),
            ("Nagle off", "Nagle off (`deploy/nodelay`)"),
        )
    ]
    heads = [
        "server",
        "app",
        "one-line page",
        "app / one-line, direct",
        "through nginx: app",
        "one-line",
        "app / one-line",
    ]
    off_on = [
        x / y
        for x, y in zip(trips["app", "Nagle off", "direct"], trips["app", "Nagle on", "direct"])
    ]
    md.append(
        "One reader's rerun round trip, nobody else on the server (median ms of 3 interleaved "
        "rounds; the app's page is the .nbytes trap):\n\n"
        + table(heads, rows)
        + f"\n\nThe app's round trip, Nagle off ÷ on, direct: {spread(off_on)}."
    )


def soak_part(a, app, say, md: list) -> None:
    # ---- soak: >= a.soak reruns by the same N open sessions on the app server, memory sampled every ~1,000
    # (the same sessions throughout: a closed session's state is kept for server.disconnectedSessionTTL, 120 s)
    soakers = [Reader(app, timeout_s=120) for _ in range(a.readers)]
    per = max(1, 1000 // a.readers)
    samples, done, soak_errors = [(0, rss_mib(app.pid))], 0, 0
    t0 = time.perf_counter()
    while done < a.soak:
        r = Load(app, app.pid, APP_VISITS, a.readers, per, seed=done, keep=soakers).run()
        done += a.readers * per
        soak_errors += len(r["errors"])
        samples.append((done, rss_mib(app.pid)))
    for r in soakers:
        r.close()
    say(
        f"\nsoak: {done:,} reruns by {a.readers} open sessions in {time.perf_counter() - t0:.0f} s, errors {soak_errors}; "
        "resident MiB every ~1,000: " + ", ".join(f"{m:.0f}" for _, m in samples)
    )
    half = samples[len(samples) // 2 :]
    slope = (half[-1][1] - half[0][1]) / max(1, half[-1][0] - half[0][0]) * 1000
    say(f"  second half: {slope:+.2f} MiB per 1,000 reruns")
    md.append(
        f"Soak: {done:,} reruns by {a.readers} open sessions in {time.perf_counter() - t0:.0f} s, "
        f"errors {soak_errors}; resident memory "
        + ", ".join(f"{m:.0f}" for _, m in samples)
        + f" MiB every ~1,000 reruns ({slope:+.2f} MiB per 1,000 over the second half)."
    )


def live_part(a, app, say, md: list) -> None:
    # ---- the same load with one live decode sweep running in another session, interleaved
    live = {"without": [], "with": []}
    for k in range(2):
        for mode in ("without", "with") if k % 2 == 0 else ("with", "without"):
            sweeper = None
            if mode == "with":
                sweeper = Reader(app, timeout_s=120)
                sweeper.rerun("Decode_slowdown", "lang=en&src=live")
                sweeper.rerun(
                    "Decode_slowdown",
                    "lang=en&src=live",
                    trigger=sweeper.button_id("live_run_decode"),
                )
                time.sleep(1.0)  # the sweep's model is built and decoding
            t0 = time.perf_counter()
            live[mode].append(
                Load(app, app.pid, APP_VISITS, a.readers, a.reruns, seed=10 + k).run()
            )
            if sweeper:
                sweeper.rerun("Decode_slowdown", "lang=en&src=live")
                state = (
                    "still running"
                    if any(e.WhichOneof("type") == "progress" for e in sweeper.elements)
                    else "finished"
                )
                say(
                    f"  (round {k + 1}: the sweep was {state} when the readers' {time.perf_counter() - t0:.0f} s of load ended)"
                )
                sweeper.rerun(
                    "Decode_slowdown",
                    "lang=en&src=live",
                    trigger=sweeper.button_id("live_stop_decode"),
                )
                sweeper.close()
                time.sleep(2.0)
    w, wo = live["with"], live["without"]
    say(
        f"\nlive: {a.readers} readers × {a.reruns} reruns with / without one live decode sweep (cpu-demo, defaults)"
    )
    say(
        f"  p95 with / without: {spread([x['p95'] / y['p95'] for x, y in zip(w, wo)])}; "
        f"throughput with / without: {spread([x['throughput'] / y['throughput'] for x, y in zip(w, wo)])}; "
        f"errors {sum(len(x['errors']) for x in w + wo)}"
    )
    p95 = spread([x["p95"] / y["p95"] for x, y in zip(w, wo)])
    throughput = spread([x["throughput"] / y["throughput"] for x, y in zip(w, wo)])
    md.append(
        f"Live sweep: {a.readers} readers × {a.reruns} reruns, 2 interleaved rounds, on a server "
        "that is not read-only, with and without another session's live decode sweep (cpu-demo, "
        f"the page's defaults): readers' p95 {p95} and throughput {throughput} of the same load "
        f"without; errors {sum(len(x['errors']) for x in w + wo)}."
    )


if __name__ == "__main__":
    sys.exit(main())
