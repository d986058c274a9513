"""Will it fit, how far can it go, how fast will it decode: the calculator's engine.

need = weights (all parameters) + KV(context, sequences). Verdict against the memory available:
fits when need <= 90 % of it (10 % kept for activations, runtime buffers and the prefill peak),
tight up to 100 %, does not fit above. The levers (largest context, most sequences, KV formats)
are solved against the "fits" line, so every suggested answer fits and one more does not.
"""

from __future__ import annotations

from dataclasses import dataclass

from .decode_model import Fit, bytes_per_generated_token, chip_for, fit_run, predict_tokens_per_s
from .errors import KvError
from .formats import FORMATS
from .formulas import (
    MAX_CONTEXT,
    MAX_SEQUENCES,
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
from .geometry import Geometry
from .hardware import get_chip

FIT_SHARE = 0.90  # need <= 90 % of available: fits
ASSUMED_EFFICIENCY = 0.6  # share of peak bandwidth when no recording says otherwise (hardware.md: ~40-85 %)


def calculate(geometry: Geometry, context: int, sequences: int = 1, spec: KvSpec = KvSpec(), weights_format: str = "bf16") -> dict:
    """Everything `calc --json` prints, as a dict; the calculator page shows the same numbers."""
    check_context(context, sequences)
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
    }


@dataclass(frozen=True)
class Verdict:
    status: str  # "fits" | "tight" | "no"
    need_bytes: int
    available_bytes: int
    share: float  # need / available

    @property
    def fits_line_bytes(self) -> int:
        return int(self.available_bytes * FIT_SHARE)


def verdict(need_bytes: int, available_bytes: int) -> Verdict:
    """fits (<= 90 % of available) / tight (<= 100 %) / no (> 100 %)."""
    if available_bytes <= 0:
        raise KvError("Available memory must be positive.")
    share = need_bytes / available_bytes
    status = "fits" if need_bytes <= available_bytes * FIT_SHARE else "tight" if need_bytes <= available_bytes else "no"
    return Verdict(status, need_bytes, available_bytes, share)


def _budget_for_kv(available_bytes: int, weights: int) -> int:
    return int(available_bytes * FIT_SHARE) - weights


def max_context(geometry: Geometry, spec: KvSpec, sequences: int, weights: int, available_bytes: int) -> int:
    """The largest context whose total fits (0: not even one token; MAX_CONTEXT: any context)."""
    return max_context_within(geometry, _budget_for_kv(available_bytes, weights), spec, sequences)


def max_sequences(geometry: Geometry, spec: KvSpec, context: int, weights: int, available_bytes: int) -> int:
    """The most concurrent sequences at `context` whose total fits (0: not even one)."""
    per_sequence = kv_bytes(geometry, context, spec)
    budget = _budget_for_kv(available_bytes, weights)
    return max(0, min(MAX_SEQUENCES, budget // per_sequence)) if budget >= 0 else 0


def formats_that_fit(geometry: Geometry, context: int, sequences: int, weights: int, available_bytes: int, spec: KvSpec) -> list[str]:
    """KV formats (same for K and V) whose total fits, from the largest to the smallest cache."""
    fits = []
    for name in FORMATS:
        try:
            trial = KvSpec(name, name, spec.group_size, spec.activation_dtype)
            need = weights + kv_bytes(geometry, context, trial, sequences)
        except KvError:  # e.g. a group size that does not divide head_dim
            continue
        if verdict(need, available_bytes).status == "fits":
            fits.append((need, name))
    return [name for _, name in sorted(fits, reverse=True)]


# ---------------------------------------------------------------- decode what-if


@dataclass(frozen=True)
class Efficiency:
    share: float  # BW_eff / peak
    source: str  # the recording it was fitted from, or "assumption"
    fit: Fit | None = None


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
    return Efficiency(mean, "; ".join(t for _, t, _ in shares), shares[0][2] if len(shares) == 1 else None)


def predict_decode(geometry: Geometry, contexts: list[int], spec: KvSpec, weights_format: str, chip: str, share: float, sequences: int = 1) -> list[dict]:
    """Predicted tokens/s per context on `chip` at `share` of its peak bandwidth (memory-bound model)."""
    bw = get_chip(chip).bandwidth_gbps * share
    rows = []
    for t in contexts:
        b = bytes_per_generated_token(geometry, t, spec, weights_format, sequences)
        rows.append({"context": t, "bytes_per_token": b, "tokens_per_s": predict_tokens_per_s(b, bw)})
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


def memory_curves(geometry: Geometry, contexts: list[int], weights: int, sequences: int, spec: KvSpec, formats=CURVE_FORMATS) -> list[dict]:
    """Total memory (weights + KV) per context for each KV format (K = V); formats that do not apply are left out."""
    rows = []
    for name in formats:
        try:
            trial = KvSpec(name, name, spec.group_size, spec.activation_dtype)
            rows += [{"context": t, "format": name, "kv_bytes": kv_bytes(geometry, t, trial, sequences),
                      "total_bytes": weights + kv_bytes(geometry, t, trial, sequences)} for t in contexts]
        except KvError:
            continue
    return rows
