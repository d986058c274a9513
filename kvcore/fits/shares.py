"""The time model's calibration: shares of peak compute and bandwidth fitted on published runs, and the
held-out check on chips the fit never saw (kvcore/fits/timing_runs.yaml; `benchmarks/timing_heldout.py` prints it).

Each published point implies a share: a prompt-processing point, the model's compute time at 100 % of the
chip's peak FLOP/s over the measured time; a generation point, the model's memory time at 100 % of peak
bandwidth over the measured time. The fitted share is the geometric mean over runs (each run's points averaged
first, so a long sweep counts as one run), and every point keeps its residual: predicted / measured - 1.

The fit: one compute share (prefill, every chip); a bandwidth share per (runtime family, dies) -- llama.cpp's Metal
backend reaches a smaller share of an Ultra's two-die bandwidth than of one die's (discussion #4167: Ultras at 800 GB/s
decode about as fast as a 546 GB/s M4 Max) -- and one fixed time per decode step, by least squares on log time.
Example: M2 Ultra, Llama-2-7B Q4_0, pp512 at 1,238 tok/s x 13.3 GFLOPs per token = 16.5 TFLOP/s of 27.2: a 61 %
compute share. Every point's share is `Point.implied_share`; nothing is tuned by hand.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from kvcore.fits import decode as decode_runs
from kvcore.inputs.config import parse_config
from kvcore.memory.formats import KvSpec
from kvcore.model.geometry import Geometry
from kvcore.recordings import store as recordings
from kvcore.runtimes.registry import engine_runtime
from kvcore.timing import estimate as timing
from kvcore.timing.hardware import Chip, get_chip

TABLE = Path(__file__).parent / "timing_runs.yaml"
ONE = timing.Efficiency(1.0, 1.0, "peak")
FIT, HELD_OUT = "fit", "held_out"
MLX = "mlx"  # the runtime family a runtime without fitted runs takes its bandwidth share from


@dataclass(frozen=True)
class Point:
    run: str
    split: str  # "fit" | "held_out"
    kind: str  # "pp" (prompt processing) | "tg" (generation)
    chip: Chip
    runtime: str
    model: str
    weights_format: str
    tokens: int  # pp: prompt length; tg: context when decoding
    depth: int  # pp: tokens already cached
    measured: float  # tokens/s
    url: str
    grade: str
    geometry: Geometry = field(repr=False, compare=False, default=None)
    spec: KvSpec = field(repr=False, compare=False, default=KvSpec())
    ubatch: int | None = None

    def step(self, eff: timing.Efficiency) -> timing.Step:
        rt = engine_runtime(self.runtime)
        llama = (
            rt.options(1, ubatch=self.ubatch)
            if self.ubatch and any(s.field == "ubatch" for s in rt.settings)
            else None
        )
        if self.kind == "pp":
            return timing.prefill_step(
                self.geometry,
                self.tokens,
                self.chip,
                eff,
                self.spec,
                self.weights_format,
                self.depth,
                llama,
            )
        return timing.decode_step(
            self.geometry, self.tokens, self.chip, eff, self.spec, self.weights_format, 1, llama
        )

    def predicted(self, eff: timing.Efficiency) -> float | None:
        """Predicted tokens/s, None when the chip has no compute figure (a pp point there)."""
        s = self.step(eff)
        if self.kind == "pp" and not self.chip.peak_flops:
            return None
        return s.tokens / s.time_s

    @property
    def implied_share(self) -> float | None:
        """The share of peak this point implies: compute (pp) or bandwidth (tg)."""
        s = self.step(ONE)
        if self.kind == "pp":
            return s.compute_s * self.measured / s.tokens if self.chip.peak_flops else None
        return s.memory_s * self.measured / s.tokens


def runtime_family(runtime: str) -> str:
    """ "llama.cpp" (llama.cpp and the servers built on it) or "mlx" (mlx_lm and the engines on MLX)."""
    return engine_runtime(runtime).fit_class


def decode_class(chip: Chip, runtime: str) -> tuple[str, int]:
    """What a decode bandwidth share is fitted per: (runtime family, dies of the chip)."""
    return runtime_family(runtime), chip.dies


@dataclass(frozen=True)
class Calibration:
    compute: float  # share of peak FP16 FLOP/s prefill reaches (one for every chip and runtime)
    bandwidth: dict  # (runtime family, dies) -> share of peak bandwidth decode reaches
    overhead_s: float  # fixed time per decode step
    fit_points: tuple[Point, ...]
    held_out: tuple[Point, ...]
    source: str

    def efficiency_for(self, chip: Chip | str, runtime: str = "mlx_lm") -> timing.Efficiency:
        """The shares to use for `runtime` on `chip`: its class's fitted bandwidth share; a class the fit had no run
        for (e.g. mlx on an Ultra) takes the same runtime's single-die share, and the source says so."""
        chip = get_chip(chip) if isinstance(chip, str) else chip
        key = decode_class(chip, runtime)
        source = f"{self.source}; bandwidth share for {key[0]} on {'a two-die Ultra' if key[1] == 2 else 'one die'}"
        if key not in self.bandwidth and (key[0], 1) in self.bandwidth:
            key = (key[0], 1)
            source += " (no fitted run of that kind: the one-die share)"
        elif (
            key not in self.bandwidth
        ):  # a runtime no published run used (e.g. reference: the config's own rules)
            key = (MLX, 1)
            source = (
                f"{self.source}; no published run of {runtime}: the mlx one-die bandwidth share"
            )
        return timing.Efficiency(self.compute, self.bandwidth[key], source, self.overhead_s)

    def residual(self, p: Point) -> float | None:
        pred = p.predicted(self.efficiency_for(p.chip, p.runtime))
        return None if pred is None else pred / p.measured - 1


def _geometry(model: str, runtime: str, models: dict) -> Geometry:
    geo_runtime = engine_runtime(runtime)
    if model in models:
        return parse_config(models[model]["config"], model, geo_runtime)
    from kvcore.inputs.source import resolve_model

    return resolve_model(model, geo_runtime.name)[0]


def _table_points(run: dict, models: dict) -> list[Point]:
    c = run["citation"]
    base = dict(
        run=run["id"],
        split=run["split"],
        chip=get_chip(run["chip"]),
        runtime=run["runtime"],
        url=c["url"],
        grade=c.get("grade", "—"),
        ubatch=run.get("ubatch"),
    )
    spec = KvSpec("fp16", "fp16")
    return [
        Point(
            **base,
            kind=kind,
            model=model,
            weights_format=weights,
            tokens=row["prompt"] if kind == "pp" else row["context"],
            depth=row.get("depth", 0),
            measured=float(row["tokens_per_s"]),
            geometry=_geometry(model, run["runtime"], models),
            spec=spec,
        )
        for kind, row, model, weights in _table_rows(run)
    ]


def _table_rows(run: dict) -> list[tuple[str, dict, str, str]]:
    """(kind, row, model, weights format) of every figure a table run states: its pp and tg rows,
    and tg rows of other weights formats (tg_by_format) or other models (tg_by_model)."""
    m, w = "model", "weights_format"  # a run states each either once or per row, never by default
    out = [(kind, row, run[m], run[w]) for kind in ("pp", "tg") for row in run.get(kind, [])]
    out += [("tg", row, run[m], row[w]) for row in run.get("tg_by_format", [])]
    out += [("tg", row, row[m], run[w]) for row in run.get("tg_by_model", [])]
    return out


def _recording_points(run: dict, recs: dict) -> list[Point]:
    rec = recs[run["recording"]]
    model, chip = decode_runs.geometry_for(rec), decode_runs.chip_for(rec)
    if (
        model is None or chip is None
    ):  # no geometry, or a chip name the table cannot place (e.g. "M5 Max": which GPU?)
        return []
    geometry, weights, spec = model
    c = rec.data["citation"]
    runtime = rec.data.get("runtime", {}).get("name", "mlx_lm")
    name = rec.data["model"].get("preset") or rec.data["model"]["name"]
    return [
        Point(
            run["id"],
            run["split"],
            "tg",
            chip,
            runtime,
            name,
            weights,
            int(r["context"]),
            0,
            float(r["tokens_per_s"]),
            c.get("url", c.get("source", "")),
            c.get("grade", "—"),
            geometry,
            spec,
        )
        for r in rec.rows("decode")
    ]


@lru_cache(maxsize=1)
def points() -> tuple[Point, ...]:
    """Every published point of kvcore/fits/timing_runs.yaml (bundled recordings included by id)."""
    table = yaml.safe_load(TABLE.read_text(encoding="utf-8"))
    names = [run["recording"] for run in table["runs"] if "recording" in run]
    recs = {name: recordings.load(recordings.BUNDLED_DIR / f"{name}.yaml") for name in names}
    out = []
    for run in table["runs"]:
        out += (
            _recording_points(run, recs)
            if "recording" in run
            else _table_points(run, table["models"])
        )
    return tuple(out)


def _geomean_by_run(pts: list[Point]) -> float:
    by_run: dict[str, list[float]] = {}
    for p in pts:
        share = p.implied_share
        if share is not None:
            by_run.setdefault(p.run, []).append(math.log(share))
    return math.exp(statistics.fmean(statistics.fmean(v) for v in by_run.values()))


def _fit_decode(pts: list[Point]) -> tuple[dict, float]:
    """Bandwidth share per class and one fixed time per step, least squares on log(predicted / measured time),
    each run weighing the same (its points averaged). Grid: overhead 0-6 ms by 0.1 ms; share 0.20-1.00 by 0.005."""
    import numpy as np

    rows = [
        (decode_class(p.chip, p.runtime), p.run, p.step(ONE).memory_s, 1.0 / p.measured)
        for p in pts
    ]
    shares = np.round(np.arange(0.2, 1.0001, 0.005), 3)
    best = None
    for c in np.round(np.arange(0, 61) * 1e-4, 4):
        total, chosen = 0.0, {}
        for k in sorted({key for key, *_ in rows}):
            runs = sorted({run for key, run, _, _ in rows if key == k})
            loss = np.zeros(len(shares))
            for run in runs:
                m = np.array([r[2] for r in rows if r[0] == k and r[1] == run])
                t = np.array([r[3] for r in rows if r[0] == k and r[1] == run])
                loss += (np.log((m[None, :] / shares[:, None] + c) / t[None, :]) ** 2).mean(axis=1)
            i = int(np.argmin(loss))
            total += float(loss[i])
            chosen[k] = float(shares[i])
        if best is None or total < best[0]:
            best = (total, chosen, float(c))
    return best[1], best[2]


@lru_cache(maxsize=1)
def calibration() -> Calibration:
    """The fitted shares (compute from the fit runs' pp points; bandwidth per class and a fixed step time from their
    tg points) and the held-out points."""
    pts = points()
    fit = [p for p in pts if p.split == FIT]
    compute = round(_geomean_by_run([p for p in fit if p.kind == "pp"]), 3)
    bandwidth, overhead = _fit_decode([p for p in fit if p.kind == "tg"])
    runs = sorted({p.run for p in fit})
    chips = sorted({p.chip.chip for p in fit})
    source = (
        f"fitted on {len(runs)} published runs ({', '.join(chips)}; kvcore/fits/timing_runs.yaml)"
    )
    return Calibration(
        compute,
        bandwidth,
        overhead,
        tuple(fit),
        tuple(p for p in pts if p.split == HELD_OUT),
        source,
    )


def efficiency(
    chip: Chip | str = "M4 Max (40-core GPU)", runtime: str = "mlx_lm"
) -> timing.Efficiency:
    """The calibrated shares of peak for `runtime` on `chip`."""
    return calibration().efficiency_for(chip, runtime)


def summary(pts: list[Point], cal: Calibration | None = None) -> dict:
    """Median |error| and the worst ratio (max of predicted/measured and its inverse) per kind, over `pts`."""
    cal = cal or calibration()
    out = {}
    for kind in ("pp", "tg"):
        errs = [cal.residual(p) for p in pts if p.kind == kind]
        errs = [e for e in errs if e is not None]
        if errs:
            worst = max(max(1 + e, 1 / (1 + e)) for e in errs)
            out[kind] = {
                "points": len(errs),
                "median_abs_error": statistics.median(abs(e) for e in errs),
                "worst_ratio": worst,
            }
    return out


KIND = {"pp": "prompt", "tg": "decode"}
TABLE_COLUMNS = (
    "run",
    "chip",
    "runtime",
    "model",
    "format",
    "kind",
    "tokens",
    "measured",
    "predicted",
    "error",
    "bound",
    "grade",
    "source",
)  # the README's held-out table, as benchmarks/timing_heldout.py prints it


def table_rows(cal: Calibration, split: str) -> list[dict]:
    """One row of TABLE_COLUMNS per point of `split` (FIT: its residuals; HELD_OUT: the check) that
    the model predicts, in words; error = predicted / measured - 1.

    Example: table_rows(calibration(), HELD_OUT)[0]["error"] -> "+12%".
    """
    out = []
    for p in cal.fit_points if split == FIT else cal.held_out:
        eff = cal.efficiency_for(p.chip, p.runtime)
        pred = p.predicted(eff)
        if pred is None:
            continue
        where = f"{p.tokens:,}" + (f" after {p.depth:,}" if p.depth else "")
        out.append(
            {
                "run": p.run,
                "chip": p.chip.chip,
                "runtime": p.runtime,
                "model": p.model,
                "format": p.weights_format,
                "kind": KIND[p.kind],
                "tokens": where,
                "measured": f"{p.measured:,.1f}",
                "predicted": f"{pred:,.1f}",
                "error": f"{pred / p.measured - 1:+.0%}",
                "bound": p.step(eff).bound,
                "grade": p.grade,
                "source": p.url,
            }
        )
    return out


def markdown_row(row: dict) -> str:
    """A table_rows row as the README's markdown line."""
    return "| " + " | ".join(str(row[c]) for c in TABLE_COLUMNS) + " |"


def shares_text(cal: Calibration) -> str:
    """The fitted shares in one line (the README quotes it)."""
    bw = ", ".join(
        f"{family} on {'an Ultra' if dies == 2 else 'one die'} {share:.1%}"
        for (family, dies), share in cal.bandwidth.items()
    )
    return (
        f"compute share {cal.compute:.1%} of peak FP16; bandwidth share {bw}; "
        f"fixed time per decode step {cal.overhead_s * 1e3:.1f} ms; {cal.source}"
    )
