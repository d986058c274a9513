"""`python -m kvcore quality --by-position`: the quality price at long context, up to the model's window, in
either runtime (kvcore.measure.long_context): KL (mean and 99th percentile), top-1 agreement and perplexity
per prefix and per window of positions, a fact asked at each length, and a sample of logits to check one
point by hand. The recording holds sections long_context and retrieval; the sample sits beside it
(<recording>.logits.npz).

Example: python -m kvcore quality --by-position --tokens 8192 --out recordings --name measured-...
"""

from __future__ import annotations

from pathlib import Path

from kvcore.errors import KvError
from kvcore.limits import MAX_TEXT_BYTES

MLX_FORMATS = (
    "mlx-q8@32,mlx-q8@64,mlx-q4@32,mlx-q4@64"  # format@group (128 does not divide head_dim 64)
)
# llama.cpp: one type for K and V, or K/V: every pair of f16, q8_0 and q4_0 (its CPU build accepts
# each), q4_0 last (the run sampled by default)
LLAMACPP_PAIRS = "q8_0,f16/q8_0,q8_0/f16,f16/q4_0,q4_0/f16,q8_0/q4_0,q4_0/q8_0,q4_0"
WINDOW_COLUMNS = [  # (key, header, format)
    ("label", "kv format", "<26"),
    ("start", "from", "d"),
    ("end", "to", "d"),
    ("kl_mean", "KL mean", ".5f"),
    ("kl_p99", "KL p99", ".4f"),
    ("top1_agreement", "top-1", ".4f"),
    ("perplexity", "perplexity", ".3f"),
]


def check_tokens(tokens: int, window: int | None, name: str) -> None:
    """--tokens within the model's trained window (max_position_embeddings), or one sentence."""
    if window and tokens > window:
        raise KvError(
            f"--tokens {tokens:,} is beyond {name}'s window of {window:,} positions "
            "(max_position_embeddings); give at most that."
        )


def mlx_options(names: list[str], group_size: int | None, start: int, head_dim: int) -> list:
    """--kv-formats under mlx_lm: fp32/fp16/bf16 or mlx-q<bits>, a quantized one with @group (mlx-q4@32); a
    format without @ takes --group-size (default 64)."""
    from kvcore.measure.mlx_quality import parse_format
    from kvcore.numbers import whole_number

    out = []
    for name in names:
        fmt, _, group = name.partition("@")
        g = (  # ASCII digits only (kvcore.numbers): '²' is str.isdigit() but no number
            whole_number(group, f"the group after @ in {name!r}", 1, 1024)
            if group
            else (64 if group_size is None else group_size)
        )
        out.append(parse_format(fmt, g, start, head_dim))
    return out


def run_mlx(a) -> int:
    from kvcore.inputs.textfile import read_text_file
    from kvcore.measure import blas, real_model
    from kvcore.measure.long_context import method, sections
    from kvcore.measure.machine import backend
    from kvcore.measure.mlx_quality import QUANTIZE_RULE_PREFILL, run_long_context
    from kvcore.measure.models import get_model
    from kvcore.measure.probes import resolve_geometry
    from kvcore.measure.recording import build_recording, model_info

    from .run import command_line, with_bar

    if a.model != real_model.NAME:
        raise KvError(
            f"quality --by-position runs the real model only (--model {real_model.NAME})."
        )
    if a.threads is not None:
        raise KvError("--threads belongs to quality --runtime llama.cpp.")
    geometry = resolve_geometry(a.model)
    check_tokens(a.tokens, geometry.max_position_embeddings, a.model)
    names = a.kv_formats or MLX_FORMATS.split(",")
    options = mlx_options(names, a.group_size, a.quantized_kv_start, geometry.layers[0].k_dim)
    text = read_text_file(a.text, MAX_TEXT_BYTES, a.text)
    real_model.require()
    model = get_model(a.model, None)
    labels = [o.label for o in options]
    sample = _sample(a.sample, labels)
    result = with_bar(
        run_long_context, model, text, options, a.tokens, a.chunk, a.answer_tokens, sample
    )
    names_of = {
        label: {
            "kv_format": o.name,
            "label": label,
            **({"bits": o.bits, "group_size": o.group_size} if o.bits else {}),
        }
        for label, o in result["options"].items()
    }
    how = method(
        result,
        Path(a.text).name,
        f"mlx_lm's KVCache in the activation dtype ({model.dtype}): the unquantized cache this "
        "backend computes in (an fp16 cache on Metal)",
        QUANTIZE_RULE_PREFILL,
    )
    how.update(weights=model.weights_note, blas=blas.state()["note"])
    data = build_recording(
        sections(result, names_of),
        model_info(model, None, result["baseline"]),
        {"long_context": how, "backend": backend()},
        command_line(),
        a.title or f"{model.name}: the quality price by position, to {a.tokens:,} tokens (mlx_lm)",
        a.label,
    )
    return _report(a, data, result)


def run_llamacpp(a) -> int:
    import os

    from kvcore.inputs import gguf
    from kvcore.inputs.textfile import read_text_file
    from kvcore.measure.llamacpp_long import (
        long_context_recording,
        pair_name,
        parse_pairs,
        run_long_context,
    )

    from .live_args import require_gguf
    from .run import command_line, with_bar

    require_gguf(a, "scores")
    if a.group_size is not None or a.quantized_kv_start:
        raise KvError(
            "--group-size and --quantized-kv-start are mlx_lm's; llama.cpp's cache types fix their "
            "own blocks (32 values) and quantize from the first token."
        )
    geometry = gguf.geometry(a.model)
    check_tokens(a.tokens, geometry.max_position_embeddings, geometry.name)
    pairs = parse_pairs(a.kv_formats or LLAMACPP_PAIRS.split(","))
    sample = _sample(a.sample, [pair_name(k, v) for k, v in pairs])
    text = read_text_file(a.text, MAX_TEXT_BYTES, a.text)
    threads = a.threads or os.cpu_count() or 1
    result = with_bar(
        run_long_context, a.model, pairs, text, a.tokens, a.chunk, threads, a.answer_tokens, sample
    )
    data = long_context_recording(
        a.model, result, command_line(), Path(a.text).name, a.title, a.label
    )
    return _report(a, data, result)


def _sample(asked: str | None, labels: list[str]) -> str | None:
    """The run whose logits are sampled: --sample (a label as listed) or the last run; none if no run."""
    if asked is None:
        return labels[-1] if labels else None
    if asked not in labels:
        raise KvError(f"--sample {asked!r} is not one of the runs: {', '.join(labels)}.")
    return asked


def _report(a, data: dict, result: dict) -> int:
    """Print the windows and the answers, save the recording and the logits sample beside it."""
    import json

    from kvcore.measure import positions

    from .run import print_table, save

    rows = data["sections"]["long_context"]
    asked = data["sections"].get("retrieval", [])
    if a.json:
        print(json.dumps({k: data[k] for k in ("sections", "method")}, allow_nan=False))
    else:
        print(f"{result['tokens']:,} positions per run; baseline: {result['baseline']}")
        print_table([r for r in rows if r["scope"] == "window"], WINDOW_COLUMNS)
        for row in asked:
            mark = "right" if row["correct"] else "WRONG"
            print(f"{row['context']:>6,} {row['label']:<26} {mark:<5} {row['answer']!r}")
    path = save(a, data, a.name)
    if path is not None and result["sample"]:
        sample = result["sample"]
        target = path.with_suffix(".logits.npz")
        positions.save_sample(target, sample["rows"], sample["positions"], sample["kl"])
        print(f"saved {target}")
    return 0
