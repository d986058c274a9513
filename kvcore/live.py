"""Live measurement on real mlx_lm caches: the `.nbytes` trap, KV growth, decode time vs context,
and decode with vs without a cache. mlx is imported inside functions only.

Every probe returns plain data (a list of dicts) and takes `progress(done, total, text)` and
`should_stop()`; a stop raises Interrupted, so a stopped run never becomes a recording.
Example: trap_probe("llama-3.2-1b")[...] -> {"cache": "KVCache", "pattern": "token by token",
    "tokens": 257, "capacity": 512, "nbytes": 1048576, "used_bytes": 526336, ...}
"""

from __future__ import annotations

import statistics
import time
from typing import Callable

from .errors import KvError
from .formulas import KvSpec, bytes_per_token, kv_bytes, prefill_chunks
from .geometry import Geometry, parse_config
from .units import MIB
from .live_models import (LiveModel, fill_caches, guard, kv_spec, make_caches, random_kv, resolve_config, used_bytes)

Progress = Callable[[int, int, str], None]
StopCheck = Callable[[], bool]
ROTATING_MAX = 512  # RotatingKVCache(max_size=512, keep=4), as mlx_lm builds it for a 512-token window (https://github.com/ml-explore/mlx-lm/blob/v0.32.2/mlx_lm/models/cache.py)
PATTERNS: dict[str, list[list[int]]] = {
    "KVCache": [[257], [256, 1], [1, 256], [300, 300], [1000], [2048, 2047, 1], [2048, 2047, 1, 1], [500] * 8],
    "QuantizedKVCache": [[257], [1, 256], [300, 300], [1000]],
    "RotatingKVCache": [[1000], [1000, 1], [300, 300]],
}


class Interrupted(KvError):
    """The run was stopped (stop button or Ctrl-C): nothing is saved."""

    def __init__(self, message: str = "stopped before the end: nothing was saved."):
        super().__init__(message)


def _noop(*_):
    return None


def _never() -> bool:
    return False


class _Ticker:
    """progress/should_stop bookkeeping shared by the probes."""

    def __init__(self, total: int, progress: Progress | None, should_stop: StopCheck | None):
        self.done, self.total = 0, max(1, total)
        self.progress, self.should_stop = progress or _noop, should_stop or _never

    def check(self) -> None:
        if self.should_stop():
            raise Interrupted()

    def tick(self, text: str, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        self.progress(self.done, self.total, text)
        self.check()


def resolve_geometry(model: str | Geometry) -> Geometry:
    """A probe's geometry: a Geometry as it is, else a preset name, config.json or model folder (live_models.resolve_config)."""
    if isinstance(model, Geometry):
        return model
    name, config = resolve_config(model)
    return parse_config(config, name)


def _attention_layer(geometry: Geometry):
    layer = next((l for l in geometry.layers if l.kind == "full"), None)
    if layer is None:
        raise KvError(f"{geometry.name} has no full-attention layer to drive a KVCache with.")
    return layer


# ---------------------------------------------------------------- the .nbytes trap


def _new_cache(cache_class: str, kv_bits: int):
    from mlx_lm.models import cache as c

    if cache_class == "KVCache":
        return c.KVCache()
    if cache_class == "QuantizedKVCache":
        return c.QuantizedKVCache(group_size=64, bits=kv_bits)
    if cache_class == "RotatingKVCache":
        return c.RotatingKVCache(max_size=ROTATING_MAX, keep=4)
    raise KvError(f"Unknown cache class {cache_class!r}; valid: {', '.join(PATTERNS)}.")


def _trap_row(cache, cache_class: str, pattern: str, layer, spec: KvSpec, layers: int) -> dict:
    tokens = cache.offset
    held = min(tokens, ROTATING_MAX) if cache_class == "RotatingKVCache" else tokens
    nbytes, used = cache.nbytes, used_bytes(cache)
    theory = held * bytes_per_token(layer, spec)
    capacity = cache.keys[0].shape[2] if cache_class == "QuantizedKVCache" else cache.keys.shape[2]
    return {"cache": cache_class, "pattern": pattern, "tokens": tokens, "capacity": capacity, "layers": layers,
            "nbytes": nbytes, "used_bytes": used, "theory_bytes": theory,
            "allocated_mib": layers * nbytes / MIB, "used_mib": layers * used / MIB, "theory_mib": layers * theory / MIB}


def _token_checkpoint(t: int) -> bool:
    return t == 1 or t % 32 == 0 or t % 256 in (1, 255)


def trap_probe(model: str | Geometry = "llama-3.2-1b", dtype: str = "fp16", tokens: int = 1025,
               cache_classes: tuple[str, ...] = ("KVCache", "QuantizedKVCache", "RotatingKVCache"), kv_bits: int = 8,
               progress: Progress | None = None, should_stop: StopCheck | None = None) -> list[dict]:
    """Drive the real mlx_lm cache classes with random tensors of one layer of `model`'s geometry:
    token by token up to `tokens`, then the prefill-chunk patterns. One row per checkpoint with
    per-layer bytes (nbytes = allocated, used from keys_and_values(), theory from the formula) and
    model totals in MiB (x the number of full-attention layers). No model weights are needed.
    """
    import mlx.core as mx

    geometry = resolve_geometry(model)
    layer = _attention_layer(geometry)
    layers = geometry.count("full")
    if "QuantizedKVCache" in cache_classes and layer.k_dim % 64:
        cache_classes = tuple(c for c in cache_classes if c != "QuantizedKVCache")
    ticker = _Ticker(sum(tokens + len(PATTERNS[c]) for c in cache_classes), progress, should_stop)
    rows = []
    for cache_class in cache_classes:
        spec = kv_spec(f"mlx-q{kv_bits}" if cache_class == "QuantizedKVCache" else dtype, dtype)
        k1, v1 = random_kv(layer, 1, dtype)
        cache = _new_cache(cache_class, kv_bits)
        for t in range(1, tokens + 1):
            cache.update_and_fetch(k1, v1)
            mx.eval(cache.state[:2])
            if _token_checkpoint(t) or t == tokens:
                rows.append(_trap_row(cache, cache_class, "token by token", layer, spec, layers))
            if t % 64 == 0:
                ticker.tick(f"{cache_class}: token {t:,}", 64)
        ticker.tick(f"{cache_class}: token {tokens:,}", tokens % 64)
        for updates in PATTERNS[cache_class]:
            cache = _new_cache(cache_class, kv_bits)
            for n in updates:
                k, v = random_kv(layer, n, dtype)
                cache.update_and_fetch(k, v)
                mx.eval(cache.state[:2])
            label = f"{updates[0]} x {len(updates)}" if len(set(updates)) == 1 and len(updates) > 2 else " + ".join(map(str, updates))
            rows.append(_trap_row(cache, cache_class, label, layer, spec, layers))
            ticker.tick(f"{cache_class}: {label}")
    return rows


def cache_classes(model: str | dict) -> list[dict]:
    """The cache mlx_lm's make_prompt_cache returns for a config, one row per layer, without any
    weights (the module is built lazily and never evaluated).
    """
    from mlx_lm.models.cache import make_prompt_cache
    from mlx_lm.utils import _get_classes

    name, config = resolve_config(model) if isinstance(model, str) else ("config", model)
    try:
        model_class, args_class = _get_classes(config)
        module = model_class(args_class.from_dict(config))
    except (ValueError, KeyError, TypeError) as e:
        raise KvError(f"mlx_lm cannot build {name!r} from its config: {e}.", "model_build", name=name, detail=str(e)) from None
    return [{"layer": i, "cache": type(c).__name__, "max_size": getattr(c, "max_size", None)}
            for i, c in enumerate(make_prompt_cache(module))]


def cache_geometry(model: LiveModel, kv_format: str | None = None) -> list[dict]:
    """The caches mlx_lm makes for this model, after one real token: class, kv_heads, head_dim, dtype per layer."""
    import mlx.core as mx

    caches = make_caches(model, kv_format or model.dtype)
    logits = model.module(mx.array([[1]]), cache=caches)
    mx.eval(logits)
    rows = []
    for i, cache in enumerate(caches):
        quantized = hasattr(cache, "bits")
        keys = cache.keys[0] if quantized else cache.keys  # quantized: (packed uint32, scales, biases)
        head_dim = keys.shape[3] * 32 // cache.bits if quantized else keys.shape[3]
        dtype = cache.keys[1].dtype if quantized else keys.dtype
        rows.append({"layer": i, "cache": type(cache).__name__, "kv_heads": keys.shape[1], "head_dim": head_dim,
                     "capacity": keys.shape[2], "dtype": str(dtype).replace("mlx.core.", ""),
                     "bits": getattr(cache, "bits", None), "max_size": getattr(cache, "max_size", None)})
    return rows


# ---------------------------------------------------------------- growth


def _layer_caches(geometry: Geometry, kv_format: str, dtype: str) -> list:
    from mlx_lm.models import cache as c

    out = []
    for layer in geometry.layers:
        if layer.kind == "sliding":
            out.append(c.RotatingKVCache(max_size=layer.window))
        elif kv_format.startswith("mlx-q"):
            out.append(c.QuantizedKVCache(group_size=64, bits=int(kv_format[5:])))
        else:
            out.append(c.KVCache())
    return out


def growth_probe(model: str | Geometry = "llama-3.2-1b", contexts: list[int] | None = None, kv_format: str = "fp16",
                 dtype: str = "fp16", progress: Progress | None = None, should_stop: StopCheck | None = None) -> list[dict]:
    """KV memory vs context on real caches filled the way generate_step prefills (2048-token chunks):
    allocated (.nbytes), used (keys_and_values()), theory (formula), the allocator's view
    (mx.get_active_memory delta) and the transient peak of the next token (a 256-boundary copy
    when the context is a multiple of 256). Random tensors, no weights.
    """
    import mlx.core as mx

    geometry = resolve_geometry(model)
    if any(l.kind in ("mla", "linear") for l in geometry.layers):
        raise KvError(f"The growth probe drives KVCache layers; {geometry.name} has MLA or linear layers.")
    contexts = sorted(contexts or [1024, 2048, 4096, 8192, 16384, 32768])
    guard(0, kv_bytes(geometry, 1, kv_spec(kv_format, dtype)), contexts[-1], task="growth")
    ticker = _Ticker(len(contexts), progress, should_stop)
    rows = []
    for context in contexts:
        rows.append(_growth_point(geometry, context, kv_format, dtype, ticker))
        mx.clear_cache()
        ticker.tick(f"KV growth: {context:,} tokens")
    return rows


def _growth_point(geometry: Geometry, context: int, kv_format: str, dtype: str, ticker: _Ticker) -> dict:
    import mlx.core as mx

    ticker.check()
    mx.clear_cache()
    base = mx.get_active_memory()
    caches = _layer_caches(geometry, kv_format, dtype)
    for n in prefill_chunks(context):
        chunk = [random_kv(layer, n, dtype, seed=n) for layer in geometry.layers]
        for cache, (k, v) in zip(caches, chunk):
            cache.update_and_fetch(k, v)
        mx.eval([c.state[:2] for c in caches])
        del chunk, k, v
        ticker.check()
    mx.clear_cache()
    active = mx.get_active_memory() - base
    allocated, used = sum(c.nbytes for c in caches), sum(used_bytes(c) for c in caches)
    one = [random_kv(layer, 1, dtype) for layer in geometry.layers]
    mx.eval(one)
    mx.reset_peak_memory()
    for cache, (k, v) in zip(caches, one):
        cache.update_and_fetch(k, v)
    mx.eval([c.state[:2] for c in caches])
    peak = max(mx.get_peak_memory(), mx.get_active_memory()) - base
    theory = kv_bytes(geometry, context, kv_spec(kv_format, dtype))
    return {"context": context, "allocated_bytes": allocated, "used_bytes": used, "theory_bytes": theory,
            "allocated_mib": allocated / MIB, "used_mib": used / MIB, "theory_mib": theory / MIB,
            "active_mib": active / MIB, "peak_mib": peak / MIB, "kv_format": kv_format}


# ---------------------------------------------------------------- decode


def _step(model: LiveModel, caches: list, token):
    """One decode step: logits for `token` [1, 1], greedy next token, evaluated."""
    import mlx.core as mx

    logits = model.module(token, cache=caches)
    nxt = mx.argmax(logits[:, -1, :], axis=-1, keepdims=True)
    mx.eval(nxt)
    return nxt


def time_steps(model: LiveModel, caches: list, warmup: int, steps: int, ticker: _Ticker | None = None) -> list[float]:
    """ms of each of `steps` timed decode steps after `warmup` untimed ones (mx.eval every step)."""
    import mlx.core as mx

    token = mx.array([[7]])
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        token = _step(model, caches, token)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1000)
        if ticker:
            ticker.check()
    return times


def paired_steps(model: LiveModel, caches_a: list, caches_b: list, warmup: int, steps: int,
                 b_first: bool = False) -> tuple[list[float], list[float]]:
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
        for arm in (("b", "a") if (i % 2 == 0) == b_first else ("a", "b")):
            t0 = time.perf_counter()
            tokens[arm] = _step(model, caches[arm], tokens[arm])
            if i >= warmup:
                times[arm].append((time.perf_counter() - t0) * 1000)
    return times["a"], times["b"]


def prefill(model: LiveModel, caches: list, tokens: int, chunk: int = 2048, ticker: _Ticker | None = None) -> None:
    """A real prefill of `tokens` random token ids, in generate_step's chunks, evaluated chunk by chunk."""
    import mlx.core as mx

    ids = mx.random.randint(0, model.geometry.vocab_size, (1, tokens), key=mx.random.key(1))
    for start in range(0, tokens, chunk):
        model.module(ids[:, start:start + chunk], cache=caches)
        mx.eval([c.state for c in caches])
        if ticker:
            ticker.check()


def _fill_dtype(model: LiveModel, kv_format: str) -> str:
    """Plain KV formats store their own dtype; quantized caches quantize the model's activations."""
    return model.dtype if kv_format.startswith("mlx-q") else kv_format


def _decode_guard(model: LiveModel, max_context: int, kv_format: str, steps: int) -> None:
    spec = kv_spec(kv_format, model.dtype)
    guard(model.weights_bytes(), kv_bytes(model.geometry, 1, spec), max_context + steps, model=model.name)


SWEEP_ORDER = "contexts visited in a fresh shuffled order each pass (seeded), a fresh cache every visit"
SWEEP_SPREAD = "min_ms/max_ms and q1_ms/q3_ms (interquartile range) of the per-pass medians listed in pass_ms"


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(first quartile, median, third quartile) of `values`, the 'inclusive' method (numpy's default
    linear interpolation between order statistics), so a single value gives (v, v, v).

    Example: quartiles([1, 2, 3, 4, 5]) -> (2.0, 3.0, 4.0).
    """
    if len(values) == 1:
        return (values[0],) * 3
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, q2, q3


def pass_orders(contexts: list[int], passes: int, seed: int = 0) -> list[list[int]]:
    """The order in which each pass visits `contexts`: a fresh random shuffle per pass (seeded, so a
    run can be repeated), so that drift of a shared machine over the run lands on every context
    alike instead of bending the curve the way a fixed short-to-long order would.

    Example: pass_orders([256, 1024, 4096], 2) -> two permutations of the three contexts.
    """
    import random

    rng = random.Random(seed)
    orders = []
    for _ in range(passes):
        order = list(contexts)
        rng.shuffle(order)
        orders.append(order)
    return orders


def decode_sweep(model: LiveModel, contexts: list[int], kv_format: str | None = None, warmup: int = 3, steps: int = 16,
                 repeats: int = 3, progress: Progress | None = None, should_stop: StopCheck | None = None,
                 seed: int = 0, on_rows: Callable[[list[dict]], None] | None = None) -> list[dict]:
    """ms/token vs context: each context's cache filled synthetically with T+1 random K/V rows
    (evaluated before timing, so the first step pays no reallocation), `warmup` untimed steps, the
    median of `steps` timed steps. `repeats` passes over the contexts, each pass in its own shuffled
    order (pass_orders), a fresh cache every visit. Each row gives the median of its per-pass
    medians (ms_per_token), their min, max and spread (max - min), their interquartile range
    (q1_ms, q3_ms) and the per-pass medians themselves (pass_ms, in pass order).
    on_rows(rows) is called after every visit with the rows so far (a live page shows them as they come).
    """
    import mlx.core as mx

    kv_format = kv_format or model.dtype
    contexts = sorted(set(contexts))
    _decode_guard(model, contexts[-1], kv_format, warmup + steps)
    ticker = _Ticker(repeats * len(contexts), progress, should_stop)
    medians: dict[int, list[float]] = {t: [] for t in contexts}
    for r, order in enumerate(pass_orders(contexts, repeats, seed)):
        for context in order:
            caches = make_caches(model, kv_format)
            fill_caches(caches, model.geometry, context + 1, _fill_dtype(model, kv_format))
            medians[context].append(statistics.median(time_steps(model, caches, warmup, steps, ticker)))
            del caches
            mx.clear_cache()
            if on_rows:
                on_rows(_decode_rows(medians, kv_format))
            ticker.tick(f"decode: {context:,} tokens (pass {r + 1}/{repeats})")
    return _decode_rows(medians, kv_format)


def _decode_rows(medians: dict[int, list[float]], kv_format: str) -> list[dict]:
    rows = []
    for context, ms_list in medians.items():
        if not ms_list:
            continue
        q1, ms, q3 = quartiles(ms_list)
        rows.append({"context": context, "ms_per_token": ms, "tokens_per_s": 1000 / ms, "min_ms": min(ms_list),
                     "max_ms": max(ms_list), "spread_ms": max(ms_list) - min(ms_list), "q1_ms": q1, "q3_ms": q3,
                     "pass_ms": list(ms_list), "repeats": len(ms_list), "kv_format": kv_format})
    return rows


def synthetic_ms(model: LiveModel, context: int, kv_format: str, warmup: int, steps: int, ticker: _Ticker | None = None,
                 kv: list | None = None) -> float:
    """Median ms/token after writing context + 1 rows of K/V into fresh caches (random, or `kv[i]` =
    (K, V) per layer, e.g. a real prefill's saved K/V); the guard is checked first; frees the cache.
    """
    import mlx.core as mx

    _decode_guard(model, context, kv_format, warmup + steps)
    caches = make_caches(model, kv_format)
    fill_caches(caches, model.geometry, context + 1, _fill_dtype(model, kv_format), kv=kv)
    ms = statistics.median(time_steps(model, caches, warmup, steps, ticker))
    del caches
    mx.clear_cache()
    return ms


def real_prefill_check(model: LiveModel, context: int, kv_format: str | None = None, warmup: int = 3, steps: int = 16,
                       progress: Progress | None = None, should_stop: StopCheck | None = None) -> dict:
    """Cross-check at one context: ms/token after a synthetic fill vs after a real prefill."""
    import mlx.core as mx

    kv_format = kv_format or model.dtype
    ticker = _Ticker(2, progress, should_stop)
    synthetic = synthetic_ms(model, context, kv_format, warmup, steps, ticker)
    ticker.tick(f"synthetic fill at {context:,}")
    caches = make_caches(model, kv_format)
    t0 = time.perf_counter()
    prefill(model, caches, context + 1, ticker=ticker)
    prefill_s = time.perf_counter() - t0
    real = statistics.median(time_steps(model, caches, warmup, steps, ticker))
    ticker.tick(f"real prefill at {context:,}")
    return {"check": "real prefill", "context": context, "synthetic_ms": synthetic, "real_prefill_ms": real,
            "ratio": real / synthetic, "prefill_s": prefill_s}


def generate_step_ms(model: LiveModel, context: int, kv_format: str | None = None, warmup: int = 3, steps: int = 16,
                     ticker: _Ticker | None = None) -> float:
    """Median ms/token of mlx_lm's own generate_step after the same synthetic fill as the harness
    (generate_step adds the prompt token itself, so `context` rows are written): the gaps between
    yielded tokens after `warmup` untimed ones. Frees the cache.
    """
    import mlx.core as mx
    from mlx_lm.generate import generate_step

    kv_format = kv_format or model.dtype
    _decode_guard(model, context, kv_format, warmup + steps)
    caches = make_caches(model, kv_format)
    fill_caches(caches, model.geometry, context, _fill_dtype(model, kv_format))
    stamps = []
    for _ in generate_step(mx.array([7]), model.module, prompt_cache=caches, max_tokens=warmup + steps + 1):
        stamps.append(time.perf_counter())
        if ticker:
            ticker.check()
    del caches
    mx.clear_cache()
    return statistics.median([(b - a) * 1000 for a, b in zip(stamps, stamps[1:])][warmup:])


def generate_step_check(model: LiveModel, context: int, kv_format: str | None = None, warmup: int = 3, steps: int = 16,
                        progress: Progress | None = None, should_stop: StopCheck | None = None) -> dict:
    """Cross-check at one context: this harness's ms/token vs mlx_lm's own generate_step (same
    synthetic fill; generate_step times the gap between yielded tokens).
    """
    kv_format = kv_format or model.dtype
    ticker = _Ticker(2, progress, should_stop)
    harness = synthetic_ms(model, context, kv_format, warmup, steps, ticker)
    ticker.tick(f"harness at {context:,}")
    ours = generate_step_ms(model, context, kv_format, warmup, steps, ticker)
    ticker.tick(f"generate_step at {context:,}")
    return {"check": "generate_step", "context": context, "harness_ms": harness, "generate_step_ms": ours,
            "ratio": harness / ours}


# ---------------------------------------------------------------- mechanism


def mechanism_probe(model: LiveModel, new_tokens: int = 64, prompt_tokens: int = 64, progress: Progress | None = None,
                    should_stop: StopCheck | None = None, prompt_ids: list[int] | None = None) -> list[dict]:
    """N new tokens with the cache (prefill once, then one token per step) vs without it (every
    step recomputes the whole prefix). Same token sequence both ways; per-step ms and running totals.
    A real model (with a tokenizer) starts from `prompt_ids` (real text) and each row carries its new token's text.
    """
    import mlx.core as mx

    if prompt_ids is not None:
        prompt_tokens = len(prompt_ids)
    _decode_guard(model, prompt_tokens + new_tokens, model.dtype, 1)
    ticker = _Ticker(2 * new_tokens, progress, should_stop)
    prompt = (mx.array([prompt_ids]) if prompt_ids is not None else
              mx.random.randint(0, model.geometry.vocab_size, (1, prompt_tokens), key=mx.random.key(2)))
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
        logits = model.module(seq[:, :prompt_tokens + i])
        mx.eval(mx.argmax(logits[:, -1, :], axis=-1))
        without_ms.append((time.perf_counter() - t0) * 1000)
        ticker.tick(f"without cache: token {i + 1}/{new_tokens}")
    rows, w, wo = [], 0.0, 0.0
    generated = seq[0, prompt_tokens:].tolist()
    for i, (a, b) in enumerate(zip(with_ms, without_ms)):
        w, wo = w + a / 1000, wo + b / 1000
        rows.append({"new_tokens": i + 1, "with_cache_step_ms": a, "without_cache_step_ms": b,
                     "with_cache_s": w, "without_cache_s": wo})
        if model.tokenizer is not None:
            rows[-1]["token"] = model.tokenizer.piece(generated[i])
    return rows
