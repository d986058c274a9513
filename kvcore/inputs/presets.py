"""The bundled presets: real models' config.json files in kvcore/inputs/presets/, one file a model.

Example: preset_geometry("llama-3.2-1b").count("full") -> 16.
"""

from __future__ import annotations

import difflib
import json
from functools import lru_cache
from pathlib import Path

from kvcore.errors import KvError, quote
from kvcore.inputs.config import parse_config
from kvcore.model.geometry import Geometry
from kvcore.runtimes.registry import DEFAULT as DEFAULT_RUNTIME
from kvcore.runtimes.registry import get_runtime

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
    return parse_config(load_preset(name)["config"], name, get_runtime(runtime))
