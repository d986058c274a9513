"""GGUF weight files as users download them: which ggml block type each matrix gets, and the bytes.

Block layouts, from ggml-org/llama.cpp `ggml/src/ggml-common.h` @ 0c1e57098bba43ac29e6e3b677cdceebdd22334f
(the copy vendored by llama-cpp-python 0.3.36), each checked there by a static_assert on sizeof(block_*):

    q8_0   32 values / 34 B  (fp16 scale + 32 int8)                      8.5 bits per weight
    q4_0   32 values / 18 B  (fp16 scale + 16 B of nibbles)              4.5
    q5_0   32 values / 22 B, q5_1 32 / 24                                5.5, 6.0
    q4_K  256 values / 144 B (2 fp16 + 12 B scales + 128 B nibbles)      4.5
    q5_K  256 values / 176 B (q4_K + 32 B of fifth bits)                 5.5
    q6_K  256 values / 210 B (fp16 + 16 B scales + 192 B)                6.5625
    mxfp4  32 values / 17 B  (one e8m0 scale + 16 B of fp4 codes)        4.25

Which tensor gets which type: `src/llama-quant.cpp` @ the same commit (llama_tensor_get_type_impl):
* the output head (or a tied embedding, which is the output) -> Q6_K, or Q8_0 when its rows do not fill
  whole blocks and for MXFP4_MOE; the token embedding otherwise takes the file's type;
* Q4_K_M / Q5_K_M are *mixes*: Q4_K (Q5_K) everywhere, but attn_v and ffn_down at Q6_K in the layers
  `use_more_bits` picks (the first and last eighth of the layers and every third one between);
* MXFP4_MOE ("mxfp4", gpt-oss's own format): the 3-D routed-expert tensors in MXFP4, every other matrix Q8_0;
* a row that does not fill whole blocks falls back (tensor_type_fallback): Q4_K -> Q5_0, Q5_K -> Q5_1,
  Q6_K -> Q8_0.
1-D tensors (norms, biases, the MoE router) stay F32 (convert_hf_to_gguf.py writes them so; llama-quant.cpp
quantizes only 2-D+ "weight" tensors and never the router `ffn_gate_inp`).

kvcore counts parameters per layer from config.json (kvcore.model.geometry), not per tensor file: the attention
projections of MLA and linear-attention layers are kept at the file's base type (their attn_v names differ).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import KvError
from kvcore.memory.ggml_blocks import GGML_BLOCKS
from kvcore.model.geometry import Geometry

SOURCE = "ggml-org/llama.cpp @ 0c1e570: ggml/src/ggml-common.h (block layouts), src/llama-quant.cpp (which tensor gets which)"

FALLBACK = {
    "Q4_K": "Q5_0",
    "Q5_K": "Q5_1",
    "Q6_K": "Q8_0",
}  # tensor_type_fallback, for rows that do not fill blocks


@dataclass(frozen=True)
class GgufFormat:
    name: str  # kvcore's name, e.g. "gguf-q4_k_m"
    base: str  # the ggml type of most matrices
    description: str  # what the file is, in one line (a mix says so)
    promoted: str | None = (
        None  # Q4_K_M / Q5_K_M: the type of attn_v and ffn_down in use_more_bits layers
    )
    experts: str | None = (
        None  # MXFP4_MOE: the type of the routed-expert tensors (the rest is `base`)
    )

    @property
    def bits_per_weight(self) -> float:
        """Bits per weight of the base type (a mix adds its promoted tensors on top)."""
        values, size = GGML_BLOCKS[self.experts or self.base]
        return 8 * size / values


GGUF_FORMATS: dict[str, GgufFormat] = {
    f.name: f
    for f in (
        GgufFormat(
            "gguf-q8_0", "Q8_0", "Q8_0: every matrix in 34-byte blocks of 32 (8.5 bits per weight)"
        ),
        GgufFormat(
            "gguf-q6_k",
            "Q6_K",
            "Q6_K: every matrix in 210-byte blocks of 256 (6.5625 bits per weight)",
        ),
        GgufFormat(
            "gguf-q5_k_m",
            "Q5_K",
            "Q5_K_M, a mix: Q5_K (5.5 bits) for most matrices; attn_v and ffn_down in "
            "about 40 % of the layers and the output head at Q6_K (6.5625)",
            promoted="Q6_K",
        ),
        GgufFormat(
            "gguf-q4_k_m",
            "Q4_K",
            "Q4_K_M, a mix: Q4_K (4.5 bits) for most matrices; attn_v and ffn_down in "
            "about 40 % of the layers and the output head at Q6_K (6.5625)",
            promoted="Q6_K",
        ),
        GgufFormat(
            "gguf-q4_0",
            "Q4_0",
            "Q4_0: every matrix in 18-byte blocks of 32 (4.5 bits per weight); output head Q6_K",
        ),
        GgufFormat(
            "gguf-mxfp4",
            "Q8_0",
            "MXFP4 (MXFP4_MOE): routed experts in 17-byte blocks of 32 (4.25 bits); "
            "every other matrix Q8_0 (8.5 bits)",
            experts="MXFP4",
        ),
    )
}


def use_more_bits(i_layer: int, n_layers: int) -> bool:
    """llama-quant.cpp's choice of layers that get more bits in the _M mixes. Example: 32 layers -> 0-3, 28-31, 6, 9, ..."""
    return (
        i_layer < n_layers // 8
        or i_layer >= 7 * n_layers // 8
        or (i_layer - n_layers // 8) % 3 == 2
    )


def tensor_bytes(type_name: str, rows: int, cols: int) -> int:
    """Bytes of a rows x cols matrix (cols = ne[0], the width blocks run along) in a ggml type, with the fallback
    llama-quant.cpp applies when cols does not fill whole blocks."""
    values, _ = GGML_BLOCKS[type_name]
    if cols % values:
        type_name = FALLBACK.get(type_name, type_name)
        values = GGML_BLOCKS[type_name][0]
        if cols % values:
            type_name, values = "F16", 1
    size = GGML_BLOCKS[type_name][1]
    return rows * (cols // values) * size


def get_gguf_format(name: str) -> GgufFormat:
    try:
        return GGUF_FORMATS[name]
    except KeyError:
        raise KvError(
            f"Unknown GGUF weights format {name!r}; valid formats: {', '.join(GGUF_FORMATS)}."
        ) from None


def weights_bytes(geometry: Geometry, name: str, active: bool = False) -> int:
    """Bytes of a GGUF file's tensors for this model (active=True: what one decode step reads, MoE: the routed
    experts a token uses). Per layer: attention projections from the layer's heads, feed-forward from config.json's
    sizes (kvcore.model.geometry), ffn_down = a third of a SwiGLU block; 1-D tensors in F32.
    """
    fmt = get_gguf_format(name)
    p = geometry.active_params if active else geometry.params
    h, vocab, n = geometry.hidden_size, geometry.vocab_size, geometry.num_layers
    out_type = "Q8_0" if fmt.experts else "Q6_K" if fmt.base != "Q8_0" else "Q8_0"
    if h % GGML_BLOCKS[out_type][0]:
        out_type = "Q8_0"
    head = tensor_bytes(out_type, vocab, h)
    embed = 0 if geometry.tie_word_embeddings else tensor_bytes(fmt.base, vocab, h)
    embed_params = vocab * h * (1 if geometry.tie_word_embeddings else 2)
    total = head + embed + (p.router + p.vector) * 4
    if (
        not geometry.layer_ffn
    ):  # a geometry built without the per-layer split: every layer matrix at the base type
        return int(total + _rows_at(fmt.base, p.matrix - embed_params, h))
    attn = (
        geometry.params.matrix - embed_params - sum(f for f, _ in geometry.layer_ffn)
    ) / n  # per layer
    for i, layer in enumerate(geometry.layers):
        ffn_all, routed = geometry.layer_ffn[i]
        dense_ffn = ffn_all - routed
        if active and routed:
            routed = _active_routed(geometry, routed)
        promoted = fmt.promoted if fmt.promoted and use_more_bits(i, n) else None
        v = (
            h * layer.kv_heads * layer.v_dim
            if promoted and layer.kind in ("full", "sliding")
            else 0
        )
        if v:
            total += tensor_bytes(promoted, layer.kv_heads * layer.v_dim, h)
        total += _rows_at(fmt.base, max(attn - v, 0), h)
        for part, kind in ((dense_ffn, fmt.base), (routed, fmt.experts or fmt.base)):
            down = part // 3 if promoted else 0  # ffn_down: one of a SwiGLU block's three matrices
            total += (_rows_at(promoted, down, h) if down else 0) + _rows_at(kind, part - down, h)
    return int(total)


def _active_routed(geometry: Geometry, routed: int) -> int:
    """The routed-expert parameters one token reads in a layer holding `routed` of them: what active_params
    leaves out (the experts a token does not use), shared among the MoE layers in proportion."""
    inactive = geometry.params.matrix - geometry.active_params.matrix
    routed_all = sum(r for _, r in geometry.layer_ffn)
    return routed - round(inactive * routed / routed_all) if routed_all else routed


def _rows_at(type_name: str, params: float, width: int) -> int:
    """Bytes of `params` weights in rows of `width` values (one tensor family of a layer)."""
    params = int(params)
    rows = params // width if width else 0
    return tensor_bytes(type_name, rows, width) + (params - rows * width) * 2
