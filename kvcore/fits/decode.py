"""A recording's decode points under the decode model (kvcore.timing.decode_model): its model's bytes per
generated token at each context, the bandwidth fitted to them, its slowdown against the slowdown its bytes predict.

Example (Article A, M5 Pro): worked_check(rec) -> {"bytes_per_token": (0.729e9, 1.769e9), "predicted": 2.43,
    "measured": 2.45, ...}
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvcore.errors import KvError
from kvcore.inputs.config import parse_config
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import ACTIVATION_DTYPES, KvSpec
from kvcore.memory.formulas import FILE_WEIGHTS, kv_bytes, weights_bytes
from kvcore.model.geometry import FileWeights, Geometry
from kvcore.recordings.check import model_format
from kvcore.recordings.provenance import badge_fields, runtime_label, source_class
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.timing.decode_model import Fit, bytes_per_generated_token, fit_bandwidth
from kvcore.timing.hardware import Chip, find_chip

if (
    TYPE_CHECKING
):  # pandas only where a table is made: `python -m kvcore` starts ~0.6 s sooner without it
    import pandas as pd

    from kvcore.recordings.store import Recording


def geometry_for(rec) -> tuple[Geometry, str, KvSpec] | None:
    """A recording's model geometry, weights format and KV spec; None when it names no model config or
    does not state which formats ran (kvcore.recordings.store.model_format: absent, "unknown"), or the activation
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
    """The geometry of a recording's model config or preset (a GGUF run's file bytes in it), None if it names
    neither. A preset or config kvcore cannot read is a KvError naming it (kvcore.recordings.check refuses such a
    file when it is loaded), never "no model": the run names one."""
    if isinstance(model.get("config"), dict):
        geometry = parse_config(model["config"], model["name"], MLX_LM)
    elif model.get("preset"):
        geometry = preset_geometry(model["preset"])
    else:
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
    """The hardware-table chip a recording ran on (published: hardware.chip; measured: machine.chip), None when the
    table has no row of that name: a published run's "not stated" or a family whose variant it does not state
    ("M4 Max"; kvcore.recordings.check refuses any other name), a measured machine's own CPU."""
    machine = rec.data.get("provenance", {}).get("machine", {})
    name = machine.get("chip") or rec.data.get("hardware", {}).get("chip")
    return find_chip(name) if isinstance(name, str) else None


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
        p = badge_fields(rec)
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
