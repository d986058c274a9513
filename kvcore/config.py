"""Reading a Hugging Face config.json: size-, depth- and syntax-checked JSON, typed field reads whose
errors name the field, a family's defaults and older spellings, multimodal `text_config` merged.

Example: Cfg({"hidden_size": 2048}, family_for("llama")).int("hidden_size") -> 2048.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from .errors import KvError, quote
from .families import Family
from .limits import MAX_DIGITS, MAX_FIELD, MAX_LAYERS  # re-exported: any count or size; layers
from .textfile import decode_text, read_text_file

MAX_CONFIG_BYTES = 1_000_000  # a real config.json is a few KB; refuse anything absurd
MAX_JSON_DEPTH = 32  # a real config.json nests 3-4 levels (text_config.rope_scaling...)


def flatten(config: dict) -> dict:
    """Merge a multimodal config's `text_config` over the top level (Gemma 3, Qwen-VL style)."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        return dict(config)
    flat = {k: v for k, v in config.items() if k != "text_config"}
    flat.update(text)
    return flat


class Cfg:
    """Typed reads from a flattened config; errors name the field."""

    def __init__(self, config: dict, family: Family):
        self.c, self.d = dict(config), family.defaults
        self._sets: dict[str, frozenset[int]] = {}
        for (
            old,
            new,
        ) in family.aliases.items():  # an older spelling counts when the newer one is absent
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
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (isinstance(value, float) and not math.isfinite(value))
            or value != int(value)
        ):
            raise KvError(
                f"config.json field {key!r} must be a whole number, not {quote(value)}.",
                "config_not_whole",
                field=key,
                value=quote(value),
            )
        limit = MAX_LAYERS if key == "num_hidden_layers" else MAX_FIELD
        if int(value) < minimum or int(value) > limit:
            raise KvError(
                f"config.json field {key!r} = {quote(value)} is out of range ({minimum} to {limit:,}).",
                "config_range",
                field=key,
                value=quote(value),
                minimum=minimum,
                limit=limit,
            )
        return int(value)

    def index_set(self, key: str) -> frozenset[int]:
        """A list of layer indices (mlp_only_layers) as a set, read and checked once (a layer loop asks per layer):
        at most MAX_LAYERS whole numbers; absent or null -> empty."""
        if key not in self._sets:
            value = self.get(key) or []
            if not isinstance(value, list) or len(value) > MAX_LAYERS:
                raise KvError(
                    f"config.json field {key!r} must list at most {MAX_LAYERS:,} layer numbers, not {quote(value)}.",
                    "config_list",
                    field=key,
                    limit=MAX_LAYERS,
                    value=quote(value),
                )
            if not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v < MAX_LAYERS
                for v in value
            ):
                raise KvError(
                    f"config.json field {key!r} must list layer numbers from 0 to {MAX_LAYERS - 1:,}, not "
                    f"{quote(value)}.",
                    "config_list",
                    field=key,
                    limit=MAX_LAYERS,
                    value=quote(value),
                )
            self._sets[key] = frozenset(value)
        return self._sets[key]

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise KvError(
                f"config.json field {key!r} must be true or false, not {quote(value)}.",
                "config_not_bool",
                field=key,
                value=quote(value),
            )
        return value


def read_config_file(path: str | Path) -> dict:
    """Read a config.json from disk (a model folder: its config.json), or raise a KvError that names the problem.

    The bytes come through kvcore.textfile (size-limited, regular files only, UTF-8).
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
