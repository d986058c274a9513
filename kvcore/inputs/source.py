"""A model as the command line names it -> its geometry: a preset name, a config.json or a model folder holding one,
or a GGUF file (llama.cpp's runtime only). Above kvcore.model.geometry and kvcore.inputs.gguf, which both stay below it.

Example: resolve_model("llama-3.2-1b")[0].count("full") -> 16.
"""

from __future__ import annotations

from pathlib import Path

from kvcore.errors import KvError
from kvcore.inputs.config import parse_config, read_config_file
from kvcore.inputs.gguf import geometry as gguf_geometry
from kvcore.inputs.gguf import is_gguf_name
from kvcore.inputs.preset_files import load_preset
from kvcore.model.geometry import Geometry
from kvcore.runtimes.registry import DEFAULT as DEFAULT_RUNTIME
from kvcore.runtimes.registry import get_runtime, gguf_runtime


def resolve_model(model: str, runtime: str = DEFAULT_RUNTIME) -> tuple[Geometry, dict]:
    """A preset name, a path to a config.json or a model folder holding one, or a GGUF file (llama.cpp's runtime
    only: its layers are llama.cpp's reading of the file) -> (geometry, preset metadata or {})."""
    if is_gguf_name(model):
        reader = gguf_runtime()  # the runtime a GGUF file is the model format of
        if get_runtime(runtime) is not reader:
            raise KvError(
                f"{Path(model).name} is a GGUF file: it is sized under {reader.name}'s rules; add --runtime {reader.name}.",
                "gguf_runtime",
                label=Path(model).name,
                runtime=runtime,
            )
        return gguf_geometry(model), {"default_weights_format": "gguf-file", "source": model}
    if (
        model.endswith(".json") or "/" in model or Path(model).exists()
    ):  # a file, a model folder, or a device the reader refuses
        return parse_config(read_config_file(model), Path(model).name, get_runtime(runtime)), {}
    preset = load_preset(model)
    return parse_config(preset["config"], preset["name"], get_runtime(runtime)), preset
