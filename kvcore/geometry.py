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

from .config import Cfg, flatten, read_config_file
from .errors import KvError
from .families import LCPP, RUNTIMES, Family, family_for
from .params import Params, count_params, layer_ffn

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
    # per layer: (feed-forward matrix parameters, of which routed-expert matrices), for the GGUF mixes
    # (kvcore.gguf_weights: Q4_K_M promotes ffn_down in some layers; MXFP4 packs only the experts)
    layer_ffn: tuple[tuple[int, int], ...] = field(default=())
    file_weights: FileWeights | None = None  # a model file's own weights (GGUF: its tensor table), exact

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


def _sliding_flags(cfg: Cfg, family: Family, n_layers: int, runtime: str) -> tuple[list[bool], list[tuple[str, int, str]]]:
    """Which layers keep a sliding window under `runtime`, by the family's window rule; notes are (code, window, text)."""
    layer_types = cfg.get("layer_types")
    if layer_types is not None and (not isinstance(layer_types, list) or len(layer_types) != n_layers):
        raise KvError(f"config.json field 'layer_types' must list {n_layers} layer types.", "config_layer_types", n=n_layers)
    window = cfg.get("sliding_window")
    for rule in family.windows.get(runtime, "none").split("|"):
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
            code = "sliding_disabled" if rule == "disabled" else "sliding_ignored_llamacpp" if runtime == LCPP else "sliding_ignored"
            return [False] * n_layers, [_note(code, cfg.int("sliding_window"))]
        if rule == "max_window" and cfg.get("use_sliding_window"):
            start = cfg.int("max_window_layers", 0, minimum=0)
            return [i >= start for i in range(n_layers)], []
    return [False] * n_layers, []


def _layers(cfg: Cfg, family: Family, runtime: str) -> tuple[list[Layer], list[tuple[str, int, str]]]:
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


# ---------------------------------------------------------------- entry points


def parse_config(config: Any, name: str = "config.json", runtime: str = "mlx_lm") -> Geometry:
    """A Hugging Face config.json (dict) -> per-layer cache geometry and parameter counts."""
    if runtime not in RUNTIMES:
        raise KvError(f"Unknown runtime {runtime!r}; valid runtimes: {', '.join(RUNTIMES)}.")
    if not isinstance(config, dict):
        raise KvError("config.json must be a JSON object.", "config_object")
    flat = flatten(config)
    model_type = flat.get("model_type")
    if not isinstance(model_type, str):
        raise KvError("config.json is missing the field 'model_type'.", "config_missing", field="model_type")
    family = family_for(model_type)
    model_type = family.model_type
    cfg = Cfg(flat, family)
    try:
        layers, notes = _layers(cfg, family, runtime)
        params, active, tied = count_params(cfg, family, layers)
        ffn_split = layer_ffn(cfg, family, layers)
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
        hint = f" Did you mean {', '.join(close)}?" if close else " Run `python -m kvcore presets` for the list."
        raise KvError(f"Unknown model preset {name!r}.{hint}")
    return json.loads(files[name].read_text(encoding="utf-8"))


@lru_cache(maxsize=64)
def preset_geometry(name: str, runtime: str = "mlx_lm") -> Geometry:
    """A bundled preset's geometry under `runtime` (shared and frozen: read it, never change it).

    Example: preset_geometry("llama-3.2-1b").count("full") -> 16.
    """
    return parse_config(load_preset(name)["config"], name, runtime)


def resolve_model(model: str, runtime: str = "mlx_lm") -> tuple[Geometry, dict]:
    """A preset name, a path to a config.json or a model folder holding one, or a GGUF file (llama.cpp's runtime
    only: its layers are llama.cpp's reading of the file) -> (geometry, preset metadata or {})."""
    if model.lower().endswith(".gguf"):
        if runtime != LCPP:
            raise KvError(f"{Path(model).name} is a GGUF file: it is sized under llama.cpp's rules; add --runtime llama.cpp.",
                          "gguf_runtime", label=Path(model).name, runtime=runtime)
        from .gguf import geometry as gguf_geometry

        return gguf_geometry(model), {"default_weights_format": "gguf-file", "source": model}
    if model.endswith(".json") or "/" in model or Path(model).exists():  # a file, a model folder, or a device the reader refuses
        return parse_config(read_config_file(model), Path(model).name, runtime), {}
    preset = load_preset(model)
    return parse_config(preset["config"], preset["name"], runtime), preset
