"""What a Hugging Face config.json says: typed field reads whose errors name the field, a family's defaults and
older spellings, multimodal `text_config` merged (kvcore.inputs.config reads the file).

Example: Cfg({"hidden_size": 2048}, family_for("llama")).int("hidden_size") -> 2048.
"""

from __future__ import annotations

import math
from typing import Any

from kvcore.errors import KvError, quote
from kvcore.limits import MAX_FIELD, MAX_LAYERS
from kvcore.model.families import Family


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
