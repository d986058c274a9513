"""Will it fit, how far can it go, how fast will it decode: the calculator's engine.

need = weights (all parameters) + KV(context, sequences). Verdict against the memory available:
fits when need <= 90 % of it (10 % kept for activations, runtime buffers and the prefill peak),
tight up to 100 %, does not fit above. The levers (largest context, most sequences, KV formats)
are solved against the "fits" line, so every suggested answer fits and one more does not.

Runtimes: mlx_lm and reference count the tokens each layer holds (kvcore.formulas); llama.cpp
preallocates padded caches (kvcore.llamacpp), where `context` is its `-c` and `sequences` its `-np`,
and the llama.cpp options (unified cache, micro-batch, --swa-full) come in a llamacpp.Options.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .decode_model import bytes_per_generated_token, chip_for, fit_run, predict_tokens_per_s
from .errors import KvError
from .formats import FORMATS
from .formulas import (
    KvSpec,
    check_context,
    formula_text,
    kv_bytes,
    kv_bytes_per_token,
    kv_bytes_per_token_at,
    kv_prefill_peak_bytes,
    max_context_within,
    per_layer_kv,
    weights_bytes,
)
from . import llamacpp
from .geometry import LCPP, Geometry
from .hardware import Chip, get_chip, gpu_memory_limit_gb
from .limits import MAX_CONTEXT, MAX_SEQUENCES
from .units import GIB

FIT_SHARE = 0.90  # need <= 90 % of available: fits
ASSUMED_EFFICIENCY = 0.6  # share of peak bandwidth when no recording says otherwise (hardware.md: ~40-85 %)


def calculate(geometry: Geometry, context: int, sequences: int = 1, spec: KvSpec = KvSpec(), weights_format: str = "bf16",
              llama: llamacpp.Options | None = None) -> dict:
    """Everything `calc --json` prints, as a dict; the calculator page shows the same numbers.

    For a llama.cpp geometry, `llama` holds its options (default: `-np sequences`, no unified cache,
    -b 2048, -ub 512); its `sequences` is taken from the `sequences` argument.
    """
    check_context(context, sequences)
    if geometry.runtime == LCPP:
        return _calculate_llamacpp(geometry, context, spec, weights_format, _llama_options(llama, sequences))
    per_layer = per_layer_kv(geometry, context, spec, sequences)
    total = kv_bytes(geometry, context, spec, sequences)
    return {
        "model": geometry.name,
        "runtime": geometry.runtime,
        "context": context,
        "sequences": sequences,
        "k_format": spec.k_format,
        "v_format": spec.v_format,
        "kv_bytes": total,
        "kv_bytes_per_sequence": total // sequences,
        "kv_bytes_per_token": kv_bytes_per_token(geometry, spec),
        "kv_bytes_per_token_average": total // sequences / context,  # one sequence's KV / its tokens
        "kv_bytes_per_token_at_context": kv_bytes_per_token_at(geometry, context, spec),
        "kv_prefill_peak_bytes": kv_prefill_peak_bytes(geometry, context, spec, sequences),
        "per_layer": per_layer,
        "weights_format": weights_format,
        "weights_bytes": weights_bytes(geometry, weights_format),
        "weights_bytes_active": weights_bytes(geometry, weights_format, active=True),
        "params": geometry.params.total,
        "active_params": geometry.active_params.total,
        "formula": formula_text(geometry, context, spec, sequences),
        "notes": list(geometry.notes),
        "max_position_embeddings": geometry.max_position_embeddings,
        "beyond_max_position": beyond_max_position(geometry, context),
    }


def _llama_options(llama: llamacpp.Options | None, sequences: int) -> llamacpp.Options:
    base = llama or llamacpp.Options()
    return llamacpp.Options(sequences, base.unified, base.batch, base.ubatch, base.swa_full)


def _calculate_llamacpp(geometry: Geometry, context: int, spec: KvSpec, weights_format: str, options: llamacpp.Options) -> dict:
    """calculate() for llama.cpp: its preallocated caches, each with the line llama.cpp logs for it."""
    caches = llamacpp.caches(geometry, context, spec.k_format, spec.v_format, options)
    total = sum(c.bytes for c in caches)
    per_token = sum(llamacpp.row_bytes(spec.k_format, k) + llamacpp.row_bytes(spec.v_format, v)
                    for k, v in map(llamacpp.kv_widths, geometry.layers))
    return {
        "model": geometry.name,
        "runtime": geometry.runtime,
        "context": context,
        "sequences": options.sequences,
        "k_format": spec.k_format,
        "v_format": spec.v_format,
        "kv_bytes": total,
        "kv_bytes_per_sequence": total // options.sequences,
        "kv_bytes_per_token": per_token,
        "kv_bytes_per_token_average": total // options.sequences / context,  # one slot's cache / -c
        # what one more token of -c adds: the rows of the layers whose cache spans the whole context (not the SWA one)
        "kv_bytes_per_token_at_context": sum(llamacpp.row_bytes(spec.k_format, k) + llamacpp.row_bytes(spec.v_format, v)
                                             for c in caches if c.name in ("kv", "non-swa")
                                             for k, v in (llamacpp.kv_widths(geometry.layers[i]) for i in c.layers)),
        "kv_prefill_peak_bytes": total,  # allocated up front: no growth during prefill
        "per_layer": llamacpp.per_layer(geometry, caches, spec.k_format, spec.v_format),
        "weights_format": weights_format,
        "weights_bytes": weights_bytes(geometry, weights_format),
        "weights_bytes_active": weights_bytes(geometry, weights_format, active=True),
        "params": geometry.params.total,
        "active_params": geometry.active_params.total,
        "formula": llamacpp.cells_text(caches),
        "notes": list(geometry.notes),
        "caches": [c.as_dict() for c in caches],
        "log_lines": [c.log_line() for c in caches],
        "llama_cpp": {"sequences": options.sequences, "unified": options.unified, "batch": options.batch,
                      "ubatch": options.ubatch, "ubatch_used": llamacpp.micro_batch(context, options), "swa_full": options.swa_full},
        "max_position_embeddings": geometry.max_position_embeddings,
        "beyond_max_position": beyond_max_position(geometry, context),
    }


def kv_need(geometry: Geometry, context: int, spec: KvSpec, sequences: int = 1, llama: llamacpp.Options | None = None) -> int:
    """The KV bytes the geometry's runtime needs at `context` x `sequences` (llama.cpp: -c context, -np sequences)."""
    if geometry.runtime == LCPP:
        return llamacpp.kv_bytes(geometry, context, spec.k_format, spec.v_format, _llama_options(llama, sequences))
    return kv_bytes(geometry, context, spec, sequences)


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


def verdict(need_bytes: int, available_bytes: int) -> Verdict:
    """fits (<= 90 % of available) / tight (<= 100 %) / no (> 100 %)."""
    if available_bytes <= 0:
        raise KvError("Available memory must be positive.")
    share = need_bytes / available_bytes
    status = "fits" if need_bytes <= available_bytes * FIT_SHARE else "tight" if need_bytes <= available_bytes else "no"
    return Verdict(status, need_bytes, available_bytes, share)


def _budget_for_kv(available_bytes: int, weights: int) -> int:
    return int(available_bytes * FIT_SHARE) - weights


def max_context(geometry: Geometry, spec: KvSpec, sequences: int, weights: int, available_bytes: int,
                llama: llamacpp.Options | None = None) -> int:
    """The largest context whose total fits (0: not even one token; MAX_CONTEXT: any context)."""
    budget = _budget_for_kv(available_bytes, weights)
    if geometry.runtime == LCPP:
        return llamacpp.largest_context(geometry, budget, spec.k_format, spec.v_format, _llama_options(llama, sequences), MAX_CONTEXT)
    return max_context_within(geometry, budget, spec, sequences)


def max_sequences(geometry: Geometry, spec: KvSpec, context: int, weights: int, available_bytes: int,
                  llama: llamacpp.Options | None = None) -> int:
    """The most concurrent sequences at `context` whose total fits (0: not even one).

    llama.cpp: the most slots that each get `context` tokens, i.e. `-c context x slots -np slots`
    (at most LLAMA_MAX_SEQ); llama.cpp's padding makes the need step, so every count is tried.
    """
    budget = _budget_for_kv(available_bytes, weights)
    if budget < 0:
        return 0
    if geometry.runtime == LCPP:
        best = 0
        for slots in range(1, min(llamacpp.LLAMA_MAX_SEQ, MAX_CONTEXT // context) + 1):
            if kv_need(geometry, context * slots, spec, slots, llama) <= budget:
                best = slots
        return best
    per_sequence = kv_bytes(geometry, context, spec)
    return max(0, min(MAX_SEQUENCES, budget // per_sequence))


def runtime_formats(runtime: str | Geometry) -> list[str]:
    """The KV formats a runtime (or a geometry's runtime) can store (llama.cpp: its -ctk/-ctv types)."""
    runtime = runtime.runtime if isinstance(runtime, Geometry) else runtime
    return list(llamacpp.LLAMACPP_TYPES) if runtime == LCPP else list(FORMATS)


def formats_that_fit(geometry: Geometry, context: int, sequences: int, weights: int, available_bytes: int, spec: KvSpec,
                     llama: llamacpp.Options | None = None) -> list[str]:
    """KV formats (same for K and V) whose total fits, from the largest to the smallest cache."""
    fits = []
    for name in runtime_formats(geometry):
        try:
            trial = KvSpec(name, name, spec.group_size, spec.activation_dtype)
            need = weights + kv_need(geometry, context, trial, sequences, llama)
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


def predict_decode(geometry: Geometry, contexts: list[int], spec: KvSpec, weights_format: str, chip: str, share: float,
                   sequences: int = 1, llama: llamacpp.Options | None = None) -> list[dict]:
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
        rows.append({"context": t, "bytes_per_token": step.bytes, "tokens_per_s": 1.0 / step.time_s,
                     "tokens_per_s_total": step.tokens / step.time_s, "sequences": step.tokens, "bound": step.bound})
    return rows


CURVE_FORMATS = ("fp16", "fp8", "mlx-q8", "q8_0", "mlx-q4", "q4_0", "turbo3")


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


def memory_curves(geometry: Geometry, contexts: list[int], weights: int, sequences: int, spec: KvSpec, formats=CURVE_FORMATS,
                  llama: llamacpp.Options | None = None) -> list[dict]:
    """Total memory (weights + KV) per context for each KV format (K = V); formats that do not apply are left out."""
    rows = []
    for name in formats:
        try:
            trial = KvSpec(name, name, spec.group_size, spec.activation_dtype)
            kv = [kv_need(geometry, t, trial, sequences, llama) for t in contexts]
        except KvError:
            continue
        rows += [{"context": t, "format": name, "kv_bytes": b, "total_bytes": weights + b} for t, b in zip(contexts, kv)]
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


def what_if(geometry: Geometry, weights_format: str, spec: KvSpec, chip: Chip, efficiency: float,
            max_context: int) -> pd.DataFrame:
    """Predicted tok/s vs context on a chip, at its peak bandwidth and at `efficiency` x peak: only at contexts the
    model supports (max_position_embeddings) and whose weights + KV fit in the chip's largest memory.

    Empty when not even the shortest context fits (e.g. Llama-3.1-70B in bf16 on an 80 GB GPU).
    """
    limit = min(max_context, geometry.max_position_embeddings or max_context)
    ctxs = sorted({*(t for t in doubling_contexts(max_context, 256) if t <= limit), limit})  # the model's own limit is drawn too
    memory = chip_memory_bytes(chip)
    if memory is not None:
        weights = weights_bytes(geometry, weights_format)
        ctxs = [t for t in ctxs if weights + kv_bytes(geometry, t, spec) <= memory]
    if not ctxs:
        return pd.DataFrame(columns=["context", "series", "tokens_per_s", "bytes_per_token"])
    frames = [pd.DataFrame(predict_decode(geometry, ctxs, spec, weights_format, chip.chip, share)).assign(series=series)
              for series, share in (("peak", 1.0), ("effective", efficiency))]
    return pd.concat(frames, ignore_index=True)[["context", "series", "tokens_per_s", "bytes_per_token"]]
