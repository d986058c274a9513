"""A model ready to run: the mlx module, its config, kvcore's geometry of it and how it was made
(kvcore.measure.models builds or loads one).

Example: build_model("llama-3.2-1b").summary() -> {"name": "llama-3.2-1b", "weights": "random", ...}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from kvcore.model.geometry import Geometry


@dataclass
class LiveModel:
    """A model ready to run: the mlx module, its config, our geometry of it, and how it was made."""

    name: str
    config: dict
    geometry: Geometry
    weights: str  # "random" or where the weights came from
    weights_format: str
    dtype: str
    module: Any = field(repr=False, default=None)
    tokenizer: Any = field(
        repr=False, default=None
    )  # a real model's own (kvcore.measure.real_model.Tokenizer), else None
    weights_mode: str = ""  # real model: "quantized" or "dequantized" (kvcore.measure.real_model)
    weights_note: str = ""  # how its weights were made ready, for the recording
    built: ClassVar[int] = (
        0  # models made in this process, every way one is made (the hosted demo's test reads it)
    )

    def __post_init__(self) -> None:
        LiveModel.built += 1

    def weights_bytes(self) -> int:
        """Bytes of the parameters as they sit in memory (measured from the arrays)."""
        from mlx.utils import tree_flatten

        return sum(v.nbytes for _, v in tree_flatten(self.module.parameters()))

    def summary(self) -> dict:
        info = {
            "name": self.name,
            "source": "random weights" if self.weights == "random" else f"loaded: {self.weights}",
            "weights": self.weights,
            "weights_format": self.weights_format,
            "activation_dtype": self.dtype,
            "config": {
                k: v for k, v in self.config.items() if isinstance(v, (int, float, str, bool))
            },
        }
        if self.weights_mode:
            info["weights_mode"], info["weights_note"] = self.weights_mode, self.weights_note
        return info
