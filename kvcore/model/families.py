"""Model families as data: one Family per `model_type` (what each layer caches, window rules per runtime,
defaults, older field spellings, parameter layout).

Example: family_for("mistral").model_type -> "llama"; family_for("nope") -> KvError "model_unknown".
The layer rules (kvcore.model.geometry) and parameter counts (kvcore.model.params) read these fields; a new family
is one entry in FAMILIES (and its test), never a new branch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvcore.errors import KvError, quote

# The sets of window rules a family states, one per runtime that reads configs its own way: each runtime's
# `windows` key (kvcore.runtimes.registry) is one of these. A runtime with rules of its own adds its key here, then states
# them in the families below; a family naming any other key is refused when it is made (a typo would otherwise
# leave that runtime on `none`, every layer full, without a word).
WINDOW_KEYS = ("mlx_lm", "reference", "llama.cpp")


@dataclass(frozen=True)
class Family:
    """What one `model_type` caches per layer and how its parameters are laid out, as data.

    Each field answers one question the layer and parameter rules ask; a new family is one
    entry in FAMILIES (and its test), never a new branch. `windows` maps each runtime's `windows`
    key (kvcore.runtimes.registry) to the window rules it applies (kvcore.model.layers.WINDOW_RULES, listed
    under this class); a runtime not listed applies `none`. An unknown attention kind, window
    rule or layout code is refused with its name when a config of the family is read.
    """

    model_type: str
    attention: str = "gqa"  # "gqa" (K and V per KV head), "mla" (one latent, DeepSeek), "hybrid_linear" (Qwen3-Next)
    windows: dict[str, str] = field(default_factory=dict)  # runtime -> window rule
    defaults: dict[str, Any] = field(
        default_factory=dict
    )  # transformers' config-class defaults for absent fields
    aliases: dict[str, str] = field(
        default_factory=dict
    )  # older config spelling -> the field the rules read
    head_dim_field: str = (
        "head_dim"  # the field that names the head width when present (Qwen v1: kv_channels)
    )
    tied: str = "config"  # "config" (tie_word_embeddings, default tie_default), "always", "never"
    tie_default: bool = False  # mlx_lm's default when the config is silent
    norms_per_layer: int = 2
    qk_norm: bool = False  # per-head q_norm and k_norm (2 x head_dim)
    attention_extras: str = (
        ""  # a key of kvcore.model.params.ATTENTION_EXTRAS: its biases and sinks
    )
    gated_q: bool = False  # Qwen3-Next doubles q_proj for its output gate
    ffn: str = (
        "dense"  # a key of kvcore.model.params.FFN_LAYOUTS: its feed-forward block (dense, MoE...)
    )
    shared_expert: bool = (
        False  # a Qwen MoE layer also has a shared expert and its gate (Qwen3-Next)
    )
    # the matrices mlx_lm's quant_predicate for this family keeps at 8 bits (group 64) whatever the bits asked
    # (MLX_8BIT_MODULES names them; IBM Granite 3 keeps all three: mlx-lm v0.32.2 mlx_lm/models/granite.py
    # `quant_predicate`, "Keep them safe at 8 bits")
    mlx_8bit: tuple[str, ...] = ()

    def __post_init__(self):
        check_window_keys(self)
        unknown = sorted(set(self.mlx_8bit) - set(MLX_8BIT_MODULES))
        if unknown:
            raise KvError(
                f"Model family {self.model_type!r} keeps {', '.join(map(repr, unknown))} at 8 bits, which "
                f"kvcore does not count; known: {', '.join(MLX_8BIT_MODULES)}."
            )


# The matrices a family may keep at 8 bits under mlx_lm (Family.mlx_8bit), as mlx_lm's paths end: the attention's
# output projection, a dense MLP's down projection, the untied output head (kvcore.model.params counts each).
MLX_8BIT_MODULES = ("o_proj", "down_proj", "lm_head")


def check_window_keys(family: Family) -> None:
    """Refuse a family whose window rules are stated for a key no runtime reads (WINDOW_KEYS), naming it."""
    for key in family.windows:
        if key not in WINDOW_KEYS:
            raise KvError(
                f"Model family {family.model_type!r} states window rules for {key!r}, which is no runtime's "
                f"window key; known: {', '.join(WINDOW_KEYS)}."
            )


# Window rules, by name (kvcore.model.layers.WINDOW_RULES applies them; an unknown one is refused, naming it):
#   none:            every layer full
#   layer_types:     the config's layer_types list when present, else the next rule named after "|"
#   pattern:         every sliding_window_pattern-th layer full (Gemma 3)
#   alternate:       even layers sliding, odd layers full (gpt-oss, Gemma 2)
#   every_layer:     one window on every layer when sliding_window is set (Mistral v0.1, Phi-3 in transformers)
#   ignored:         sliding_window is set but this runtime caches the full context (a note says so)
#   disabled:        llama.cpp turns this family's window off (Phi-3; a note says so)
#   max_window:      layers from max_window_layers on, when use_sliding_window (Qwen2/3 in transformers)
# The keys of `windows` below are each runtime's `windows` key (kvcore.runtimes.registry): data, never compared.

FAMILIES: dict[str, Family] = {
    f.model_type: f
    for f in (
        # Llama 1/2/3, Mistral, SmolLM2: full attention; Llama 1/2 have no num_key_value_heads (full MHA).
        # llama.cpp's LLM_ARCH_LLAMA has no sliding window (Mistral-7B-v0.1's window is not applied).
        Family(
            "llama",
            windows={
                "mlx_lm": "layer_types|ignored",
                "reference": "layer_types|every_layer",
                "llama.cpp": "layer_types|ignored",
            },
            tie_default=True,
            attention_extras="llama_bias",
            ffn="llama",
        ),
        # Qwen v1 (QWenLMHeadModel): full MHA, head width kv_channels; the first configs spell fields GPT-2 style.
        Family(
            "qwen",
            head_dim_field="kv_channels",
            tied="never",
            attention_extras="qwen_v1",
            ffn="qwen_v1",
            aliases={
                "n_embd": "hidden_size",
                "n_head": "num_attention_heads",
                "n_layer": "num_hidden_layers",
                "ffn_hidden_size": "intermediate_size",
                "padded_vocab_size": "vocab_size",
            },
        ),
        Family(
            "qwen2",
            windows={"reference": "max_window"},
            tie_default=True,
            attention_extras="qkv_bias",
        ),
        Family("qwen3", windows={"reference": "max_window"}, qk_norm=True),
        Family("qwen3_moe", windows={"reference": "max_window"}, qk_norm=True, ffn="moe_qwen"),
        Family(
            "qwen3_next",
            attention="hybrid_linear",
            qk_norm=True,
            gated_q=True,
            ffn="moe_qwen",
            shared_expert=True,
        ),
        # Phi-3: transformers applies sliding_window on every layer; mlx_lm ignores it; llama.cpp disables it
        # ("Phi SWA is currently disabled", https://github.com/ggml-org/llama.cpp/pull/13676).
        Family(
            "phi3",
            windows={"mlx_lm": "ignored", "reference": "every_layer", "llama.cpp": "disabled"},
        ),
        # Gemma 2: even layers slide (transformers, llama.cpp set_swa_pattern(2)); mlx_lm's gemma2.py caches every layer in full.
        Family(
            "gemma2",
            windows={"mlx_lm": "ignored", "reference": "alternate", "llama.cpp": "alternate"},
            tied="always",
            norms_per_layer=4,
            defaults={"head_dim": 256, "sliding_window": 4096},
        ),
        Family(
            "gemma3_text",
            windows={
                "mlx_lm": "pattern",
                "reference": "layer_types|pattern",
                "llama.cpp": "pattern",
            },
            tie_default=True,
            norms_per_layer=4,
            qk_norm=True,
            defaults={
                "vocab_size": 262208,
                "head_dim": 256,
                "num_attention_heads": 8,
                "num_key_value_heads": 4,
                "sliding_window": 4096,
                "sliding_window_pattern": 6,
                "tie_word_embeddings": True,
                "max_position_embeddings": 131072,
            },
        ),
        Family(
            "gpt_oss",
            windows={
                "mlx_lm": "layer_types|alternate",
                "reference": "layer_types|alternate",
                "llama.cpp": "layer_types|alternate",
            },
            tied="never",
            attention_extras="gpt_oss",
            ffn="moe_gpt_oss",
        ),
        Family("deepseek_v3", attention="mla", tied="never", ffn="moe_deepseek"),
    )
}
MODEL_TYPE_ALIASES = {
    "gemma3": "gemma3_text",
    "mistral": "llama",
    "smollm2": "llama",
    "deepseek_v2": "deepseek_v3",
}


def family_for(model_type: str) -> Family:
    """The family a config's `model_type` belongs to, or a KvError naming it (never silent Llama rules)."""
    family = FAMILIES.get(MODEL_TYPE_ALIASES.get(model_type, model_type))
    if family is None:
        known = ", ".join(sorted(set(FAMILIES) | set(MODEL_TYPE_ALIASES)))
        raise KvError(
            f"model_type {quote(model_type)} is not a model family kvcore knows; known: {known}.",
            "model_unknown",
            model_type=quote(model_type),
            known=known,
        )
    return family
