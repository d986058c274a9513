"""Decode model: every generated token reads the active weights plus the whole KV cache.

time/token = (W_active + KV(T)) / BW_eff (+ a fixed overhead c >= 0)
Example (Article A, M5 Pro): bytes/token 0.729 GB at T=1,024 and 1.769 GB at T=32,768
-> predicted slowdown 2.43x against the measured 292/119 = 2.45x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvcore.errors import KvError
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import kv_bytes, weights_bytes
from kvcore.model.geometry import Geometry
from kvcore.timing.hardware import slowest_memory

if (
    TYPE_CHECKING
):  # pandas only where a table is made: `python -m kvcore` starts ~0.6 s sooner without it
    pass

MIN_POINTS_FOR_OVERHEAD = 3  # a slope and an intercept need a third point to leave a residual
FAR_BELOW_PEAK = 0.10  # fitted BW_eff under 10 % of the chip's peak: not explained by memory reads
ABOVE_PEAK = 1.10  # over the peak (with 10 % slack): the bytes model cannot be right either
LARGE_RESIDUAL = (
    0.10  # RMS relative residual over 10 %: the points do not follow bytes/BW (the runs on the
)
# slowdown-vs-bytes identity line miss it by 4 % at most; Qwen3-0.6B below it, 12 %, is not called memory-bound)


def bytes_per_generated_token(
    geometry: Geometry,
    context: int,
    spec: KvSpec = KvSpec(),
    weights_format: str = "mlx-q4",
    sequences: int = 1,
) -> int:
    """Bytes one decode step reads: the active weights once plus the KV cache of every sequence."""
    return weights_bytes(geometry, weights_format, active=True) + kv_bytes(
        geometry, context, spec, sequences
    )


def predict_tokens_per_s(
    bytes_per_token: float, bandwidth_gbps: float, overhead_s: float = 0.0
) -> float:
    """Tokens/s of a memory-bound decode step: 1 / (bytes / BW + overhead)."""
    if bandwidth_gbps <= 0:
        raise KvError("Bandwidth must be positive.")
    return 1.0 / (bytes_per_token / (bandwidth_gbps * 1e9) + overhead_s)


@dataclass(frozen=True)
class Fit:
    bandwidth_gbps: float  # fitted effective bandwidth BW_eff
    overhead_s: float  # fitted fixed time per token (0 when not fitted)
    fitted_overhead: bool
    residuals: tuple[float, ...]  # (measured - predicted) / measured, per point, in time per token
    rms_residual: float
    memory_bound: bool
    verdict: str  # one plain English sentence (CLI, tests); pages render verdict_code instead
    verdict_code: str = "memory_bound"  # memory_bound | large_residual | far_below_peak | below_any_memory | above_peak
    peak_gbps: float | None = None  # the chip's peak the verdict compared against

    def predict(self, bytes_per_token: float) -> float:
        return predict_tokens_per_s(bytes_per_token, self.bandwidth_gbps, self.overhead_s)


def fit_bandwidth(
    bytes_per_token: list[float], tokens_per_s: list[float], peak_gbps: float | None = None
) -> Fit:
    """Least-squares fit of t = b / BW_eff + c to measured points (c >= 0, only with >= 3 points).

    Args:
        bytes_per_token: bytes read per generated token at each measured context.
        tokens_per_s: the measured decode speed at the same contexts.
        peak_gbps: the chip's published peak bandwidth, if known, for the verdict.
    Returns:
        a Fit with residuals and a plain verdict on whether the data is memory-bound.
    """
    if len(bytes_per_token) != len(tokens_per_s) or not bytes_per_token:
        raise KvError("The fit needs one or more (bytes, tokens/s) pairs of equal length.")
    if any(not (v > 0 and math.isfinite(v)) for v in [*bytes_per_token, *tokens_per_s]):
        raise KvError("Bytes and tokens/s must be positive numbers.")
    b = [float(x) for x in bytes_per_token]
    t = [1.0 / v for v in tokens_per_s]
    slope, c = _fit_line(b, t) if len(b) >= MIN_POINTS_FOR_OVERHEAD else (None, 0.0)
    fitted_overhead = slope is not None and c > 0 and slope > 0
    if not fitted_overhead:  # one parameter through the origin
        slope, c = sum(x * y for x, y in zip(b, t)) / sum(x * x for x in b), 0.0
    bw = 1.0 / slope / 1e9
    residuals = tuple((ti - (bi * slope + c)) / ti for bi, ti in zip(b, t))
    rms = math.sqrt(sum(r * r for r in residuals) / len(residuals))
    code = verdict_code(bw, rms, peak_gbps)
    return Fit(
        bw,
        c,
        fitted_overhead,
        residuals,
        rms,
        code == "memory_bound",
        _verdict(code, bw, rms, c, peak_gbps),
        code,
        peak_gbps,
    )


def _fit_line(x: list[float], y: list[float]) -> tuple[float | None, float]:
    """Ordinary least squares y = a x + c; (None, 0) when x does not vary."""
    n = len(x)
    mx, my = sum(x) / n, sum(y) / n
    sxx = sum((xi - mx) ** 2 for xi in x)
    if sxx == 0:
        return None, 0.0
    a = sum((xi - mx) * (yi - my) for xi, yi in zip(x, y)) / sxx
    return a, my - a * mx


def verdict_code(bw: float, rms: float, peak: float | None) -> str:
    """Why a fit is or is not memory-bound: "memory_bound", "large_residual", "far_below_peak", "below_any_memory"
    (no chip peak known, and the fitted bandwidth is below the slowest memory any computer has: a CPU run at
    1 GB/s is not reading memory flat out) or "above_peak"."""
    if rms > LARGE_RESIDUAL:
        return "large_residual"
    if peak and bw < FAR_BELOW_PEAK * peak:
        return "far_below_peak"
    if not peak and bw < slowest_memory()[0]:
        return "below_any_memory"
    if peak and bw > ABOVE_PEAK * peak:
        return "above_peak"
    return "memory_bound"


def _verdict(code: str, bw: float, rms: float, overhead: float, peak: float | None) -> str:
    """The verdict as one English sentence (the site renders `code` through its i18n files)."""
    if code == "large_residual":
        return (
            f"Not memory-bound: the points miss the bytes-per-token line by {rms:.0%} RMS, "
            "so a single effective bandwidth would mislead."
        )
    if code == "far_below_peak":
        return (
            f"Not memory-bound: the fitted {bw:.1f} GB/s is under {FAR_BELOW_PEAK:.0%} of the chip's "
            f"{peak:g} GB/s peak, so something other than memory reads sets the pace."
        )
    if code == "below_any_memory":
        floor, source = slowest_memory()
        return (
            f"Not memory-bound: the fitted {bw:.1f} GB/s is below the slowest memory a computer has ({floor:g} GB/s, "
            f"{source}), so something other than memory reads sets the pace."
        )
    if code == "above_peak":
        return f"Implausible: the fitted {bw:.1f} GB/s exceeds the chip's {peak:g} GB/s peak."
    share = f" ({bw / peak:.0%} of the {peak:g} GB/s peak)" if peak else ""
    extra = f", plus {overhead * 1e3:.2f} ms fixed per token" if overhead > 0 else ""
    return f"Memory-bound: decode follows bytes read at an effective {bw:.1f} GB/s{share}{extra}."


def slowdown(
    geometry: Geometry,
    context_a: int,
    context_b: int,
    spec: KvSpec = KvSpec(),
    weights_format: str = "mlx-q4",
) -> float:
    """Predicted tokens/s ratio between two contexts: bytes(b) / bytes(a) (no overhead)."""
    return bytes_per_generated_token(
        geometry, context_b, spec, weights_format
    ) / bytes_per_generated_token(geometry, context_a, spec, weights_format)
