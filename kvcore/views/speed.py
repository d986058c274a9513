"""The prefill-and-decode chapter's numbers as long-form DataFrames and dicts (kvcore.timing.estimate underneath): a roofline
per chip, one reader's prompt from the first token to the last, and batching. Pure functions, no Streamlit.

Names of series are codes ("roof", "prefill", "decode_1", "decode_b", "measured"); the site translates them.
Example: roofline_points(preset_geometry("llama-3.2-1b"), "mlx-q4", KvSpec(), get_chip("M2 Ultra"), eff, 2048, 4096, 8)
         -> rows prefill / decode_1 / decode_b with intensity (FLOPs per byte) and TFLOP/s.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from kvcore.capacity.calculator import kv_need
from kvcore.fits.decode import chip_for, geometry_for
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import weights_bytes
from kvcore.model.geometry import Geometry
from kvcore.recordings.store import Recording
from kvcore.timing import estimate as timing
from kvcore.timing.hardware import Chip

PEAK = timing.Efficiency(
    1.0, 1.0, "peak"
)  # for work counts only (FLOPs, bytes): no time is read from it
INTENSITY_RANGE = (0.1, 10_000.0)  # FLOPs per byte the roofline spans
UNDETERMINED = 0.01  # RMS log residual: a one-number fit this close to the two-number one leaves the other undetermined
DECODE_SAMPLES = 65  # contexts at which "your prompt" times a decode step (the answer's steps between them interpolated)


# ---------------------------------------------------------------- roofline


def roof(
    chip: Chip, lo: float = INTENSITY_RANGE[0], hi: float = INTENSITY_RANGE[1]
) -> pd.DataFrame:
    """The chip's roof: attainable TFLOP/s = min(peak compute, peak bandwidth x intensity), at log-spaced
    intensities and at the ridge itself. Without a compute figure: the bandwidth slope only (no ridge).

    Columns: intensity (FLOPs/byte), tflops.
    """
    xs = set(np.logspace(math.log10(lo), math.log10(hi), 41).round(6))
    ridge = chip.ridge_flops_per_byte
    if ridge and lo < ridge < hi:
        xs.add(round(ridge, 6))
    xs = sorted(xs)
    bw = chip.bandwidth_gbps * 1e9
    peak = chip.peak_flops or math.inf
    return pd.DataFrame({"intensity": xs, "tflops": [min(peak, bw * x) / 1e12 for x in xs]})


def _point(kind: str, step: timing.Step, **extra) -> dict:
    return {
        "kind": kind,
        "intensity": step.intensity,
        "tflops": step.flops / step.time_s / 1e12,
        "bound": step.bound,
        "flops": step.flops,
        "bytes": step.bytes,
        **extra,
    }


def roofline_points(
    geometry: Geometry,
    weights_format: str,
    spec: KvSpec,
    chip: Chip,
    eff: timing.Efficiency,
    prompt: int,
    context: int,
    sequences: int,
) -> pd.DataFrame:
    """The model's three steps on the chip: the prompt's prefill, a decode step of one sequence at `context`, and one
    of `sequences` sequences. tflops is what each achieves at the efficiency (FLOPs / its roofline time).

    Columns: kind (prefill | decode_1 | decode_b), intensity, tflops, bound, flops, bytes, tokens, sequences.
    """
    pre = timing.prefill_step(geometry, prompt, chip, eff, spec, weights_format)
    one = timing.decode_step(geometry, context, chip, eff, spec, weights_format, 1)
    many = timing.decode_step(geometry, context, chip, eff, spec, weights_format, sequences)
    rows = [
        _point("prefill", pre, tokens=prompt, sequences=1),
        _point("decode_1", one, tokens=context, sequences=1),
    ]
    if sequences > 1:
        rows.append(_point("decode_b", many, tokens=context, sequences=sequences))
    return pd.DataFrame(rows)


def measured_points(rec: Recording) -> pd.DataFrame:
    """A run's decode points on the roofline: the intensity of its model's step at each context (kvcore.timing.estimate),
    and the FLOP/s it achieved (that step's FLOPs x the measured tok/s). Empty when its model is unknown.

    Columns: kind ("measured"), context, tokens_per_s, intensity, tflops.
    """
    model = geometry_for(rec)
    if model is None or not rec.has("decode"):
        return pd.DataFrame(columns=["kind", "context", "tokens_per_s", "intensity", "tflops"])
    geometry, weights, spec = model
    any_chip = _work_chip()
    rows = []
    for r in rec.rows("decode"):
        step = timing.decode_step(geometry, int(r["context"]), any_chip, PEAK, spec, weights, 1)
        rows.append(
            {
                "kind": "measured",
                "context": int(r["context"]),
                "tokens_per_s": r["tokens_per_s"],
                "intensity": step.intensity,
                "tflops": step.flops * r["tokens_per_s"] / 1e12,
            }
        )
    return pd.DataFrame(rows)


def runs_on(recs: list[Recording], chip: Chip) -> list[Recording]:
    """The runs measured on `chip` (kvcore.fits.decode.chip_for) whose decode points measured_points places: what a
    roofline of that chip can show beside the time model (a run on another chip is under another roof).
    Example: runs_on(recs, get_chip("M5 Pro")) -> [Article A's run]."""
    return [
        r
        for r in recs
        if (ran := chip_for(r)) is not None
        and ran.chip == chip.chip
        and not measured_points(r).empty
    ]


# ---------------------------------------------------------------- one reader's prompt


def your_prompt(
    geometry: Geometry,
    weights_format: str,
    spec: KvSpec,
    chip: Chip,
    eff: timing.Efficiency,
    prompt: int,
    answer: int,
    sequences: int = 1,
) -> dict:
    """From the prompt to the last token of the answer, for `sequences` sequences each with its own prompt and answer.

    prefill_s: one prompt (the time to its first token; None without a compute figure for the chip); the prompts
    are processed one after another (prefill is compute-bound: B prompts cost B times the FLOPs), so the last
    sequence's first token comes after sequences x prefill_s. decode_s: the answer's steps, each timed by the
    roofline at its context, summed (timed at DECODE_SAMPLES contexts, linear between them). memory_bytes: the
    weights and every sequence's KV at prompt + answer.
    """
    timing.check_tokens("answer", answer)
    end = prompt + answer
    pre = timing.prefill_step(geometry, prompt, chip, eff, spec, weights_format)
    prefill_s = pre.time_s if chip.peak_flops else None
    first = timing.decode_step(geometry, prompt + 1, chip, eff, spec, weights_format, sequences)
    last = timing.decode_step(geometry, end, chip, eff, spec, weights_format, sequences)
    samples = sorted(
        {
            round(prompt + 1 + (end - prompt - 1) * i / (DECODE_SAMPLES - 1))
            for i in range(DECODE_SAMPLES)
        }
    )
    times = [
        timing.decode_step(geometry, c, chip, eff, spec, weights_format, sequences).time_s
        for c in samples
    ]
    # the answer's steps: one at every context prompt+1 .. end, a step's time linear between two samples: the n steps
    # after sample a up to sample b = a + n add n * ta + (tb - ta) * (n + 1) / 2 (exact where samples are 1 apart)
    decode_s = times[0] + sum(
        (b - a) * ta + (tb - ta) * (b - a + 1) / 2
        for a, b, ta, tb in zip(samples, samples[1:], times, times[1:])
    )
    weights = weights_bytes(geometry, weights_format)
    kv = kv_need(geometry, end, spec, sequences)
    return {
        "prompt": prompt,
        "answer": answer,
        "sequences": sequences,
        "end_context": end,
        "prefill_s": prefill_s,
        "prefill_all_s": prefill_s * sequences if prefill_s is not None else None,
        "prefill_bound": pre.bound if chip.peak_flops else None,
        "prefill_flops": pre.flops,
        "decode_s": decode_s,
        "decode_tokens_per_s_first": 1 / first.time_s,
        "decode_tokens_per_s_last": 1 / last.time_s,
        "decode_tokens_per_s_total_first": sequences / first.time_s,
        "decode_bound_first": first.bound,
        "decode_bound_last": last.bound,
        "total_s": (prefill_s * sequences + decode_s) if prefill_s is not None else None,
        "weights_bytes": weights,
        "kv_bytes": kv,
        "memory_bytes": weights + kv,
        "decode_bytes_first": first.bytes,
        "decode_bytes_last": last.bytes,
        "peak_tflops": chip.fp16_tflops,
        "peak_gbps": chip.bandwidth_gbps,
        "compute_efficiency": eff.compute,
        "bandwidth_efficiency": eff.bandwidth,
        "efficiency_source": eff.source,
    }


# ---------------------------------------------------------------- batching


def kv_overtakes_weights(
    geometry: Geometry, weights_format: str, spec: KvSpec, context: int
) -> float:
    """The batch size at which the step's KV reads equal its weight reads at `context`: active weights / one
    sequence's KV read (kvcore.timing.estimate.kv_read_bytes). Above it the KV is most of what a step reads."""
    return weights_bytes(geometry, weights_format, active=True) / timing.kv_read_bytes(
        geometry, context, spec, 1
    )


def batch_curve(
    geometry: Geometry,
    weights_format: str,
    spec: KvSpec,
    chip: Chip,
    eff: timing.Efficiency,
    contexts: list[int],
    batches: list[int],
) -> pd.DataFrame:
    """Decode of B sequences at each context, as the roofline model has it.

    Columns: context, batch, tokens_per_s_total, tokens_per_s (one sequence), bound, kv_share (share of the step's
    bytes that are KV), memory_bytes (all the weights and every sequence's KV).
    """
    weights = weights_bytes(geometry, weights_format, active=True)
    stored = weights_bytes(geometry, weights_format)
    rows = []
    for context in contexts:
        kv_one = kv_need(geometry, context, spec, 1)
        for b in batches:
            step = timing.decode_step(geometry, context, chip, eff, spec, weights_format, b)
            rows.append(
                {
                    "context": context,
                    "batch": b,
                    "tokens_per_s_total": b / step.time_s,
                    "tokens_per_s": 1 / step.time_s,
                    "bound": step.bound,
                    "kv_share": 1 - weights / step.bytes,
                    "memory_bytes": stored + b * kv_one,
                }
            )
    return pd.DataFrame(rows)


def batch_points(rec: Recording) -> pd.DataFrame:
    """A run's batch rows with per-sequence tok/s (the run's own, else total / batch: our arithmetic).

    Columns: series (the source's model name, "" when it has one), context, batch, tokens_per_s_total, tokens_per_s.
    """
    rows = [
        {
            "series": r.get("series", ""),
            "context": int(r["context"]),
            "batch": int(r["batch"]),
            "tokens_per_s_total": r["tokens_per_s_total"],
            "tokens_per_s": r.get("tokens_per_s", r["tokens_per_s_total"] / r["batch"]),
        }
        for r in rec.rows("batch")
    ]
    return pd.DataFrame(
        rows, columns=["series", "context", "batch", "tokens_per_s_total", "tokens_per_s"]
    )


# ---------------------------------------------------------------- a measured run against the model


def fit_roofline(flops: list[float], n_bytes: list[float], seconds: list[float]) -> dict:
    """The two numbers of a roofline fitted to one run's points: effective compute (FLOP/s) and bandwidth (bytes/s)
    such that time = max(FLOPs / compute, bytes / bandwidth) matches the measured times best on a log scale (a
    grid over 0.1-10x the run's own medians, 1 % apart). A number the run does not determine is None: when the fit
    with the other number alone is as good (its RMS log residual within UNDETERMINED), the run never waits on it.
    bounds: which of the two each point waits on; residuals: predicted / measured time - 1, per point.
    """
    f, b, t = (np.asarray(v, dtype=float) for v in (flops, n_bytes, seconds))
    grid = np.geomspace(0.1, 10, 464)
    cs, ws = float(np.median(f / t)) * grid, float(np.median(b / t)) * grid
    log_t = np.log(t)

    def rms(pred) -> np.ndarray:
        return np.sqrt(((np.log(pred) - log_t) ** 2).mean(axis=-1))

    both = rms(np.maximum(f / cs[:, None, None], b / ws[None, :, None]))
    i, j = np.unravel_index(int(both.argmin()), both.shape)
    memory_only, compute_only = rms(b / ws[:, None]), rms(f / cs[:, None])
    compute, bandwidth = float(cs[i]), float(ws[j])
    if memory_only.min() <= both.min() + UNDETERMINED:
        compute, bandwidth = None, float(ws[memory_only.argmin()])
    elif compute_only.min() <= both.min() + UNDETERMINED:
        compute, bandwidth = float(cs[compute_only.argmin()]), None
    fit = {"compute_flops": compute, "bandwidth_bytes": bandwidth}
    compute_s = f / compute if compute else np.zeros_like(f)
    memory_s = b / bandwidth if bandwidth else np.zeros_like(b)
    fit["bounds"] = ["compute" if c > m else "memory" for c, m in zip(compute_s, memory_s)]
    fit["residuals"] = [float(x) for x in np.maximum(compute_s, memory_s) / t - 1]
    return fit


def chip_known(rec: Recording) -> bool:
    """Whether the run's chip is in the hardware table (its peaks known), as kvcore.fits.decode.chip_for reads it."""
    return chip_for(rec) is not None


def _fitted_time(flops: float, n_bytes: float, fit: dict) -> float:
    c, w = fit["compute_flops"], fit["bandwidth_bytes"]
    return max(flops / c if c else 0.0, n_bytes / w if w else 0.0)


def _work_chip() -> Chip:
    return Chip(
        "work counts", 1.0, (), True, ""
    )  # a step's FLOPs and bytes do not depend on the chip


def batch_fit(rec: Recording, max_batch: int | None = None) -> dict | None:
    """A run's batch rows against the roofline fitted to them (its own model and formats): the fit, and the model's
    curve at every batch size from 1 to the largest measured (powers of two and the measured ones) per context.
    None when kvcore does not know the run's model (a published run with no preset or config)."""
    model = geometry_for(rec)
    if model is None or not rec.has("batch"):
        return None
    geometry, weights, spec = model
    chip, pts = _work_chip(), batch_points(rec)
    steps = [
        timing.decode_step(geometry, int(r.context), chip, PEAK, spec, weights, int(r.batch))
        for r in pts.itertuples()
    ]
    fit = fit_roofline(
        [s.flops for s in steps],
        [s.bytes for s in steps],
        list(pts["batch"] / pts["tokens_per_s_total"]),
    )
    top = max_batch or int(pts["batch"].max())
    sizes = sorted(
        {2**k for k in range(int(math.log2(top)) + 1)} | set(int(b) for b in pts["batch"])
    )
    rows = []
    for context in sorted(set(pts["context"])):
        for b in sizes:
            s = timing.decode_step(geometry, int(context), chip, PEAK, spec, weights, b)
            t = _fitted_time(s.flops, s.bytes, fit)
            rows.append(
                {
                    "context": int(context),
                    "batch": b,
                    "tokens_per_s_total": b / t,
                    "tokens_per_s": 1 / t,
                }
            )
    return {
        "fit": fit,
        "curve": pd.DataFrame(rows),
        "points": pts.assign(residual=fit["residuals"], bound=fit["bounds"]),
    }


def prefill_fit(rec: Recording) -> dict | None:
    """A run's prefill rows (prompt tok/s against prompt length) against the roofline fitted to them, and the model's
    curve (kvcore.timing.estimate.prefill_step: FLOPs with the O(T^2) attention term) from the shortest to the longest prompt.
    None when kvcore does not know the run's model or the run has fewer than two prompt lengths at depth 0."""
    model = geometry_for(rec)
    rows = [r for r in rec.rows("prefill") if not r.get("depth") and r.get("batch", 1) == 1]
    if model is None or len({r["prompt_tokens"] for r in rows}) < 2:
        return None
    geometry, weights, spec = model
    chip = _work_chip()
    steps = [
        timing.prefill_step(geometry, int(r["prompt_tokens"]), chip, PEAK, spec, weights)
        for r in rows
    ]
    fit = fit_roofline(
        [s.flops for s in steps],
        [s.bytes for s in steps],
        [r["prompt_tokens"] / r["tokens_per_s"] for r in rows],
    )
    lo, hi = min(r["prompt_tokens"] for r in rows), max(r["prompt_tokens"] for r in rows)
    prompts = sorted(
        {int(p) for p in np.geomspace(lo, hi, 25).round()} | {int(r["prompt_tokens"]) for r in rows}
    )
    curve = []
    for p in prompts:
        s = timing.prefill_step(geometry, p, chip, PEAK, spec, weights)
        attention = s.flops - timing.matrix_flops_per_token(geometry) * p
        curve.append(
            {
                "prompt_tokens": p,
                "tokens_per_s": p / _fitted_time(s.flops, s.bytes, fit),
                "attention_share": attention / s.flops,
            }
        )
    pts = pd.DataFrame(
        [
            {
                "prompt_tokens": int(r["prompt_tokens"]),
                "tokens_per_s": r["tokens_per_s"],
                "prefill_s": r["prompt_tokens"] / r["tokens_per_s"],
            }
            for r in rows
        ]
    )
    return {
        "fit": fit,
        "curve": pd.DataFrame(curve),
        "points": pts.assign(residual=fit["residuals"], bound=fit["bounds"]),
    }
