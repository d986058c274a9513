"""A runtime is one object: what it caches, which formats it stores, its options, and what decode reads.

The calculator, the CLI and the pages ask the runtime of a geometry (`runtime_of(geometry)`) or of a name
(`get_runtime(name)`); no code outside the runtime objects (this module, kvcore.runtime_llamacpp; what every runtime answers:
kvcore.runtime) compares a runtime's name. A new runtime is one entry in RUNTIMES (see the README's "Where things go" and tests/test_extension_points.py).

* mlx_lm and reference count the tokens each layer holds (kvcore.formulas): mlx_lm's KVCache and
  RotatingKVCache under mlx_lm's model files, reference under the config's own window rules
  (transformers / vLLM). `context` is each sequence's length; `sequences` multiplies.
* llama.cpp preallocates padded caches (kvcore.llamacpp): `context` is its `-c` (all cells of the cache),
  `sequences` its `-np`, and its options (`--kv-unified`, `-ub`, `--swa-full`) a llamacpp.Options.

Example: get_runtime("llama.cpp").kv_bytes(gpt_oss_20b, 131072, KvSpec()) -> (3072 + 18) MiB.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import formulas
from .errors import KvError, quote
from .formats import FORMATS, mlx_cache_formats
from .limits import MAX_SEQUENCES
from .runtime import DecodeRead, Runtime
from .runtime_llamacpp import LlamaCppRuntime
from .units import fmt_bytes

if TYPE_CHECKING:
    from .geometry import Geometry


class TokenRuntime(Runtime):
    """A runtime whose cache holds what each layer keeps per token (mlx_lm's offset, a window's last tokens):
    kvcore.formulas. `context` is each sequence's length and `sequences` the concurrent sequences."""

    def __init__(
        self,
        name: str,
        help: str,
        ignored_window_note: str,
        prefill_peak: str | None = None,
        kv_formats: tuple[str, ...] | None = None,
        windows: str | None = None,
        engines: tuple[str, ...] = (),
        fit_class: str = "",
        one_kv_format: bool = False,
    ):
        self.name, self.help, self.windows = name, help, windows or name
        self.engines, self.fit_class, self.one_kv_format = engines, fit_class, one_kv_format
        self.ignored_window_note, self.prefill_peak = ignored_window_note, prefill_peak
        self._kv_formats = kv_formats
        self.max_sequences = MAX_SEQUENCES

    @property
    def kv_formats(
        self,
    ) -> tuple[str, ...]:  # every format kvcore knows, unless the runtime names its own
        return self._kv_formats if self._kv_formats is not None else tuple(FORMATS)

    def kv_bytes(self, geometry, context, spec, sequences=1, options=None):
        self.options(sequences, options)
        return formulas.kv_bytes(geometry, context, spec, sequences)

    def report(self, geometry, context, spec, sequences, options):
        self.check_kv(spec)
        total = self.kv_bytes(geometry, context, spec, sequences, options)
        return {
            "sequences": sequences,
            "kv_bytes": total,
            "kv_bytes_per_sequence": total // sequences,
            "kv_bytes_per_token": formulas.kv_bytes_per_token(geometry, spec),
            "kv_bytes_per_token_average": total
            // sequences
            / context,  # one sequence's KV / its tokens
            "kv_bytes_per_token_at_context": formulas.kv_bytes_per_token_at(
                geometry, context, spec
            ),
            "kv_prefill_peak_bytes": formulas.kv_prefill_peak_bytes(
                geometry, context, spec, sequences
            ),
            "per_layer": formulas.per_layer_kv(geometry, context, spec, sequences),
            "formula": formulas.formula_text(geometry, context, spec, sequences),
        }

    def largest_context(self, geometry, spec, sequences, budget, options=None):
        self.options(sequences, options)
        return formulas.max_context_within(geometry, budget, spec, sequences)

    def most_sequences(self, geometry, spec, context, budget, options=None):
        self.options(1, options)
        if budget < 0:
            return 0
        return max(0, min(self.max_sequences, budget // formulas.kv_bytes(geometry, context, spec)))

    def decode_read(self, geometry, context, spec, sequences=1, options=None, tokens=None):
        self.options(sequences, options)
        held = (
            context if tokens is None else min(tokens, context)
        )  # each sequence reads its own cache, to its offset
        spans = any(layer.kind in ("full", "mla") for layer in geometry.layers)
        return DecodeRead(
            formulas.kv_bytes(geometry, held, spec, sequences),
            sequences,
            held * sequences if spans else 0,
        )

    def decode_position(self, context, sequences=1, options=None):
        self.options(sequences, options)
        return context

    def prefill_chunk(self, prompt, options=None):
        self.options(1, options)
        return formulas.PREFILL_STEP  # mlx_lm generate_step's prefill_step_size

    def describe_sizes(self, result):
        if self.prefill_peak and result["kv_prefill_peak_bytes"] != result["kv_bytes"]:
            return [
                f"  prefill peak ({self.prefill_peak}): {fmt_bytes(result['kv_prefill_peak_bytes'])}"
            ]
        return []


RUNTIMES: dict[str, Runtime] = {
    rt.name: rt
    for rt in (
        TokenRuntime(
            "mlx_lm",
            "mlx_lm (default; mlx_lm's own caches)",
            "sliding_ignored",
            prefill_peak="mlx_lm chunked prefill",
            kv_formats=mlx_cache_formats(),  # KVCache in a dtype, QuantizedKVCache(bits)
            engines=("mlx_lm", "mlx-lm", "mlx-vlm", "omlx", "rapid-mlx"),
            fit_class="mlx",
            one_kv_format=True,  # generate's one kv_bits quantizes K and V alike
        ),
        LlamaCppRuntime(),
        TokenRuntime(
            "reference",
            "reference (the config's own window rules, as transformers and vLLM run them)",
            "sliding_ignored",
        ),
    )
}
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
