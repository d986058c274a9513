"""What a new state's charts cost the server: every chart the pages draw in a few states, built as the site builds it
(kvcore.views.charts, then kvsite.charts.chart.to_spec: the Vega-Lite dict with Arrow datasets), by this checkout's kvcore against
kvcore as it was at an earlier commit (--before, default 15e3ef8: before its channels were given to Altair as objects,
its layer charts took their height as an argument and with_points put its points beside a layer chart's own layers
rather than the chart inside a new one), in one run.

    .venv/bin/python benchmarks/bench_charts.py [--rounds 15] [--before REV]
        [--markdown docs/benchmarks.md]

Why it matters: a reader's new state (a slider step, another format) is built once, then cached; most of that
build is chart construction (the Calculator's two charts were ~54 % of its state sweep's time, by py-spy). Altair
turns a dict or a shorthand string given to encode() (alt.condition's dict, "label:N") into a channel object by
reading its whole schema again (~10 ms a channel here); LayerChart.properties() deep-copies and validates the whole
chart, and so does a layer chart made a layer of another. The charts' arguments are captured from AppTest runs of
six pages in Japanese; the earlier kvcore is read from git into a temporary package. Each round builds every chart
once each way, the order reversed every other round, each from a collected heap, all without Altair's check of every
object as it is built (its "debug mode", on by default; kvsite.charts.chart turns it off) but a third build of this kvcore
with it. Reported: the median of the paired ratios (before / now, per round, over all charts) with their range, each
one's median ms per chart, the same ratio for the check (with / without), and how many charts both kvcores draw
alike (vl-convert's SVG, the names Altair gives views and layers aside).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import altair as alt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import kvcore.views.charts as charts  # noqa: E402
import kvsite.charts.chart as chart  # noqa: E402
from benchmarks.doc_tables import Section, add_option, table  # noqa: E402

STATES = [
    ("pages/8_Calculator.py", {"ctx": "65536"}),
    ("pages/8_Calculator.py", {"seq": "4", "k": "q8_0", "v": "q8_0"}),
    ("pages/6_Savings.py", {}),
    ("pages/5_Prefill_and_decode.py", {}),
    ("pages/4_Decode_slowdown.py", {}),
    ("pages/3_Linear_growth.py", {}),
]


def captured() -> list[tuple]:
    """make_chart's arguments in every state of STATES, from real page runs (AppTest)."""
    from streamlit.testing.v1 import AppTest

    calls, real = [], chart.make_chart

    def spy(data, builder, *args, **kwargs):
        calls.append((data, builder, args, kwargs))
        return real(data, builder, *args, **kwargs)

    users = [m for m in list(sys.modules.values()) if getattr(m, "make_chart", None) is real]
    for m in users:
        m.make_chart = spy
    try:
        for page, params in STATES:
            at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=120)
            at.query_params["lang"] = "ja"
            for k, v in params.items():
                at.query_params[k] = v
            at.switch_page(page)
            at.run()
            if at.exception:
                raise SystemExit(f"{page}: {at.exception[0].message}")
    finally:
        for m in users:
            m.make_chart = real
    return calls


def charts_at(rev: str, folder: Path):
    """kvcore.views.charts as it was at `rev`, imported from `folder` as the package kvcore_before."""
    try:
        tar = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "kvcore"], capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(
            f"cannot read kvcore at {rev} from git: {getattr(e, 'stderr', b'').decode().strip() or e}"
        )
    tarfile.open(fileobj=io.BytesIO(tar)).extractall(folder, filter="data")
    (folder / "kvcore").rename(folder / "kvcore_before")
    sys.path.insert(0, str(folder))
    return importlib.import_module("kvcore_before.charts")


def build(calls: list[tuple], module, checked: bool = False) -> tuple[float, list[dict]]:
    """Every chart built by `module`'s builders; checked: with Altair's check of each object as it is built (its
    "debug mode", which kvsite.charts.chart turns off)."""
    alt.utils.schemapi.DEBUG_MODE = checked
    gc.collect()  # each build starts from a collected heap, not from what the one before left
    start = time.perf_counter()
    specs = [chart.to_spec(getattr(module, b)(*a, **k)) for _, b, a, k in calls]
    return time.perf_counter() - start, specs


def drawings(specs: list[dict]) -> list[str]:
    """Each spec drawn by vl-convert as SVG, without the names Altair gives views and layers (view_<hash>_0,
    layer_0_layer_1_marks): what a reader sees."""
    import vl_convert as vlc

    names = re.compile(r"view_[0-9a-f]+_\d+|(layer_\d+_)+marks")
    return [names.sub("", vlc.vegalite_to_svg(chart.export_spec(s))) for s in specs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument(
        "--before", default="15e3ef8", help="the commit whose kvcore.views.charts is compared"
    )
    add_option(ap)
    args = ap.parse_args()
    section = Section(args.markdown, "bench_charts")
    calls = captured()
    with tempfile.TemporaryDirectory() as tmp:
        before = charts_at(args.before, Path(tmp))
        _, now_specs = build(calls, charts)  # warm-up, both
        _, before_specs = build(calls, before)
        ratios, checked, t_now, t_before = [], [], [], []
        for r in range(args.rounds):
            order = [("now", charts, False), ("before", before, False), ("checked", charts, True)]
            took = {name: build(calls, m, c)[0] for name, m, c in order[:: 1 if r % 2 == 0 else -1]}
            t_now.append(took["now"])
            t_before.append(took["before"])
            ratios.append(took["before"] / took["now"])
            checked.append(took["checked"] / took["now"])
        alt.utils.schemapi.DEBUG_MODE = False
    n = len(calls)
    print(f"{n} charts from {len(STATES)} states, {args.rounds} rounds (Altair {alt.__version__})")
    print(
        f"before ({args.before}) / now: median {statistics.median(ratios):.2f} "
        f"(range {min(ratios):.2f}-{max(ratios):.2f}); per chart: now {statistics.median(t_now) / n * 1000:.0f} ms, "
        f"before {statistics.median(t_before) / n * 1000:.0f} ms"
    )
    print(
        f"now with Altair's check as each object is built / without (kvsite.charts.chart's): median "
        f"{statistics.median(checked):.2f} (range {min(checked):.2f}-{max(checked):.2f})"
    )
    same = sum(a == b for a, b in zip(drawings(now_specs), drawings(before_specs)))
    print(f"the same drawing (vl-convert's SVG): {same} of {n} charts")
    per_now, per_before = (statistics.median(t) / n * 1000 for t in (t_now, t_before))
    rows = [
        [
            f"`kvcore` charts before ({args.before}) ÷ now (both unchecked)",
            f"**×{statistics.median(ratios):.2f}** ({min(ratios):.2f}–{max(ratios):.2f})",
            f"{per_before:.0f} → {per_now:.0f}",
        ],
        [
            "now, Altair's check on ÷ off",
            f"×{statistics.median(checked):.2f} ({min(checked):.2f}–{max(checked):.2f})",
            "",
        ],
        [
            "the same drawing (SVG, the names Altair gives views and layers aside)",
            f"{same} of {n}",
            "",
        ],
    ]
    section.write(
        table(["", "median of the paired ratios (range)", "ms a chart"], rows)
        + f"\n\n{n} charts from {len(STATES)} states, {args.rounds} rounds, "
        f"Altair {alt.__version__}."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
