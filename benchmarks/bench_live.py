"""Does the live decode harness measure what it claims? Three checks in one run (not a test: timing).

A shared machine drifts by tens of per cent within minutes, so a check that times A once and B once
measures the drift, not the method (this check once gave x0.730 and x1.412 in two runs minutes
apart). Each A/B check here is therefore paired: after one untimed A and B, `--rounds` rounds,
a fresh cache for every measurement, the order alternating (A B, B A, A B, ...) so that a steady
drift favours neither; the figure is the median of the per-round ratios B/A, and its spread is
their interquartile range (and min-max). A claim is made only as far as that spread supports it:
"within 10 %" when the whole interquartile range lies inside ±10 %, "outside" when it lies wholly
beyond, else "not resolved at this spread".

1. Synthetic fill vs real prefill (A/B): ms/token at one context after writing random K/V into
   fresh caches (A) vs after writing a real prefill's K/V into fresh caches (B). The real
   (generate_step-style, chunked) prefill runs once, untimed for the ratio, and its K/V are saved
   and written into a fresh cache in every round, as llama.cpp's llama-bench restores its `-d` depth
   prefill between repetitions (llama_state_seq_set_data in
   https://github.com/ggml-org/llama.cpp/blob/0104b151c56d54143e2e3554aabe9e2b2b8dbdba/tools/llama-bench/llama-bench.cpp).
   Below 2,048 tokens the prefill is a single chunk, so the restored cache has the prefill's own
   capacity (checked: `prefill_capacity` = `restored_capacity`); what differs between A and B is the
   K/V content. Within a round A and B decode step by step in turn (kvcore.measure.decode.paired_steps), so a
   busy machine's swings, which last seconds, land on both; the round's ratio is the median B step
   over the median A step. Expected: within 10 %.
2. Cost of a full 256 -> 32K sweep: synthetic fills (measured) vs real prefills to the same
   contexts (measured where affordable, extrapolated beyond; see `extrapolation` in the output).
   Expected >= 20x faster. One measurement per run, not paired: the claim is a lower bound far
   from the goal, and a real prefill per round would cost minutes.
3. The harness's ms/token (B) vs mlx_lm's own generate_step (A) at the same context, the same
   synthetic fill, a fresh cache each; A and B alternate as whole measurements (19 steps each), not
   step by step: generate_step evaluates the next token asynchronously while it yields the last,
   so a harness step slipped between its yields would be timed inside its gaps. Expected: within 10 %.

Usage: .venv/bin/python benchmarks/bench_live.py [--model cpu-demo] [--weights-format fp32] [--rounds 15]
    [--markdown docs/benchmarks.md]
Writes benchmarks/out/bench_live.json and .md (git-ignored), or --out-name NAME.json/.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from statistics import median
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.doc_tables import Section, add_option  # noqa: E402
from kvcore.measure.caches import fill_caches, make_caches  # noqa: E402
from kvcore.measure.decode import (  # noqa: E402
    decode_sweep,
    generate_step_ms,
    paired_steps,
    prefill,
    synthetic_ms,
)  # noqa: E402
from kvcore.measure.machine import backend, measured_provenance  # noqa: E402
from kvcore.measure.models import get_model  # noqa: E402
from kvcore.measure.timing import SweepOptions, quartiles  # noqa: E402

SWEEP = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]
TOLERANCE = 0.10


def verdict(q1: float, q3: float, tolerance: float = TOLERANCE) -> str:
    """What the interquartile range of paired ratios supports about 'within ±tolerance of 1'."""
    lo, hi = 1 - tolerance, 1 + tolerance
    if lo <= q1 and q3 <= hi:
        return f"within {tolerance:.0%}"
    if q3 < lo or q1 > hi:
        return f"outside {tolerance:.0%}"
    return "not resolved at this spread"


def paired(a: Callable[[], float], b: Callable[[], float], rounds: int, label: str) -> dict:
    """Whole measurements A and B back to back in each round, alternating which goes first (paired_rounds)."""

    def one_round(b_first: bool) -> tuple[float, float]:
        if b_first:
            b_ms = b()
            return a(), b_ms
        a_ms = a()
        return a_ms, b()

    return paired_rounds(one_round, rounds, label)


def paired_rounds(
    one_round: Callable[[bool], tuple[float, float]], rounds: int, label: str
) -> dict:
    """One untimed round (first calls pay one-off costs: allocator, kernels, caches), then `rounds`
    rounds of one_round(b_first) -> (A ms, B ms), B first in every other round; the median of the
    per-round ratios B/A with their quartiles and min-max."""
    one_round(False)
    rows = []
    for i in range(rounds):
        a_ms, b_ms = one_round(i % 2 == 1)
        rows.append(
            {
                "round": i + 1,
                "first": "A" if i % 2 == 0 else "B",
                "a_ms": a_ms,
                "b_ms": b_ms,
                "ratio": b_ms / a_ms,
            }
        )
        print(
            f"   {label} round {i + 1}/{rounds}: {a_ms:.2f} vs {b_ms:.2f} ms/token -> x{b_ms / a_ms:.3f}",
            flush=True,
        )
    ratios = [r["ratio"] for r in rows]
    q1, mid, q3 = quartiles(ratios)
    return {
        "rounds": rows,
        "median_ratio": mid,
        "q1_ratio": q1,
        "q3_ratio": q3,
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "a_median_ms": median(r["a_ms"] for r in rows),
        "b_median_ms": median(r["b_ms"] for r in rows),
        "verdict": verdict(q1, q3),
    }


def spread_text(check: dict) -> str:
    return (
        f"x{check['median_ratio']:.3f} (IQR {check['q1_ratio']:.3f}-{check['q3_ratio']:.3f}, "
        f"min-max {check['min_ratio']:.3f}-{check['max_ratio']:.3f}, {len(check['rounds'])} pairs)"
    )


def synthetic_vs_real(model, context: int, warmup: int, steps: int, rounds: int) -> dict:
    """Check 1: paired rounds, random K/V (A) vs a real prefill's K/V (B), each written into fresh caches."""
    import mlx.core as mx

    caches = make_caches(model, model.dtype)
    t0 = time.perf_counter()
    prefill(model, caches, context + 1)
    prefill_s = time.perf_counter() - t0
    saved = [tuple(mx.array(x) for x in c.keys_and_values()) for c in caches]
    mx.eval(saved)
    capacity = caches[0].keys.shape[2]
    restored = make_caches(model, model.dtype)
    fill_caches(restored, model.geometry, context + 1, model.dtype, kv=saved)
    restored_capacity = restored[0].keys.shape[2]
    del caches, restored
    mx.clear_cache()

    def one_round(b_first: bool) -> tuple[float, float]:
        a, b = make_caches(model, model.dtype), make_caches(model, model.dtype)
        fill_caches(a, model.geometry, context + 1, model.dtype)
        fill_caches(b, model.geometry, context + 1, model.dtype, kv=saved)
        a_ms, b_ms = paired_steps(model, a, b, warmup, steps, b_first=b_first)
        del a, b
        mx.clear_cache()
        return median(a_ms), median(b_ms)

    out = paired_rounds(one_round, rounds, "1.")
    return {
        "context": context,
        "a": "synthetic fill (random K/V)",
        "b": "real prefill's K/V, restored",
        **out,
        "prefill_s": prefill_s,
        "prefill_capacity": capacity,
        "restored_capacity": restored_capacity,
    }


def sweep_cost(
    model, measured_prefill: list[int], known: dict[int, float], warmup: int, steps: int
) -> dict:
    """Wall time of a synthetic 256 -> 32K sweep vs real prefills (measured up to max(measured_prefill));
    `known` holds prefill times already measured in this run (check 1)."""
    import mlx.core as mx

    t0 = time.perf_counter()
    rows = decode_sweep(model, SWEEP, options=SweepOptions(warmup, steps, repeats=1))
    synthetic_s = time.perf_counter() - t0
    timing_s = {r["context"]: (warmup + steps) * r["ms_per_token"] / 1000 for r in rows}
    measured = {c: s for c, s in known.items() if c in measured_prefill}
    for context in measured_prefill:
        if context in measured:
            continue
        caches = make_caches(model, model.dtype)
        t0 = time.perf_counter()
        prefill(model, caches, context + 1)
        measured[context] = time.perf_counter() - t0
        del caches
        mx.clear_cache()
    largest = max(measured)
    per_token_s = measured[largest] / (largest + 1)
    real = {}
    for context in SWEEP:
        if context in measured:
            real[context] = {"prefill_s": measured[context], "how": "measured"}
        else:
            real[context] = {
                "prefill_s": per_token_s * (context + 1),
                "how": f"extrapolated linearly from {largest:,}",
            }
    real_total = sum(v["prefill_s"] + timing_s[c] for c, v in real.items())
    return {
        "contexts": SWEEP,
        "synthetic_sweep_s": synthetic_s,
        "real_prefill_sweep_s": real_total,
        "speedup": real_total / synthetic_s,
        "real_prefill": real,
        "decode_rows": rows,
        "extrapolation": (
            f"contexts above {largest:,}: the per-token prefill time measured at {largest:,} "
            f"({per_token_s * 1000:.1f} ms/token) x context; a lower bound, since attention "
            "work per token grows with context"
        ),
        "at_least_20x": real_total / synthetic_s >= 20,
    }


def harness_vs_generate_step(model, context: int, warmup: int, steps: int, rounds: int) -> dict:
    """Check 3: paired rounds, mlx_lm's generate_step (A) vs this harness (B), same synthetic fill, fresh caches."""
    out = paired(
        lambda: generate_step_ms(model, context, model.dtype, warmup, steps),
        lambda: synthetic_ms(model, context, model.dtype, warmup, steps),
        rounds,
        "3.",
    )
    return {"context": context, "a": "mlx_lm generate_step", "b": "this harness", **out}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="cpu-demo")
    p.add_argument("--weights-format", default="fp32")
    p.add_argument(
        "--context",
        type=int,
        default=1024,
        help="context for check 1 (affordable real prefill, < 2048)",
    )
    p.add_argument("--generate-context", type=int, default=4096, help="context for check 3")
    p.add_argument(
        "--measured-prefill", default="256,512,1024", help="contexts whose real prefill is measured"
    )
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--rounds", type=int, default=15, help="A/B pairs per paired check")
    p.add_argument("--out-name", default="bench_live", help="file stem under benchmarks/out/")
    add_option(p, "its table of the three checks")
    a = p.parse_args()
    section = Section(a.markdown, "bench_live")
    model = get_model(a.model, "random", a.weights_format)
    print(
        f"model {model.name}, {model.weights_format} weights, {model.dtype} activations, {backend()['backend']}"
    )
    t_start = time.perf_counter()

    one = synthetic_vs_real(model, a.context, a.warmup, a.steps, a.rounds)
    print(
        f"1. real prefill's K/V vs synthetic fill at {one['context']:,}: {spread_text(one)} -> {one['verdict']} "
        f"(medians {one['a_median_ms']:.2f} vs {one['b_median_ms']:.2f} ms/token; prefill took {one['prefill_s']:.1f} s)"
    )
    two = sweep_cost(
        model,
        [int(x) for x in a.measured_prefill.split(",")],
        {a.context: one["prefill_s"]},
        a.warmup,
        a.steps,
    )
    print(
        f"2. sweep 256 -> 32K: synthetic {two['synthetic_sweep_s']:.1f} s vs real prefills "
        f"{two['real_prefill_sweep_s']:.0f} s -> {two['speedup']:.0f}x ({two['extrapolation']})"
    )
    three = harness_vs_generate_step(model, a.generate_context, a.warmup, a.steps, a.rounds)
    print(
        f"3. harness vs mlx_lm generate_step at {a.generate_context:,}: {spread_text(three)} -> {three['verdict']} "
        f"(medians {three['a_median_ms']:.2f} vs {three['b_median_ms']:.2f} ms/token)"
    )

    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "command": " ".join(["python", *sys.argv]),
        "provenance": measured_provenance(" ".join(sys.argv)),
        "model": model.summary(),
        "wall_s": time.perf_counter() - t_start,
        "method": {
            "pairing": "one untimed round, then rounds with fresh caches, B first in every other round; "
            "check 1 interleaves A and B step by step within a round, check 3 alternates "
            "whole measurements; median of B/A with interquartile range and min-max",
            "tolerance": TOLERANCE,
            "warmup": a.warmup,
            "steps": a.steps,
            "rounds": a.rounds,
        },
        "synthetic_vs_real_prefill": one,
        "sweep_cost": two,
        "harness_vs_generate_step": three,
    }
    (out / f"{a.out_name}.json").write_text(json.dumps(summary, indent=2))
    md = [
        f"# bench_live ({summary['provenance']['date']}, {summary['provenance']['machine']['chip']}, "
        f"{summary['provenance']['backend']})",
        "",
        f"Model: {model.name} (random weights, {model.weights_format}); command: `{summary['command']}`",
        "",
        "| check | paired ratio B/A: median (IQR, min-max) | A vs B medians | goal | supported |",
        "|---|---|---|---|---|",
        f"| real prefill's K/V (B) vs synthetic fill (A) @ {one['context']:,} | {spread_text(one)} | "
        f"{one['a_median_ms']:.2f} vs {one['b_median_ms']:.2f} ms/token | within 10 % | {one['verdict']} |",
        f"| sweep 256->32K, synthetic vs real prefills (one measurement) | {two['speedup']:.0f}x | "
        f"{two['synthetic_sweep_s']:.1f} s vs {two['real_prefill_sweep_s']:.0f} s | >= 20x | {two['at_least_20x']} |",
        f"| harness (B) vs generate_step (A) @ {a.generate_context:,} | {spread_text(three)} | "
        f"{three['a_median_ms']:.2f} vs {three['b_median_ms']:.2f} ms/token | within 10 % | {three['verdict']} |",
        "",
        f"Extrapolation: {two['extrapolation']}.",
    ]
    (out / f"{a.out_name}.md").write_text("\n".join(md) + "\n")
    section.write(
        "\n".join(md[4:]) + f"\n\nModel: {model.name} (random weights, {model.weights_format}); "
        f"{a.rounds} paired rounds."
    )
    print(f"wrote {out / (a.out_name + '.json')} and .md ({summary['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
