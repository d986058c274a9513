"""A bundled preset's geometry under a runtime (its file: kvcore.inputs.preset_files).

Example: preset_geometry("llama-3.2-1b").count("full") -> 16.
"""

from __future__ import annotations

from functools import lru_cache

from kvcore.inputs.config import parse_config
from kvcore.inputs.preset_files import load_preset
from kvcore.model.geometry import Geometry
from kvcore.runtimes.registry import DEFAULT as DEFAULT_RUNTIME
from kvcore.runtimes.registry import get_runtime


@lru_cache(maxsize=64)
def preset_geometry(name: str, runtime: str = DEFAULT_RUNTIME) -> Geometry:
    """A bundled preset's geometry under `runtime` (shared and frozen: read it, never change it).

    Example: preset_geometry("llama-3.2-1b").count("full") -> 16.
    """
    return parse_config(load_preset(name)["config"], name, get_runtime(runtime))
