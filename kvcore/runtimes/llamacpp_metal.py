"""llama.cpp's Metal backend where it differs from the CPU build: which flash attention it runs, and the room it
adds beside each flash-attention node (the rules are told in kvcore.runtimes.llamacpp_plan's docstring, with
their source lines in ggml/src/ggml-metal at llama.cpp 0c1e570).

Example: metal_fa_extra_bytes for Llama-3.1-8B's layer at n_kv 131,072, 512 tokens, f16: about 530 MiB.
"""

from __future__ import annotations

from kvcore.memory.formats import get_format, ggml_name
from kvcore.runtimes import llamacpp_cache as llamacpp
from kvcore.runtimes.llamacpp_graph import FLOAT

METAL_FA_HEADS = (
    32,
    40,
    48,
    64,
    72,
    80,
    96,
    112,
    128,
    192,
    256,
    320,
    512,
    576,
)  # ggml-metal-device.m:1729
METAL_FA_TYPES = (
    "f32",
    "f16",
    "bf16",
    "q8_0",
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
)  # ggml-metal-device.m:1754
METAL_DEQUANT = (
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
    "q8_0",
)  # ggml-metal-ops.cpp:2971: dequantized to f16 first
NCPSG, NQPSG, VEC_NCPSG, VEC_NQPSG = 64, 8, 32, 1  # ggml-metal-impl.h:126-130


def metal_runs_flash_attention(geometry, k_type: str, v_type: str) -> bool:
    """True when ggml-metal's supports_op takes every attention layer's flash-attention node (see the module)."""
    k, v = (ggml_name(get_format(t).name) for t in (k_type, v_type))
    if k != v or k not in METAL_FA_TYPES:
        return False
    for layer in geometry.layers:
        dk, dv = head_dims(layer)
        if dk and (dk not in METAL_FA_HEADS or dk < dv or (dk == 72 and dv != 72)):
            return False
    return True


def head_dims(layer) -> tuple[int, int]:
    """(K, V) values per head the attention reads: MLA reads latent + rope as K and the latent as V."""
    if layer.kind == "mla":
        return layer.k_dim + layer.v_dim, layer.k_dim
    if layer.kind in ("full", "sliding"):
        return layer.k_dim, layer.v_dim
    return 0, 0


def _pad(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def metal_fa_extra_bytes(
    layer, n_kv: int, streams: int, n_tokens: int, heads: int, k_type: str, v_type: str
) -> int:
    """The room ggml-metal adds to one FLASH_ATTN_EXT node (ggml-metal-ops.cpp:3064-3231): kv_f16 + pad + blk +
    tmp (idx is 0 without a top-k graph).
    Example: Llama-3.1-8B's layer at n_kv 131,072, 512 tokens, f16: 512 MiB of f16 K and V + about 18 MiB."""
    dk, dv = head_dims(layer)
    mla = layer.kind == "mla"
    kv_heads = 1 if mla else layer.kv_heads
    q = n_tokens // streams  # queries per stream (ne01)
    kv_f16 = _pad(2 * dk * n_kv * kv_heads * streams, 16)
    if not mla:  # V is a view of K in MLA: its dequantized copy too
        kv_f16 += _pad(2 * dv * n_kv * kv_heads * streams, 16)
    dequant = q >= 32 and ggml_name(get_format(k_type).name) in METAL_DEQUANT
    k_row = 2 * dk if dequant else llamacpp.row_bytes(k_type, kv_heads * dk)
    v_row = (
        (2 * (dk if mla else dv))
        if dequant
        else (k_row if mla else llamacpp.row_bytes(v_type, kv_heads * dv))
    )
    pad = NCPSG * (k_row * kv_heads * streams + v_row * kv_heads * streams + 2 * q * streams)
    vec = q < 20 and dk % 32 == 0
    per_q, per_kv = (VEC_NQPSG, VEC_NCPSG) if vec else (NQPSG, NCPSG)
    blk = _pad(-(-q // per_q) * -(-n_kv // per_kv) * streams, 32)
    tmp = FLOAT * min(q, 32) * heads * streams * 32 * (dv + 2)
    return kv_f16 + pad + blk + tmp
