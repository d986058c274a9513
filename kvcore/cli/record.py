"""`python -m kvcore record`: the suite (trap, growth, decode, mechanism, or --sections, e.g.
prefill,batch) into one recording, saved unless --no-save; under --runtime llama.cpp, decode vs
context and prompt processing of a GGUF file in llama-cpp-python, its allocation lines kept."""

from __future__ import annotations

import os

from kvcore.cli.live_args import (
    DEFAULT_BATCH_CONTEXTS,
    DEFAULT_BATCHES,
    DEFAULT_CONTEXTS,
    DEFAULT_KV_CONTEXTS,
    DEFAULT_MODEL,
    DEFAULT_PROMPTS,
    MAX_BATCH,
    MAX_LIVE_CONTEXT,
    MODEL_HELP,
    add_common,
    add_model_args,
    add_token_counts,
    any_format,
    batch_sizes,
    contexts,
    count,
    kv_format,
    mlx_kv_help,
    require_gguf,
    sections,
    stem,
)
from kvcore.cli.run import checked, command_line, load_model, print_table, save, with_bar
from kvcore.errors import KvError
from kvcore.runtimes.registry import get_runtime, gguf_runtime

RECORD_TABLES = {  # what `record` prints of each section it measured: (key, header, format)
    "decode": [
        ("context", "context", ","),
        ("ms_per_token", "ms/token", ".2f"),
        ("q1_ms", "q1 ms", ".2f"),
        ("q3_ms", "q3 ms", ".2f"),
        ("spread_ms", "spread ms", ".2f"),
    ],
    "growth": [
        ("context", "context", ","),
        ("allocated_mib", "alloc MiB", ".1f"),
        ("used_mib", "used MiB", ".1f"),
        ("peak_mib", "peak MiB", ".1f"),
    ],
    "prefill": [
        ("prompt_tokens", "prompt", ","),
        ("prefill_s", "prefill s", ".3f"),
        ("tokens_per_s", "prompt tok/s", ".1f"),
        ("min_s", "min s", ".3f"),
        ("max_s", "max s", ".3f"),
    ],
    "batch": [
        ("batch", "sequences", ","),
        ("context", "context", ","),
        ("ms_per_step", "ms/step", ".2f"),
        ("tokens_per_s_total", "total tok/s", ".1f"),
        ("tokens_per_s", "per-seq tok/s", ".1f"),
        ("spread_ms", "spread ms", ".2f"),
    ],
}


def _print_sections(data: dict) -> None:
    for name, cols in RECORD_TABLES.items():
        if name in data["sections"]:
            print(f"\n{name}")
            print_table(data["sections"][name], cols)


def _cmd_record_gguf(a) -> int:
    """record under the runtime that runs GGUF files (llama.cpp): decode vs context and prompt
    processing on the file."""
    from kvcore.measure.llamacpp_runs import record

    require_gguf(a, "records")
    data = with_bar(
        record,
        a.model,
        command_line(),
        a.contexts,
        a.prompts,
        warmup=a.warmup,
        steps=a.steps,
        repeats=a.repeats,
        kv_format=a.kv_format or get_runtime(a.runtime).default_kv_format,
        threads=a.threads,
        title=a.title,
        label=a.label,
    )
    print("allocation (llama.cpp's own lines):")
    for line in data["method"]["allocation_lines"]:
        print(f"  {line}")
    agree = data["method"]["cross_checks"][0]["agree"]
    print(f"check      calc --runtime llama.cpp prints the same lines: {agree}")
    _print_sections(data)
    save(a, data, a.name)
    return 0


def _cmd_record(a) -> int:
    from kvcore.measure.caches import live_format
    from kvcore.measure.suite import record_suite

    runtime = get_runtime(a.runtime)
    if runtime.reads_gguf:
        if a.kv_format and a.kv_format not in runtime.kv_formats:  # its -ctk/-ctv types
            raise KvError(
                f"--runtime {runtime.name} caches in {', '.join(runtime.kv_formats)}, not {a.kv_format!r}."
            )
        return _cmd_record_gguf(a)
    if a.kv_format:  # before the model loads: a format an mlx_lm cache class holds
        live_format(a.kv_format)
    model = load_model(a)
    geometry = a.geometry or (model.geometry if model.weights != "random" else a.model)
    data = with_bar(
        record_suite,
        model,
        geometry,
        command_line(),
        trap_tokens=a.tokens,
        kv_contexts=a.kv_contexts,
        contexts=a.contexts,
        kv_format=a.kv_format,
        geometry_kv_format=a.geometry_kv_format,
        warmup=a.warmup,
        steps=a.steps,
        repeats=a.repeats,
        new_tokens=a.new_tokens,
        prompt_tokens=a.prompt_tokens,
        check_context=a.check_context,
        title=a.title,
        label=a.label,
        sections=a.sections,
        prompts=a.prompts,
        batches=a.batch_sizes,
        batch_contexts=a.batch_contexts,
    )
    _print_sections(data)
    if "mechanism" in data["sections"]:
        last = data["sections"]["mechanism"][-1]
        print(
            f"\nmechanism  {last['new_tokens']} tokens: {last['with_cache_s']:.2f} s with cache, "
            f"{last['without_cache_s']:.2f} s without"
        )
    for c in data["method"].get("cross_checks", []):
        print("check      " + ", ".join(f"{k} {v}" for k, v in c.items()))
    save(a, data, a.name)
    return 0


def add(sub) -> None:
    p = sub.add_parser(
        "record",
        help="trap + growth + decode + mechanism (or --sections, e.g. prefill,batch) "
        "into one recording",
    )
    add_common(p, DEFAULT_MODEL, MODEL_HELP + "; used for decode and mechanism", saves=True)
    gguf = gguf_runtime()  # the runtime's own formats and default, not a list typed here
    add_model_args(
        p,
        kv_type=any_format,
        kv_help=f"mlx_lm: {mlx_kv_help()}; --runtime {gguf.name}: {', '.join(gguf.kv_formats)} "
        f"(default: {gguf.default_kv_format})",
    )
    p.add_argument(
        "--geometry",
        help="preset or config.json whose cache geometry the trap and growth probes use "
        "(default: the model's)",
    )
    p.add_argument(
        "--geometry-kv-format",
        type=kv_format,
        default="fp16",
        help="KV format for trap and growth",
    )
    p.add_argument("--tokens", type=count("tokens", 1, 100_000), default=1025)
    p.add_argument("--kv-contexts", type=contexts, default=contexts(DEFAULT_KV_CONTEXTS))
    p.add_argument("--contexts", type=contexts, default=contexts(DEFAULT_CONTEXTS))
    add_token_counts(p)
    p.add_argument(
        "--name",
        type=stem,
        help="file name of the recording, without .yaml (default: date + title)",
    )
    p.add_argument(
        "--check-context",
        type=count("--check-context", 1, MAX_LIVE_CONTEXT),
        help="also cross-check decode at this context: real prefill and mlx_lm generate_step",
    )
    p.add_argument(
        "--sections",
        type=sections,
        default=("trap", "growth", "decode", "mechanism"),
        help="what to measure, separated by commas: trap, growth, decode, mechanism (the default), "
        "prefill (a real prefill at each --prompts), batch (--batch-sizes sequences decoding "
        "together at each --batch-contexts, mlx_lm's batch caches)",
    )
    p.add_argument(
        "--prompts",
        type=contexts,
        default=contexts(DEFAULT_PROMPTS),
        help="prefill: prompt lengths",
    )
    p.add_argument(
        "--batch-sizes",
        type=batch_sizes,
        default=batch_sizes(DEFAULT_BATCHES),
        help=f"batch: sequences decoding together (1 to {MAX_BATCH})",
    )
    p.add_argument(
        "--batch-contexts",
        type=contexts,
        default=contexts(DEFAULT_BATCH_CONTEXTS),
        help="batch: tokens each sequence holds",
    )
    p.add_argument(
        "--runtime",
        default="mlx_lm",
        help="mlx_lm (default), or llama.cpp: decode vs context and prompt "
        "processing of --model FILE.gguf in llama-cpp-python "
        "(requirements-llamacpp.txt), its allocation lines kept",
    )
    p.add_argument(
        "--threads",
        type=count("--threads", 1, 256),
        default=os.cpu_count() or 1,
        help="llama.cpp: threads (default: every core)",
    )
    p.set_defaults(run=checked(_cmd_record))
