"""Model geometry: a Hugging Face config.json -> what each layer caches, and parameter counts.

Example: parse_config(llama_3_2_1b_config).layers[0] ->
    Layer(index=0, kind="full", kv_heads=8, k_dim=64, v_dim=64)
Every model_type is one entry in FAMILIES (data, not branches): its window rule per runtime, its
defaults, older field spellings and parameter layout. The layer rules follow mlx_lm's model files
(`mlx_lm/models/<model_type>.py`, mlx-lm 0.32.2) under `runtime="mlx_lm"`, llama.cpp's model code
(`src/llama-model.cpp`, see kvcore.llamacpp) under `runtime="llama.cpp"`, and the architecture as its
config defines it (transformers / vLLM) under `runtime="reference"`; they differ only in which
attention windows a runtime applies. An unknown model_type is a KvError naming it.
"""

from __future__ import annotations

import difflib
import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .errors import KvError
from .runtimes import DEFAULT as DEFAULT_RUNTIME, Runtime, get_runtime, gguf_runtime
from .textfile import decode_text, read_text_file

PRESETS_DIR = Path(__file__).parent / "presets"
MAX_CONFIG_BYTES = 1_000_000  # a real config.json is a few KB; refuse anything absurd
MAX_JSON_DEPTH = 32  # a real config.json nests 3-4 levels (text_config.rope_scaling...)
MAX_FIELD = 10**9  # any count or size in a config
MAX_LAYERS = 1024  # the largest real models have ~130; the engine loops over layers


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
class Params:
    """Parameter counts split by how mlx_lm quantizes them.

    matrix: Linear/Embedding weights (quantized at the chosen bits); router: MoE router
    weights (mlx_lm keeps them at 8 bits); vector: norms, biases, other small tensors (never
    quantized).
    """

    matrix: int = 0
    router: int = 0
    vector: int = 0

    @property
    def total(self) -> int:
        return self.matrix + self.router + self.vector

    def __add__(self, other: "Params") -> "Params":
        return Params(self.matrix + other.matrix, self.router + other.router, self.vector + other.vector)

    def __mul__(self, k: int) -> "Params":
        return Params(self.matrix * k, self.router * k, self.vector * k)


@dataclass(frozen=True)
class FileWeights:
    """The weights as a model file stores them (a GGUF's tensor table): exact bytes, and by tensor type."""

    bytes: int
    active_bytes: int  # what one decode step reads (MoE: the routed experts' share of the expert tensors)
    by_type: tuple[tuple[str, int, int, int], ...] = ()  # (ggml type, tensors, values, bytes), largest first


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
    note_codes: tuple[tuple[str, int], ...] = field(default=())  # (code, sliding window), parallel to notes
    max_position_embeddings: int | None = None  # the longest context the model was trained for (config.json)
    file_weights: FileWeights | None = None  # a model file's own weights (GGUF: its tensor table), exact

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def count(self, kind: str) -> int:
        return sum(1 for layer in self.layers if layer.kind == kind)


# ---------------------------------------------------------------- config access


def _flatten(config: dict) -> dict:
    """Merge a multimodal config's `text_config` over the top level (Gemma 3, Qwen-VL style)."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        return dict(config)
    flat = {k: v for k, v in config.items() if k != "text_config"}
    flat.update(text)
    return flat


class _Cfg:
    """Typed reads from a flattened config; errors name the field."""

    def __init__(self, config: dict, family: "Family"):
        self.c, self.d = dict(config), family.defaults
        for old, new in family.aliases.items():  # an older spelling counts when the newer one is absent
            if self.c.get(new) is None and self.c.get(old) is not None:
                self.c[new] = self.c[old]

    def has(self, key: str) -> bool:
        return self.c.get(key) is not None or key in self.d

    def get(self, key: str, default: Any = None) -> Any:
        value = self.c.get(key)
        if value is None:
            value = self.d.get(key, default)
        return value

    def int(self, key: str, default: Any = ..., minimum: int = 1) -> int:
        value = self.get(key, None if default is ... else default)
        if value is None:
            raise KvError(f"config.json is missing the field {key!r}.", "config_missing", field=key)
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (isinstance(value, float) and not math.isfinite(value)) or value != int(value)):
            raise KvError(f"config.json field {key!r} must be a whole number, not {value!r}.", "config_not_whole", field=key, value=value)
        limit = MAX_LAYERS if key == "num_hidden_layers" else MAX_FIELD
        if int(value) < minimum or int(value) > limit:
            raise KvError(f"config.json field {key!r} = {value!r} is out of range ({minimum} to {limit:,}).", "config_range",
                          field=key, value=value, minimum=minimum, limit=limit)
        return int(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise KvError(f"config.json field {key!r} must be true or false, not {value!r}.", "config_not_bool", field=key, value=value)
        return value


# ---------------------------------------------------------------- model families (data)


@dataclass(frozen=True)
class Family:
    """What one `model_type` caches per layer and how its parameters are laid out, as data.

    Each field answers one question the layer and parameter rules ask; a new family is one
    entry in FAMILIES (and its test), never a new branch. `windows` maps each runtime to the
    window rule it applies (see WINDOW_RULES); a runtime not listed applies `none`.
    """

    model_type: str
    attention: str = "gqa"  # "gqa" (K and V per KV head), "mla" (one latent, DeepSeek), "hybrid_linear" (Qwen3-Next)
    windows: dict[str, str] = field(default_factory=dict)  # runtime -> window rule
    defaults: dict[str, Any] = field(default_factory=dict)  # transformers' config-class defaults for absent fields
    aliases: dict[str, str] = field(default_factory=dict)  # older config spelling -> the field the rules read
    head_dim_field: str = "head_dim"  # the field that names the head width when present (Qwen v1: kv_channels)
    tied: str = "config"  # "config" (tie_word_embeddings, default tie_default), "always", "never"
    tie_default: bool = False  # mlx_lm's default when the config is silent
    norms_per_layer: int = 2
    qk_norm: bool = False  # per-head q_norm and k_norm (2 x head_dim)
    attention_extras: str = ""  # "qkv_bias", "llama_bias" (attention_bias flag), "gpt_oss" (all biases + sinks), "qwen_v1"
    gated_q: bool = False  # Qwen3-Next doubles q_proj for its output gate
    ffn: str = "dense"  # "dense", "llama" (mlp_bias flag), "qwen_v1" (two halves), "moe_qwen", "moe_gpt_oss", "moe_deepseek"


# Window rules, by name: which layers keep a sliding window (returns flags and reader notes).
#   none:            every layer full
#   layer_types:     the config's layer_types list when present, else the next rule named after "|"
#   pattern:         every sliding_window_pattern-th layer full (Gemma 3)
#   alternate:       even layers sliding, odd layers full (gpt-oss, Gemma 2)
#   every_layer:     one window on every layer when sliding_window is set (Mistral v0.1, Phi-3 in transformers)
#   ignored:         sliding_window is set but this runtime caches the full context (a note says so)
#   disabled:        llama.cpp turns this family's window off (Phi-3; a note says so)
#   max_window:      layers from max_window_layers on, when use_sliding_window (Qwen2/3 in transformers)
# The keys of `windows` below are each runtime's `windows` key (kvcore.runtimes): data, never compared.

FAMILIES: dict[str, Family] = {f.model_type: f for f in (
    # Llama 1/2/3, Mistral, SmolLM2: full attention; Llama 1/2 have no num_key_value_heads (full MHA).
    # llama.cpp's LLM_ARCH_LLAMA has no sliding window (Mistral-7B-v0.1's window is not applied).
    Family("llama", windows={"mlx_lm": "layer_types|ignored", "reference": "layer_types|every_layer", "llama.cpp": "layer_types|ignored"},
           tie_default=True, attention_extras="llama_bias", ffn="llama"),
    # Qwen v1 (QWenLMHeadModel): full MHA, head width kv_channels; the first configs spell fields GPT-2 style.
    Family("qwen", head_dim_field="kv_channels", tied="never", attention_extras="qwen_v1", ffn="qwen_v1",
           aliases={"n_embd": "hidden_size", "n_head": "num_attention_heads", "n_layer": "num_hidden_layers",
                    "ffn_hidden_size": "intermediate_size", "padded_vocab_size": "vocab_size"}),
    Family("qwen2", windows={"reference": "max_window"}, tie_default=True, attention_extras="qkv_bias"),
    Family("qwen3", windows={"reference": "max_window"}, qk_norm=True),
    Family("qwen3_moe", windows={"reference": "max_window"}, qk_norm=True, ffn="moe_qwen"),
    Family("qwen3_next", attention="hybrid_linear", qk_norm=True, gated_q=True, ffn="moe_qwen"),
    # Phi-3: transformers applies sliding_window on every layer; mlx_lm ignores it; llama.cpp disables it
    # ("Phi SWA is currently disabled", https://github.com/ggml-org/llama.cpp/pull/13676).
    Family("phi3", windows={"mlx_lm": "ignored", "reference": "every_layer", "llama.cpp": "disabled"}),
    # Gemma 2: even layers slide (transformers, llama.cpp set_swa_pattern(2)); mlx_lm's gemma2.py caches every layer in full.
    Family("gemma2", windows={"mlx_lm": "ignored", "reference": "alternate", "llama.cpp": "alternate"}, tied="always", norms_per_layer=4,
           defaults={"head_dim": 256, "sliding_window": 4096}),
    Family("gemma3_text", windows={"mlx_lm": "pattern", "reference": "layer_types|pattern", "llama.cpp": "pattern"}, tie_default=True,
           norms_per_layer=4, qk_norm=True,
           defaults={"vocab_size": 262208, "head_dim": 256, "num_attention_heads": 8, "num_key_value_heads": 4,
                     "sliding_window": 4096, "sliding_window_pattern": 6, "tie_word_embeddings": True,
                     "max_position_embeddings": 131072}),
    Family("gpt_oss", windows={"mlx_lm": "layer_types|alternate", "reference": "layer_types|alternate", "llama.cpp": "layer_types|alternate"},
           tied="never", attention_extras="gpt_oss", ffn="moe_gpt_oss"),
    Family("deepseek_v3", attention="mla", tied="never", ffn="moe_deepseek"),
)}
MODEL_TYPE_ALIASES = {"gemma3": "gemma3_text", "mistral": "llama", "smollm2": "llama", "deepseek_v2": "deepseek_v3"}


def family_for(model_type: str) -> Family:
    """The family a config's `model_type` belongs to, or a KvError naming it (never silent Llama rules)."""
    family = FAMILIES.get(MODEL_TYPE_ALIASES.get(model_type, model_type))
    if family is None:
        known = ", ".join(sorted(set(FAMILIES) | set(MODEL_TYPE_ALIASES)))
        raise KvError(f"model_type {model_type!r} is not a model family kvcore knows; known: {known}.", "model_unknown",
                      model_type=model_type, known=known)
    return family



# ---------------------------------------------------------------- layer rules

_NOTE_TEXT = {
    "sliding_ignored": "mlx_lm ignores sliding_window={window} here and caches the full context",
    "sliding_ignored_llamacpp": "llama.cpp ignores sliding_window={window} for this architecture and caches the full context",
    "sliding_disabled": "llama.cpp disables Phi-3's sliding_window={window} and caches the full context",
    "sliding_every_layer": "every layer keeps a {window}-token window (as transformers and vLLM run it)",
}


def _note(code: str, window: int) -> tuple[str, int, str]:
    return code, window, _NOTE_TEXT[code].format(window=window)


def _sliding_flags(cfg: _Cfg, family: Family, n_layers: int, runtime: Runtime) -> tuple[list[bool], list[tuple[str, int, str]]]:
    """Which layers keep a sliding window under `runtime`, by the family's window rule; notes are (code, window, text)."""
    layer_types = cfg.get("layer_types")
    if layer_types is not None and (not isinstance(layer_types, list) or len(layer_types) != n_layers):
        raise KvError(f"config.json field 'layer_types' must list {n_layers} layer types.", "config_layer_types", n=n_layers)
    window = cfg.get("sliding_window")
    for rule in family.windows.get(runtime.windows, "none").split("|"):
        if rule == "layer_types":
            if layer_types:
                return [t == "sliding_attention" for t in layer_types], []
            continue
        if rule == "pattern":
            pattern = cfg.int("sliding_window_pattern")
            return [i % pattern != pattern - 1 for i in range(n_layers)], []
        if rule == "alternate":
            return [i % 2 == 0 for i in range(n_layers)], []
        if rule == "every_layer" and window:
            return [True] * n_layers, [_note("sliding_every_layer", cfg.int("sliding_window"))]
        if rule in ("ignored", "disabled") and window:
            code = "sliding_disabled" if rule == "disabled" else runtime.ignored_window_note
            return [False] * n_layers, [_note(code, cfg.int("sliding_window"))]
        if rule == "max_window" and cfg.get("use_sliding_window"):
            start = cfg.int("max_window_layers", 0, minimum=0)
            return [i >= start for i in range(n_layers)], []
    return [False] * n_layers, []


def _layers(cfg: _Cfg, family: Family, runtime: Runtime) -> tuple[list[Layer], list[tuple[str, int, str]]]:
    n_layers = cfg.int("num_hidden_layers")
    n_heads = cfg.int("num_attention_heads")
    hidden = cfg.int("hidden_size")
    if family.attention == "mla":  # one latent (kv_lora_rank) + one shared rope key per token
        latent, rope = cfg.int("kv_lora_rank"), cfg.int("qk_rope_head_dim")
        return [Layer(i, "mla", 1, latent, rope) for i in range(n_layers)], []
    kv_heads = cfg.int("num_key_value_heads", n_heads)  # absent -> full multi-head attention (Llama 1/2, Qwen v1)
    if cfg.has(family.head_dim_field):
        head_dim = cfg.int(family.head_dim_field)
    else:
        if hidden % n_heads:
            raise KvError("config.json has no 'head_dim' and hidden_size is not divisible by num_attention_heads.", "config_head_dim")
        head_dim = hidden // n_heads
    if n_heads % kv_heads:
        raise KvError(
            f"config.json: num_attention_heads ({n_heads}) must be a multiple of num_key_value_heads ({kv_heads}).",
            "config_heads", heads=n_heads, kv_heads=kv_heads)
    if family.attention == "hybrid_linear":  # Qwen3-Next: gated delta net layers, full attention every interval-th
        interval = cfg.int("full_attention_interval", 4)
        nk, nv = cfg.int("linear_num_key_heads"), cfg.int("linear_num_value_heads")
        dk, dv = cfg.int("linear_key_head_dim"), cfg.int("linear_value_head_dim")
        conv_dim = 2 * nk * dk + nv * dv
        conv = (cfg.int("linear_conv_kernel_dim") - 1) * conv_dim
        layers = [
            Layer(i, "full", kv_heads, head_dim, head_dim)
            if (i + 1) % interval == 0
            else Layer(i, "linear", conv_values=conv, state_values=nv * dv * dk)
            for i in range(n_layers)
        ]
        return layers, []
    sliding, notes = _sliding_flags(cfg, family, n_layers, runtime)
    window = cfg.int("sliding_window") if any(sliding) else None
    layers = [
        Layer(i, "sliding", kv_heads, head_dim, head_dim, window) if s else Layer(i, "full", kv_heads, head_dim, head_dim)
        for i, s in enumerate(sliding)
    ]
    return layers, notes


# ---------------------------------------------------------------- parameter counts (mlx_lm layout)


def _mlp(h: int, inter: int) -> Params:
    return Params(matrix=3 * h * inter)


def _attention(cfg: _Cfg, family: Family, layer: Layer) -> Params:
    h, nh = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    if layer.kind == "mla":
        q_lora = cfg.get("q_lora_rank")
        nope, rope, v_head = cfg.int("qk_nope_head_dim"), cfg.int("qk_rope_head_dim"), cfg.int("v_head_dim")
        latent = cfg.int("kv_lora_rank")
        q = Params(matrix=h * q_lora + q_lora * nh * (nope + rope), vector=q_lora) if q_lora else Params(matrix=h * nh * (nope + rope))
        kv = Params(matrix=h * (latent + rope) + nh * nope * latent + nh * latent * v_head, vector=latent)
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
    p = Params(matrix=h * q_out + 2 * h * kvh * hd + nh * hd * h)
    extras = family.attention_extras
    if extras == "qkv_bias":
        p += Params(vector=(nh + 2 * kvh) * hd)
    elif extras == "llama_bias" and cfg.bool("attention_bias", False):
        p += Params(vector=(nh + 2 * kvh) * hd + h)
    elif extras == "gpt_oss":
        p += Params(vector=(nh + 2 * kvh) * hd + h + nh)  # q/k/v/o biases + attention sinks
    elif extras == "qwen_v1":  # c_attn has a bias; c_proj has one unless no_bias
        p += Params(vector=3 * nh * hd + (0 if cfg.bool("no_bias", True) else h))
    if family.qk_norm:
        p += Params(vector=2 * hd)  # q_norm, k_norm
    return p


def _ffn(cfg: _Cfg, family: Family, i: int) -> tuple[Params, Params]:
    """(all parameters, parameters one token reads) of layer i's feed-forward block."""
    h = cfg.int("hidden_size")
    if family.ffn == "moe_deepseek":
        if i < cfg.int("first_k_dense_replace", 0, minimum=0) or i % cfg.int("moe_layer_freq", 1):
            p = _mlp(h, cfg.int("intermediate_size"))
            return p, p
        experts, top_k, inter = cfg.int("n_routed_experts"), cfg.int("num_experts_per_tok"), cfg.int("moe_intermediate_size")
        shared = _mlp(h, inter * cfg.int("n_shared_experts", 0, minimum=0))
        router = Params(vector=h * experts + experts)  # MoEGate: plain arrays (never quantized) + bias
        return router + shared + _mlp(h, inter) * experts, router + shared + _mlp(h, inter) * top_k
    if family.ffn == "moe_gpt_oss":
        experts, top_k, inter = cfg.int("num_local_experts"), cfg.int("num_experts_per_tok"), cfg.int("intermediate_size")
        expert = Params(matrix=3 * h * inter, vector=2 * inter + h)
        router = Params(router=h * experts, vector=experts)
        return router + expert * experts, router + expert * top_k
    if family.ffn == "moe_qwen":
        experts = cfg.int("num_experts", 0, minimum=0)
        mlp_only = cfg.get("mlp_only_layers") or []
        if experts and i not in mlp_only and (i + 1) % cfg.int("decoder_sparse_step", 1) == 0:
            top_k, inter = cfg.int("num_experts_per_tok"), cfg.int("moe_intermediate_size")
            router = Params(router=h * experts)
            if family.gated_q:  # Qwen3-Next: a shared expert and its gate
                router += _mlp(h, cfg.int("shared_expert_intermediate_size")) + Params(router=h)
            return router + _mlp(h, inter) * experts, router + _mlp(h, inter) * top_k
    if family.ffn == "qwen_v1":  # w1, w2: hidden -> intermediate_size / 2; c_proj back
        half = cfg.int("intermediate_size") // 2
        p = _mlp(h, half) + (Params() if cfg.bool("no_bias", True) else Params(vector=h))
        return p, p
    p = _mlp(h, cfg.int("intermediate_size"))
    if family.ffn == "llama" and cfg.bool("mlp_bias", False):
        p += Params(vector=2 * cfg.int("intermediate_size") + h)
    return p, p


def _params(cfg: _Cfg, family: Family, layers: list[Layer]) -> tuple[Params, Params, bool]:
    h, vocab = cfg.int("hidden_size"), cfg.int("vocab_size")
    tied = {"always": True, "never": False}.get(family.tied)
    if tied is None:
        tied = cfg.bool("tie_word_embeddings", family.tie_default)
    base = Params(matrix=vocab * h * (1 if tied else 2), vector=h)
    total, active = base, base
    for layer in layers:
        attn = _attention(cfg, family, layer) + Params(vector=family.norms_per_layer * h)
        ffn_all, ffn_active = _ffn(cfg, family, layer.index)
        total, active = total + attn + ffn_all, active + attn + ffn_active
    return total, active, tied

# ---------------------------------------------------------------- entry points


def parse_config(config: Any, name: str = "config.json", runtime: str = DEFAULT_RUNTIME) -> Geometry:
    """A Hugging Face config.json (dict) -> per-layer cache geometry and parameter counts."""
    rt = get_runtime(runtime)
    if rt.windows not in {key for family in FAMILIES.values() for key in family.windows}:
        raise KvError(f"Runtime {rt.name} applies the window rules of {rt.windows!r}, which no model family states; "
                      f"give each family's rule for it in kvcore.geometry.FAMILIES.")
    if not isinstance(config, dict):
        raise KvError("config.json must be a JSON object.", "config_object")
    flat = _flatten(config)
    model_type = flat.get("model_type")
    if not isinstance(model_type, str):
        raise KvError("config.json is missing the field 'model_type'.", "config_missing", field="model_type")
    family = family_for(model_type)
    model_type = family.model_type
    cfg = _Cfg(flat, family)
    try:
        layers, notes = _layers(cfg, family, rt)
        params, active, tied = _params(cfg, family, layers)
    except (TypeError, ValueError, AttributeError, OverflowError) as e:
        if isinstance(e, KvError):
            raise
        raise KvError(f"config.json has a field of the wrong shape for a {model_type} model ({e}).", "config_shape",
                      model_type=model_type, detail=str(e)) from None
    return Geometry(
        name=name,
        model_type=model_type,
        runtime=runtime,
        layers=tuple(layers),
        hidden_size=cfg.int("hidden_size"),
        num_attention_heads=cfg.int("num_attention_heads"),
        vocab_size=cfg.int("vocab_size"),
        params=params,
        active_params=active,
        tie_word_embeddings=tied,
        notes=tuple(text for _, _, text in notes),
        note_codes=tuple((code, window) for code, window, _ in notes),
        max_position_embeddings=cfg.int("max_position_embeddings", None) if cfg.has("max_position_embeddings") else None,
    )


@lru_cache(maxsize=None)
def _preset_files() -> dict[str, Path]:
    return {p.stem: p for p in sorted(PRESETS_DIR.glob("*.json"))}


def preset_names() -> list[str]:
    return list(_preset_files())


@lru_cache(maxsize=None)
def load_preset(name: str) -> dict:
    """The preset file (name, hf_id, source, default_weights_format, config) for a preset name."""
    files = _preset_files()
    if name not in files:
        close = difflib.get_close_matches(name.lower(), files, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else " Run `python -m kvcore presets` for the list."
        raise KvError(f"Unknown model preset {name!r}.{hint}")
    return json.loads(files[name].read_text(encoding="utf-8"))


def read_config_file(path: str | Path) -> dict:
    """Read a config.json from disk (a model folder: its config.json), or raise a KvError that names the problem.

    The bytes come through kvcore.textfile (size-limited, regular files only, UTF-8).
    """
    path = Path(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise KvError(f"{path} is a folder without a config.json; give a config.json or a model folder.", "file_folder",
                          label=str(path))
        path = path / "config.json"
    return parse_json_text(read_text_file(path, MAX_CONFIG_BYTES), str(path))


def _nesting_depth(text: str) -> int:
    """The deepest bracket nesting of JSON text (strings skipped), in one pass; no recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def parse_json_text(text: str | bytes, label: str = "config.json") -> dict:
    """JSON text (or an uploaded file's bytes) -> dict, or a KvError naming the problem: too large, binary,
    not UTF-8, nested deeper than MAX_JSON_DEPTH, or the line and column of the mistake.
    """
    if isinstance(text, bytes):
        text = decode_text(text, MAX_CONFIG_BYTES, label)
    if len(text.encode("utf-8", "replace")) > MAX_CONFIG_BYTES:
        raise KvError(f"{label} is larger than {MAX_CONFIG_BYTES // 1000} kB; that is not a config.json.", "json_too_large",
                      label=label, kb=MAX_CONFIG_BYTES // 1000)
    if "\x00" in text:
        raise KvError(f"{label} is a binary file, not text.", "file_binary", label=label)
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _nesting_depth(text) > MAX_JSON_DEPTH:
        raise KvError(f"{label} is nested too deeply to be a config.json.", "json_nested", label=label)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise KvError(f"{label} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}.", "json_invalid", label=label,
                      detail=e.msg, line=e.lineno, column=e.colno) from None
    except RecursionError:
        raise KvError(f"{label} is nested too deeply to be a config.json.", "json_nested", label=label) from None
    if not isinstance(data, dict):
        raise KvError(f"{label} must hold a JSON object.", "json_not_object", label=label)
    return data


@lru_cache(maxsize=64)
def preset_geometry(name: str, runtime: str = DEFAULT_RUNTIME) -> Geometry:
    """A bundled preset's geometry under `runtime` (shared and frozen: read it, never change it).

    Example: preset_geometry("llama-3.2-1b").count("full") -> 16.
    """
    return parse_config(load_preset(name)["config"], name, runtime)


def resolve_model(model: str, runtime: str = DEFAULT_RUNTIME) -> tuple[Geometry, dict]:
    """A preset name, a path to a config.json or a model folder holding one, or a GGUF file (llama.cpp's runtime
    only: its layers are llama.cpp's reading of the file) -> (geometry, preset metadata or {})."""
    if model.lower().endswith(".gguf"):
        reader = gguf_runtime()
        if get_runtime(runtime) is not reader:
            raise KvError(f"{Path(model).name} is a GGUF file: it is sized under {reader.name}'s rules; add --runtime {reader.name}.",
                          "gguf_runtime", label=Path(model).name, runtime=runtime)
        from .gguf import geometry as gguf_geometry

        return gguf_geometry(model), {"default_weights_format": "gguf-file", "source": model}
    if model.endswith(".json") or "/" in model or Path(model).exists():  # a file, a model folder, or a device the reader refuses
        return parse_config(read_config_file(model), Path(model).name, runtime), {}
    preset = load_preset(model)
    return parse_config(preset["config"], preset["name"], runtime), preset
