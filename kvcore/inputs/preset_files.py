"""The bundled presets: real models' config.json files in kvcore/inputs/presets/, one file a model, read as they
are (kvcore.inputs.presets reads one's geometry under a runtime).

Example: load_preset("llama-3.2-1b")["config"]["num_hidden_layers"] -> 16.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from kvcore.errors import KvError, did_you_mean, quote

PRESETS_DIR = Path(__file__).parent / "presets"


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
        hint = did_you_mean(
            name.lower(), files, " Run `python -m kvcore presets` for the list.", cutoff=0.5
        )
        raise KvError(f"Unknown model preset {quote(name)}.{hint}")
    return json.loads(files[name].read_text(encoding="utf-8"))
