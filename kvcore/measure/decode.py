"""Live measurement on real mlx_lm caches, time: decode ms/token vs context (shuffled passes, a fresh cache per
visit, medians with their spread), its cross-checks (a real prefill's K/V, mlx_lm's generate_step), and decode
with vs without a cache. mlx is imported inside functions only; progress and stop as in kvcore.measure.probes.

Example: decode_sweep(get_model("cpu-demo"), [256, 1024])[0] -> {"context": 256, "ms_per_token": ..., ...}
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

from kvcore.measure.caches import fill_caches, guard, kv_spec, make_caches
from kvcore.measure.live_model import LiveModel
from kvcore.measure.progress import Progress, StopCheck, Ticker
from kvcore.measure.timing import SweepOptions, pass_spread, timed_passes, timed_steps
from kvcore.memory.formats import mlx_cache
from kvcore.memory.formulas import kv_bytes

# ---------------------------------------------------------------- decode


def _step(model: LiveModel, caches: list, token):
    """One decode step: logits for `token` [1, 1], greedy next token, evaluated."""
    import mlx.core as mx

    logits = model.module(token, cache=caches)
    nxt = mx.argmax(logits[:, -1, :], axis=-1, keepdims=True)
    mx.eval(nxt)
    return nxt


def time_steps(
    model: LiveModel, caches: list, warmup: int, steps: int, ticker: Ticker | None = None
) -> list[float]:
    """ms of each of `steps` timed decode steps after `warmup` untimed ones (mx.eval every step)."""
    import mlx.core as mx

    token = mx.array([[7]])

    def step() -> None:
        nonlocal token
        token = _step(model, caches, token)

    return timed_steps(step, warmup, steps, ticker)


def paired_steps(
    model: LiveModel, caches_a: list, caches_b: list, warmup: int, steps: int, b_first: bool = False
) -> tuple[list[float], list[float]]:
    """ms of each timed decode step on two caches, their steps interleaved (A B, B A, A B, ... after
    `warmup` untimed pairs), so that a busy machine's drift lands on both alike: an A/B comparison
    that a sequential one (all of A, then all of B) turns into a comparison of two moments.

    Example: paired_steps(model, synthetic, restored, 3, 16) -> ([16 ms values], [16 ms values]).
    """
    import mlx.core as mx

    tokens = {"a": mx.array([[7]]), "b": mx.array([[7]])}
    caches = {"a": caches_a, "b": caches_b}
    times: dict[str, list[float]] = {"a": [], "b": []}
    for i in range(warmup + steps):
        for arm in ("b", "a") if (i % 2 == 0) == b_first else ("a", "b"):
            t0 = time.perf_counter()
            tokens[arm] = _step(model, caches[arm], tokens[arm])
            if i >= warmup:
                times[arm].append((time.perf_counter() - t0) * 1000)
    return times["a"], times["b"]


def prefill(
    model: LiveModel, caches: list, tokens: int, chunk: int = 2048, ticker: Ticker | None = None
) -> None:
    """A real prefill of `tokens` random token ids, in generate_step's chunks, evaluated chunk by chunk."""
    import mlx.core as mx

    ids = mx.random.randint(0, model.geometry.vocab_size, (1, tokens), key=mx.random.key(1))
    for start in range(0, tokens, chunk):
        model.module(ids[:, start : start + chunk], cache=caches)
        mx.eval([c.state for c in caches])
        if ticker:
            ticker.check()


def fill_dtype(model: LiveModel, kv_format: str) -> str:
    """Plain KV formats store their own dtype; quantized caches quantize the model's activations."""
    return model.dtype if mlx_cache(kv_format)[0] == "QuantizedKVCache" else kv_format


def _decode_guard(model: LiveModel, max_context: int, kv_format: str, steps: int) -> None:
    spec = kv_spec(kv_format, model.dtype)
    guard(
        model.weights_bytes(),
        kv_bytes(model.geometry, 1, spec),
        max_context + steps,
        model=model.name,
    )


def decode_sweep(
    model: LiveModel,
    contexts: list[int],
    kv_format: str | None = None,
    options: SweepOptions = SweepOptions(),
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
    on_rows: Callable[[list[dict]], None] | None = None,
) -> list[dict]:
    """ms/token vs context: each context's cache filled synthetically with T+1 random K/V rows
    (evaluated before timing, so the first step pays no reallocation), `warmup` untimed steps, the
    median of `steps` timed steps. `repeats` passes over the contexts, each pass in its own shuffled
    order (live_timing.timed_passes), a fresh cache every visit. Each row gives the median of its
    per-pass medians (ms_per_token), their min, max and spread (max - min), their interquartile range
    (q1_ms, q3_ms) and the per-pass medians themselves (pass_ms, in pass order).
    on_rows(rows) is called after every visit with the rows so far (a live page shows them as they come).
    """
    kv_format = kv_format or model.dtype
    contexts = sorted(set(contexts))
    o = options
    _decode_guard(model, contexts[-1], kv_format, o.warmup + o.steps)
    ticker = Ticker(o.repeats * len(contexts), progress, should_stop)
    medians = timed_passes(
        contexts,
        o,
        ticker,
        lambda context: _synthetic_ms(model, context, kv_format, o.warmup, o.steps, ticker),
        lambda medians: _decode_rows(medians, kv_format),
        lambda context: f"decode: {context:,} tokens",
        on_rows,
    )
    return _decode_rows(medians, kv_format)


def _decode_rows(medians: dict[int, list[float]], kv_format: str) -> list[dict]:
    rows = []
    for context, ms_list in medians.items():
        if not ms_list:
            continue
        ms, spread = pass_spread(ms_list)
        rows.append(
            {
                "context": context,
                "ms_per_token": ms,
                "tokens_per_s": 1000 / ms,
                **spread,
                "kv_format": kv_format,
            }
        )
    return rows


def synthetic_ms(
    model: LiveModel,
    context: int,
    kv_format: str,
    warmup: int,
    steps: int,
    ticker: Ticker | None = None,
    kv: list | None = None,
) -> float:
    """Median ms/token after writing context + 1 rows of K/V into fresh caches (random, or `kv[i]` =
    (K, V) per layer, e.g. a real prefill's saved K/V); the guard is checked first; frees the cache.
    """
    _decode_guard(model, context, kv_format, warmup + steps)
    return _synthetic_ms(model, context, kv_format, warmup, steps, ticker, kv)


def _synthetic_ms(model, context, kv_format, warmup, steps, ticker=None, kv=None) -> float:
    import mlx.core as mx

    caches = make_caches(model, kv_format)
    fill_caches(caches, model.geometry, context + 1, fill_dtype(model, kv_format), kv=kv)
    ms = statistics.median(time_steps(model, caches, warmup, steps, ticker))
    del caches
    mx.clear_cache()
    return ms


def real_prefill_check(
    model: LiveModel,
    context: int,
    kv_format: str | None = None,
    warmup: int = 3,
    steps: int = 16,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
) -> dict:
    """Cross-check at one context: ms/token after a synthetic fill vs after a real prefill."""
    kv_format = kv_format or model.dtype
    ticker = Ticker(2, progress, should_stop)
    synthetic = synthetic_ms(model, context, kv_format, warmup, steps, ticker)
    ticker.tick(f"synthetic fill at {context:,}")
    caches = make_caches(model, kv_format)
    t0 = time.perf_counter()
    prefill(model, caches, context + 1, ticker=ticker)
    prefill_s = time.perf_counter() - t0
    real = statistics.median(time_steps(model, caches, warmup, steps, ticker))
    ticker.tick(f"real prefill at {context:,}")
    return {
        "check": "real prefill",
        "context": context,
        "synthetic_ms": synthetic,
        "real_prefill_ms": real,
        "ratio": real / synthetic,
        "prefill_s": prefill_s,
    }


def generate_step_ms(
    model: LiveModel,
    context: int,
    kv_format: str | None = None,
    warmup: int = 3,
    steps: int = 16,
    ticker: Ticker | None = None,
) -> float:
    """Median ms/token of mlx_lm's own generate_step after the same synthetic fill as the harness
    (generate_step adds the prompt token itself, so `context` rows are written): the gaps between
    yielded tokens after `warmup` untimed ones. Frees the cache.
    """
    import mlx.core as mx
    from mlx_lm.generate import generate_step

    kv_format = kv_format or model.dtype
    _decode_guard(model, context, kv_format, warmup + steps)
    caches = make_caches(model, kv_format)
    fill_caches(caches, model.geometry, context, fill_dtype(model, kv_format))
    stamps = []
    for _ in generate_step(
        mx.array([7]), model.module, prompt_cache=caches, max_tokens=warmup + steps + 1
    ):
        stamps.append(time.perf_counter())
        if ticker:
            ticker.check()
    del caches
    mx.clear_cache()
    return statistics.median([(b - a) * 1000 for a, b in zip(stamps, stamps[1:])][warmup:])


def generate_step_check(
    model: LiveModel,
    context: int,
    kv_format: str | None = None,
    warmup: int = 3,
    steps: int = 16,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
) -> dict:
    """Cross-check at one context: this harness's ms/token vs mlx_lm's own generate_step (same
    synthetic fill; generate_step times the gap between yielded tokens).
    """
    kv_format = kv_format or model.dtype
    ticker = Ticker(2, progress, should_stop)
    harness = synthetic_ms(model, context, kv_format, warmup, steps, ticker)
    ticker.tick(f"harness at {context:,}")
    ours = generate_step_ms(model, context, kv_format, warmup, steps, ticker)
    ticker.tick(f"generate_step at {context:,}")
    return {
        "check": "generate_step",
        "context": context,
        "harness_ms": harness,
        "generate_step_ms": ours,
        "ratio": harness / ours,
    }


# ---------------------------------------------------------------- mechanism


def mechanism_probe(
    model: LiveModel,
    new_tokens: int = 64,
    prompt_tokens: int = 64,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
    prompt_ids: list[int] | None = None,
) -> list[dict]:
    """N new tokens with the cache (prefill once, then one token per step) vs without it (every
    step recomputes the whole prefix). Same token sequence both ways; per-step ms and running totals.
    A real model (with a tokenizer) starts from `prompt_ids` (real text) and each row carries its new token's text.
    """
    import mlx.core as mx

    if prompt_ids is not None:
        prompt_tokens = len(prompt_ids)
    _decode_guard(model, prompt_tokens + new_tokens, model.dtype, 1)
    ticker = Ticker(2 * new_tokens, progress, should_stop)
    prompt = (
        mx.array([prompt_ids])
        if prompt_ids is not None
        else mx.random.randint(
            0, model.geometry.vocab_size, (1, prompt_tokens), key=mx.random.key(2)
        )
    )
    mx.eval(prompt)
    caches, seq, with_ms = make_caches(model, model.dtype), prompt, []
    token = prompt
    for i in range(new_tokens):
        t0 = time.perf_counter()
        token = _step(model, caches, token)
        with_ms.append((time.perf_counter() - t0) * 1000)
        seq = mx.concatenate([seq, token], axis=1)
        ticker.tick(f"with cache: token {i + 1}/{new_tokens}")
    mx.eval(seq)
    without_ms = []
    for i in range(new_tokens):
        t0 = time.perf_counter()
        logits = model.module(seq[:, : prompt_tokens + i])
        mx.eval(mx.argmax(logits[:, -1, :], axis=-1))
        without_ms.append((time.perf_counter() - t0) * 1000)
        ticker.tick(f"without cache: token {i + 1}/{new_tokens}")
    rows, w, wo = [], 0.0, 0.0
    generated = seq[0, prompt_tokens:].tolist()
    for i, (a, b) in enumerate(zip(with_ms, without_ms)):
        w, wo = w + a / 1000, wo + b / 1000
        rows.append(
            {
                "new_tokens": i + 1,
                "with_cache_step_ms": a,
                "without_cache_step_ms": b,
                "with_cache_s": w,
                "without_cache_s": wo,
            }
        )
        if model.tokenizer is not None:
            rows[-1]["token"] = model.tokenizer.piece(generated[i])
    if model.tokenizer is not None and rows and prompt_ids is not None:
        rows[0]["prompt"] = model.tokenizer.decode(prompt_ids)
    return rows
