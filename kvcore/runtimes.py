"""A runtime is one object: what it caches, which formats it stores, its options, and what decode reads.

The calculator, the CLI and the pages ask the runtime of a geometry (`runtime_of(geometry)`) or of a name
(`get_runtime(name)`); no code outside this module compares a runtime's name. A new runtime is one entry in
RUNTIMES (see the README's "Where things go" and tests/test_extension_points.py).

* mlx_lm and reference count the tokens each layer holds (kvcore.formulas): mlx_lm's KVCache and
  RotatingKVCache under mlx_lm's model files, reference under the config's own window rules
  (transformers / vLLM). `context` is each sequence's length; `sequences` multiplies.
* llama.cpp preallocates padded caches (kvcore.llamacpp): `context` is its `-c` (all cells of the cache),
  `sequences` its `-np`, and its options (`--kv-unified`, `-ub`, `--swa-full`) a llamacpp.Options.

Example: get_runtime("llama.cpp").kv_bytes(gpt_oss_20b, 131072, KvSpec()) -> (3072 + 18) MiB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import formulas, llamacpp
from .errors import KvError
from .formats import FORMATS, llamacpp_types
from .limits import MAX_CONTEXT, MAX_SEQUENCES
from .units import fmt_bytes

if TYPE_CHECKING:
    from .formulas import KvSpec
    from .geometry import Geometry


@dataclass(frozen=True)
class Setting:
    """One option of a runtime that changes its cache: its options field, CLI flag and page widget.

    A whole-number setting has `low`..`high`; a switch (default True/False) has neither. Its `name` (the flag
    without dashes) is the CLI's argument and the page's i18n key `calc.<name>` (and `calc.<name>_help`); `key`
    is the widget's key in the page's URL.
    """

    field: str  # the runtime's options field, e.g. "unified"
    flag: str  # the CLI flag, e.g. "--kv-unified"
    default: bool | int
    help: str  # the CLI's help text
    key: str  # the page's URL key
    low: int = 0
    high: int = 0

    @property
    def name(self) -> str:
        """The flag as a Python name: "--kv-unified" -> "kv_unified"."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def switch(self) -> bool:
        return isinstance(self.default, bool)

    def check(self, value: Any) -> bool | int:
        """The value as the runtime takes it, or a KvError naming the flag and its range."""
        if self.switch:
            if not isinstance(value, bool):
                raise KvError(f"{self.flag} is on or off (true or false), not {value!r}.")
            return value
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not self.low <= value <= self.high
        ):
            raise KvError(
                f"{self.flag} must be a whole number from {self.low:,} to {self.high:,}, not {value!r}."
            )
        return value


@dataclass(frozen=True)
class DecodeRead:
    """What one decode step reads from the KV cache: one step makes one token for each of `sequences`.

    `kv_bytes` is the whole step's read (every sequence); a sequence's tokens per second is one per step, so the
    per-sequence speed comes from the step's time and the total from `sequences` times that. `per_sequence` is the
    step's read shared out (the bytes a sequence costs the step), not a read of its own.
    """

    kv_bytes: int
    sequences: int
    cells: int  # cells (tokens) of full-attention cache the step reads, over all sequences

    @property
    def per_sequence(self) -> float:
        return self.kv_bytes / self.sequences


class Runtime:
    """The common questions every runtime answers; TokenRuntime and LlamaCppRuntime answer them."""

    name: str
    help: str  # what it is, for `--runtime`'s help
    kv_formats: tuple[str, ...]  # the K/V formats it stores (the page's and the levers' choices)
    max_sequences: int  # the most concurrent sequences it runs
    settings: tuple[Setting, ...] = ()
    windows: str  # the key of the family table's window rules it applies (kvcore.families.Family.windows)
    ignored_window_note: str = (
        "sliding_ignored"  # the note code when it caches the full context of a windowed model
    )
    prefill_peak: str | None = (
        None  # the CLI's label for a prefill peak above the steady state (None: never shown)
    )
    preallocates: bool = (
        False  # True: its caches are allocated up front and it logs them (log_lines)
    )
    reads_gguf: bool = (
        False  # True: a GGUF file's geometry is this runtime's reading of it (kvcore.gguf)
    )
    engines: tuple[
        str, ...
    ] = ()  # programs whose recorded runs follow its rules (a recording's runtime.name, any case)
    fit_class: str = (
        ""  # the class its runs' decode bandwidth share is fitted per (kvcore.timing_fit)
    )
    sequence_noun: str = (
        "sequence"  # what it calls one of its concurrent sequences ("slot" for llama.cpp's server)
    )

    def __repr__(self) -> str:
        return f"<runtime {self.name}>"

    def check(self, geometry: Geometry) -> None:
        """Refuse a geometry parsed under another runtime's rules (its windows would be that runtime's)."""
        if geometry.runtime != self.name:
            raise KvError(
                f"{geometry.name} was read under {geometry.runtime}'s rules, not {self.name}'s; read it again with "
                f"runtime {self.name}."
            )

    def options(self, sequences: int = 1, base: Any = None, **values) -> Any:
        """Its options object for `sequences` (llama.cpp: -np) with `values` by setting field; None when it has none."""
        if base is not None or values:
            raise KvError(
                f"{self.name} has no options of its own ({', '.join(values) or type(base).__name__})."
            )
        return None

    def settings_flags(self) -> str:
        return ", ".join(s.flag for s in self.settings)

    # the numbers each runtime computes in its own way
    def kv_bytes(
        self,
        geometry: Geometry,
        context: int,
        spec: KvSpec,
        sequences: int = 1,
        options: Any = None,
    ) -> int:
        raise NotImplementedError

    def report(
        self, geometry: Geometry, context: int, spec: KvSpec, sequences: int, options: Any
    ) -> dict:
        """calculate()'s runtime-dependent fields: sizes, per-layer rows, formula text (and llama.cpp's caches)."""
        raise NotImplementedError

    def largest_context(
        self, geometry: Geometry, spec: KvSpec, sequences: int, budget: int, options: Any = None
    ) -> int:
        raise NotImplementedError

    def most_sequences(
        self, geometry: Geometry, spec: KvSpec, context: int, budget: int, options: Any = None
    ) -> int:
        raise NotImplementedError

    def decode_read(
        self,
        geometry: Geometry,
        context: int,
        spec: KvSpec,
        sequences: int = 1,
        options: Any = None,
        tokens: int | None = None,
    ) -> DecodeRead:
        """The KV one decode step reads at `context`, each sequence holding `tokens` (default: the cache full)."""
        raise NotImplementedError

    def decode_position(self, context: int, sequences: int = 1, options: Any = None) -> int:
        """The position each sequence decodes at (the tokens its attention runs over) when the cache is at `context`."""
        raise NotImplementedError

    def sequence_share(self, context: int, sequences: int = 1, options: Any = None) -> int:
        """The tokens of `context` one sequence has to itself (llama.cpp split slots: -c / -np)."""
        return context

    def shares_cache(self, sequences: int = 1, options: Any = None) -> bool:
        """True when the sequences share one cache that a decode step reads once for all (llama.cpp --kv-unified)."""
        return False

    def prefill_chunk(self, prompt: int, options: Any = None) -> int:
        """Tokens one prefill step processes of a `prompt`-token prompt (mlx_lm's prefill step, llama.cpp's -ub)."""
        raise NotImplementedError

    def describe_options(self, result: dict) -> list[str]:
        """The CLI's lines, under the model's, for this runtime's options and caches (llama.cpp: its log lines)."""
        return []

    def describe_sizes(self, result: dict) -> list[str]:
        """The CLI's lines, under the per-token size, for what this runtime adds to it (mlx_lm: the prefill peak)."""
        return []


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
    ):
        self.name, self.help, self.windows = name, help, windows or name
        self.engines, self.fit_class = engines, fit_class
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


class LlamaCppRuntime(Runtime):
    """llama.cpp: padded caches allocated when the context is created (kvcore.llamacpp), logged line by line.
    `context` is `-c` (the cells of the whole cache, shared out among the slots), `sequences` is `-np`."""

    name = windows = fit_class = "llama.cpp"
    help = "llama.cpp (its preallocated caches)"
    engines = ("llama.cpp", "llama-server", "ollama")  # Ollama runs llama.cpp's engine
    sequence_noun = "slot"
    max_sequences = llamacpp.LLAMA_MAX_SEQ
    ignored_window_note = "sliding_ignored_llamacpp"
    preallocates = reads_gguf = True
    settings = (
        Setting(
            "unified",
            "--kv-unified",
            False,
            "llama.cpp: one cache stream shared by all sequences (-kvu)",
            "uni",
        ),
        Setting(
            "ubatch",
            "--ubatch",
            llamacpp.DEFAULT_UBATCH,
            f"llama.cpp: micro-batch -ub (default {llamacpp.DEFAULT_UBATCH}); it sizes the sliding-window cache",
            "ub",
            1,
            llamacpp.MAX_UBATCH,
        ),
        Setting(
            "swa_full",
            "--swa-full",
            False,
            "llama.cpp: a full-size sliding-window cache (--swa-full)",
            "swafull",
        ),
    )

    @property
    def kv_formats(self) -> tuple[str, ...]:  # its -ctk/-ctv types, from the table of formats
        return llamacpp_types()

    def options(self, sequences=1, base=None, **values):
        """llamacpp.Options with -np `sequences`; the other fields from `values`, else from `base`, else the defaults."""
        if base is not None and not isinstance(base, llamacpp.Options):
            raise KvError(f"llama.cpp's options are a llamacpp.Options, not {type(base).__name__}.")
        base = base or llamacpp.Options()
        known = {s.field: s for s in self.settings}
        for field in values:
            if field not in known:
                raise KvError(
                    f"llama.cpp has no option {field!r}; its options: {', '.join(known)}."
                )
        fields = {f: known[f].check(values[f]) if f in values else getattr(base, f) for f in known}
        return llamacpp.Options(sequences, batch=base.batch, **fields)

    def kv_bytes(self, geometry, context, spec, sequences=1, options=None):
        self.check(geometry)
        return llamacpp.kv_bytes(
            geometry, context, spec.k_format, spec.v_format, self.options(sequences, options)
        )

    def report(self, geometry, context, spec, sequences, options):
        self.check(geometry)
        options = self.options(sequences, options)
        k, v = spec.k_format, spec.v_format
        caches = llamacpp.caches(geometry, context, k, v, options)
        total = sum(c.bytes for c in caches)

        def row(layer):
            k_width, v_width = llamacpp.kv_widths(layer)
            return llamacpp.row_bytes(k, k_width) + llamacpp.row_bytes(v, v_width)

        return {
            "sequences": options.sequences,
            "kv_bytes": total,
            "kv_bytes_per_sequence": total // options.sequences,
            "kv_bytes_per_token": sum(row(layer) for layer in geometry.layers),
            "kv_bytes_per_token_average": total
            // options.sequences
            / context,  # one slot's cache / -c
            # what one more token of -c adds: the rows of the layers whose cache spans the whole context (not the SWA one)
            "kv_bytes_per_token_at_context": sum(
                row(geometry.layers[i]) for c in caches if c.spans_context for i in c.layers
            ),
            "kv_prefill_peak_bytes": total,  # allocated up front: no growth during prefill
            "per_layer": llamacpp.per_layer(geometry, caches, k, v),
            "formula": llamacpp.cells_text(caches),
            "caches": [c.as_dict() for c in caches],
            "log_lines": [c.log_line() for c in caches],
            "llama_cpp": {
                "sequences": options.sequences,
                "unified": options.unified,
                "batch": options.batch,
                "ubatch": options.ubatch,
                "ubatch_used": llamacpp.micro_batch(context, options),
                "swa_full": options.swa_full,
            },
        }

    def largest_context(self, geometry, spec, sequences, budget, options=None):
        self.check(geometry)
        options = self.options(sequences, options)
        return llamacpp.largest_context(
            geometry, budget, spec.k_format, spec.v_format, options, MAX_CONTEXT
        )

    def most_sequences(self, geometry, spec, context, budget, options=None):
        """The most slots that each get `context` tokens, i.e. `-c context x slots -np slots` (at most LLAMA_MAX_SEQ);
        llama.cpp's padding makes the need step, so every count is tried."""
        self.check(geometry)
        if budget < 0:
            return 0
        best = 0
        for slots in range(1, min(self.max_sequences, MAX_CONTEXT // context) + 1):
            if self.kv_bytes(geometry, context * slots, spec, slots, options) <= budget:
                best = slots
        return best

    def decode_read(self, geometry, context, spec, sequences=1, options=None, tokens=None):
        """A decode step's read: every stream's get_n_kv cells (kvcore.llamacpp.read_cells) once.

        Split cache (-np N): N streams of n_ctx/N cells, each sequence reads its own stream. Unified cache: one
        stream of n_ctx cells shared by the slots, read once per step for all of them (not once per slot).
        `tokens` is what each sequence holds (default: the cache full).
        """
        self.check(geometry)
        options = self.options(sequences, options)
        read = cells = 0
        for cache in llamacpp.caches(geometry, context, spec.k_format, spec.v_format, options):
            if cache.name == "recurrent":  # the whole state, every step
                read += cache.bytes
                continue
            used = cache.cells if tokens is None else tokens * (sequences if options.unified else 1)
            n_kv = llamacpp.read_cells(min(used, cache.cells), cache.cells)
            read += cache.bytes // cache.cells * n_kv
            if cache.spans_context:
                cells += n_kv * cache.streams
        return DecodeRead(read, sequences, cells)

    def decode_position(self, context, sequences=1, options=None):
        """Split streams: each slot's share of -c (n_ctx_seq); unified: the slots together fill the -c cells."""
        options = self.options(sequences, options)
        return min(
            context, context if options.unified else llamacpp.context_cells(context, options)[0]
        )

    def prefill_chunk(self, prompt, options=None):
        return llamacpp.micro_batch(prompt, self.options(1, options))  # -ub as llama.cpp clamps it

    def sequence_share(self, context, sequences=1, options=None):
        return context if self.options(sequences, options).unified else context // sequences

    def shares_cache(self, sequences=1, options=None):
        return sequences > 1 and self.options(sequences, options).unified

    def describe_options(self, result):
        o = result["llama_cpp"]
        lines = [
            f"llama.cpp  -c {result['context']} -np {o['sequences']}{' --kv-unified' if o['unified'] else ''} "
            f"-ub {o['ubatch']} (micro-batch used: {o['ubatch_used']}){' --swa-full' if o['swa_full'] else ''}"
        ]
        return lines + [
            f"  {cache['name']:<9} {line}"
            for cache, line in zip(result["caches"], result["log_lines"])
        ]


RUNTIMES: dict[str, Runtime] = {
    rt.name: rt
    for rt in (
        TokenRuntime(
            "mlx_lm",
            "mlx_lm (default; mlx_lm's own caches)",
            "sliding_ignored",
            prefill_peak="mlx_lm chunked prefill",
            engines=("mlx_lm", "mlx-lm", "mlx-vlm", "omlx", "rapid-mlx"),
            fit_class="mlx",
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
            f"Unknown runtime {name!r}; valid runtimes: {known}.",
            "runtime_unknown",
            runtime=name,
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
