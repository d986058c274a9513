"""Live measurement, part 3: prompt processing and batched decode, on mlx_lm's own model classes and caches.

* prefill_sweep: a real prefill (random token ids through the model, in mlx_lm generate's 2,048-token chunks, each
  chunk evaluated) of each prompt length into fresh caches; seconds and prompt tok/s. Attention over a prompt of T
  tokens costs O(T^2) (kvcore.timing.estimate.prefill_flops): at long prompts tok/s falls.
* batch_sweep: B sequences decoding together. Each sequence's cache (make_prompt_cache) is filled with context + 1
  random K/V rows, then the B caches are merged the way mlx_lm's BatchGenerator merges them (`cache.merge`: a
  KVCache becomes a BatchKVCache), and one decode step feeds B tokens [B, 1]: ms per step, total tok/s (B tokens a
  step) and per-sequence tok/s (one token a step).

Both visit their points in a fresh shuffled order each pass and give the median over passes with its spread
(kvcore.measure.timing.timed_passes), as kvcore.measure.decode.decode_sweep does. mlx is imported inside the functions only.
Example: prefill_sweep(get_model("cpu-demo", "random", "fp32"), [256, 1024, 4096], SweepOptions(repeats=2))
         -> [{"prompt_tokens": 256, "prefill_s": ..., "tokens_per_s": ...}, ...]
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

from kvcore.errors import KvError
from kvcore.measure.caches import fill_caches, guard, kv_spec, make_caches
from kvcore.measure.decode import fill_dtype, prefill
from kvcore.measure.live_model import LiveModel
from kvcore.measure.progress import Progress, StopCheck, Ticker
from kvcore.measure.timing import (
    SWEEP_ORDER,
    SWEEP_SPREAD,
    SweepOptions,
    pass_spread,
    quartiles,
    timed_passes,
    timed_steps,
)
from kvcore.memory.formats import mlx_cache
from kvcore.memory.formulas import PREFILL_STEP, kv_bytes

PREFILL_CHUNK = PREFILL_STEP  # mlx_lm generate's prefill_step_size, kvcore's one home for it (kvcore.memory.formulas)
PREFILL_OPTIONS = SweepOptions(repeats=2)  # a prefill has no steps: one untimed warm-up prefill
BATCH_OPTIONS = SweepOptions(warmup=2, steps=8, repeats=2)
PREFILL_METHOD = {
    "fill": "real prefill: random token ids through the model into fresh caches",
    "chunk": f"{PREFILL_CHUNK} tokens per forward pass (mlx_lm generate's prefill_step_size), "
    "mx.eval of the caches after each",
    "timer": "time.perf_counter around the whole prompt",
    "warmup_run": "one untimed prefill of the shortest prompt first",
    "order": SWEEP_ORDER,
    "statistic": "median over passes",
    "spread": "min_s/max_s and q1_s/q3_s of the per-pass times in pass_s",
}
BATCH_METHOD = {
    "fill": "synthetic: random K/V for context + 1 rows in each sequence's cache (make_prompt_cache), "
    "then merged like mlx_lm's BatchGenerator (cache.merge: KVCache -> BatchKVCache)",
    "step": "one forward of B tokens [B, 1] on the merged caches, greedy next tokens, mx.eval every step",
    "order": SWEEP_ORDER,
    "statistic": "median of steps per visit, median over passes",
    "spread": SWEEP_SPREAD,
    "total": "tokens_per_s_total = B x 1000 / ms_per_step; tokens_per_s = 1000 / ms_per_step (one sequence)",
}


def _quiet_clear() -> None:
    import mlx.core as mx

    mx.clear_cache()


# ---------------------------------------------------------------- prefill


def prefill_seconds(
    model: LiveModel, prompt: int, kv_format: str, chunk: int = PREFILL_CHUNK
) -> float:
    """Seconds of one real prefill of `prompt` random tokens into fresh caches (the caches freed afterwards)."""
    caches = make_caches(model, kv_format)
    t0 = time.perf_counter()
    prefill(model, caches, prompt, chunk)
    seconds = time.perf_counter() - t0
    del caches
    _quiet_clear()
    return seconds


def prefill_sweep(
    model: LiveModel,
    prompts: list[int],
    kv_format: str | None = None,
    options: SweepOptions = PREFILL_OPTIONS,
    chunk: int = PREFILL_CHUNK,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
    on_rows: Callable[[list[dict]], None] | None = None,
) -> list[dict]:
    """Prompt processing against prompt length: per prompt the median seconds over `options.repeats`
    passes, prompt tok/s (prompt / median seconds), the spread. on_rows(rows) after every visit (a
    live page shows them as they come)."""
    kv_format = kv_format or model.dtype
    prompts = sorted(set(prompts))
    guard(
        model.weights_bytes(),
        kv_bytes(model.geometry, 1, kv_spec(kv_format, model.dtype)),
        prompts[-1],
        model=model.name,
    )
    ticker = Ticker(options.repeats * len(prompts) + 1, progress, should_stop)
    prefill_seconds(model, prompts[0], kv_format, chunk)  # first use: kernels and buffers, untimed
    ticker.tick(f"prefill: warm-up ({prompts[0]:,} tokens)")
    times = timed_passes(
        prompts,
        options,
        ticker,
        lambda prompt: prefill_seconds(model, prompt, kv_format, chunk),
        lambda times: _prefill_rows(times, kv_format),
        lambda prompt: f"prefill: {prompt:,} tokens",
        on_rows,
    )
    return _prefill_rows(times, kv_format)


def _prefill_rows(times: dict[int, list[float]], kv_format: str) -> list[dict]:
    rows = []
    for prompt, seconds in times.items():
        if seconds:
            q1, s, q3 = quartiles(seconds)
            rows.append(
                {
                    "prompt_tokens": prompt,
                    "prefill_s": s,
                    "tokens_per_s": prompt / s,
                    "min_s": min(seconds),
                    "max_s": max(seconds),
                    "q1_s": q1,
                    "q3_s": q3,
                    "spread_s": max(seconds) - min(seconds),
                    "pass_s": list(seconds),
                    "repeats": len(seconds),
                    "batch": 1,
                }
            )
    return rows


# ---------------------------------------------------------------- batched decode


def batch_caches(model: LiveModel, batch: int, context: int, kv_format: str) -> list:
    """`batch` sequences' caches, each filled with context + 1 random K/V rows (a different seed per sequence),
    merged into one batch cache per layer the way mlx_lm's BatchGenerator merges them (cache.merge)."""
    if mlx_cache(kv_format)[0] != "KVCache":
        raise KvError(
            f"mlx_lm batches only plain K/V caches (its batch caches have no quantized form): "
            f"--kv-format {kv_format} cannot be batched; use fp16, bf16 or fp32.",
            "live_batch_format",
            format=kv_format,
        )
    per_sequence = []
    dtype = fill_dtype(model, kv_format)
    for b in range(batch):
        caches = make_caches(model, kv_format)
        if not all(hasattr(c, "merge") for c in caches):
            kinds = sorted({type(c).__name__ for c in caches if not hasattr(c, "merge")})
            raise KvError(
                f"{model.name}: mlx_lm cannot merge its {', '.join(kinds)} into a batch.",
                "live_batch_cache",
                model=model.name,
                caches=", ".join(kinds),
            )
        fill_caches(
            caches, model.geometry, context + 1, dtype, kv=_seeded_kv(model, context + 1, dtype, b)
        )
        per_sequence.append(caches)
    merged = [
        type(per_sequence[0][i]).merge([c[i] for c in per_sequence])
        for i in range(len(per_sequence[0]))
    ]
    import mlx.core as mx

    mx.eval([c.state for c in merged])
    return merged


def _seeded_kv(model: LiveModel, tokens: int, dtype: str, sequence: int) -> list:
    from kvcore.measure.caches import random_kv

    return [
        random_kv(layer, tokens, dtype, seed=1000 * sequence + i)
        for i, layer in enumerate(model.geometry.layers)
    ]


def batch_step_ms(
    model: LiveModel,
    caches: list,
    batch: int,
    warmup: int,
    steps: int,
    ticker: Ticker | None = None,
) -> list[float]:
    """ms of each of `steps` timed decode steps of all `batch` sequences together, after `warmup`
    untimed ones."""
    import mlx.core as mx

    tokens = mx.full((batch, 1), 7, dtype=mx.int32)

    def step() -> None:
        nonlocal tokens
        logits = model.module(tokens, cache=caches)
        tokens = mx.argmax(logits[:, -1, :], axis=-1, keepdims=True)
        mx.eval(tokens)

    return timed_steps(step, warmup, steps, ticker)


def batch_sweep(
    model: LiveModel,
    batches: list[int],
    contexts: list[int],
    kv_format: str | None = None,
    options: SweepOptions = BATCH_OPTIONS,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
    on_rows: Callable[[list[dict]], None] | None = None,
) -> list[dict]:
    """Decode of B sequences at once against B, at each context: per (B, context) the median over
    passes of the median step, total tok/s (B per step) and per-sequence tok/s; the spread over
    passes."""
    kv_format = kv_format or model.dtype
    o = options
    batches, contexts = sorted(set(batches)), sorted(set(contexts))
    per_token = kv_bytes(model.geometry, 1, kv_spec(kv_format, model.dtype))
    # the per-sequence caches and the merged one live together while merging: twice the batch's KV
    guard(
        model.weights_bytes(),
        2 * batches[-1] * per_token,
        contexts[-1] + o.warmup + o.steps,
        model=model.name,
    )
    points = [(b, c) for c in contexts for b in batches]
    ticker = Ticker(o.repeats * len(points), progress, should_stop)

    def visit(point: tuple[int, int]) -> float:
        caches = batch_caches(model, *point, kv_format)
        ms = statistics.median(batch_step_ms(model, caches, point[0], o.warmup, o.steps, ticker))
        del caches
        _quiet_clear()
        return ms

    medians = timed_passes(
        points,
        o,
        ticker,
        visit,
        lambda medians: _batch_rows(medians, kv_format),
        lambda point: f"batch {point[0]} at {point[1]:,} tokens",
        on_rows,
    )
    return _batch_rows(medians, kv_format)


def _batch_rows(medians: dict[tuple[int, int], list[float]], kv_format: str) -> list[dict]:
    rows = []
    for (b, c), ms_list in sorted(medians.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        if ms_list:
            ms, spread = pass_spread(ms_list)
            rows.append(
                {
                    "batch": b,
                    "context": c,
                    "ms_per_step": ms,
                    "tokens_per_s_total": b * 1000 / ms,
                    "tokens_per_s": 1000 / ms,
                    **spread,
                }
            )
    return rows
