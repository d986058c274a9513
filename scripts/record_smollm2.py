"""Record the real model on this machine: quality per KV format (with the price at 512 ... N tokens from one pass),
the same prompts answered through each cache, the mechanism on real text, a decode sweep and prompt processing.

    .venv/bin/python scripts/record_smollm2.py [--tokens 2048] [--out recordings] [--name NAME]
    .venv/bin/python scripts/record_smollm2.py --answers-into recordings/NAME.yaml --out DIR

One recording (kvcore.recordings.store schema), labelled with the backend and BLAS that measured it.
--answers-into asks the questions again and saves that recording with its answers replaced (the rest as it was
recorded; the answers' own date, command and versions in method.answers). Either way, a baseline answer that is not
right (mlx_quality.DEMO_QUESTIONS: what a right answer says) is refused: nothing is saved.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvcore.measure import blas
from kvcore.measure.decode import decode_sweep, mechanism_probe  # noqa: E402
from kvcore.measure.machine import backend  # noqa: E402
from kvcore.measure.mlx_quality import (  # noqa: E402
    DEMO_QUESTIONS,
    QUANTIZE_RULE,
    answers,
    parse_format,
    score,
)
from kvcore.measure.models import load_real_model  # noqa: E402
from kvcore.measure.real_model import SAMPLE_TEXT as BUNDLED_TEXT  # noqa: E402
from kvcore.measure.recording import build_recording, model_info, quality_method, save_run  # noqa: E402
from kvcore.measure.sweeps import prefill_sweep  # noqa: E402
from kvcore.measure.timing import SWEEP_ORDER, SWEEP_SPREAD, SweepOptions  # noqa: E402

OPTIONS = (("fp16", 64), ("mlx-q8", 64), ("mlx-q4", 64), ("mlx-q4", 32))  # (format, group size)


def ask(model, options) -> list[dict]:
    """Every DEMO_QUESTIONS question answered through each cache; SystemExit when a baseline answer is not right."""
    rows = []
    for question, right in DEMO_QUESTIONS.items():
        got = answers(model, question, options, 40)
        if right not in got[0]["answer"]:
            raise SystemExit(f"the baseline answered {question!r} wrongly: {got[0]['answer']!r}")
        print(f"answered: {question}", flush=True)
        rows += got
    return rows


def answers_into(path: str, out: str, command: str) -> int:
    """The recording at `path` with its answers asked again on this machine, saved under its own name in `out`."""
    from kvcore.measure.machine import measured_provenance
    from kvcore.measure.recording import section_rows
    from kvcore.recordings import store

    data = store.load(Path(path)).data
    model = load_real_model()
    t0 = time.perf_counter()
    rows = ask(model, [parse_format(f, g) for f, g in OPTIONS])
    prov = measured_provenance(command)
    data["sections"]["answers"] = section_rows("answers", rows)
    data["method"]["answers"] = {
        "max_tokens": 40,
        "decoding": "greedy",
        "quantize": QUANTIZE_RULE,
        "asked": prov["date"],  # on the recording's machine and versions, apart from the rest of it
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(f"saved {save_run(data, out, Path(path).stem)}")
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=2048)
    p.add_argument("--out", default="recordings")
    p.add_argument("--name", default="measured-linux-cpu-smollm2-135m")
    p.add_argument("--answers-into", metavar="RECORDING", help="ask the questions again into it")
    a = p.parse_args()
    command = shlex.join(["python", "scripts/record_smollm2.py", *sys.argv[1:]])
    if a.answers_into:
        return answers_into(a.answers_into, a.out, command)
    t_all = time.perf_counter()
    model = load_real_model()
    ids = model.tokenizer.encode(BUNDLED_TEXT.read_text(encoding="utf-8"))
    options = [parse_format(f, g) for f, g in OPTIONS]
    checkpoints = tuple(c for c in (512, 1024, 2048, 4096, 8192) if c < a.tokens)
    t0 = time.perf_counter()
    quality, _ = score(model, ids[: a.tokens + 1], options, 256, checkpoints=checkpoints)
    quality_s = time.perf_counter() - t0
    print(f"quality {quality_s:.0f} s", flush=True)
    answer_rows = ask(model, options)
    print("answers done", flush=True)
    mech = mechanism_probe(model, 32, prompt_ids=ids[:64])
    print("mechanism done", flush=True)
    decode = decode_sweep(model, [256, 1024, 4096, 8192], options=SweepOptions(2, 8, 2))
    print("decode done", flush=True)
    prefill = prefill_sweep(model, [128, 512, 2048], options=SweepOptions(repeats=2))
    total_s = time.perf_counter() - t_all
    method = {
        "quality": dict(
            quality_method(str(BUNDLED_TEXT), a.tokens, 256, None, model),
            checkpoints=list(checkpoints),
            seconds=round(quality_s, 1),
        ),
        "answers": {"max_tokens": 40, "decoding": "greedy", "quantize": QUANTIZE_RULE},
        "mechanism": {
            "prompt_tokens": 64,
            "new_tokens": 32,
            "prompt_source": "the first 64 tokens of the bundled text (prompt: in the first row)",
            "without_cache": "full forward over prompt + generated tokens every step",
        },
        "decode": {
            "fill": "synthetic: random K/V for T+1 tokens, evaluated before timing",
            "warmup": 2,
            "steps": 8,
            "repeats": 2,
            "statistic": "median of repeat medians",
            "order": SWEEP_ORDER,
            "spread": SWEEP_SPREAD,
            "sync": "mx.eval of the sampled token every step",
            "kv_format": model.dtype,
        },
        "prefill": {
            "tokens": "random token ids (the time does not depend on which)",
            "chunk": 2048,
            "statistic": "median of 2 passes, a fresh cache each, one untimed warm-up",
        },
        "backend": backend(),
        "blas": blas.state(),
        "total_seconds": round(total_s, 1),
    }
    label = f"Measured — Linux CPU (mlx[cpu], {blas.label()}), SmolLM2-135M real weights, not Apple Silicon"
    data = build_recording(
        {
            "quality": quality,
            "answers": answer_rows,
            "mechanism": mech,
            "decode": decode,
            "prefill": prefill,
        },
        model_info(model, None, model.dtype),
        method,
        command,
        title="SmolLM2-135M-Instruct on this Linux CPU: quality per KV format, mechanism, decode, prefill",
        label=label,
    )
    data["short_label"] = f"Linux CPU · SmolLM2-135M · {blas.label()}"
    print(f"saved {save_run(data, a.out, a.name)} after {total_s:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
