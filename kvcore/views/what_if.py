"""How fast will it decode, and how memory grows with context per format: the calculator's decode what-if on a
chosen chip (bytes per token over the share of peak bandwidth decode reaches, fitted from recordings or assumed)
and its memory curves.

Example: what_if(llama_3_1_8b, ..., chip="M4 Max") -> tokens per second by context, with the share it assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvcore.capacity.calculator import kv_need
from kvcore.errors import KvError
from kvcore.fits.decode import chip_for, fit_run
from kvcore.memory.formats import COMPARED, KvSpec
from kvcore.memory.formulas import kv_bytes, weights_bytes
from kvcore.model.geometry import Geometry
from kvcore.timing.hardware import Chip, gpu_memory_limit_gb
from kvcore.units import GIB

if (
    TYPE_CHECKING
):  # pandas only where a table is made: `python -m kvcore` starts ~0.6 s sooner without it
    import pandas as pd

# The share of peak bandwidth assumed when no recording says otherwise: a round figure inside the published range
# (kvcore/timing/hardware.yaml `apple_silicon_efficiency`: 40-85 % in llama.cpp's Apple Silicon table, discussion #4167),
# the page saying it is an assumption and citing that range (tests/test_calculator.py holds it inside it).
ASSUMED_EFFICIENCY = 0.6


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
    """Predicted decode per context on `chip` at `share` of its peak bandwidth: the time model's step (kvcore.timing.estimate:
    the weights once, every sequence's KV as the runtime reads it, the roofline bound) at each context.

    Rows: tokens_per_s (each sequence; llama.cpp: each slot), tokens_per_s_total (all of them), bytes_per_token (what
    one step reads), bound. llama.cpp: `context` is -c and `llama` its options (unified slots share the cells: one
    read serves every slot, so each slot decodes as one slot at -c does and the total is slots x that).
    """
    from kvcore.fits import shares as timing_fit
    from kvcore.timing import estimate as timing

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


CURVE_FORMATS = COMPARED  # the formats the site compares (kvcore.memory.formats)


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
