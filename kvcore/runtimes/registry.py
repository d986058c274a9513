"""The runtimes kvcore knows, by name: one module each (kvcore.runtimes.mlx_lm, .llamacpp, .reference), every one
a kvcore.runtimes.base.Runtime. A new runtime is one module and one entry here (docs/contributing.md).

Example: get_runtime("llama.cpp").kv_bytes(gpt_oss_20b, 131072, KvSpec()) -> (3072 + 18) MiB.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvcore.errors import KvError, quote
from kvcore.memory.formats import get_format
from kvcore.model.families import FAMILIES
from kvcore.runtimes.base import Runtime
from kvcore.runtimes.llamacpp import LLAMA_CPP
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.runtimes.reference import REFERENCE

if TYPE_CHECKING:
    from kvcore.model.geometry import Geometry


def checked(runtimes: tuple[Runtime, ...]) -> dict[str, Runtime]:
    """The runtimes by name, each refused in one sentence if it is not a Runtime, shares a name, stores a format
    kvcore does not know (or caches by default in one it does not store), or applies window rules no model family
    states."""
    windows = {key for family in FAMILIES.values() for key in family.windows}
    found: dict[str, Runtime] = {}
    for rt in runtimes:
        if not isinstance(rt, Runtime):
            raise KvError(f"{rt!r} is not a runtime (kvcore.runtimes.base.Runtime).")
        if not rt.name or rt.name in found:
            raise KvError(f"Runtime name {rt.name!r} is empty or taken.")
        for name in rt.kv_formats:
            get_format(name)  # an unknown format, by name
        if not rt.kv_formats or (
            rt.default_kv_format is not None and rt.default_kv_format not in rt.kv_formats
        ):
            raise KvError(
                f"Runtime {rt.name} must store at least one format, its default "
                f"{rt.default_kv_format!r} among them."
            )
        if rt.windows not in windows:
            raise KvError(
                f"Runtime {rt.name} applies the window rules of {rt.windows!r}, which no model family "
                "states; give each family's rule for it in kvcore.model.families.FAMILIES."
            )
        if rt.max_sequences < 1:
            raise KvError(f"Runtime {rt.name} must run at least one sequence.")
        found[rt.name] = rt
    return found


RUNTIMES: dict[str, Runtime] = checked((MLX_LM, LLAMA_CPP, REFERENCE))
DEFAULT = "mlx_lm"


def get_runtime(name: str) -> Runtime:
    """The runtime called `name`, or a KvError naming it and the known ones (never another runtime's rules)."""
    try:
        return RUNTIMES[name]
    except (KeyError, TypeError):
        known = ", ".join(RUNTIMES)
        raise KvError(
            f"Unknown runtime {quote(name)}; valid runtimes: {known}.",
            "runtime_unknown",
            runtime=quote(name),
            known=known,
        ) from None


def gguf_runtime() -> Runtime:
    """The runtime whose rules a GGUF file is read under (llama.cpp's: the file is its model format)."""
    return next(runtime for runtime in RUNTIMES.values() if runtime.reads_gguf)


def engine_runtime(engine: str) -> Runtime:
    """The runtime whose rules a recorded engine follows (a recording's runtime.name, any case): the runtime that
    lists it among its engines; an engine none lists (e.g. ds4, an MLX server) is read under the default runtime's."""
    name = str(engine).lower()
    return next(
        (rt for rt in RUNTIMES.values() if name == rt.name.lower() or name in rt.engines),
        RUNTIMES[DEFAULT],
    )


def runtime_of(geometry: Geometry) -> Runtime:
    """The runtime whose rules a geometry was read under."""
    return get_runtime(geometry.runtime)
