"""What a Hugging Face config.json says: typed field reads whose errors name the field, a family's defaults and
older spellings, multimodal `text_config` merged (kvcore.inputs.config reads the file).

Example: Cfg({"hidden_size": 2048}, family_for("llama")).int("hidden_size") -> 2048.
"""

from __future__ import annotations

import math
from typing import Any

from kvcore.errors import KvError
from kvcore.model.families import Family

MAX_FIELD = 10**9  # any count or size in a config
MAX_LAYERS = 1024  # the largest real models have ~130; the engine loops over layers


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
                f"config.json field {key!r} must be a whole number, not {value!r}.",
                "config_not_whole",
                field=key,
                value=value,
            )
        limit = MAX_LAYERS if key == "num_hidden_layers" else MAX_FIELD
        if int(value) < minimum or int(value) > limit:
            raise KvError(
                f"config.json field {key!r} = {value!r} is out of range ({minimum} to {limit:,}).",
                "config_range",
                field=key,
                value=value,
                minimum=minimum,
                limit=limit,
            )
        return int(value)

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise KvError(
                f"config.json field {key!r} must be true or false, not {value!r}.",
                "config_not_bool",
                field=key,
                value=value,
            )
        return value
