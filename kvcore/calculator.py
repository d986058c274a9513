"""Will it fit, how far can it go, how fast will it decode: the calculator's engine.

A runtime with a memory plan (llama.cpp: kvcore.runtime_llamacpp_plan, every buffer it allocates) is judged by
its plan, with no margin (kvcore.memory_fit): need = the plan's total, fits when need plus the compute buffer's
measured tolerance is within the memory available, does not fit when need minus it is above, tight between.
A runtime without one yet (mlx_lm, reference: need = weights + KV(context, sequences)) keeps the old rule:
fits when need <= 90 % of the memory (FIT_SHARE: 10 % kept for activations, runtime buffers and the prefill
peak), tight up to 100 %. The levers (largest context, most sequences, KV formats) are solved against the
"fits" line the same way, so every suggested answer fits and one more does not.

Each number comes from the geometry's runtime (kvcore.runtimes): mlx_lm and reference count the tokens
each layer holds; llama.cpp preallocates padded caches, where `context` is its `-c` and `sequences` its
`-np`, and its options (unified cache, micro-batch, --swa-full) come in a llamacpp.Options.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .decode_model import chip_for, fit_run
from .errors import KvError
from .formats import COMPARED
from .formulas import KvSpec, check_context, kv_bytes, weights_bytes
from .geometry import Geometry
from .hardware import Chip, gpu_memory_limit_gb
from .limits import MAX_CONTEXT
from .runtimes import get_runtime, runtime_of
from .units import GIB

if (
    TYPE_CHECKING
):  # pandas only where a table is made: `python -m kvcore` starts ~0.6 s sooner without it
    import pandas as pd

FIT_SHARE = 0.90  # runtimes without a memory plan: need <= 90 % of available fits
# The share of peak bandwidth assumed when no recording says otherwise: a round figure inside the published range
# (kvcore/hardware.yaml `apple_silicon_efficiency`: 40-85 % in llama.cpp's Apple Silicon table, discussion #4167),
# the page saying it is an assumption and citing that range (tests/test_calculator.py holds it inside it).
ASSUMED_EFFICIENCY = 0.6


def calculate(
    geometry: Geometry,
    context: int,
    sequences: int = 1,
    spec: KvSpec = KvSpec(),
    weights_format: str = "bf16",
    options: Any = None,
    flash_attn: str = "auto",
) -> dict:
    """Everything `calc --json` prints, as a dict; the calculator page shows the same numbers.

    `options` are the runtime's own (llama.cpp: a llamacpp.Options, default `-np sequences`, no unified cache,
    -b 2048, -ub 512; its `sequences` is taken from the `sequences` argument); the runtime's report gives the
    cache's sizes, rows and formula (kvcore.runtimes).
    """
    check_context(context, sequences)
    runtime = runtime_of(geometry)
    report = runtime.report(geometry, context, spec, sequences, options)
    weights = weights_bytes(geometry, weights_format)
    # every buffer the runtime allocates (llama.cpp: model, KV, output, compute), where the engine has a plan
    plan = runtime.memory_plan(geometry, context, spec, sequences, options, weights, flash_attn)
    result = {
        "model": geometry.name,
        "runtime": geometry.runtime,
        "context": context,
        "sequences": report.pop("sequences"),
        "k_format": spec.k_format,
        "v_format": spec.v_format,
        **{
            key: report.pop(key)
            for key in (
                "kv_bytes",
                "kv_bytes_per_sequence",
                "kv_bytes_per_token",
                "kv_bytes_per_token_average",
                "kv_bytes_per_token_at_context",
                "kv_prefill_peak_bytes",
                "per_layer",
            )
        },
        "weights_format": weights_format,
        "weights_bytes": weights,
        "weights_bytes_active": weights_bytes(geometry, weights_format, active=True),
        "params": geometry.params.total,
        "active_params": geometry.active_params.total,
        "formula": report.pop("formula"),
        "notes": list(geometry.notes),
        **report,  # what only this runtime reports (llama.cpp: its caches, log lines and options)
        "max_position_embeddings": geometry.max_position_embeddings,
        "beyond_max_position": beyond_max_position(geometry, context),
    }
    if plan is not None:
        result["plan"] = plan
    # what the verdict compares with the memory: the plan's total and its allowance, else weights + KV (FIT_SHARE)
    result["need_bytes"] = plan["total_bytes"] if plan else weights + result["kv_bytes"]
    result["fit_allowance_bytes"] = (
        int(plan["compute_bytes"] * plan["compute_tolerance_share"]) if plan else None
    )
    return result


def kv_need(
    geometry: Geometry, context: int, spec: KvSpec, sequences: int = 1, options: Any = None
) -> int:
    """The KV bytes the geometry's runtime needs at `context` x `sequences` (llama.cpp: -c context, -np sequences)."""
    return runtime_of(geometry).kv_bytes(geometry, context, spec, sequences, options)


def beyond_max_position(geometry: Geometry, context: int) -> bool:
    """True when `context` exceeds the model's `max_position_embeddings` (the longest context it was built for,
    per its config.json): the memory is still what the cache would hold, but the model is not meant to run there.

    Example: beyond_max_position(llama-3.1-8b, 131_073) -> True (its config says 131,072); a config without the field -> False.
    """
    limit = geometry.max_position_embeddings
    return limit is not None and context > limit


@dataclass(frozen=True)
class Verdict:
    status: str  # "fits" | "tight" | "no"
    need_bytes: int
    available_bytes: int
    share: float  # need / available


def verdict(need_bytes: int, available_bytes: int, allowance_bytes: int | None = None) -> Verdict:
    """A memory plan's need (calculate()'s need_bytes) with its allowance (fit_allowance_bytes): fits when
    need + allowance <= available, no when need - allowance > available, tight between (kvcore.memory_fit).
    Without an allowance (a runtime without a plan; need = weights + KV): fits <= 90 %, tight <= 100 %, no above."""
    if available_bytes <= 0:
        raise KvError("Available memory must be positive.")
    share = need_bytes / available_bytes
    if allowance_bytes is not None:
        status = (
            "fits"
            if need_bytes + allowance_bytes <= available_bytes
            else "no"
            if need_bytes - allowance_bytes > available_bytes
            else "tight"
        )
        return Verdict(status, need_bytes, available_bytes, share)
    status = (
        "fits"
        if need_bytes <= available_bytes * FIT_SHARE
        else "tight"
        if need_bytes <= available_bytes
        else "no"
    )
    return Verdict(status, need_bytes, available_bytes, share)


def _budget_for_kv(available_bytes: int, weights: int) -> int:
    return int(available_bytes * FIT_SHARE) - weights


def _limit(available_bytes: int):
    from .memory_fit import Limit

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
    whole plan where it has one (flash attention as the runtime's default), else weights + KV under FIT_SHARE."""
    runtime = runtime_of(geometry)
    if runtime.plans_memory:
        from .memory_fit import largest_context

        return largest_context(
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


def max_sequences(
    geometry: Geometry,
    spec: KvSpec,
    context: int,
    weights: int,
    available_bytes: int,
    options: Any = None,
) -> int:
    """The most concurrent sequences at `context` whose total fits (0: not even one); how a runtime shares its
    context among sequences is its own (llama.cpp: -c context x slots, -np slots; its whole plan)."""
    runtime = runtime_of(geometry)
    if runtime.plans_memory:
        from .memory_fit import most_sequences

        return most_sequences(
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
    plan where it has one)."""
    runtime = runtime_of(geometry)
    if runtime.plans_memory:
        from .memory_fit import kv_types_that_fit

        return kv_types_that_fit(
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
        if verdict(need, available_bytes).status == "fits":
            fits.append((need, name))
    return [name for _, name in sorted(fits, reverse=True)]


# ---------------------------------------------------------------- decode what-if


@dataclass(frozen=True)
class Efficiency:
    share: float  # BW_eff / peak
    source: str  # the recordings it was fitted from, or "assumption"


def efficiency(recordings: list) -> Efficiency:
    """The share of peak bandwidth decode reached in memory-bound recordings on known chips (their mean), else an assumption."""
    shares = []
    for rec in recordings:
        fit, chip = fit_run(rec), chip_for(rec)
        if fit is not None and chip is not None and fit.memory_bound:
            shares.append((fit.bandwidth_gbps / chip.bandwidth_gbps, rec.title, fit))
    if not shares:
        return Efficiency(ASSUMED_EFFICIENCY, "assumption")
    mean = sum(s for s, _, _ in shares) / len(shares)
    return Efficiency(mean, "; ".join(t for _, t, _ in shares))


def predict_decode(
    geometry: Geometry,
    contexts: list[int],
    spec: KvSpec,
    weights_format: str,
    chip: str,
    share: float,
    sequences: int = 1,
    llama: Any = None,
) -> list[dict]:
    """Predicted decode per context on `chip` at `share` of its peak bandwidth: the time model's step (kvcore.timing:
    the weights once, every sequence's KV as the runtime reads it, the roofline bound) at each context.

    Rows: tokens_per_s (each sequence; llama.cpp: each slot), tokens_per_s_total (all of them), bytes_per_token (what
    one step reads), bound. llama.cpp: `context` is -c and `llama` its options (unified slots share the cells: one
    read serves every slot, so each slot decodes as one slot at -c does and the total is slots x that).
    """
    from . import timing, timing_fit

    eff = timing.Efficiency(timing_fit.calibration().compute, share, "calculator")
    rows = []
    for t in contexts:
        step = timing.decode_step(geometry, t, chip, eff, spec, weights_format, sequences, llama)
        rows.append(
            {
                "context": t,
                "bytes_per_token": step.bytes,
                "tokens_per_s": 1.0 / step.time_s,
                "tokens_per_s_total": step.tokens / step.time_s,
                "sequences": step.tokens,
                "bound": step.bound,
            }
        )
    return rows


CURVE_FORMATS = COMPARED  # the formats the site compares (kvcore.formats)


def log_contexts(low: int = 1024, high: int = 10_000_000, per_decade: int = 6) -> list[int]:
    """Log-spaced contexts for charts; every power of two in range is included (exact 256-multiples).

    Example: log_contexts(1024, 8192, 1) -> [1024, 2048, 4096, 8192].
    """
    points = {2**k for k in range(0, 40) if low <= 2**k <= high}
    step = 10 ** (1 / per_decade)
    value = float(low)
    while value <= high:
        points.add(int(round(value)))
        value *= step
    return sorted(points | {low, high})


def memory_curves(
    geometry: Geometry,
    contexts: list[int],
    weights: int,
    sequences: int,
    spec: KvSpec,
    formats=CURVE_FORMATS,
    options: Any = None,
) -> list[dict]:
    """Total memory (weights + KV) per context for each KV format (K = V); formats that do not apply are left out."""
    rows = []
    for name in formats:
        try:
            trial = KvSpec(name, name, spec.group_size, spec.activation_dtype)
            kv = [kv_need(geometry, t, trial, sequences, options) for t in contexts]
        except KvError:
            continue
        rows += [
            {"context": t, "format": name, "kv_bytes": b, "total_bytes": weights + b}
            for t, b in zip(contexts, kv)
        ]
    return rows


# ---------------------------------------------------------------- a chip's memory and the decode what-if


def doubling_contexts(max_context: int, start: int = 1024) -> list[int]:
    """Powers of two from `start` to `max_context` (all multiples of 256)."""
    return [2**k for k in range(int(math.log2(start)), int(math.log2(max_context)) + 1)]


def chip_memory_bytes(chip: Chip) -> int | None:
    """The most memory a model may use on `chip`: its largest memory option (vendors' "GB" are GiB) within
    macOS's default GPU share on a Mac; None when the hardware table lists no sizes for it."""
    if not chip.memory_gb:
        return None
    gb, _ = gpu_memory_limit_gb(float(max(chip.memory_gb)), chip.unified)
    return int(gb * GIB)


def what_if(
    geometry: Geometry,
    weights_format: str,
    spec: KvSpec,
    chip: Chip,
    efficiency: float,
    max_context: int,
) -> pd.DataFrame:
    """Predicted tok/s vs context on a chip, at its peak bandwidth and at `efficiency` x peak: only at contexts the
    model supports (max_position_embeddings) and whose weights + KV fit in the chip's largest memory.

    Empty when not even the shortest context fits (e.g. Llama-3.1-70B in bf16 on an 80 GB GPU).
    """
    import pandas as pd

    limit = min(max_context, geometry.max_position_embeddings or max_context)
    ctxs = sorted(
        {*(t for t in doubling_contexts(max_context, 256) if t <= limit), limit}
    )  # the model's own limit is drawn too
    memory = chip_memory_bytes(chip)
    if memory is not None:
        weights = weights_bytes(geometry, weights_format)
        ctxs = [t for t in ctxs if weights + kv_bytes(geometry, t, spec) <= memory]
    if not ctxs:
        return pd.DataFrame(columns=["context", "series", "tokens_per_s", "bytes_per_token"])
    frames = [
        pd.DataFrame(predict_decode(geometry, ctxs, spec, weights_format, chip.chip, share)).assign(
            series=series
        )
        for series, share in (("peak", 1.0), ("effective", efficiency))
    ]
    return pd.concat(frames, ignore_index=True)[
        ["context", "series", "tokens_per_s", "bytes_per_token"]
    ]
