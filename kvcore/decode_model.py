"""Decode model: every generated token reads the active weights plus the whole KV cache.

time/token = (W_active + KV(T)) / BW_eff (+ a fixed overhead c >= 0)
Example (Article A, M5 Pro): bytes/token 0.729 GB at T=1,024 and 1.769 GB at T=32,768
-> predicted slowdown 2.43x against the measured 292/119 = 2.45x.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .errors import KvError
from .formulas import ACTIVATION_DTYPES, FILE_WEIGHTS, KvSpec, kv_bytes, weights_bytes
from .geometry import FileWeights, Geometry, parse_config, preset_geometry
from .hardware import Chip, get_chip, slowest_memory
from .provenance import provenance, runtime_label, source_class
from .recordings import Recording, model_format

if (
    TYPE_CHECKING
):  # pandas only where a table is made: `python -m kvcore` starts ~0.6 s sooner without it
    import pandas as pd

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


# ---------------------------------------------------------------- a recording's decode points


def geometry_for(rec) -> tuple[Geometry, str, KvSpec] | None:
    """A recording's model geometry, weights format and KV spec; None when it names no model config or
    does not state which formats ran (kvcore.recordings.model_format: absent, "unknown"), or the activation
    dtype its cache's bytes depend on (no_fit_reason says which). A misspelled format is a KvError naming
    it, never fp16 or bf16 in its place (a fit on other bytes would move its bandwidth)."""
    found = _fit_model(rec.data["model"])
    return None if isinstance(found, str) else found


def _fit_model(model: dict) -> tuple[Geometry, str, KvSpec] | str:
    """(geometry, weights format, KV spec) of a recording's model, or why there is none: "no_format" or
    "no_model" (no_fit_reason's codes)."""
    kv, weights = model_format(model, "kv_format"), model_format(model, "weights_format")
    dtype = model_format(model, "activation_dtype")
    if kv is None or weights is None:
        return "no_format"
    geometry = _model_geometry(model, weights)
    if geometry is None:
        return "no_model"
    if dtype is None and _bytes_follow_the_dtype(geometry, kv):
        return "no_format"  # a quantized cache's scales (or a linear-attention state) in a dtype not stated
    # a dtype not stated where no byte depends on it (a plain or block format's rows hold no scales): any one
    return geometry, weights, KvSpec(kv, kv, activation_dtype=dtype or ACTIVATION_DTYPES[0])


def _model_geometry(model: dict, weights: str) -> Geometry | None:
    """The geometry of a recording's model config or preset (a GGUF run's file bytes in it), None if none."""
    try:
        if isinstance(model.get("config"), dict):
            geometry = parse_config(model["config"], model["name"])
        elif model.get("preset"):
            geometry = preset_geometry(model["preset"])
        else:
            return None
    except KvError:
        return None
    if weights == FILE_WEIGHTS and isinstance(
        model.get("weights_bytes"), int
    ):  # a GGUF run states its file's bytes
        size = model["weights_bytes"]
        geometry = replace(
            geometry, file_weights=FileWeights(size, model.get("weights_bytes_active", size))
        )
    return geometry


def _bytes_follow_the_dtype(geometry: Geometry, kv: str) -> bool:
    """Whether the model's KV bytes in format `kv` change with the activation dtype (mlx's quantized caches keep
    their scales and biases in it; a linear-attention layer its state). Example: mlx-q4 -> True; fp16 or q8_0
    on a full-attention model -> False. A format the model's rows cannot take is left to the fit to refuse."""
    try:
        sizes = {
            kv_bytes(geometry, 1, KvSpec(kv, kv, activation_dtype=d)) for d in ACTIVATION_DTYPES
        }
    except KvError:
        return False
    return len(sizes) > 1


def no_fit_reason(rec) -> str | None:
    """Why a run has no bytes line, or None when it has one: "hybrid" (linear-attention layers kvcore
    has no geometry for), "unusual" (attention kvcore does not model), "no_model" (no model
    configuration named) or "no_format" (its KV or weights format not stated, or the activation dtype its
    cache's bytes depend on, so no bytes to fit).

    Example: a run with a preset and no kv_format -> "no_format"; an mlx-q4 cache with no activation_dtype
    -> "no_format".
    """
    model = rec.data["model"]
    if model.get("hybrid"):
        return "hybrid"
    if model.get("unusual"):
        return "unusual"
    if not isinstance(model.get("config"), dict) and not model.get("preset"):
        return "no_model"
    found = _fit_model(model)
    return found if isinstance(found, str) else None


def chip_for(rec) -> Chip | None:
    """The hardware-table chip a recording ran on (published: hardware.chip; measured: machine.chip), if known."""
    machine = rec.data.get("provenance", {}).get("machine", {})
    name = machine.get("chip") or rec.data.get("hardware", {}).get("chip")
    try:
        return get_chip(name) if name else None
    except KvError:
        return None


# ---------------------------------------------------------------- a run's decode points, its fit and its slowdown


def decode_points(rec: Recording) -> pd.DataFrame:
    """Measured decode points with the bytes each generated token reads and the bandwidth that implies."""
    return _points(rec, geometry_for(rec))


def _points(rec: Recording, model: tuple[Geometry, str, KvSpec] | None) -> pd.DataFrame:
    import pandas as pd

    df = pd.DataFrame(rec.rows("decode"))
    if df.empty or model is None:
        return df
    geometry, weights, spec = model
    df["weights_bytes"] = weights_bytes(geometry, weights, active=True)
    df["kv_bytes"] = [kv_bytes(geometry, int(t), spec) for t in df["context"]]
    df["bytes_per_token"] = df["weights_bytes"] + df["kv_bytes"]
    df["implied_gbps"] = df["bytes_per_token"] * df["tokens_per_s"] / 1e9
    return df.assign(source=rec.label, recording=rec.id)


def _fit_points(points: pd.DataFrame, chip: Chip | None) -> Fit:
    return fit_bandwidth(
        list(points["bytes_per_token"]),
        list(points["tokens_per_s"]),
        chip.bandwidth_gbps if chip else None,
    )


def fit_run(rec) -> Fit | None:
    """BW_eff fitted to a recording's decode points (decode_points) with its own model and formats; None if it
    has none."""
    points = decode_points(rec)
    if points.empty or "bytes_per_token" not in points:
        return None
    return _fit_points(points, chip_for(rec))


@dataclass(frozen=True)
class RunDecode:
    """A run's decode analysis, computed once: its points (decode_points), the fit, the fitted curve over the
    run's context range (log-spaced), the worked check (first vs last point; None under two points), its chip."""

    points: pd.DataFrame
    fit: Fit
    curve: pd.DataFrame
    check: dict | None
    chip: Chip | None


def analyse(rec: Recording) -> RunDecode | None:
    """Everything the Decode chapter says about one run, each part computed once; None when the run has no decode
    points or no model geometry. Example: analyse(article_a).check["predicted_slowdown"] -> 2.43."""
    import pandas as pd

    model = geometry_for(rec)
    points = _points(rec, model)
    if points.empty or "bytes_per_token" not in points:
        return None
    chip = chip_for(rec)
    fit = _fit_points(points, chip)
    geometry, weights, spec = model
    lo, hi = int(points["context"].min()), int(points["context"].max())
    grid = sorted({int(round(lo * (hi / lo) ** (i / 40))) for i in range(41)} if hi > lo else {lo})
    curve = pd.DataFrame({"context": grid})
    curve["tokens_per_s"] = [
        fit.predict(bytes_per_generated_token(geometry, t, spec, weights)) for t in grid
    ]
    return RunDecode(
        points, fit, curve.assign(source=rec.label, recording=rec.id), _check(points), chip
    )


def worked_check(rec: Recording) -> dict | None:
    """First vs last decode point: bytes per token, predicted and measured slowdown, implied bandwidths."""
    return _check(decode_points(rec))


def _check(points: pd.DataFrame) -> dict | None:
    if len(points) < 2 or "bytes_per_token" not in points:
        return None
    a, b = points.iloc[0], points.iloc[-1]
    return {
        "context_a": int(a["context"]),
        "context_b": int(b["context"]),
        "tokens_per_s_a": float(a["tokens_per_s"]),
        "tokens_per_s_b": float(b["tokens_per_s"]),
        "weights_bytes": int(a["weights_bytes"]),
        "kv_bytes_a": int(a["kv_bytes"]),
        "kv_bytes_b": int(b["kv_bytes"]),
        "bytes_a": int(a["bytes_per_token"]),
        "bytes_b": int(b["bytes_per_token"]),
        "predicted_slowdown": float(b["bytes_per_token"] / a["bytes_per_token"]),
        "measured_slowdown": float(a["tokens_per_s"] / b["tokens_per_s"]),
        "gbps_a": float(a["implied_gbps"]),
        "gbps_b": float(b["implied_gbps"]),
    }


def slowdown_vs_bytes(recs: list[Recording]) -> pd.DataFrame:
    """Every run's measured slowdown against what the bytes model predicts, one row per decode point.

    measured_slowdown = time per token at the context / at the run's shortest context (= tok/s there / here);
    predicted_slowdown = bytes read per token at the context / at the shortest (active weights + KV, with the
    run's own model, weights format and KV format). A memory-bound run sits on the identity line; one whose
    measured slowdown is steeper than its bytes (kernels, latency) sits above it. The first point of every
    run is (1, 1). Runs without a model geometry or with fewer than two points are left out.
    Example: Article A's M5 Pro run -> (1, 1) at 1,024 tokens, (2.43, 2.45) at 32,768.
    """
    import pandas as pd

    frames = []
    for rec in recs:
        points = decode_points(rec)
        if len(points) < 2 or "bytes_per_token" not in points:
            continue
        points = points.sort_values("context", kind="stable").reset_index(drop=True)
        first = points.iloc[0]
        p = provenance(rec)
        frames.append(
            pd.DataFrame(
                {
                    "run": rec.short_label,
                    "recording": rec.id,
                    "kind": source_class(rec),
                    "chip": p["chip"] or "—",
                    "runtime": runtime_label(rec),
                    "model": p["model"],
                    "context": points["context"].astype(int),
                    "tokens_per_s": points["tokens_per_s"].astype(float),
                    "ms_per_token": 1e3 / points["tokens_per_s"].astype(float),
                    "bytes_per_token": points["bytes_per_token"].astype(int),
                    "predicted_slowdown": points["bytes_per_token"] / first["bytes_per_token"],
                    "measured_slowdown": first["tokens_per_s"] / points["tokens_per_s"],
                }
            )
        )
    columns = [
        "run",
        "recording",
        "kind",
        "chip",
        "runtime",
        "model",
        "context",
        "tokens_per_s",
        "ms_per_token",
        "bytes_per_token",
        "predicted_slowdown",
        "measured_slowdown",
    ]
    return (
        pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)
    )


def slowdown_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's last (longest-context) point of slowdown_vs_bytes, with measured ÷ predicted:
    1 on the identity line, above 1 when decode slows more than its bytes grow."""
    if frame.empty:
        return frame.assign(context_first=[], ratio=[])
    first = frame.groupby("recording", sort=False)["context"].min().rename("context_first")
    last = frame.loc[frame.groupby("recording", sort=False)["context"].idxmax()].join(
        first, on="recording"
    )
    return last.assign(ratio=last["measured_slowdown"] / last["predicted_slowdown"]).reset_index(
        drop=True
    )
