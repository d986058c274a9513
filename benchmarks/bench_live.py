"""Does the live decode harness measure what it claims? Three checks in one run (not a test: timing).

1. Synthetic fill vs real prefill: ms/token at one context after writing random K/V into the
   cache vs after a real (chunked, generate_step-style) prefill. Expected within 10 %.
2. Cost of a full 256 -> 32K sweep: synthetic fills (measured) vs real prefills to the same
   contexts (measured where affordable, extrapolated beyond; see `extrapolation` in the output).
   Expected >= 20x faster.
3. The harness's ms/token vs mlx_lm's own generate_step at the same context. Expected within 10 %.

Usage: .venv/bin/python benchmarks/bench_live.py [--model cpu-demo] [--weights-format fp32]
Writes benchmarks/out/bench_live.json and .md (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvcore.live import decode_sweep, generate_step_check, prefill, time_steps  # noqa: E402
from kvcore.live_models import backend, fill_caches, get_model, make_caches, provenance  # noqa: E402

SWEEP = [256, 512, 1024, 2048, 4096, 8192, 16384, 32768]


def synthetic_vs_real(model, context: int, warmup: int, steps: int, repeats: int) -> dict:
    """Median over `repeats` of the per-run median ms/token, synthetic fill vs real prefill."""
    import mlx.core as mx

    synthetic, real, prefill_s = [], [], []
    for _ in range(repeats):
        caches = make_caches(model, model.dtype)
        fill_caches(caches, model.geometry, context + 1, model.dtype)
        synthetic.append(statistics.median(time_steps(model, caches, warmup, steps)))
        del caches
        mx.clear_cache()
    caches = make_caches(model, model.dtype)
    t0 = time.perf_counter()
    prefill(model, caches, context + 1)
    prefill_s.append(time.perf_counter() - t0)
    for _ in range(repeats):  # the same prefilled cache, trimmed back after each run
        real.append(statistics.median(time_steps(model, caches, warmup, steps)))
        for c in caches:
            c.trim(warmup + steps)
    s, r = statistics.median(synthetic), statistics.median(real)
    return {"context": context, "synthetic_ms": s, "real_prefill_ms": r, "ratio": r / s, "prefill_s": prefill_s[0],
            "synthetic_runs_ms": synthetic, "real_runs_ms": real, "within_10pct": abs(r / s - 1) <= 0.10}


def sweep_cost(model, measured_prefill: list[int], warmup: int, steps: int) -> dict:
    """Wall time of a synthetic 256 -> 32K sweep vs real prefills (measured up to max(measured_prefill))."""
    import mlx.core as mx

    t0 = time.perf_counter()
    rows = decode_sweep(model, SWEEP, warmup=warmup, steps=steps, repeats=1)
    synthetic_s = time.perf_counter() - t0
    timing_s = {r["context"]: (warmup + steps) * r["ms_per_token"] / 1000 for r in rows}
    measured = {}
    for context in measured_prefill:
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
            real[context] = {"prefill_s": per_token_s * (context + 1), "how": f"extrapolated linearly from {largest:,}"}
    real_total = sum(v["prefill_s"] + timing_s[c] for c, v in real.items())
    return {"contexts": SWEEP, "synthetic_sweep_s": synthetic_s, "real_prefill_sweep_s": real_total,
            "speedup": real_total / synthetic_s, "real_prefill": real, "decode_rows": rows,
            "extrapolation": (f"contexts above {largest:,}: the per-token prefill time measured at {largest:,} "
                              f"({per_token_s * 1000:.1f} ms/token) x context; a lower bound, since attention "
                              "work per token grows with context"),
            "at_least_20x": real_total / synthetic_s >= 20}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="cpu-demo")
    p.add_argument("--weights-format", default="fp32")
    p.add_argument("--context", type=int, default=1024, help="context for checks 1 (affordable real prefill)")
    p.add_argument("--generate-context", type=int, default=4096, help="context for check 3")
    p.add_argument("--measured-prefill", default="256,512,1024", help="contexts whose real prefill is measured")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    model = get_model(a.model, "random", a.weights_format)
    print(f"model {model.name}, {model.weights_format} weights, {model.dtype} activations, {backend()['backend']}")
    t_start = time.perf_counter()

    one = synthetic_vs_real(model, a.context, a.warmup, a.steps, a.repeats)
    print(f"1. synthetic fill vs real prefill at {one['context']:,}: {one['synthetic_ms']:.2f} vs "
          f"{one['real_prefill_ms']:.2f} ms/token -> ratio {one['ratio']:.3f} (prefill took {one['prefill_s']:.1f} s)")
    two = sweep_cost(model, [int(x) for x in a.measured_prefill.split(",")], a.warmup, a.steps)
    print(f"2. sweep 256 -> 32K: synthetic {two['synthetic_sweep_s']:.1f} s vs real prefills "
          f"{two['real_prefill_sweep_s']:.0f} s -> {two['speedup']:.0f}x ({two['extrapolation']})")
    gens = [generate_step_check(model, a.generate_context, None, a.warmup, a.steps) for _ in range(a.repeats)]
    harness = statistics.median(g["harness_ms"] for g in gens)
    generate = statistics.median(g["generate_step_ms"] for g in gens)
    three = {"context": a.generate_context, "harness_ms": harness, "generate_step_ms": generate,
             "ratio": harness / generate, "runs": gens, "within_10pct": abs(harness / generate - 1) <= 0.10}
    print(f"3. harness vs mlx_lm generate_step at {a.generate_context:,}: {harness:.2f} vs {generate:.2f} ms/token "
          f"-> ratio {three['ratio']:.3f}")

    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    summary = {"command": " ".join(["python", *sys.argv]), "provenance": provenance(" ".join(sys.argv)),
               "model": model.summary(), "wall_s": time.perf_counter() - t_start,
               "synthetic_vs_real_prefill": one, "sweep_cost": two, "harness_vs_generate_step": three}
    (out / "bench_live.json").write_text(json.dumps(summary, indent=2))
    md = [f"# bench_live ({summary['provenance']['date']}, {summary['provenance']['machine']['chip']}, "
          f"{summary['provenance']['backend']})", "",
          f"Model: {model.name} (random weights, {model.weights_format}); command: `{summary['command']}`", "",
          "| check | figure | expected | ok |", "|---|---|---|---|",
          f"| synthetic vs real prefill @ {one['context']:,} | {one['synthetic_ms']:.2f} vs {one['real_prefill_ms']:.2f} "
          f"ms/token (x{one['ratio']:.3f}) | within 10 % | {one['within_10pct']} |",
          f"| sweep 256->32K | {two['synthetic_sweep_s']:.1f} s vs {two['real_prefill_sweep_s']:.0f} s "
          f"({two['speedup']:.0f}x) | >= 20x | {two['at_least_20x']} |",
          f"| harness vs generate_step @ {a.generate_context:,} | {harness:.2f} vs {generate:.2f} ms/token "
          f"(x{three['ratio']:.3f}) | within 10 % | {three['within_10pct']} |", "",
          f"Extrapolation: {two['extrapolation']}."]
    (out / "bench_live.md").write_text("\n".join(md) + "\n")
    print(f"wrote {out / 'bench_live.json'} and {out / 'bench_live.md'} ({summary['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
