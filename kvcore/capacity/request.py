"""What the Calculator and `calc` are asked, and what they answer: a frozen request and a typed result.

A Request is built once, by the page from its widgets or by the CLI from its arguments, and names everything the
answer depends on and nothing else (not the reader's language, not the chip's name when only its memory counts): two
links that ask the same question make equal requests, so a cache keyed by the request answers both.
A Result holds calc --json's numbers as fields; `as_dict()` is the JSON.

Example: Request(ModelSource("llama-3.1-8b"), 131072, memory_bytes=16 * 2**30)
-> calculator.answer(request, geometry).fit.status == "no"
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kvcore.memory.formats import KvSpec
from kvcore.runtimes.registry import get_runtime

from .memory_fit import Fit, Limit


@dataclass(frozen=True)
class ModelSource:
    """Where the model comes from: a preset's name (`text` None), a config.json's text under its label, or a GGUF
    (`text` a tuple: the site's key for a header it holds, ("gguf", digest), or ("gguf-path", mtime))."""

    name: str  # a preset's name, a file's label or path
    text: str | bytes | tuple | None = None

    @property
    def is_preset(self) -> bool:
        return self.text is None


@dataclass(frozen=True)
class Request:
    """One question to the Calculator: a model under a runtime's rules at a context and a number of sequences,
    its K and V formats, its weights, the runtime's own settings and, for a verdict, the memory the GPU may use.

    `settings` are the runtime's settings by options field, sorted, a default left out (the page's widgets and the
    CLI's flags give every one): equal questions are equal requests."""

    model: ModelSource
    context: int
    sequences: int = 1
    k_format: str = "fp16"
    v_format: str = "fp16"
    weights_format: str = "bf16"
    runtime: str = "mlx_lm"
    settings: tuple[tuple[str, Any], ...] = ()
    flash_attn: str = "auto"  # llama.cpp's -fa; the levers solve with it
    group_size: int = 64  # mlx quantized cache
    activation_dtype: str = "fp16"
    memory_bytes: int | None = None  # what the GPU may use; None: no verdict

    def __post_init__(self) -> None:
        spec = self.spec  # an unknown format, group size or dtype refused by name; f16 read as fp16
        rt = get_runtime(self.runtime)  # an unknown runtime refused by name
        defaults = {s.field: s.default for s in rt.settings}
        given = dict(self.settings)
        rt.options(self.sequences, **given)  # a setting it does not have, or out of its range
        kept = tuple(sorted((k, v) for k, v in given.items() if defaults.get(k) != v))
        object.__setattr__(self, "settings", kept)
        object.__setattr__(self, "k_format", spec.k_format)
        object.__setattr__(self, "v_format", spec.v_format)

    @property
    def spec(self) -> KvSpec:
        return KvSpec(self.k_format, self.v_format, self.group_size, self.activation_dtype)

    def options(self) -> Any:
        """The runtime's options object: `sequences` and these settings (llama.cpp: -np, -kvu, -ub, --swa-full)."""
        return get_runtime(self.runtime).options(self.sequences, **dict(self.settings))

    def sized(self) -> Request:
        """The same request without the memory: what the sizes depend on (the verdict needs the memory too)."""
        return replace(self, memory_bytes=None)


@dataclass(frozen=True)
class Result:
    """calc --json's numbers for one request: the KV cache (per sequence, per token, per layer), the weights, the
    runtime's memory plan where it has one, what the verdict compares and, with a memory, the verdict and levers."""

    model: str
    runtime: str
    context: int
    sequences: int
    k_format: str
    v_format: str
    kv_bytes: int
    kv_bytes_per_sequence: int
    kv_bytes_per_token: (
        int  # per token per sequence, all layers (sliding ones until their window is full)
    )
    kv_bytes_per_token_average: float  # over the context
    kv_bytes_per_token_at_context: int  # what one more token adds at the context
    kv_prefill_peak_bytes: int
    per_layer: tuple[dict, ...]  # {"layer", "kind", "tokens_held", "kv_bytes"} each
    weights_format: str
    weights_bytes: int
    weights_bytes_active: int  # what one token reads (a mixture of experts: the active ones)
    params: int
    active_params: int
    formula: str
    notes: tuple[str, ...]
    runtime_report: (
        dict  # what only this runtime reports (llama.cpp: its caches, log lines and options)
    )
    max_position_embeddings: int | None
    beyond_max_position: bool
    plan: dict | None  # the runtime's memory plan (kvcore.runtimes.*_plan), None without one
    need_bytes: int  # what the verdict compares: the plan's total, else weights + KV
    fit_allowance_bytes: int | None  # the plan's tolerance either way; None without a plan
    fit: Fit | None = field(
        default=None
    )  # the verdict and levers, when the request gives the memory

    @property
    def counted(self) -> str:
        """What need_bytes holds: the plan's every part, or weights + KV only."""
        return "the whole plan" if self.plan is not None else "weights + KV"

    def as_dict(self, source: str | None = None, limit: Limit | None = None) -> dict:
        """calc --json: every field in its order, the runtime's own report among them, `source` (the preset's
        page or the path given) and the fit block (its limit as `limit` says why, else as the request gave it)."""
        out = {
            "model": self.model,
            "runtime": self.runtime,
            "context": self.context,
            "sequences": self.sequences,
            "k_format": self.k_format,
            "v_format": self.v_format,
            "kv_bytes": self.kv_bytes,
            "kv_bytes_per_sequence": self.kv_bytes_per_sequence,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_token_average": self.kv_bytes_per_token_average,
            "kv_bytes_per_token_at_context": self.kv_bytes_per_token_at_context,
            "kv_prefill_peak_bytes": self.kv_prefill_peak_bytes,
            "per_layer": list(self.per_layer),
            "weights_format": self.weights_format,
            "weights_bytes": self.weights_bytes,
            "weights_bytes_active": self.weights_bytes_active,
            "params": self.params,
            "active_params": self.active_params,
            "formula": self.formula,
            "notes": list(self.notes),
            **self.runtime_report,
            "max_position_embeddings": self.max_position_embeddings,
            "beyond_max_position": self.beyond_max_position,
        }
        if self.plan is not None:
            out["plan"] = self.plan
        out["need_bytes"] = self.need_bytes
        out["fit_allowance_bytes"] = self.fit_allowance_bytes
        if source is not None:
            out["source"] = source
        if self.fit is not None:
            out["fit"] = self.fit.as_dict(limit)
        return out
