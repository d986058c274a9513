"""Reading a Hugging Face config.json: size-, depth- and syntax-checked JSON, then its geometry under a runtime.

Example: parse_config(llama_3_2_1b_config, "llama-3.2-1b", MLX_LM).layers[0] ->
    Layer(index=0, kind="full", kv_heads=8, k_dim=64, v_dim=64)
An unknown model_type is a KvError naming it (kvcore.model.families).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvcore.errors import KvError
from kvcore.inputs.textfile import decode_text, read_text_file
from kvcore.limits import MAX_DIGITS
from kvcore.model.config import Cfg, flatten
from kvcore.model.families import family_for
from kvcore.model.geometry import Geometry
from kvcore.model.layers import BOOL_FIELDS, check_family, layers_of
from kvcore.model.params import EXPERT_COUNT_KEY, count_params, layer_ffn
from kvcore.runtimes.base import (
    Runtime,  # the runtime object is handed in, looked up once by its namer
)

MAX_CONFIG_BYTES = 1_000_000  # a real config.json is a few KB; refuse anything absurd
MAX_JSON_DEPTH = 32  # a real config.json nests 3-4 levels (text_config.rope_scaling...)


def read_config_file(path: str | Path) -> dict:
    """Read a config.json from disk (a model folder: its config.json), or raise a KvError that names the problem.

    The bytes come through kvcore.inputs.textfile (size-limited, regular files only, UTF-8).
    """
    path = Path(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise KvError(
                f"{path} is a folder without a config.json; give a config.json or a model folder.",
                "file_folder",
                label=str(path),
            )
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


def _json_int(digits: str, label: str) -> int:
    """A JSON integer of at most MAX_DIGITS digits (Python refuses 4,301+ with a ValueError; no config field needs
    more than ten)."""
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise KvError(
            f"{label} holds an integer of {len(digits.lstrip('-')):,} digits; a config.json number has at most "
            f"{MAX_DIGITS}.",
            "json_digits",
            label=label,
            n=len(digits.lstrip("-")),
            limit=MAX_DIGITS,
        )
    return int(digits)


def parse_json_text(text: str | bytes, label: str = "config.json") -> dict:
    """JSON text (or an uploaded file's bytes) -> dict, or a KvError naming the problem: too large, binary,
    not UTF-8, nested deeper than MAX_JSON_DEPTH, or the line and column of the mistake.
    """
    if isinstance(text, bytes):
        text = decode_text(text, MAX_CONFIG_BYTES, label)
    if len(text.encode("utf-8", "replace")) > MAX_CONFIG_BYTES:
        raise KvError(
            f"{label} is larger than {MAX_CONFIG_BYTES // 1000} kB; that is not a config.json.",
            "json_too_large",
            label=label,
            kb=MAX_CONFIG_BYTES // 1000,
        )
    if "\x00" in text:
        raise KvError(f"{label} is a binary file, not text.", "file_binary", label=label)
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _nesting_depth(text) > MAX_JSON_DEPTH:
        raise KvError(
            f"{label} is nested too deeply to be a config.json.", "json_nested", label=label
        )
    try:
        data = json.loads(text, parse_int=lambda digits: _json_int(digits, label))
    except json.JSONDecodeError as e:
        raise KvError(
            f"{label} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}.",
            "json_invalid",
            label=label,
            detail=e.msg,
            line=e.lineno,
            column=e.colno,
        ) from None
    except RecursionError:
        raise KvError(
            f"{label} is nested too deeply to be a config.json.", "json_nested", label=label
        ) from None
    if not isinstance(data, dict):
        raise KvError(f"{label} must hold a JSON object.", "json_not_object", label=label)
    return data


def parse_config(config: Any, name: str, runtime: Runtime) -> Geometry:
    """A Hugging Face config.json (dict) -> per-layer cache geometry and parameter counts under `runtime`'s rules
    (the runtime object, looked up once by whoever named it: kvcore.runtimes.registry.get_runtime)."""
    if not isinstance(runtime, Runtime):
        raise KvError(
            f"parse_config takes a runtime object, not {runtime!r} (get_runtime looks one up)."
        )
    rt = runtime
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
        layers, notes = layers_of(cfg, family, rt.windows, rt.ignored_window_note)
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
        runtime=rt.name,
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
        **ffn_widths(cfg, family),
        mla_widths=(
            cfg.int("q_lora_rank", 0, 0) if cfg.get("q_lora_rank") is not None else 0,
            cfg.int("qk_nope_head_dim"),
            cfg.int("v_head_dim"),
        )
        if family.attention == "mla"
        else (),
    )


def ffn_widths(cfg: Cfg, family) -> dict:
    """Geometry.ffn_width, expert_width and experts_used from a config, as llama.cpp's graph holds them
    (Qwen v1's MLP tensors are half its intermediate_size wide: src/models/qwen.cpp:33-35 takes n_ff/2 of the
    intermediate_size the converter writes; gpt-oss's experts are intermediate_size wide; DeepSeek's
    first_k_dense_replace layers are dense)."""
    moe = family.ffn.startswith("moe_")
    ffn = cfg.int("intermediate_size", 0, 0)
    dense = not moe or cfg.int("first_k_dense_replace", 0, 0) > 0
    return {
        "ffn_width": (ffn // 2 if family.ffn == "qwen_v1" else ffn) if dense else 0,
        "expert_width": (ffn if family.ffn == "moe_gpt_oss" else cfg.int("moe_intermediate_size"))
        if moe
        else 0,
        "experts_used": cfg.int("num_experts_per_tok") if moe else 0,
        "experts": cfg.int(EXPERT_COUNT_KEY[family.ffn]) if moe else 0,
        "shared_expert_width": cfg.int("shared_expert_intermediate_size", 0, 0),
        "linear_widths": _linear_widths(cfg) if family.attention == "hybrid_linear" else (),
    }


def _linear_widths(cfg: Cfg) -> tuple[int, int, int, int]:
    """Qwen3-Next's gated delta-net widths (Geometry.linear_widths): key, value, value heads, and the input
    projection as the converter writes it now (conversion/qwen.py: q, k and v in attn_qkv, z in attn_gate)."""
    key = cfg.int("linear_num_key_heads") * cfg.int("linear_key_head_dim")
    value = cfg.int("linear_num_value_heads") * cfg.int("linear_value_head_dim")
    return key, value, cfg.int("linear_num_value_heads"), 2 * key + value
