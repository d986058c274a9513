"""mlx_lm: its KVCache and RotatingKVCache under mlx_lm's model files, and QuantizedKVCache (one kv_bits for K
and V), counted token by token (kvcore.runtimes.token); mlx-lm 0.32.2's models/cache.py and generate.py."""

from __future__ import annotations

from kvcore.memory.formats import mlx_cache_formats
from kvcore.runtimes import mlx_lm_plan
from kvcore.runtimes.token import TokenRuntime

MLX_LM = TokenRuntime(
    "mlx_lm",
    "mlx_lm (default; mlx_lm's own caches)",
    "sliding_ignored",
    prefill_peak="mlx_lm chunked prefill",
    kv_formats=mlx_cache_formats(),  # KVCache in a dtype, QuantizedKVCache(bits)
    engines=("mlx_lm", "mlx-lm", "mlx-vlm", "omlx", "rapid-mlx"),
    fit_class="mlx",
    one_kv_format=True,  # generate's one kv_bits quantizes K and V alike
    planner=mlx_lm_plan,  # generate_step's peak, part by part
)
