"""Live measurement, memory: the caches of a live model (made as mlx_lm makes them, filled with
random K/V, their used bytes) and the guard that refuses a run whose peak would not fit.

mlx and mlx_lm are imported inside functions only.
Example: guard(2 * GIB, 131072, 131072, available=4 * GIB) -> KvError "... the largest context that
fits is about ... tokens".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvcore.errors import KvError
from kvcore.measure import machine
from kvcore.memory.formats import KvSpec, mlx_cache
from kvcore.model.geometry import Geometry

if TYPE_CHECKING:
    from kvcore.measure.live_model import LiveModel

GROUP_SIZE = 64  # mlx_lm's default for weights and KV quantization
ROTATING_MAX = 512  # RotatingKVCache(max_size=512, keep=4), as mlx_lm builds it for a 512-token window (https://github.com/ml-explore/mlx-lm/blob/v0.32.2/mlx_lm/models/cache.py)


# ---------------------------------------------------------------- dtypes and the memory guard


def mx_dtype(name: str):
    mx = machine.mlx_core()
    return {"fp16": mx.float16, "bf16": mx.bfloat16, "fp32": mx.float32}[name]


def guard(
    fixed_bytes: int,
    kv_per_token_bytes: int,
    max_context: int,
    available: int | None = None,
    task: str = "decode",
    model: str = "",
) -> int:
    """Refuse a run whose peak would not fit in the memory the backend may use (Metal's recommended working set,
    else the memory available now: kvcore.measure.machine); return the estimate. The estimate is an upper one, so
    no share of the memory is kept back: fixed + every layer's KV at the largest context twice (mlx_lm's 256-token
    growth holds the old buffer beside the grown one, one layer at a time). The run is task "decode" (of `model`)
    or "growth" (the KV growth sweep). The KvError names the largest context that fits; its code is
    guard_<task>_fits or guard_<task>_none.
    """
    from kvcore.units import fmt_bytes

    available = machine.available_memory_bytes() if available is None else available
    budget = int(available)

    def peak(context: int) -> int:
        padded = (context + 1 + 255) // 256 * 256 + 256
        return fixed_bytes + 2 * kv_per_token_bytes * padded

    need = peak(max_context)
    if need <= budget:
        return need
    fits = max(0, (budget - fixed_bytes) // max(1, 2 * kv_per_token_bytes) - 512) // 256 * 256
    hint = (
        f"the largest context that fits is about {fits:,} tokens"
        if fits >= 256
        else "not even 256 tokens fit"
    )
    what = "The KV growth sweep" if task == "growth" else f"Decoding {model}"
    raise KvError(
        f"{what} up to {max_context:,} tokens needs about {fmt_bytes(need)} but only "
        f"{fmt_bytes(budget)} of memory is available to the backend; {hint}.",
        f"guard_{task}_{'fits' if fits >= 256 else 'none'}",
        model=model,
        max_context=max_context,
        need=fmt_bytes(need),
        budget=fmt_bytes(budget),
        fits=fits,
    )


# ---------------------------------------------------------------- caches


def kv_spec(kv_format: str, activation_dtype: str) -> KvSpec:
    """The spec of a live cache in `kv_format`: one of the formats an mlx_lm cache class holds, read
    from kvcore.memory.formats when asked (a format added there at run time counts), or one sentence."""
    live_format(kv_format)
    return KvSpec(kv_format, kv_format, GROUP_SIZE, activation_dtype)


def live_format(kv_format: str) -> str:
    """`kv_format` if an mlx_lm cache class holds it (kvcore.memory.formats, read when asked), else one sentence."""
    mlx_cache(kv_format)
    return kv_format


def make_caches(model: LiveModel, kv_format: str) -> list:
    """The caches mlx_lm makes for this model (make_prompt_cache); an mlx-q<bits> format -> QuantizedKVCache(bits)
    in place of each KVCache (kvcore.memory.formats.mlx_cache)."""
    from mlx_lm.models.cache import KVCache, QuantizedKVCache, make_prompt_cache

    cache_class, bits = mlx_cache(kv_format)
    caches = make_prompt_cache(model.module)
    if cache_class == "QuantizedKVCache":
        caches = [QuantizedKVCache(GROUP_SIZE, bits) if type(c) is KVCache else c for c in caches]
    return caches


def random_kv(layer, tokens: int, dtype: str, seed: int = 0):
    """Random K and V for one layer: [1, kv_heads, tokens, head_dim] each."""
    import mlx.core as mx

    key = mx.random.key(seed)
    k1, k2 = mx.random.split(key)
    d = mx_dtype(dtype)
    return (
        mx.random.normal((1, layer.kv_heads, tokens, layer.k_dim), key=k1).astype(d),
        mx.random.normal((1, layer.kv_heads, tokens, layer.v_dim), key=k2).astype(d),
    )


def fill_caches(
    caches: list, geometry: Geometry, tokens: int, dtype: str, kv: list | None = None
) -> None:
    """Write `tokens` rows of K/V straight into each layer's cache (random, or `kv[i]` = (K, V)) and
    evaluate them, so no fill cost lands in a timed step.
    """
    import mlx.core as mx

    for i, (cache, layer) in enumerate(zip(caches, geometry.layers)):
        k, v = kv[i] if kv is not None else random_kv(layer, tokens, dtype, seed=i)
        cache.update_and_fetch(k, v)
        mx.eval(cache.state[:2])


def used_bytes(cache) -> int:
    """Bytes of the rows a cache actually holds, from the arrays keys_and_values() returns."""
    from mlx.utils import tree_flatten

    if cache.empty():
        return 0
    return sum(a.nbytes for _, a in tree_flatten(list(cache.keys_and_values())))
