"""llama.cpp as a live runtime: a real GGUF, its allocation lines, decode ms/token against context, prompt processing.

`python -m kvcore record --runtime llama.cpp --model FILE.gguf` loads the file with llama-cpp-python (weights read,
no_alloc off), creates one context of `-c max(contexts) + steps` cells through llama_context_params, and keeps the
cache lines llama.cpp logs (held against `calc --runtime llama.cpp` for the same file: the method's cross-check).
Decode at context T is measured as llama-bench's `-d` does: the cache is cleared, T - 1 random tokens are
prefilled in `-b` batches (a real prefill), then `repeats` passes of `steps` single-token decodes are timed after
`warmup` untimed ones; the row's context is the first timed step's position + 1 (the cells it attends), its
ms/token the median of the passes' medians. Prompt processing times a prefill of P tokens from an empty cache,
`repeats` times (tokens/s = P / median). The model and its context open in kvcore/measure/llamacpp_session.py (as
`quality --runtime llama.cpp`'s do; llama_cpp is imported there, lazily).
"""

from __future__ import annotations

import random
import statistics
import time

from kvcore.errors import KvError
from kvcore.inputs import gguf
from kvcore.measure.llamacpp_session import (
    LLAMA_CPP_COMMIT,
    Context,
    Model,
    model_block,
    predicted,
    run_provenance,
    runtime_block,
)
from kvcore.measure.timing import pass_spread
from kvcore.recordings import store as recordings


class _Runner:
    """One model and one context, with the calls a sweep needs (clear, prefill, one decode step)."""

    def __init__(self, path: str, n_ctx: int, n_batch: int, threads: int, kv_format: str):
        self.model = Model(path)
        try:
            self.context = Context(
                self.model, kv_format, n_ctx=n_ctx, n_batch=n_batch, threads=threads
            )
        except KvError:
            self.model.close()
            raise
        self.lc, self.n_batch, self.n_vocab = self.model.lc, n_batch, self.model.n_vocab
        self.log = self.model.log + self.context.log
        self.rng = random.Random(0)

    def close(self) -> None:
        self.context.close()
        self.model.close()

    def _decode(self, tokens: list[int]) -> None:
        arr = (self.lc.llama_token * len(tokens))(*tokens)
        self.context.decode(self.lc.llama_batch_get_one(arr, len(tokens)))
        self.lc.llama_synchronize(self.context.ctx)

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
    runner = _Runner(path, n_ctx, n_batch, threads, kv_format)
    try:
        ours = predicted(geometry, kv_format, n_ctx, n_batch)["lines"]
        theirs = runner.context.cache_lines
        decode, prefill = [], []
        for i, context in enumerate(sorted(contexts)):
            runner.context.clear()
            runner.prefill(context - 1)
            for _ in range(warmup):
                runner.step_ms()
            passes = [[runner.step_ms() for _ in range(steps)] for _ in range(repeats)]
            # the spread of the pass medians, as the mlx_lm sweeps record it (one statistic under one name)
            ms, spread = pass_spread([statistics.median(p) for p in passes])
            decode.append(
                {
                    "context": context + warmup,
                    "depth": context - 1,
                    "tokens_per_s": round(1000 / ms, 3),
                    "ms_per_token": round(ms, 4),
                    **{
                        k: [round(m, 4) for m in v] if isinstance(v, list) else round(v, 4)
                        for k, v in spread.items()
                    },
                    "kv_format": kv_format,
                }
            )
            if progress:
                progress(i + 1, total, f"decode at {context:,}")
        for j, prompt in enumerate(sorted(prompts)):
            times = []
            for _ in range(repeats):
                runner.context.clear()
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
        "runtime": runtime_block(),
        "provenance": prov,
        "model": model_block(geometry, kv_format),
        "method": {
            "decode": "llama-bench -d style: cache cleared, a real prefill of depth random tokens in -b batches, "
            f"{warmup} untimed steps, {repeats} passes of {steps} timed single-token decodes; ms/token = "
            "median of the pass medians (min, max, quartiles: of the pass medians); context = depth + warm-up + 1 "
            "(the first timed step's cells)",
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
