"""mlx_lm's memory plan (kvcore.runtimes.mlx_lm_plan) against mx.get_peak_memory() around mlx_lm's own
generate_step on this machine: random-weight models of real geometry (fp32 on the CPU backend), prompts across
the prefill step and the 256-token boundaries, with and without an 8-bit cache (quantized from the first chunk),
each run repeated. Prints the table (plan, measured, their difference as a share of the plan's transient parts)
and the machine it ran on; tests/test_mlx_lm_plan.py holds a few of these cases.

    .venv/bin/python scripts/mlx_peak_sweep.py [--models cpu-demo,smollm2-135m] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvcore.inputs.config import parse_config  # noqa: E402
from kvcore.measure.machine import measured_provenance  # noqa: E402
from kvcore.measure.models import build_random, resolve_config  # noqa: E402
from kvcore.measure.peaks import generate_peak  # noqa: E402
from kvcore.memory.formats import KvSpec  # noqa: E402
from kvcore.runtimes import mlx_lm_plan  # noqa: E402
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.units import MIB  # noqa: E402

CASES = (  # (prompt, generated, prefill step, kv_bits)
    (100, 0, 512, None),
    (255, 1, 512, None),
    (256, 1, 512, None),
    (511, 1, 512, None),
    (513, 0, 512, None),
    (1025, 0, 512, None),
    (1300, 1, 512, None),
    (600, 0, 256, None),
    (2049, 0, 2048, None),
    (513, 1, 512, 8),
    (1300, 0, 512, 8),
    (1025, 0, 512, 4),
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="cpu-demo,smollm2-135m")
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    print(json.dumps(measured_provenance(" ".join(sys.argv)), default=str))
    print(
        "| model | prompt | generated | step | cache | plan MiB | peak MiB (runs) | worst (plan - peak) / transient |"
    )
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for name in a.models.split(","):
        model_name, config = resolve_config(name)
        model = build_random(model_name, config, "fp32")
        geometry = parse_config(config, model_name, MLX_LM)
        generate_peak(model, 64, 0, 256)  # mlx's first run in a process holds a little more
        for prompt, generated, step, bits in CASES:
            fmt = f"mlx-q{bits}" if bits else "fp32"
            spec = KvSpec(fmt, fmt, 64, "fp32")
            runs = [
                generate_peak(model, prompt, generated, step, bits, quantized_kv_start=0)
                for _ in range(a.repeat)
            ]
            plan = mlx_lm_plan.plan(
                geometry, prompt, spec, runs[0]["weights_bytes"], generated, "cpu", step, 0
            )
            above = plan["total_bytes"] - plan["weights_bytes"]
            peaks = [r["peak_bytes"] - r["weights_bytes"] for r in runs]
            err = max((above - p for p in peaks), key=abs) / plan["compute_bytes"]
            worst = max(worst, abs(err))
            shown = ", ".join(f"{p / MIB:.2f}" for p in peaks)
            print(
                f"| {name} | {prompt:,} | {generated} | {step} | {fmt} | {above / MIB:.2f} | {shown} | "
                f"{err:+.2f} |"
            )
    print(f"worst |plan - peak| / transient: {worst:.2f} (plan and peak above the weights)")


if __name__ == "__main__":
    main()
