"""Will it fit, how far can it go, how fast will it decode: the calculator's engine.

A runtime with a memory plan (llama.cpp: kvcore.runtimes.llamacpp_plan, every buffer it allocates; mlx_lm:
kvcore.runtimes.mlx_lm_plan, the peak of its generate_step) is judged by its plan, with no margin
(kvcore.capacity.memory_fit): need = the plan's total, fits when need plus the measured tolerance of its working memory is
within the memory available, does not fit when need minus it is above, tight between. Without a plan (the reference
runtime; a model whose layers mlx_lm's plan does not know: MLA, linear attention) kvcore counts weights +
KV(context, sequences) and says so: "no" when they alone exceed the memory, else "unplanned" (they fit, but what the
runtime holds beside them, NOT_COUNTED, is not counted), never "fits". The memory is the same for both: on a Mac,
what the GPU may use (kvcore.capacity.memory_fit.gpu_limit). The levers (largest context, most sequences, KV formats;
with a plan, a smaller prefill step: -ub, --prefill-step-size) are solved against the same lines: with a plan every suggested answer fits and one more does not; without one they
are upper bounds (weights + KV within the memory, one more past it).

Each number comes from the geometry's runtime (kvcore.runtimes.registry): mlx_lm and reference count the tokens
each layer holds; llama.cpp preallocates padded caches, where `context` is its `-c` and `sequences` its
`-np`, and its options (unified cache, micro-batch, --swa-full) come in a llamacpp.Options.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from kvcore.errors import KvError
from kvcore.limits import MAX_BYTES, MAX_CONTEXT
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import check_context, weights_bytes
from kvcore.model.geometry import Geometry
from kvcore.runtimes.registry import get_runtime, runtime_of

from . import memory_fit
from .memory_fit import Fit, Limit, plan_allowance, plan_status
from .request import Request, Result

# What a runtime holds beside weights and KV that kvcore does not count where it has no memory plan for it
NOT_COUNTED = ("activations", "runtime buffers", "the prefill peak")
# the runtime's report's fields a Result holds by name; the rest is what only that runtime reports
_SIZES = (
    "kv_bytes",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "kv_bytes_per_token_average",
    "kv_bytes_per_token_at_context",
    "kv_prefill_peak_bytes",
)


def answer(request: Request, geometry: Geometry) -> Result:
    """The request's result: its sizes (size()) and, when it gives the memory, the verdict and levers (judge()).
    `geometry` is the request's model read under its runtime (kvcore.inputs.source, or the site's reader)."""
    result = size(request, geometry)
    return judge(result, request, geometry) if request.memory_bytes is not None else result


def size(request: Request, geometry: Geometry) -> Result:
    """The request's sizes without a verdict (its memory is not read)."""
    if geometry.runtime != request.runtime:
        raise KvError(
            f"{geometry.name} was read under {geometry.runtime}'s rules, not {request.runtime}'s."
        )
    return calculate(
        geometry,
        request.context,
        request.sequences,
        request.spec,
        request.weights_format,
        request.options(),
        request.flash_attn,
    )


def calculate(
    geometry: Geometry,
    context: int,
    sequences: int = 1,
    spec: KvSpec = KvSpec(),
    weights_format: str = "bf16",
    options: Any = None,
    flash_attn: str = "auto",
) -> Result:
    """Everything `calc --json` prints but the verdict, as a Result; the calculator page shows the same numbers.

    `options` are the runtime's own (llama.cpp: a llamacpp.Options, default `-np sequences`, no unified cache,
    -b 2048, -ub 512; its `sequences` is taken from the `sequences` argument); the runtime's report gives the
    cache's sizes, rows and formula (kvcore.runtimes.registry).
    """
    check_context(context, sequences)
    runtime = runtime_of(geometry)
    report = runtime.report(geometry, context, spec, sequences, options)
    weights = weights_bytes(geometry, weights_format)
    # every buffer the runtime allocates (llama.cpp: model, KV, output, compute), where the engine has a plan
    plan = runtime.memory_plan(geometry, context, spec, sequences, options, weights, flash_attn)
    sizes = {key: report.pop(key) for key in _SIZES}
    sequences_held, per_layer, formula = (
        report.pop(k) for k in ("sequences", "per_layer", "formula")
    )
    # what the verdict compares with the memory: the plan's total and its allowance, else weights + KV
    need = plan["total_bytes"] if plan else weights + sizes["kv_bytes"]
    for key, value in (
        ("kv_bytes", sizes["kv_bytes"]),
        ("kv_prefill_peak_bytes", sizes["kv_prefill_peak_bytes"]),
        ("weights_bytes", weights),
        ("need_bytes", need),
    ):
        check_bytes(key, value)
    return Result(
        model=geometry.name,
        runtime=geometry.runtime,
        context=context,
        sequences=sequences_held,
        k_format=spec.k_format,
        v_format=spec.v_format,
        **sizes,
        per_layer=tuple(per_layer),
        weights_format=weights_format,
        weights_bytes=weights,
        weights_bytes_active=weights_bytes(geometry, weights_format, active=True),
        params=geometry.params.total,
        active_params=geometry.active_params.total,
        formula=formula,
        notes=tuple(geometry.notes),
        runtime_report=report,  # what only this runtime reports (llama.cpp: caches, log lines, options)
        max_position_embeddings=geometry.max_position_embeddings,
        beyond_max_position=beyond_max_position(geometry, context),
        plan=plan,
        need_bytes=need,
        fit_allowance_bytes=plan_allowance(plan) if plan else None,
    )


def judge(result: Result, request: Request, geometry: Geometry) -> Result:
    """`result` with its verdict against the request's memory: the runtime's whole plan where it has one (unless it
    fits, the levers that make it fit, each solved with the plan); else weights + KV only, "no" or "unplanned",
    what is not counted and why, and the levers as upper bounds (weights + KV within the memory, one more past it).
    """
    limit = _limit(request.memory_bytes)
    spec, options = request.spec, request.options()
    weights = result.weights_bytes
    if result.plan is not None:
        fit = memory_fit.fit(result.plan, limit)
        if fit.status != "fits":
            levers = memory_fit.levers(
                runtime_of(geometry),
                geometry,
                request.context,
                spec,
                request.sequences,
                options,
                weights,
                request.flash_attn,
                limit,
                MAX_CONTEXT,
            )
            fit = replace(fit, levers=tuple(levers))
        return replace(result, fit=fit)
    v = verdict(result.need_bytes, limit.bytes)
    bounds = (
        ("context", max_context(geometry, spec, request.sequences, weights, limit.bytes, options)),
        (
            "sequences",
            max_sequences(geometry, spec, request.context, weights, limit.bytes, options),
        ),
        (
            "kv_format",
            formats_that_fit(
                geometry, request.context, request.sequences, weights, limit.bytes, spec, options
            ),
        ),
    )
    blocking = None
    if v.status == "no":
        blocking = "weights" if weights > limit.bytes else "KV cache"
    fit = replace(
        v,
        blocking=blocking,
        levers=tuple(
            {"lever": name, "value": value, "at_most": True} for name, value in bounds if value
        ),
        unplanned=unplanned_because(geometry),
    )
    return replace(result, fit=fit)


def check_bytes(what: str, value: int | float) -> None:
    """Refuse a byte count that is not finite, is negative or exceeds MAX_BYTES (a config of 1,024 layers of 10^9
    values each is inside every field's limit, but its sums are not inside any machine or a 64-bit table)."""
    if not (isinstance(value, int) or math.isfinite(value)) or not 0 <= value <= MAX_BYTES:
        shown = f"{value:,.0f}" if isinstance(value, int) or math.isfinite(value) else str(value)
        raise KvError(
            f"{what} comes to {shown} bytes, outside the range 0 to {MAX_BYTES:,} this calculator takes; give a "
            "smaller model, context or number of sequences.",
            "total_range",
            what=what,
            value=shown,
            limit=f"{MAX_BYTES:,}",
        )


def kv_need(
    geometry: Geometry, context: int, spec: KvSpec, sequences: int = 1, options: Any = None
) -> int:
    """The KV bytes the geometry's runtime needs at `context` x `sequences` (llama.cpp: -c context, -np sequences)."""
    return runtime_of(geometry).kv_bytes(geometry, context, spec, sequences, options)


def beyond_max_position(geometry: Geometry, context: int) -> bool:
    """True when `context` exceeds the model's `max_position_embeddings` (the longest context it was built for,
    per its config.json, or a GGUF's context_length): the memory is still what the cache would hold, but the model is not meant to run there.

    Example: beyond_max_position(llama-3.1-8b, 131_073) -> True (its config says 131,072); a config without the field -> False.
    """
    limit = geometry.max_position_embeddings
    return limit is not None and context > limit


def verdict(need_bytes: int, available_bytes: int, allowance_bytes: int | None = None) -> Fit:
    """A memory plan's need (Result.need_bytes) with its allowance (fit_allowance_bytes): fits when
    need + allowance <= available, no when need - allowance > available, tight between (kvcore.capacity.memory_fit).
    Without an allowance (no plan; need = weights + KV): "no" when need > available, else "unplanned": weights + KV
    fit, and what the runtime holds beside them (NOT_COUNTED) is not counted, so it is never called a fit. No part
    named and no levers: judge() adds them."""
    limit = _limit(available_bytes)
    if allowance_bytes is not None:
        status = plan_status(need_bytes, allowance_bytes, limit.bytes)
        return Fit(status, need_bytes, allowance_bytes, limit, None)
    status = "no" if need_bytes > limit.bytes else "unplanned"
    return Fit(status, need_bytes, None, limit, None, not_counted=NOT_COUNTED)


def unplanned_because(geometry: Geometry) -> str | None:
    """Why kvcore has no memory plan here: "runtime" (none for this runtime: reference), "model" (the runtime's plan
    does not know this model's layers: mlx_lm with MLA or linear attention), None (it has one)."""
    runtime = runtime_of(geometry)
    if runtime.plan_covers(geometry):
        return None
    return "model" if runtime.plans_memory else "runtime"


def _budget_for_kv(available_bytes: int, weights: int) -> int:
    """What weights leave of the memory for KV (no plan: nothing else is counted, so the levers are upper bounds)."""
    if available_bytes <= 0:
        raise KvError("Available memory must be positive.")
    return int(available_bytes) - weights


def _limit(available_bytes: int) -> Limit:
    if available_bytes <= 0:
        raise KvError("Available memory must be positive.")
    return Limit(int(available_bytes), "the memory given")


def max_context(
    geometry: Geometry,
    spec: KvSpec,
    sequences: int,
    weights: int,
    available_bytes: int,
    options: Any = None,
) -> int:
    """The largest context whose total fits (0: not even one token; MAX_CONTEXT: any context): a runtime's
    whole plan where it has one (flash attention as the runtime's default), else the largest whose weights + KV
    stay within the memory, an upper bound (nothing else counted)."""
    runtime = runtime_of(geometry)
    if runtime.plan_covers(geometry):
        return memory_fit.largest_context(
            runtime,
            geometry,
            spec,
            sequences,
            options,
            weights,
            "auto",
            _limit(available_bytes),
            MAX_CONTEXT,
        )
    return runtime.largest_context(
        geometry, spec, sequences, _budget_for_kv(available_bytes, weights), options
    )


def max_context_kv_only(
    geometry: Geometry, spec: KvSpec, sequences: int, weights: int, available_bytes: int
) -> int:
    """The largest context whose weights + KV stay within the memory, whatever the runtime's plan, nothing else
    counted: an upper bound, the Savings chapter's comparison of KV formats by their bytes alone (the Calculator
    judges a runtime by its plan)."""
    return runtime_of(geometry).largest_context(
        geometry, spec, sequences, _budget_for_kv(available_bytes, weights)
    )


def max_sequences(
    geometry: Geometry,
    spec: KvSpec,
    context: int,
    weights: int,
    available_bytes: int,
    options: Any = None,
) -> int:
    """The most concurrent sequences at `context` whose total fits (0: not even one); how a runtime shares its
    context among sequences is its own (llama.cpp: -c context x slots, -np slots; its whole plan). Without a plan:
    the most whose weights + KV stay within the memory, an upper bound."""
    runtime = runtime_of(geometry)
    if runtime.plan_covers(geometry):
        return memory_fit.most_sequences(
            runtime,
            geometry,
            spec,
            context,
            options,
            weights,
            "auto",
            _limit(available_bytes),
            MAX_CONTEXT,
        )
    return runtime.most_sequences(
        geometry, spec, context, _budget_for_kv(available_bytes, weights), options
    )


def runtime_formats(runtime: str | Geometry) -> list[str]:
    """The KV formats a runtime (or a geometry's runtime) can store (llama.cpp: its -ctk/-ctv types)."""
    return list(
        (runtime_of(runtime) if isinstance(runtime, Geometry) else get_runtime(runtime)).kv_formats
    )


def formats_that_fit(
    geometry: Geometry,
    context: int,
    sequences: int,
    weights: int,
    available_bytes: int,
    spec: KvSpec,
    options: Any = None,
) -> list[str]:
    """KV formats (same for K and V) whose total fits, from the largest to the smallest cache (a runtime's whole
    plan where it has one; else those whose weights + KV stay within the memory, an upper bound)."""
    runtime = runtime_of(geometry)
    if runtime.plan_covers(geometry):
        return memory_fit.kv_types_that_fit(
            runtime,
            geometry,
            context,
            spec,
            sequences,
            options,
            weights,
            "auto",
            _limit(available_bytes),
        )
    fits = []
    for name in runtime_formats(geometry):
        try:
            trial = KvSpec(name, name, spec.group_size, spec.activation_dtype)
            need = weights + kv_need(geometry, context, trial, sequences, options)
        except KvError:  # e.g. a group size that does not divide head_dim
            continue
        if verdict(need, available_bytes).status != "no":
            fits.append((need, name))
    return [name for _, name in sorted(fits, reverse=True)]


def smaller_chunk(
    geometry: Geometry,
    context: int,
    sequences: int,
    spec: KvSpec,
    weights: int,
    available_bytes: int,
    options: Any = None,
) -> dict | None:
    """The largest prefill step below the runtime's (llama.cpp: -ub; mlx_lm: --prefill-step-size) whose whole plan
    fits (flash attention as the runtime's default), with the plan's total and the runtime's words for it
    (kvcore.capacity.memory_fit.smaller_chunk); None without a plan, without such a setting, or when none fits."""
    runtime = runtime_of(geometry)
    if not runtime.plan_covers(geometry):
        return None
    return memory_fit.smaller_chunk(
        runtime,
        geometry,
        context,
        spec,
        sequences,
        options,
        weights,
        "auto",
        _limit(available_bytes),
    )
