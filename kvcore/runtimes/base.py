"""What every runtime answers (Runtime), the options that change its cache (Setting) and what one
decode step reads (DecodeRead); the runtimes themselves are one module each, named in kvcore.runtimes.registry.

A runtime is held to this contract by the code: a class that leaves out one of the questions every runtime answers
(REQUIRED) is refused when it is defined, a Setting without its help, URL key or a range around its default when it
is made, and a report whose per-layer rows do not add up to its KV bytes when it is made.

Example: Setting("ubatch", "--ubatch", 512, "...", "ub", 1, 1 << 20).check(0) -> KvError
"--ubatch must be a whole number from 1 to 1,048,576, not 0."
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvcore.errors import KvError, quote
from kvcore.memory.formats import get_format
from kvcore.memory.formulas import DOWNLOAD_WEIGHT_FORMATS

if TYPE_CHECKING:
    from kvcore.memory.formats import KvSpec
    from kvcore.model.geometry import Geometry


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
    choices: tuple[
        int, ...
    ] = ()  # a whole-number setting that takes only these values (e.g. powers of two)

    def __post_init__(self) -> None:
        where = f"Runtime setting {self.flag!r}"
        if not (isinstance(self.flag, str) and self.flag.startswith("--") and len(self.flag) > 2):
            raise KvError(f"{where}: its flag must start with '--' (e.g. '--ubatch').")
        if not (self.field and self.help and self.key):
            raise KvError(f"{where} needs its options field, its help text and its URL key.")
        if self.choices and (
            isinstance(self.default, bool)
            or self.default not in self.choices
            or not all(self.low <= c <= self.high for c in self.choices)
        ):
            raise KvError(f"{where}: its choices must hold its default and lie within its range.")
        if not isinstance(self.default, bool) and not (
            isinstance(self.default, int) and 0 < self.low <= self.default <= self.high
        ):
            raise KvError(
                f"{where}: a whole-number setting needs 0 < low <= default <= high, not "
                f"{self.low!r} <= {self.default!r} <= {self.high!r}."
            )

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
                raise KvError(f"{self.flag} is on or off (true or false), not {quote(value)}.")
            return value
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not self.low <= value <= self.high
        ):
            raise KvError(
                f"{self.flag} must be a whole number from {self.low:,} to {self.high:,}, not {quote(value)}."
            )
        if self.choices and value not in self.choices:
            raise KvError(
                f"{self.flag} must be one of {', '.join(f'{c:,}' for c in self.choices)}, not {quote(value)}."
            )
        return value


@dataclass(frozen=True)
class Part:
    """One thing a runtime holds in its memory plan: its name as the runtime says it, its bytes, the rule behind
    them and the source line of that rule; `log_line`, what the runtime prints about it (llama.cpp), if anything."""

    name: str
    kind: str  # weights, kv, output, compute (llama.cpp); growth, scores, mask, activations, conversion, logits
    bytes: int
    rule: str
    source: str
    log_line: str = ""

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("name", "kind", "bytes", "rule", "source")}
        return {**d, "log_line": self.log_line} if self.log_line else d


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


REQUIRED = (
    "kv_bytes",
    "sizes",
    "largest_context",
    "most_sequences",
    "decode_read",
    "decode_position",
    "prefill_chunk",
)  # the questions a runtime answers in its own way: a subclass defines every one


class Runtime:
    """The common questions every runtime answers; TokenRuntime and LlamaCppRuntime answer them.

    A subclass that leaves out a method of REQUIRED is refused when its class statement runs (a KvError naming it).
    """

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        missing = [name for name in REQUIRED if getattr(cls, name) is getattr(Runtime, name)]
        if missing:
            raise KvError(
                f"Runtime class {cls.__name__} does not define {', '.join(missing)}: every runtime answers "
                "them (kvcore.runtimes.base.REQUIRED)."
            )
        settings = getattr(cls, "settings", ())
        for attr in ("field", "flag", "key", "name"):
            seen = [getattr(s, attr) for s in settings]
            if len(seen) != len(set(seen)):
                raise KvError(f"Runtime class {cls.__name__} has two settings with one {attr}.")
        mac = getattr(cls, "mac_backend", "")
        if mac and mac not in getattr(cls, "backends", ()):
            raise KvError(
                f"Runtime class {cls.__name__} names {quote(mac)} its Mac build, which is not one of its backends."
            )

    name: str
    help: str  # what it is, for `--runtime`'s help
    kv_formats: tuple[str, ...]  # the K/V formats it stores (the page's and the levers' choices)
    max_sequences: int  # the most concurrent sequences it runs
    settings: tuple[Setting, ...] = ()
    windows: str  # the key of the family table's window rules it applies (kvcore.model.families.Family.windows)
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
        False  # True: a GGUF file's geometry is this runtime's reading of it (kvcore.inputs.gguf)
    )
    flash_attention: bool = False  # True: -fa on/off/auto sizes its compute buffer (memory_plan; the CLI's --flash-attn)
    backends: tuple[
        str, ...
    ] = ()  # the builds its plan tells apart (llama.cpp: cpu, metal; the CLI's --backend)
    mac_backend: str = (
        ""  # of `backends`, the build a Mac reader runs (the Calculator offers it first)
    )
    plans_memory: bool = (
        False  # True: memory_plan() gives every buffer; verdicts and levers use it, no margin
    )
    engines: tuple[
        str, ...
    ] = ()  # programs whose recorded runs follow its rules (a recording's runtime.name, any case)
    fit_class: str = (
        ""  # the class its runs' decode bandwidth share is fitted per (kvcore.fits.shares)
    )
    server: str = (
        ""  # the server program that ships with it, as kvcore.servers names its ledger ("": none)
    )
    sequence_noun: str = (
        "sequence"  # what it calls one of its concurrent sequences ("slot" for llama.cpp's server)
    )
    # the K/V format it caches in when told none (None: the model's activation dtype, as mlx_lm's KVCache)
    default_kv_format: str | None = None
    # True: K and V are kept in one format (mlx_lm: one kv_bits quantizes both, KVCache holds both in one dtype)
    one_kv_format: bool = False
    # the weight formats its model files come in (the Calculator's choices) and the one it offers first
    weight_formats: tuple[str, ...] = DOWNLOAD_WEIGHT_FORMATS
    default_weights: str = "mlx-q4"

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

    def check_kv(self, spec: KvSpec) -> None:
        """Refuse a K/V format kvcore does not know, one this runtime does not store, and a K/V pair where it
        keeps one format for both: a KvError naming them and what it does store."""
        for name in dict.fromkeys((spec.k_format, spec.v_format)):
            get_format(name)  # an unknown name, by name
            if name not in self.kv_formats:
                valid = ", ".join(self.kv_formats)
                raise KvError(
                    f"{self.name} does not store K/V as {name!r}: its caches hold {valid}; the reference "
                    "runtime sizes any format.",
                    "runtime_format",
                    runtime=self.name,
                    format=name,
                    valid=valid,
                )
        if self.one_kv_format and spec.k_format != spec.v_format:
            raise KvError(
                f"{self.name} keeps K and V in one format, not K {spec.k_format} and V {spec.v_format}; "
                "choose the same for both (the reference runtime sizes a pair).",
                "runtime_kv_pair",
                runtime=self.name,
                k=spec.k_format,
                v=spec.v_format,
            )

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

    def sizes(
        self, geometry: Geometry, context: int, spec: KvSpec, sequences: int, options: Any
    ) -> dict:
        """calculate()'s runtime-dependent fields: sizes, per-layer rows, formula text (and llama.cpp's caches)."""
        raise NotImplementedError

    def report(
        self, geometry: Geometry, context: int, spec: KvSpec, sequences: int, options: Any
    ) -> dict:
        """sizes(), refused if its per-layer rows do not add up to its KV bytes (a KvError naming both)."""
        result = self.sizes(geometry, context, spec, sequences, options)
        rows = sum(row["kv_bytes"] for row in result["per_layer"])
        if rows != result["kv_bytes"]:
            raise KvError(
                f"Runtime {self.name}'s report for {geometry.name} does not add up: its per-layer rows hold "
                f"{rows:,} B, its KV cache {result['kv_bytes']:,} B."
            )
        return result

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

    def memory_plan(
        self,
        geometry: Geometry,
        context: int,
        spec: KvSpec,
        sequences: int,
        options: Any,
        weights_bytes: int,
        flash_attn: str = "auto",
        chip: str | None = None,
    ) -> dict | None:
        """Every buffer the runtime allocates, part by part (llama.cpp: kvcore.runtimes.llamacpp_plan); None where
        the engine has no plan for this runtime. `chip` (e.g. "M4 Max"): the Mac it runs on, where the plan depends
        on it (mlx_lm's command buffers in flight); None for the plan's upper estimate."""
        return None

    def plan_covers(self, geometry: Geometry) -> bool:
        """True when memory_plan() gives a plan for this geometry (the verdict and levers then use it)."""
        return self.plans_memory

    def plan_context(self, context: int, sequences: int = 1) -> int:
        """The context memory_plan() takes for `sequences` sequences of `context` tokens each (llama.cpp: -c context
        x N with -np N; runtimes that count tokens per sequence: context)."""
        return context

    def describe_options(self, result: dict) -> list[str]:
        """The CLI's lines, under the model's, for this runtime's options and caches (llama.cpp: its log lines)."""
        return []

    def describe_sizes(self, result: dict) -> list[str]:
        """The CLI's lines, under the per-token size, for what this runtime adds to it (mlx_lm: the prefill peak)."""
        return []
