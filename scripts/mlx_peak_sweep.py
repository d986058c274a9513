"""mlx_lm's memory plan (kvcore.runtimes.mlx_lm_plan) against mx.get_peak_memory() around mlx_lm's own
generate_step on this machine: random-weight models of real geometry (fp32 on the CPU backend), prompts across
the prefill step and the 256-token boundaries, with and without an 8-bit cache (quantized from the first chunk),
each run repeated. Prints the table (plan, measured, their difference as a share of the plan's transient parts)
and the machine it ran on; tests/test_mlx_lm_plan.py holds a few of these cases live.

--dense adds prompts every 50 tokens from 200 to 1,100 and either side of each 256 boundary, at prefill steps of
512 and 2,048 (one token generated): enough to draw the peak as a line against the prompt. --record OUT writes the
run (one model) as a recording with its provenance (kvcore.measure.recording.build_recording): only what was
measured; the plan is computed wherever the recording is shown. The bundled one:

    .venv/bin/python scripts/mlx_peak_sweep.py --models smollm2-135m --dense --repeat 2 \\
        --record recordings/measured-linux-cpu-mlx-lm-peaks.yaml

    .venv/bin/python scripts/mlx_peak_sweep.py [--models cpu-demo,smollm2-135m] [--repeat 2] [--dense] [--record OUT]
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvcore.inputs.config import parse_config  # noqa: E402
from kvcore.measure import blas  # noqa: E402
from kvcore.measure.machine import measured_provenance  # noqa: E402
from kvcore.measure.models import build_random, resolve_config  # noqa: E402
from kvcore.measure.peaks import generate_peak, peak_method, peak_row  # noqa: E402
from kvcore.measure.recording import build_recording, default_label, save_run  # noqa: E402
from kvcore.memory.formats import KvSpec  # noqa: E402
from kvcore.recordings.provenance import is_apple_silicon  # noqa: E402
from kvcore.runtimes import mlx_lm_plan  # noqa: E402
from kvcore.runtimes.mlx_lm import MLX_LM  # noqa: E402
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
DENSE_PROMPTS = sorted(
    {*range(200, 1101, 50), *(b + d for b in (256, 512, 768, 1024) for d in (-1, 0, 1))}
)
DENSE_STEPS = (512, 2048)


def dense_cases() -> tuple:
    """The line across the boundaries: every DENSE_PROMPTS prompt at each DENSE_STEPS step, one token generated."""
    return tuple((p, 1, step, None) for step in DENSE_STEPS for p in DENSE_PROMPTS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="cpu-demo,smollm2-135m")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dense", action="store_true", help="add the dense prompt sweep (see above)")
    ap.add_argument("--record", metavar="OUT", help="write the run as a recording (one model)")
    a = ap.parse_args()
    names = a.models.split(",")
    if a.record and len(names) != 1:
        ap.error("--record writes one model's run: name one model in --models")
    command = shlex.join(["python", "scripts/mlx_peak_sweep.py", *sys.argv[1:]])
    print(json.dumps(measured_provenance(command), default=str))
    print(
        "| model | prompt | generated | step | cache | plan MiB | peak MiB (runs) | worst (plan - peak) / transient |"
    )
    print("|---|---|---|---|---|---|---|---|")
    cases = list(dict.fromkeys(CASES + (dense_cases() if a.dense else ())))
    worst, rows, started = 0.0, [], time.perf_counter()
    for name in names:
        model_name, config = resolve_config(name)
        model = build_random(model_name, config, "fp32")
        geometry = parse_config(config, model_name, MLX_LM)
        generate_peak(model, 64, 0, 256)  # mlx's first run in a process holds a little more
        for prompt, generated, step, bits in cases:
            fmt = f"mlx-q{bits}" if bits else "fp32"
            spec = KvSpec(fmt, fmt, 64, "fp32")
            runs = [
                generate_peak(model, prompt, generated, step, bits, quantized_kv_start=0)
                for _ in range(a.repeat)
            ]
            rows.append(peak_row(runs, fmt))
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
                f"{err:+.2f} |",
                flush=True,
            )
    print(f"worst |plan - peak| / transient: {worst:.2f} (plan and peak above the weights)")
    if a.record:
        out = Path(a.record)
        method = {
            "blas": blas.state()["note"],
            "total_seconds": round(time.perf_counter() - started, 1),
            "peak": peak_method(a.repeat, model.weights_bytes()),
        }
        prov = measured_provenance(command)
        info = dict(model.summary(), kv_format="various")  # each row names its own
        data = build_recording(
            {"peak": rows},
            info,
            method,
            command,
            title=f"mlx_lm's peak memory around generate_step: random-weight {model_name} geometry "
            f"({prov['backend']}, fp32), prompts across the 256-token boundaries",
            label=f"{default_label(prov)}: mlx_lm's peak memory ({blas.label()})",
        )
        where = (  # a phone's legend: where it ran, the model, what
            prov["machine"]["chip"]
            if is_apple_silicon(prov)
            else f"{prov['machine']['os'].split()[0]} CPU"
        )
        data["short_label"] = f"{where} · {model_name} · peaks"[:35]
        print(f"saved {save_run(data, out.parent, out.stem)}")


if __name__ == "__main__":
    main()
