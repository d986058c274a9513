"""Model geometry: a Hugging Face config.json -> what each layer caches (and, from kvcore.params, its
parameter counts); the bundled presets.

Example: parse_config(llama_3_2_1b_config).layers[0] ->
    Layer(index=0, kind="full", kv_heads=8, k_dim=64, v_dim=64)
Every model_type is one entry in kvcore.families.FAMILIES (data, not branches): its window rule per runtime, its
defaults, older field spellings and parameter layout. The layer rules follow mlx_lm's model files
(`mlx_lm/models/<model_type>.py`, mlx-lm 0.32.2) under `runtime="mlx_lm"`, llama.cpp's model code
(`src/llama-model.cpp`, see kvcore.llamacpp) under `runtime="llama.cpp"`, and the architecture as its
config defines it (transformers / vLLM) under `runtime="reference"`; they differ only in which
attention windows a runtime applies. An unknown model_type is a KvError naming it.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from .config import Cfg, flatten
from .errors import KvError, quote
from .families import FAMILIES, Family, family_for
from .params import Params, check_layouts, count_params, layer_ffn
from .runtime import Runtime
from .runtimes import DEFAULT as DEFAULT_RUNTIME, get_runtime

PRESETS_DIR = Path(__file__).parent / "presets"


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
        None  # the longest context the model was trained for (config.json)
    )
    # per layer: (feed-forward matrix parameters, of which routed-expert matrices), for the GGUF mixes
    # (kvcore.gguf_weights: Q4_K_M promotes ffn_down in some layers; MXFP4 packs only the experts)
    layer_ffn: tuple[tuple[int, int], ...] = field(default=())
    file_weights: FileWeights | None = (
        None  # a model file's own weights (GGUF: its tensor table), exact
    )

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    def count(self, kind: str) -> int:
        return sum(1 for layer in self.layers if layer.kind == kind)


# ---------------------------------------------------------------- layer rules

_NOTE_TEXT = {
    "sliding_ignored": "mlx_lm ignores sliding_window={window} here and caches the full context",
    "sliding_ignored_llamacpp": "llama.cpp ignores sliding_window={window} for this architecture and caches the full context",
    "sliding_disabled": "llama.cpp disables Phi-3's sliding_window={window} and caches the full context",
    "sliding_every_layer": "every layer keeps a {window}-token window (as transformers and vLLM run it)",
}


def _note(code: str, window: int) -> tuple[str, int, str]:
    return code, window, _NOTE_TEXT[code].format(window=window)


# Window rules by name (a family's `windows`, kvcore.families): layer count and the config -> (sliding flags, notes),
# or None when the rule does not apply to this config and the next rule named after "|" is tried.
def _rule_layer_types(cfg: Cfg, n: int, runtime: Runtime):
    layer_types = cfg.get("layer_types")  # the config's list when present
    return ([t == "sliding_attention" for t in layer_types], []) if layer_types else None


def _rule_pattern(
    cfg: Cfg, n: int, runtime: Runtime
):  # every sliding_window_pattern-th layer full (Gemma 3)
    pattern = cfg.int("sliding_window_pattern")
    return [i % pattern != pattern - 1 for i in range(n)], []


def _rule_every_layer(cfg: Cfg, n: int, runtime: Runtime):  # Mistral v0.1, Phi-3 in transformers
    if cfg.get("sliding_window"):
        return [True] * n, [_note("sliding_every_layer", cfg.int("sliding_window"))]
    return None


def _rule_full(
    code: str | None,
):  # the window is set, but this runtime caches the full context; a note says so
    def rule(cfg: Cfg, n: int, runtime: Runtime):
        if cfg.get("sliding_window"):
            return [False] * n, [
                _note(code or runtime.ignored_window_note, cfg.int("sliding_window"))
            ]
        return None

    return rule


def _rule_max_window(
    cfg: Cfg, n: int, runtime: Runtime
):  # Qwen2/3 in transformers, when use_sliding_window
    if cfg.bool("use_sliding_window", False):
        start = cfg.int("max_window_layers", 0, minimum=0)
        return [i >= start for i in range(n)], []
    return None


WINDOW_RULES = {
    "none": lambda cfg, n, runtime: ([False] * n, []),  # every layer full
    "layer_types": _rule_layer_types,
    "pattern": _rule_pattern,
    "alternate": lambda cfg, n, runtime: (
        [i % 2 == 0 for i in range(n)],
        [],
    ),  # even layers slide (gpt-oss, Gemma 2)
    "every_layer": _rule_every_layer,
    "ignored": _rule_full(None),  # the runtime's own note (mlx_lm, llama.cpp)
    "disabled": _rule_full("sliding_disabled"),  # llama.cpp turns Phi-3's window off
    "max_window": _rule_max_window,
}
ATTENTION_KINDS = (
    "gqa",
    "mla",
    "hybrid_linear",
)  # a family's `attention`: how its layers are read (_layers)


def check_family(family: Family) -> None:
    """Refuse a family whose attention kind, window rule or layout code kvcore does not know, naming it."""
    if family.attention not in ATTENTION_KINDS:
        raise KvError(
            f"Model family {family.model_type!r} has the attention kind {family.attention!r}; known: "
            f"{', '.join(ATTENTION_KINDS)}."
        )
    for key, rules in family.windows.items():
        for rule in rules.split("|"):
            if rule not in WINDOW_RULES:
                raise KvError(
                    f"Model family {family.model_type!r} names the window rule {rule!r} for {key}; known: "
                    f"{', '.join(WINDOW_RULES)}."
                )
    check_layouts(family)


# The config flags any family reads (kvcore.params, the window rules): each must be JSON true or false when given
BOOL_FIELDS = ("use_sliding_window", "tie_word_embeddings", "attention_bias", "mlp_bias", "no_bias")


def check_kv_heads(label: str, heads_key: str, heads: int, kv_key: str, kv_heads: int) -> None:
    """Refuse KV heads that contradict the heads (0, or more KV heads than query heads): one check for a config.json
    and a GGUF file alike. Example: check_kv_heads("m.gguf", "head_count", 4, "head_count_kv", 64) -> KvError."""
    if not 1 <= kv_heads <= heads:
        raise KvError(
            f"{label}: {kv_key} = {kv_heads:,} must be from 1 to {heads_key} ({heads:,}); a model has at least one "
            "KV head and no more KV heads than query heads.",
            "kv_heads",
            label=label,
            heads_key=heads_key,
            heads=heads,
            kv_key=kv_key,
            kv_heads=kv_heads,
        )


def _sliding_flags(
    cfg: Cfg, family: Family, n_layers: int, runtime: Runtime
) -> tuple[list[bool], list[tuple[str, int, str]]]:
    """Which layers keep a sliding window under `runtime`, by the family's window rules (WINDOW_RULES, tried in
    order); notes are (code, window, text)."""
    layer_types = cfg.get("layer_types")
    if layer_types is not None and (
        not isinstance(layer_types, list)
        or len(layer_types) != n_layers
        or not all(isinstance(t, str) for t in layer_types)
    ):
        raise KvError(
            f"config.json field 'layer_types' must list {n_layers} layer types.",
            "config_layer_types",
            n=n_layers,
        )
    for rule in family.windows.get(runtime.windows, "none").split("|"):
        found = WINDOW_RULES[rule](cfg, n_layers, runtime)
        if found is not None:
            return found
    return [False] * n_layers, []


def _layers(
    cfg: Cfg, family: Family, runtime: Runtime
) -> tuple[list[Layer], list[tuple[str, int, str]]]:
    n_layers = cfg.int("num_hidden_layers")
    n_heads = cfg.int("num_attention_heads")
    hidden = cfg.int("hidden_size")
    if family.attention == "mla":  # one latent (kv_lora_rank) + one shared rope key per token
        latent, rope = cfg.int("kv_lora_rank"), cfg.int("qk_rope_head_dim")
        return [Layer(i, "mla", 1, latent, rope) for i in range(n_layers)], []
    kv_heads = cfg.int(
        "num_key_value_heads", n_heads
    )  # absent -> full multi-head attention (Llama 1/2, Qwen v1)
    if cfg.has(family.head_dim_field):
        head_dim = cfg.int(family.head_dim_field)
    else:
        if hidden % n_heads:
            raise KvError(
                "config.json has no 'head_dim' and hidden_size is not divisible by num_attention_heads.",
                "config_head_dim",
            )
        head_dim = hidden // n_heads
    check_kv_heads("config.json", "num_attention_heads", n_heads, "num_key_value_heads", kv_heads)
    if n_heads % kv_heads:
        raise KvError(
            f"config.json: num_attention_heads ({n_heads}) must be a multiple of num_key_value_heads ({kv_heads}).",
            "config_heads",
            heads=n_heads,
            kv_heads=kv_heads,
        )
    if (
        family.attention == "hybrid_linear"
    ):  # Qwen3-Next: gated delta net layers, full attention every interval-th
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
        Layer(i, "sliding", kv_heads, head_dim, head_dim, window)
        if s
        else Layer(i, "full", kv_heads, head_dim, head_dim)
        for i, s in enumerate(sliding)
    ]
    return layers, notes


# ---------------------------------------------------------------- entry points


def parse_config(
    config: Any, name: str = "config.json", runtime: str = DEFAULT_RUNTIME
) -> Geometry:
    """A Hugging Face config.json (dict) -> per-layer cache geometry and parameter counts."""
    rt = get_runtime(runtime)
    if rt.windows not in {key for family in FAMILIES.values() for key in family.windows}:
        raise KvError(
            f"Runtime {rt.name} applies the window rules of {rt.windows!r}, which no model family states; "
            f"give each family's rule for it in kvcore.families.FAMILIES."
        )
    if not isinstance(config, dict):
        raise KvError("config.json must be a JSON object.", "config_object")
    flat = flatten(config)
    model_type = flat.get("model_type")
    if not isinstance(model_type, str):
        raise KvError(
            "config.json is missing the field 'model_type'.", "config_missing", field="model_type"
        )
    family = family_for(model_type)
    check_family(family)
    model_type = family.model_type
    cfg = Cfg(flat, family)
    for key in (
        BOOL_FIELDS
    ):  # read or not under this runtime's rules, a flag is true or false ("yes" is neither)
        if flat.get(key) is not None:
            cfg.bool(key, False)
    try:
        layers, notes = _layers(cfg, family, rt)
        params, active, tied = count_params(cfg, family, layers)
        ffn_split = layer_ffn(cfg, family, layers)
    except (TypeError, ValueError, AttributeError, OverflowError) as e:
        if isinstance(e, KvError):
            raise
        raise KvError(
            f"config.json has a field of the wrong shape for a {model_type} model ({e}).",
            "config_shape",
            model_type=model_type,
            detail=str(e),
        ) from None
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
        max_position_embeddings=cfg.int("max_position_embeddings", None)
        if cfg.has("max_position_embeddings")
        else None,
        layer_ffn=ffn_split,
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
        hint = (
            f" Did you mean {', '.join(close)}?"
            if close
            else " Run `python -m kvcore presets` for the list."
        )
        raise KvError(f"Unknown model preset {quote(name)}.{hint}")
    return json.loads(files[name].read_text(encoding="utf-8"))


@lru_cache(maxsize=64)
def preset_geometry(name: str, runtime: str = DEFAULT_RUNTIME) -> Geometry:
    """A bundled preset's geometry under `runtime` (shared and frozen: read it, never change it).

    Example: preset_geometry("llama-3.2-1b").count("full") -> 16.
    """
    return parse_config(load_preset(name)["config"], name, runtime)
