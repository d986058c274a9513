"""Cache formats: bytes per cached row, from the real block layouts.

A *row* is one head's key (or value) vector for one token: `dim` values.
Example: row_bytes("mlx-q4", 64) -> 32 packed bytes + 2 groups x (scale + bias) x 2 B = 40.
Sources: mlx_lm `QuantizedKVCache` (scales/biases in the activation dtype); ggml's blocks in
ggml-org/llama.cpp `ggml/src/ggml-common.h` (32 values per block: q8_0 34 B, q4_0 18 B, q4_1 20 B,
q5_0 22 B, q5_1 24 B, iq4_nl 18 B, from its static_asserts on sizeof(block_*)); AtomicBot-ai/atomic-llama-cpp-turboquant
`ggml-common.h`. llama.cpp's own type names (`ggml_type_name`: f32, f16) are accepted as aliases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import KvError

DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1}


@dataclass(frozen=True)
class CacheFormat:
    name: str
    kind: str  # "plain" | "mlx" | "ggml" | "turbo"
    bits: int  # bits of one stored value (plain) or one quantized code
    block_values: int = 1  # values per block (ggml / turbo)
    block_bytes: int = 0  # bytes per block incl. its scales (ggml / turbo)
    source: str = ""

    def row_bytes(self, dim: int, group_size: int = 64, scale_dtype: str = "fp16") -> int:
        """Bytes one `dim`-value row takes in this format (K or V of one head, one token)."""
        if self.kind == "plain":
            return dim * self.bits // 8
        if self.kind == "mlx":
            if dim % group_size:
                raise KvError(  # mx.quantize refuses a last dimension its group size does not divide
                    f"{self.name} quantizes values in groups of {group_size}, and {group_size} does not divide this "
                    f"model's head_dim of {dim}; choose another KV format.",
                    "format_group", format=self.name, group=group_size, dim=dim)
            packed = dim * self.bits // 8  # uint32 words hold 32/bits codes
            return packed + 2 * (dim // group_size) * DTYPE_BYTES[scale_dtype]
        # ggml and turbo blocks: a row takes whole blocks. The TurboQuant fork zero-pads each
        # head to a multiple of 128 (AtomicBot-ai/atomic-llama-cpp-turboquant@088ae62,
        # src/llama-kv-cache.cpp: "turbo zero-padding K head_dim"), so head_dim 64 costs one
        # 128-value block; ggml's q8_0/q4_0 need dim % 32 == 0, which every preset meets.
        return math.ceil(dim / self.block_values) * self.block_bytes

    def bits_per_value(self, dim: int = 128, group_size: int = 64, scale_dtype: str = "fp16") -> float:
        """Effective bits per cached value for a row of `dim` values (overhead and padding included)."""
        return 8 * self.row_bytes(dim, group_size, scale_dtype) / dim


FORMATS: dict[str, CacheFormat] = {
    f.name: f
    for f in (
        CacheFormat("fp32", "plain", 32),
        CacheFormat("fp16", "plain", 16),
        CacheFormat("bf16", "plain", 16),
        CacheFormat("fp8", "plain", 8, source="1-byte float (e4m3/e5m2), no scales"),
        CacheFormat("mlx-q8", "mlx", 8, source="mlx_lm QuantizedKVCache(bits=8)"),
        CacheFormat("mlx-q4", "mlx", 4, source="mlx_lm QuantizedKVCache(bits=4)"),
        CacheFormat("q8_0", "ggml", 8, 32, 34, source="ggml block_q8_0: fp16 scale + 32 int8"),
        CacheFormat("q4_0", "ggml", 4, 32, 18, source="ggml block_q4_0: fp16 scale + 16 bytes"),
        CacheFormat("q4_1", "ggml", 4, 32, 20, source="ggml block_q4_1: fp16 scale + fp16 min + 16 bytes"),
        CacheFormat("q5_0", "ggml", 5, 32, 22, source="ggml block_q5_0: fp16 scale + 4 bytes high bits + 16 bytes"),
        CacheFormat("q5_1", "ggml", 5, 32, 24, source="ggml block_q5_1: fp16 scale + fp16 min + 4 bytes high bits + 16 bytes"),
        CacheFormat("iq4_nl", "ggml", 4, 32, 18, source="ggml block_iq4_nl: fp16 scale + 16 bytes (non-linear 4-bit codebook)"),
        CacheFormat("turbo4", "turbo", 4, 128, 68, source="atomic-llama-cpp-turboquant ggml-common.h block_turbo4_0"),
        CacheFormat("turbo3", "turbo", 3, 128, 50, source="atomic-llama-cpp-turboquant ggml-common.h block_turbo3_0"),
        CacheFormat("turbo2", "turbo", 2, 128, 34, source="atomic-llama-cpp-turboquant ggml-common.h block_turbo2_0"),
    )
}


# llama.cpp's spellings (ggml_type_name) of the plain types; every other llama.cpp KV type has our name already.
ALIASES = {"f32": "fp32", "f16": "fp16"}

# The K/V types llama.cpp accepts for -ctk/-ctv: common/arg.cpp `kv_cache_types`
# (ggml-org/llama.cpp@145b6280d6aa1890e22457143dad0badb3fd6820): F32 F16 BF16 Q8_0 Q4_0 Q4_1 IQ4_NL Q5_0 Q5_1.
LLAMACPP_TYPES = ("fp32", "fp16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


def ggml_name(name: str) -> str:
    """The name llama.cpp prints for a format (its ggml_type_name). Example: ggml_name("fp16") -> "f16"."""
    return {v: k for k, v in ALIASES.items()}.get(name, name)


def get_format(name: str) -> CacheFormat:
    """The format called `name` (or a llama.cpp alias such as f16), or a KvError listing the valid names."""
    try:
        return FORMATS[ALIASES.get(name, name)]
    except KeyError:
        raise KvError(f"Unknown cache format {name!r}; valid formats: {', '.join(FORMATS)}.") from None
