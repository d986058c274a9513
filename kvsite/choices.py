"""The choices several chapters offer in the same words, made once: a bundled model and a weights format,
each bound to the URL under the same key on every page (?model=, ?w=)."""

from __future__ import annotations

from kvcore.inputs.preset_files import preset_names
from kvcore.memory.formulas import WEIGHT_FORMATS
from kvcore.views.memory import ARTICLE_MODEL

from .frame import bound_choice


def model_choice(where, f, default: str = ARTICLE_MODEL) -> str:
    """A bundled preset, `default` first shown (Article A's Llama-3.2-1B unless the chapter says)."""
    names = preset_names()
    return bound_choice(
        where.selectbox, f.t("common.model"), names, "model", index=names.index(default)
    )


def weights_choice(where, f) -> str:
    """A weights format, mlx-q4 first shown (what Article A's model ships as)."""
    return bound_choice(
        where.selectbox,
        f.t("common.weights"),
        WEIGHT_FORMATS,
        "w",
        index=WEIGHT_FORMATS.index("mlx-q4"),
    )
