"""Parameter counts in mlx_lm's layout: what memory must hold and what one decode step reads (MoE:
the routed experts only), split by how mlx_lm quantizes them.

Example: preset_geometry("llama-3.2-1b").params.total -> 1,235,814,400.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from kvcore.errors import KvError
from kvcore.model.families import Family
from kvcore.model.geometry import Layer, Params

if TYPE_CHECKING:  # the config's reader is handed in; counting needs only its reads
    from kvcore.model.config import Cfg


def _mlp(h: int, inter: int) -> Params:
    return Params(matrix=3 * h * inter)


def _attention(cfg: Cfg, family: Family, layer: Layer) -> Params:
    h, nh = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    if layer.kind == "mla":
        q_lora = (
            cfg.int("q_lora_rank") if cfg.get("q_lora_rank") is not None else 0
        )  # null: no Q LoRA
        nope, rope, v_head = (
            cfg.int("qk_nope_head_dim"),
            cfg.int("qk_rope_head_dim"),
            cfg.int("v_head_dim"),
        )
        latent = cfg.int("kv_lora_rank")
        q = (
            Params(matrix=h * q_lora + q_lora * nh * (nope + rope), vector=q_lora)
            if q_lora
            else Params(matrix=h * nh * (nope + rope))
        )
        kv = Params(
            matrix=h * (latent + rope) + nh * nope * latent + nh * latent * v_head, vector=latent
        )
        return q + kv + Params(matrix=nh * v_head * h)
    if layer.kind == "linear":  # Qwen3-Next gated delta net
        nk, nv = cfg.int("linear_num_key_heads"), cfg.int("linear_num_value_heads")
        dk, dv = cfg.int("linear_key_head_dim"), cfg.int("linear_value_head_dim")
        key_dim, value_dim = nk * dk, nv * dv
        conv_dim = 2 * key_dim + value_dim
        return Params(
            matrix=h * (2 * key_dim + 2 * value_dim) + h * 2 * nv + value_dim * h,
            vector=conv_dim * cfg.int("linear_conv_kernel_dim") + 2 * nv + dv,
        )
    hd, kvh = layer.k_dim, layer.kv_heads
    q_out = nh * hd * (2 if family.gated_q else 1)
    o_proj = nh * hd * h
    p = Params(matrix=h * q_out + 2 * h * kvh * hd + o_proj)
    if "o_proj" in family.mlx_8bit:
        p += Params(matrix_8bit=o_proj)
    p += _layout(ATTENTION_EXTRAS, "attention_extras", family.attention_extras, family)(
        cfg, nh, kvh, hd, h
    )
    if family.qk_norm:
        p += Params(vector=2 * hd)  # q_norm, k_norm
    return p


def _layout(table: dict, field: str, code: str, family: Family):
    """The table's entry for a family's layout code, or a KvError naming the code (never a silent default)."""
    try:
        return table[code]
    except KeyError:
        raise KvError(
            f"Model family {family.model_type!r} names the {field} layout {code!r}, which kvcore does not know; "
            f"known: {', '.join(repr(k) for k in table)}."
        ) from None


def _qkv_bias(nh: int, kvh: int, hd: int) -> int:
    return (nh + 2 * kvh) * hd


# The attention's extra parameters by layout code (Family.attention_extras): biases and sinks, per layer.
ATTENTION_EXTRAS: dict[str, Callable[[Cfg, int, int, int, int], Params]] = {
    "": lambda cfg, nh, kvh, hd, h: Params(),
    "qkv_bias": lambda cfg, nh, kvh, hd, h: Params(vector=_qkv_bias(nh, kvh, hd)),  # Qwen2
    # Llama: q/k/v/o biases when the config's attention_bias is set
    "llama_bias": lambda cfg, nh, kvh, hd, h: (
        Params(vector=_qkv_bias(nh, kvh, hd) + h) if cfg.bool("attention_bias", False) else Params()
    ),
    "gpt_oss": lambda cfg, nh, kvh, hd, h: Params(
        vector=_qkv_bias(nh, kvh, hd) + h + nh
    ),  # q/k/v/o biases + attention sinks
    # Qwen v1: c_attn has a bias; c_proj has one unless no_bias
    "qwen_v1": lambda cfg, nh, kvh, hd, h: Params(
        vector=3 * nh * hd + (0 if cfg.bool("no_bias", True) else h)
    ),
}


def _moe_layer(cfg: Cfg, i: int, first_dense: str | None = None) -> bool:
    """Whether layer i routes to experts: DeepSeek (first_k_dense_replace, moe_layer_freq), Qwen (num_experts,
    mlp_only_layers, decoder_sparse_step)."""
    if first_dense:
        return not (
            i < cfg.int("first_k_dense_replace", 0, minimum=0) or i % cfg.int("moe_layer_freq", 1)
        )
    return (
        bool(cfg.int("num_experts", 0, minimum=0))
        and i not in cfg.index_set("mlp_only_layers")
        and (i + 1) % cfg.int("decoder_sparse_step", 1) == 0
    )


def _dense(cfg: Cfg, family: Family, i: int) -> tuple[Params, Params, int]:
    h, inter = cfg.int("hidden_size"), cfg.int("intermediate_size")
    p = _mlp(h, inter)
    if "down_proj" in family.mlx_8bit:
        p += Params(matrix_8bit=inter * h)
    return p, p, 0


def _llama(cfg: Cfg, family: Family, i: int) -> tuple[Params, Params, int]:
    p, _, _ = _dense(cfg, family, i)
    if cfg.bool("mlp_bias", False):
        p += Params(vector=2 * cfg.int("intermediate_size") + cfg.int("hidden_size"))
    return p, p, 0


def _qwen_v1(cfg: Cfg, family: Family, i: int) -> tuple[Params, Params, int]:
    """w1, w2: hidden -> intermediate_size / 2; c_proj back (with a bias unless no_bias)."""
    h = cfg.int("hidden_size")
    p = _mlp(h, cfg.int("intermediate_size") // 2) + (
        Params() if cfg.bool("no_bias", True) else Params(vector=h)
    )
    return p, p, 0


# how many routed experts a MoE family's config.json names, by its feed-forward kind (Family.ffn)
EXPERT_COUNT_KEY = {
    "moe_deepseek": "n_routed_experts",
    "moe_gpt_oss": "num_local_experts",
    "moe_qwen": "num_experts",
}


def _moe_deepseek(cfg: Cfg, family: Family, i: int) -> tuple[Params, Params, int]:
    if not _moe_layer(cfg, i, first_dense="first_k_dense_replace"):
        return _dense(cfg, family, i)
    h = cfg.int("hidden_size")
    experts, top_k, inter = (
        cfg.int(EXPERT_COUNT_KEY["moe_deepseek"]),
        cfg.int("num_experts_per_tok"),
        cfg.int("moe_intermediate_size"),
    )
    shared = _mlp(h, inter * cfg.int("n_shared_experts", 0, minimum=0))
    router = Params(vector=h * experts + experts)  # MoEGate: plain arrays (never quantized) + bias
    return (
        router + shared + _mlp(h, inter) * experts,
        router + shared + _mlp(h, inter) * top_k,
        _mlp(h, inter).matrix * experts,
    )


def _moe_gpt_oss(cfg: Cfg, family: Family, i: int) -> tuple[Params, Params, int]:
    h = cfg.int("hidden_size")
    experts, top_k, inter = (
        cfg.int(EXPERT_COUNT_KEY["moe_gpt_oss"]),
        cfg.int("num_experts_per_tok"),
        cfg.int("intermediate_size"),
    )
    expert = Params(matrix=3 * h * inter, vector=2 * inter + h)
    router = Params(router=h * experts, vector=experts)
    return router + expert * experts, router + expert * top_k, 3 * h * inter * experts


def _moe_qwen(cfg: Cfg, family: Family, i: int) -> tuple[Params, Params, int]:
    if not _moe_layer(cfg, i):
        return _dense(cfg, family, i)
    h = cfg.int("hidden_size")
    experts, top_k, inter = (
        cfg.int(EXPERT_COUNT_KEY["moe_qwen"]),
        cfg.int("num_experts_per_tok"),
        cfg.int("moe_intermediate_size"),
    )
    router = Params(router=h * experts)
    if family.shared_expert:  # Qwen3-Next: a shared expert and its gate
        router += _mlp(h, cfg.int("shared_expert_intermediate_size")) + Params(router=h)
    return (
        router + _mlp(h, inter) * experts,
        router + _mlp(h, inter) * top_k,
        _mlp(h, inter).matrix * experts,
    )


# The feed-forward block by layout code (Family.ffn): layer i -> (all parameters, parameters one token reads,
# matrix parameters of its routed experts: the 3-D expert tensors a GGUF file stores; 0 when dense).
FFN_LAYOUTS: dict[str, Callable[[Cfg, Family, int], tuple[Params, Params, int]]] = {
    "dense": _dense,
    "llama": _llama,
    "qwen_v1": _qwen_v1,
    "moe_qwen": _moe_qwen,
    "moe_gpt_oss": _moe_gpt_oss,
    "moe_deepseek": _moe_deepseek,
}


def _ffn(cfg: Cfg, family: Family, i: int) -> tuple[Params, Params, int]:
    """(all parameters, parameters one token reads, routed-expert matrix parameters) of layer i's feed-forward block."""
    return _layout(FFN_LAYOUTS, "ffn", family.ffn, family)(cfg, family, i)


def check_layouts(family: Family) -> None:
    """Refuse a family whose attention_extras or ffn code is not a layout kvcore knows, naming it."""
    _layout(ATTENTION_EXTRAS, "attention_extras", family.attention_extras, family)
    _layout(FFN_LAYOUTS, "ffn", family.ffn, family)


def count_params(cfg: Cfg, family: Family, layers: list[Layer]) -> tuple[Params, Params, bool]:
    h, vocab = cfg.int("hidden_size"), cfg.int("vocab_size")
    tied = {"always": True, "never": False}.get(family.tied)
    if tied is None:
        tied = cfg.bool("tie_word_embeddings", family.tie_default)
    base = Params(matrix=vocab * h * (1 if tied else 2), vector=h)
    if not tied and "lm_head" in family.mlx_8bit:
        base += Params(matrix_8bit=vocab * h)
    total, active = base, base
    for layer in layers:
        attn = _attention(cfg, family, layer) + Params(vector=family.norms_per_layer * h)
        ffn_all, ffn_active, _ = _ffn(cfg, family, layer.index)
        total, active = total + attn + ffn_all, active + attn + ffn_active
    return total, active, tied


def layer_ffn(cfg: Cfg, family: Family, layers: list[Layer]) -> tuple[tuple[int, int], ...]:
    """Per layer: (feed-forward matrix parameters, of which routed-expert matrices), for the GGUF mixes
    (kvcore.memory.weight_formats: Q4_K_M promotes ffn_down in some layers; MXFP4_MOE packs only the 3-D expert tensors)."""
    return tuple(
        (ffn[0].matrix, ffn[2]) for ffn in (_ffn(cfg, family, layer.index) for layer in layers)
    )
