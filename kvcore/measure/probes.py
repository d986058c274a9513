"""Live measurement on real mlx_lm caches, memory: the `.nbytes` trap and KV growth, and what every probe
shares (progress, stop, Interrupted); time (decode vs context, with vs without a cache) is kvcore.measure.decode.
mlx is imported inside functions only.

Every probe returns plain data (a list of dicts) and takes `progress(done, total, text)` and
`should_stop()`; a stop raises Interrupted, so a stopped run never becomes a recording.
Example: trap_probe("llama-3.2-1b")[...] -> {"cache": "KVCache", "pattern": "token by token",
    "tokens": 257, "capacity": 512, "nbytes": 1048576, "used_bytes": 526336, ...}
"""

from __future__ import annotations

from kvcore.errors import KvError
from kvcore.inputs.config import parse_config
from kvcore.measure.caches import ROTATING_MAX, guard, kv_spec, random_kv, used_bytes
from kvcore.measure.models import mlx_module, resolve_config
from kvcore.measure.progress import Progress, StopCheck, Ticker
from kvcore.memory.formats import KvSpec, mlx_cache
from kvcore.memory.formulas import bytes_per_token, kv_bytes, prefill_chunks
from kvcore.model.geometry import Geometry
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.units import MIB

PATTERNS: dict[str, list[list[int]]] = {
    "KVCache": [
        [257],
        [256, 1],
        [1, 256],
        [300, 300],
        [1000],
        [2048, 2047, 1],
        [2048, 2047, 1, 1],
        [500] * 8,
    ],
    "QuantizedKVCache": [[257], [1, 256], [300, 300], [1000]],
    "RotatingKVCache": [[1000], [1000, 1], [300, 300]],
}


def resolve_geometry(model: str | Geometry) -> Geometry:
    """A probe's geometry: a Geometry as it is, else a preset name, config.json or model folder (live_models.resolve_config)."""
    if isinstance(model, Geometry):
        return model
    name, config = resolve_config(model)
    return parse_config(config, name, MLX_LM)


def _attention_layer(geometry: Geometry):
    layer = next((x for x in geometry.layers if x.kind == "full"), None)
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
    return {
        "cache": cache_class,
        "pattern": pattern,
        "tokens": tokens,
        "capacity": capacity,
        "layers": layers,
        "nbytes": nbytes,
        "used_bytes": used,
        "theory_bytes": theory,
        "allocated_mib": layers * nbytes / MIB,
        "used_mib": layers * used / MIB,
        "theory_mib": layers * theory / MIB,
    }


def _token_checkpoint(t: int) -> bool:
    return t == 1 or t % 32 == 0 or t % 256 in (1, 255)


def trap_probe(
    model: str | Geometry = "llama-3.2-1b",
    dtype: str = "fp16",
    tokens: int = 1025,
    cache_classes: tuple[str, ...] = ("KVCache", "QuantizedKVCache", "RotatingKVCache"),
    kv_bits: int = 8,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
) -> list[dict]:
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
    ticker = Ticker(sum(tokens + len(PATTERNS[c]) for c in cache_classes), progress, should_stop)
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
            label = (
                f"{updates[0]} x {len(updates)}"
                if len(set(updates)) == 1 and len(updates) > 2
                else " + ".join(map(str, updates))
            )
            rows.append(_trap_row(cache, cache_class, label, layer, spec, layers))
            ticker.tick(f"{cache_class}: {label}")
    return rows


def cache_classes(model: str | dict) -> list[dict]:
    """The cache mlx_lm's make_prompt_cache returns for a config, one row per layer, without any
    weights (the module is built lazily and never evaluated).
    """
    from mlx_lm.models.cache import make_prompt_cache

    name, config = resolve_config(model) if isinstance(model, str) else ("config", model)
    module = mlx_module(config, name)
    return [
        {"layer": i, "cache": type(c).__name__, "max_size": getattr(c, "max_size", None)}
        for i, c in enumerate(make_prompt_cache(module))
    ]


# ---------------------------------------------------------------- growth


def _layer_caches(geometry: Geometry, kv_format: str, dtype: str) -> list:
    from mlx_lm.models import cache as c

    bits = mlx_cache(kv_format)[1]  # QuantizedKVCache(bits) for an mlx-q<bits> format, else None
    out = []
    for layer in geometry.layers:
        if layer.kind == "sliding":
            out.append(c.RotatingKVCache(max_size=layer.window))
        elif bits:
            out.append(c.QuantizedKVCache(group_size=64, bits=bits))
        else:
            out.append(c.KVCache())
    return out


def growth_probe(
    model: str | Geometry = "llama-3.2-1b",
    contexts: list[int] | None = None,
    kv_format: str = "fp16",
    dtype: str = "fp16",
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
) -> list[dict]:
    """KV memory vs context on real caches filled the way generate_step prefills (2048-token chunks):
    allocated (.nbytes), used (keys_and_values()), theory (formula), the allocator's view
    (mx.get_active_memory delta) and the transient peak of the next token (a 256-boundary copy
    when the context is a multiple of 256). Random tensors, no weights.
    """
    import mlx.core as mx

    geometry = resolve_geometry(model)
    if any(x.kind in ("mla", "linear") for x in geometry.layers):
        raise KvError(
            f"The growth probe drives KVCache layers; {geometry.name} has MLA or linear layers."
        )
    contexts = sorted(contexts or [1024, 2048, 4096, 8192, 16384, 32768])
    guard(0, kv_bytes(geometry, 1, kv_spec(kv_format, dtype)), contexts[-1], task="growth")
    ticker = Ticker(len(contexts), progress, should_stop)
    rows = []
    for context in contexts:
        rows.append(_growth_point(geometry, context, kv_format, dtype, ticker))
        mx.clear_cache()
        ticker.tick(f"KV growth: {context:,} tokens")
    return rows


def _growth_point(
    geometry: Geometry, context: int, kv_format: str, dtype: str, ticker: Ticker
) -> dict:
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
    return {
        "context": context,
        "allocated_bytes": allocated,
        "used_bytes": used,
        "theory_bytes": theory,
        "allocated_mib": allocated / MIB,
        "used_mib": used / MIB,
        "theory_mib": theory / MIB,
        "active_mib": active / MIB,
        "peak_mib": peak / MIB,
        "kv_format": kv_format,
    }
