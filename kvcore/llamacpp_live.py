"""llama.cpp as a live runtime: a real GGUF, its allocation lines, decode ms/token against context, prompt processing.

`python -m kvcore record --runtime llama.cpp --model FILE.gguf` loads the file with llama-cpp-python (weights read,
no_alloc off), creates one context of `-c max(contexts) + steps` cells through llama_context_params, and keeps the
cache lines llama.cpp logs (held against `calc --runtime llama.cpp` for the same file: the method's cross-check).
Decode at context T is measured as llama-bench's `-d` does: the cache is cleared, T - 1 random tokens are
prefilled in `-b` batches (a real prefill), then `repeats` passes of `steps` single-token decodes are timed after
`warmup` untimed ones; the row's context is the first timed step's position + 1 (the cells it attends), its
ms/token the median of the passes' medians. Prompt processing times a prefill of P tokens from an empty cache,
`repeats` times (tokens/s = P / median). llama_cpp is imported here only, lazily.
"""

from __future__ import annotations

import random
import statistics
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from . import recordings
from .errors import KvError
from .machine import provenance

LLAMA_CPP_COMMIT = "0c1e570"  # vendored by llama-cpp-python 0.3.36 (its vendor/llama.cpp)


def _version() -> str:
    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        return "not installed"


def run_provenance(command: str, log: list[str]) -> dict:
    """A llama.cpp run's provenance: the machine, llama.cpp's device (Metal when its log names it, else the CPU),
    the versions that ran (mlx not used), and its BLAS as llama.cpp's system info reports it."""
    prov = provenance(command)
    metal = any(
        "Metal" in line or "MTL" in line for line in log
    )  # llama.cpp names its Metal device
    prov["backend"], prov["device"] = (
        ("llama.cpp (Metal)", "gpu") if metal else ("llama.cpp (CPU)", "cpu")
    )
    prov["blas"] = system_blas()[1]
    prov["versions"] = {
        **{k: v for k, v in prov["versions"].items() if k in ("python", "kvcore")},
        "mlx": "not used",
        "mlx_lm": "not used",  # the schema names them for every measured run
        "llama_cpp_python": _version(),
        "llama.cpp": LLAMA_CPP_COMMIT,
    }
    return prov


def system_blas() -> tuple[str, str]:
    """(llama.cpp's system info line, its BLAS in words): a BLAS backend is named in that line when it is built in."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode().strip(" |")
    if "BLAS" in info:
        return info, "llama.cpp's BLAS backend (named in its system info)"
    return info, "none: llama.cpp's own CPU kernels (its system info names no BLAS backend)"


class _Runner:
    """One model and one context, with the calls a sweep needs (clear, prefill, one decode step)."""

    def __init__(self, path: str, n_ctx: int, n_batch: int, threads: int, type_k: str, type_v: str):
        import llama_cpp

        from . import llamacpp_probe as probe

        probe._install_log()
        probe._log.clear()
        self.lc = llama_cpp
        mp = llama_cpp.llama_model_default_params()
        mp.n_gpu_layers = 999  # Metal on a Mac; the CPU build ignores it
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), mp)
        if not self.model:
            raise KvError(
                f"llama.cpp could not load {Path(path).name}: {probe._error_line()}",
                "model_load",
                name=Path(path).name,
                detail=probe._error_line(),
            )
        cp = llama_cpp.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_batch, min(512, n_batch), 1
        cp.type_k, cp.type_v = probe.ggml_type(type_k), probe.ggml_type(type_v)
        cp.n_threads = cp.n_threads_batch = threads
        cp.swa_full = False  # llama-server's and llama-cli's default (the C default is true)
        self.ctx = llama_cpp.llama_init_from_model(self.model, cp)
        if not self.ctx:
            llama_cpp.llama_model_free(self.model)
            raise KvError(
                f"llama.cpp could not create a context for {Path(path).name}: {probe._error_line()}",
                "model_load",
                name=Path(path).name,
                detail=probe._error_line(),
            )
        self.log = list(probe._log)
        self.n_batch = n_batch
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model))
        self.rng = random.Random(0)

    def close(self) -> None:
        self.lc.llama_free(self.ctx)
        self.lc.llama_model_free(self.model)

    def clear(self) -> None:
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), True)

    def _decode(self, tokens: list[int]) -> None:
        arr = (self.lc.llama_token * len(tokens))(*tokens)
        if self.lc.llama_decode(self.ctx, self.lc.llama_batch_get_one(arr, len(tokens))) != 0:
            raise KvError(
                "llama.cpp's llama_decode failed (the context is full?).",
                "model_load",
                name="llama_decode",
                detail="llama_decode returned an error",
            )
        self.lc.llama_synchronize(self.ctx)

    def prefill(self, n: int) -> float:
        """Seconds to prefill n random tokens in -b batches."""
        start = time.perf_counter()
        for at in range(0, n, self.n_batch):
            self._decode(
                [self.rng.randrange(self.n_vocab) for _ in range(min(self.n_batch, n - at))]
            )
        return time.perf_counter() - start

    def step_ms(self) -> float:
        start = time.perf_counter()
        self._decode([self.rng.randrange(self.n_vocab)])
        return (time.perf_counter() - start) * 1000


def _preset_of(geometry) -> dict:
    """{"preset": name, "preset_note": ...} for the bundled preset whose llama.cpp layers, heads and vocabulary are the
    file's (so the decode fit has the model's geometry), or {} when none is."""
    from .geometry import preset_geometry, preset_names

    for name in preset_names():
        p = preset_geometry(name, geometry.runtime)
        if (p.layers, p.hidden_size, p.num_attention_heads, p.vocab_size) == (
            geometry.layers,
            geometry.hidden_size,
            geometry.num_attention_heads,
            geometry.vocab_size,
        ):
            return {
                "preset": name,
                "preset_note": f"the bundled preset whose layers, heads and vocabulary equal the file's",
            }
    return {}


def record(
    path: str,
    command: str,
    contexts: list[int],
    prompts: list[int],
    *,
    warmup: int = 2,
    steps: int = 8,
    repeats: int = 3,
    threads: int = 2,
    kv_format: str = "f16",
    n_batch: int = 2048,
    progress=None,
    title: str | None = None,
    label: str | None = None,
) -> dict:
    """A measured recording of llama.cpp running the GGUF at `path`: decode rows per context, prefill rows per
    prompt length, and in `method` the allocation lines llama.cpp logged with kvcore's own lines for the same file."""
    from . import calculator, gguf, llamacpp
    from .formulas import KvSpec

    geometry = gguf.geometry(path)
    limit = geometry.max_position_embeddings or max(contexts)
    if max(contexts) + warmup + steps * repeats > limit or max(prompts, default=0) > limit:
        raise KvError(
            f"{geometry.name} was trained for {limit:,} tokens: give contexts and prompts up to "
            f"{limit - warmup - steps * repeats:,}.",
            "gguf_context",
            model=geometry.name,
            limit=limit,
            most=limit - warmup - steps * repeats,
        )
    n_ctx = max([*contexts, *prompts]) + warmup + steps * repeats
    total = len(contexts) + len(prompts)
    runner = _Runner(path, n_ctx, n_batch, threads, kv_format, kv_format)
    try:
        ours = calculator.calculate(
            geometry,
            n_ctx,
            1,
            KvSpec(kv_format, kv_format),
            "gguf-file",
            llamacpp.Options(1, batch=n_batch, ubatch=min(512, n_batch)),
        )["log_lines"]
        theirs = [
            line
            for line in runner.log
            if line.startswith("llama_kv_cache: size =")
            or line.startswith("llama_memory_recurrent: size =")
        ]
        decode, prefill = [], []
        for i, context in enumerate(sorted(contexts)):
            runner.clear()
            runner.prefill(context - 1)
            for _ in range(warmup):
                runner.step_ms()
            passes = [[runner.step_ms() for _ in range(steps)] for _ in range(repeats)]
            medians = [statistics.median(p) for p in passes]
            q1, _, q3 = (
                statistics.quantiles([m for p in passes for m in p], n=4)
                if steps * repeats > 1
                else [medians[0]] * 3
            )
            ms = statistics.median(medians)
            decode.append(
                {
                    "context": context + warmup,
                    "depth": context - 1,
                    "tokens_per_s": round(1000 / ms, 3),
                    "ms_per_token": round(ms, 4),
                    "spread_ms": round(max(medians) - min(medians), 4),
                    "min_ms": round(min(medians), 4),
                    "max_ms": round(max(medians), 4),
                    "repeats": repeats,
                    "q1_ms": round(q1, 4),
                    "q3_ms": round(q3, 4),
                    "pass_ms": [round(m, 4) for m in medians],
                    "kv_format": kv_format,
                }
            )
            if progress:
                progress(i + 1, total, f"decode at {context:,}")
        for j, prompt in enumerate(sorted(prompts)):
            times = []
            for _ in range(repeats):
                runner.clear()
                times.append(runner.prefill(prompt))
            s = statistics.median(times)
            prefill.append(
                {
                    "prompt_tokens": prompt,
                    "tokens_per_s": round(prompt / s, 3),
                    "prefill_s": round(s, 5),
                    "min_s": round(min(times), 5),
                    "max_s": round(max(times), 5),
                    "spread_s": round(max(times) - min(times), 5),
                    "repeats": repeats,
                    "pass_s": [round(t, 5) for t in times],
                }
            )
            if progress:
                progress(len(contexts) + j + 1, total, f"prompt of {prompt:,}")
    finally:
        runner.close()
    prov = run_provenance(command, runner.log)
    data = {
        "schema": recordings.SCHEMA_VERSION,
        "kind": "measured",
        "title": title or f"llama.cpp run: decode and prompt processing — {geometry.name}",
        "label": label or f"llama.cpp {LLAMA_CPP_COMMIT}, {geometry.name}, {prov['machine']['os']}",
        "runtime": {
            "name": "llama.cpp",
            "version": f"llama-cpp-python {_version()} (llama.cpp {LLAMA_CPP_COMMIT})",
        },
        "provenance": prov,
        "model": {
            "name": geometry.name,
            "source": "GGUF file",
            "weights_format": "gguf-file",
            "kv_format": kv_format,
            "weights_bytes": geometry.file_weights.bytes,
            "weights_bytes_active": geometry.file_weights.active_bytes,
            **_preset_of(geometry),
            "weights_types": ", ".join(
                f"{t} {n} tensors" for t, n, _, _ in geometry.file_weights.by_type
            ),
        },
        "method": {
            "decode": "llama-bench -d style: cache cleared, a real prefill of depth random tokens in -b batches, "
            f"{warmup} untimed steps, {repeats} passes of {steps} timed single-token decodes; ms/token = "
            "median of the pass medians; context = depth + warm-up + 1 (the first timed step's cells)",
            "prefill": f"prompt processing from an empty cache, -b {n_batch}, -ub {min(512, n_batch)}, {repeats} runs, "
            "tokens/s = prompt / median seconds",
            "threads": threads,
            "n_ctx": n_ctx,
            "swa_full": False,
            "allocation_lines": theirs,
            "cross_checks": [
                {
                    "what": "llama.cpp's cache lines vs calc --runtime llama.cpp",
                    "agree": theirs == ours,
                }
            ],
        },
        "sections": {"decode": decode, "prefill": prefill},
    }
    return recordings.validate(data)
