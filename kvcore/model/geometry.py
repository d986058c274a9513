"""Model geometry: what each decoder layer of a model caches, and its parameter counts (data only).

Example: preset_geometry("llama-3.2-1b").layers[0] ->
    Layer(index=0, kind="full", kv_heads=8, k_dim=64, v_dim=64)
kvcore.model.layers reads the layers from a config under a runtime's window rules, kvcore.model.params counts the
parameters, kvcore.inputs builds a Geometry from a config.json, a GGUF header or a preset.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Params:
    """Parameter counts split by how mlx_lm quantizes them.

    matrix: Linear/Embedding weights (quantized at the chosen bits); router: MoE router
    weights (mlx_lm keeps them at 8 bits); vector: norms, biases, other small tensors (never
    quantized). matrix_8bit: the part of `matrix` a family's quant_predicate keeps at 8 bits
    (Family.mlx_8bit: granite's o_proj, down_proj and lm_head), counted in `matrix` too.
    """

    matrix: int = 0
    router: int = 0
    vector: int = 0
    matrix_8bit: int = 0  # of matrix, not beside it

    @property
    def total(self) -> int:
        return self.matrix + self.router + self.vector

    def __add__(self, other: "Params") -> "Params":
        return Params(
            self.matrix + other.matrix,
            self.router + other.router,
            self.vector + other.vector,
            self.matrix_8bit + other.matrix_8bit,
        )

    def __mul__(self, k: int) -> "Params":
        return Params(self.matrix * k, self.router * k, self.vector * k, self.matrix_8bit * k)


@dataclass(frozen=True)
class Layer:
    """What one decoder layer keeps per sequence.

    kind: "full" (K and V for every token), "sliding" (K and V for the last `window` tokens),
    "mla" (one latent of k_dim + v_dim values per token, DeepSeek style), "linear" (a fixed
    recurrent state: `conv_values` in the activation dtype + `state_values` in fp32).
    """

    index: int
    kind: str
    kv_heads: int = 0
    k_dim: int = 0  # values per K row (MLA: kv_lora_rank)
    v_dim: int = 0  # values per V row (MLA: qk_rope_head_dim)
    window: int | None = None
    conv_values: int = 0
    state_values: int = 0


@dataclass(frozen=True)
class FileWeights:
    """The weights as a model file stores them (a GGUF's tensor table): exact bytes, and by tensor type."""

    bytes: int
    active_bytes: (
        int  # what one decode step reads (MoE: the routed experts' share of the expert tensors)
    )
    by_type: tuple[
        tuple[str, int, int, int], ...
    ] = ()  # (ggml type, tensors, values, bytes), largest first


@dataclass(frozen=True)
class Geometry:
    name: str
    model_type: str
    runtime: str
    layers: tuple[Layer, ...]
    hidden_size: int
    num_attention_heads: int
    vocab_size: int
    params: Params  # all parameters: what memory must hold
    active_params: Params  # what one decode step reads (MoE: routed experts only)
    tie_word_embeddings: bool
    notes: tuple[str, ...] = field(default=())
    note_codes: tuple[tuple[str, int], ...] = field(
        default=()
    )  # (code, sliding window), parallel to notes
    max_position_embeddings: int | None = (
        None  # the longest context the model was trained for (config.json; a GGUF: context_length)
    )
    # per layer: (feed-forward matrix parameters, of which routed-expert matrices), for the GGUF mixes
    # (kvcore.memory.weight_formats: Q4_K_M promotes ffn_down in some layers; MXFP4 packs only the experts)
    layer_ffn: tuple[tuple[int, int], ...] = field(default=())
    # the feed-forward widths llama.cpp's graph holds per token (its compute buffer's MLP and MoE moments):
    # the widest dense layer's n_ff (0: no dense layer, or not known), and the routed experts' n_ff_exp x
    # n_expert_used (0: no experts, or not known)
    ffn_width: int = 0
    expert_width: int = 0
    experts_used: int = 0
    # the router's width (n_expert: its logits and argsort per token) and a shared expert's n_ff_shexp (Qwen3-Next)
    experts: int = 0
    shared_expert_width: int = 0
    # a gated delta-net layer's per-token widths in llama.cpp's graph (qwen3next.cpp): (key: n_k_heads x
    # head_k_dim, value: n_v_heads x head_v_dim, n_v_heads, the input projection: 2 key + 2 value where one
    # `ssm_in` holds q, k, v and z, older files; 2 key + value where `attn_qkv` does); () where none or unknown
    linear_widths: tuple[int, int, int, int] = ()
    # absorbed MLA's per-token widths in llama.cpp's graph (deepseek2.cpp): (q_lora_rank, 0 without one;
    # qk_nope_head_dim; v_head_dim); () where there is no MLA or it is not known
    mla_widths: tuple[int, int, int] = ()
    file_weights: FileWeights | None = (
        None  # a model file's own weights (GGUF: its tensor table), exact
    )

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def count(self, kind: str) -> int:
        return sum(1 for layer in self.layers if layer.kind == kind)
