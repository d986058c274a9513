"""Published Mac memory figures against kvcore: each row of a bundled recording's `memory` section (what a source
printed: a llama.cpp buffer line, mlx_lm's "Peak memory") and each peak of a `benchmark` section (mlx_lm.benchmark's
peak_memory) beside what kvcore computes for the same model, context and formats, with the reason when they differ.

What kvcore computes per part:
* `kv`: the caches the run's runtime allocates, asked of its runtime object (the engine named by the source, read
  by kvcore.runtimes.registry.engine_runtime: ollama runs llama.cpp's, kvcore.runtimes.llamacpp_cache), to the
  byte; the source prints MiB with two decimals, so "agrees" means equal at that precision.
* `peak`: the runtime's memory plan where it has one (mlx_lm: kvcore.runtimes.mlx_lm_plan, for Metal, on the
  source's chip): the plan is a range, from its peak without to its peak with the upper estimate of the arrays
  Metal's command buffers in flight hold (the plan's `in_flight_bytes`), widened by its stated tolerance of the
  other transient parts; without a plan, weights as stored plus the KV the runtime
  reports at the context, the difference named in the reason (what that leaves out). A published peak is a run the
  plan was not fitted on: the plan's tolerance was measured on this project's CPU runs.

Example: rows(recordings)[0] -> {"part": "kv", "published": "816.00 MiB", "kvcore": "816.00 MiB", "agrees": True, ...}.
"""

from __future__ import annotations

from decimal import Decimal

from kvcore.errors import KvError
from kvcore.inputs.config import parse_config
from kvcore.inputs.presets import preset_geometry
from kvcore.limits import MAX_DECIMALS
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import ALL_WEIGHT_FORMATS, weights_bytes
from kvcore.recordings.schema import MEMORY_UNITS
from kvcore.runtimes.registry import engine_runtime, get_runtime

# a benchmark row's name -> its weights (mlx_lm's BENCHMARKS.md: bf16, and mlx-community's N-bit conversions)
BENCHMARK_WEIGHTS = {"bf16": "bf16", "q8": "mlx-q8", "q6": "mlx-q6", "q5": "mlx-q5", "q4": "mlx-q4"}
DECIMALS = {
    "MiB": 2,
    "GiB": 2,
    "GB": 3,
    "MB": 1,
}  # how many decimals the sources print in each unit

KV_AGREES = (
    "equal at the printed precision: llama.cpp's cache for this geometry, context and format"
)
KV_DIFFERS = (
    "llama.cpp's cache for this geometry differs: a setting the source does not state (sequences, "
    "a unified cache, a sliding window) or a different geometry"
)
PEAK_GAP = (
    "kvcore counts weights and KV only (no memory plan for this runtime); the rest of the peak is what it does not "
    "count: the prefill step's transients (activations, attention scores, logits) and the 256-step growth copy"
)
PEAK_BELOW = (
    "mlx_lm's peak is below weights + KV: a smaller geometry, weights or KV than the preset's"
)
PLAN_WITHIN = (
    "within kvcore's memory plan for this runtime: between its peak without and with its upper estimate of what "
    "Metal's command buffers in flight hold, give or take the tolerance of its transient parts"
)
PLAN_DIFFERS = (
    "outside the tolerance of kvcore's memory plan: something the plan does not model (the source's version, a "
    "setting it does not state, a kernel that holds more or less)"
)
NOT_COMPUTED = "kvcore does not compute this part for this runtime"
# each reason by its key (the site's words: recordings.mem_reason_<key> in every language file)
REASONS = {
    "kv_agrees": KV_AGREES,
    "kv_differs": KV_DIFFERS,
    "peak_gap": PEAK_GAP,
    "peak_below": PEAK_BELOW,
    "agrees": "equal at the printed precision",
    "plan_within": PLAN_WITHIN,
    "plan_differs": PLAN_DIFFERS,
    "not_computed": NOT_COMPUTED,
}


def engine_of(rec) -> str | None:
    """The kvcore runtime whose rules a published run's engine follows (kvcore.runtimes.registry.engine_runtime:
    ollama runs llama.cpp's); None for an engine no runtime lists (ds4: its own engine)."""
    engine = str(rec.data.get("runtime", {}).get("name", "")).lower()
    runtime = engine_runtime(engine)
    return runtime.name if engine in (runtime.name.lower(), *runtime.engines) else None


def _geometry(model: dict, runtime: str):
    if "config" in model:
        return parse_config(model["config"], model["name"], get_runtime(runtime))
    if "preset" in model:
        return preset_geometry(model["preset"], runtime)
    return None


def _decimals(row: dict) -> int:
    """The decimals the source printed: its line's (llama.cpp's MiB: 2, mlx_lm's GB: 3), else as the value is
    written (a table's "33.46": 2; 0.00001: 5), at most MAX_DECIMALS (1e-300 is not read at 300)."""
    if row.get("line"):
        return DECIMALS[row["unit"]]
    value = float(row["value"])
    if value == int(value):
        return 0
    return min(max(0, -Decimal(repr(value)).as_tuple().exponent), MAX_DECIMALS)


def _agree(ours: float, published: float, row: dict) -> bool:
    """Equal at the printed precision: within half of the last printed digit."""
    return abs(ours - published) <= 0.5 * 10 ** -_decimals(row) * MEMORY_UNITS[row["unit"]]


def _text(n_bytes: float, unit: str) -> str:
    return f"{n_bytes / MEMORY_UNITS[unit]:,.{DECIMALS[unit]}f} {unit}"


_READ = object()  # compare_row's geometry when its caller has not read it


def compare_row(rec, row: dict, geometry=_READ) -> dict:
    """One published figure against kvcore (see the module's rules). geometry: the recording's model under its
    engine's runtime, read once for all its rows (recording_rows), else read here."""
    model, engine = rec.data["model"], engine_of(rec)
    unit = row["unit"]
    published = row["value"] * MEMORY_UNITS[unit]
    out = {
        "run": rec.id,
        "source": rec.data["citation"]["source"],
        "url": rec.data["citation"].get("url", ""),
        "date": rec.data["citation"].get("date", ""),
        "chip": rec.data.get("hardware", {}).get("chip", ""),
        "model": model["name"],
        "series": row.get("series", ""),
        "part": row["part"],
        "context": int(row["context"]),
        "line": row.get("line", ""),
        "published": f"{row['value']:,.{_decimals(row)}f} {unit}",
        "published_bytes": published,
        "kvcore": "",
        "kvcore_bytes": None,
        "kvcore_counts": "",
        "agrees": False,
        "reason": NOT_COMPUTED,
        "reason_key": "not_computed",
    }
    if geometry is _READ:
        geometry = _geometry(model, engine) if engine else None
    if geometry is None:
        return out
    runtime = get_runtime(engine)
    kv = row.get("kv_format", model.get("kv_format", "fp16"))
    spec, sequences = KvSpec(kv, kv), int(row.get("sequences", 1))
    weights_format = row.get("weights_format", model["weights_format"])
    low = None  # a plan with an upper estimate is a range: its lower end
    if (
        row["part"] == "kv"
    ):  # the caches the runtime allocates (llama.cpp: preallocated, every cell)
        ours = runtime.kv_bytes(geometry, out["context"], spec, sequences)
        counts = runtime.report(geometry, out["context"], spec, sequences, None)["formula"]
        agrees = _agree(ours, published, row)
        key = "kv_agrees" if agrees else "kv_differs"
    elif row["part"] == "peak" and weights_format in ALL_WEIGHT_FORMATS:
        weights = weights_bytes(geometry, weights_format)
        kv_bytes = runtime.kv_bytes(geometry, out["context"], spec, sequences)
        chip = out["chip"] or None
        plan = runtime.memory_plan(
            geometry, out["context"], spec, sequences, None, weights, chip=chip
        )
        if plan is not None:  # the runtime's whole plan, held to a figure it was not fitted on
            ours = plan["total_bytes"]
            counts = " + ".join(f"{p['name']} {p['bytes']:,} B" for p in plan["parts"])
            # an upper estimate (mlx_lm's command buffers in flight on Metal) makes the plan a range
            low = ours - plan["in_flight_bytes"]
            slack = (low - weights - kv_bytes) * plan["compute_tolerance_share"]
            agrees = low - slack <= published <= ours + slack or _agree(ours, published, row)
            key = "plan_within" if agrees else "plan_differs"
        else:
            ours = weights + kv_bytes
            counts = f"weights {weights:,} B ({weights_format}) + KV {kv_bytes:,} B ({kv})"
            agrees = _agree(ours, published, row)
            key = "agrees" if agrees else "peak_gap" if published > ours else "peak_below"
    else:
        return out
    low = ours if low is None else low
    out.update(
        kvcore=_text(ours, unit) if low == ours else f"{_text(low, unit)} – {_text(ours, unit)}",
        kvcore_bytes=ours,
        kvcore_low_bytes=low,
        kvcore_counts=counts,
        agrees=agrees,
        reason=REASONS[key],
        reason_key=key,
        difference_bytes=published - ours,
    )
    return out


def benchmark_rows(rec) -> list[dict]:
    """A published `benchmark` section's peaks as memory rows: mlx_lm.benchmark's peak_memory (GB) after
    `prompt_tokens` + `generation_tokens`, the weights named by the row (bf16, or qN: mlx_lm's N-bit at its default
    group of 64; another name, such as "q4 g32", is not read)."""
    out = []
    for row in rec.data.get("sections", {}).get("benchmark", []):
        if "peak_memory_gb" not in row or "prompt_tokens" not in row:
            continue
        tokens = int(row["prompt_tokens"] + row.get("generation_tokens", 0))
        weights = BENCHMARK_WEIGHTS.get(row["name"], "")
        out.append(
            {
                "context": tokens,
                "value": row["peak_memory_gb"],
                "unit": "GB",
                "part": "peak",
                "series": row["name"],
                "weights_format": weights,
            }
        )
    return out


def figures(rec) -> list[dict]:
    """A published recording's memory figures as rows: its `memory` section's, then its `benchmark` peaks
    (benchmark_rows); none for a measured run. At most MAX_MEMORY_FIGURES (kvcore.recordings.check)."""
    if rec.data.get("kind") != "published":
        return []
    return [*rec.data.get("sections", {}).get("memory", []), *benchmark_rows(rec)]


def recording_rows(rec) -> list[dict]:
    """One recording's figures (figures) against kvcore: its model's geometry is read once for all of them, so
    each figure costs its own runtime's sizes and plan only; a geometry or setting kvcore refuses is said in
    each row it concerns, not hidden."""
    rows = figures(rec)
    if not rows:
        return []
    engine, refused = engine_of(rec), None
    try:
        geometry = _geometry(rec.data["model"], engine) if engine else None
    except KvError as e:
        geometry, refused = None, e
    out = []
    for row in rows:
        try:
            if refused is not None:
                raise refused
            out.append(compare_row(rec, row, geometry))
        except KvError as e:
            out.append(
                {
                    "run": rec.id,
                    "part": row["part"],
                    "published": f"{row['value']} {row['unit']}",
                    "kvcore": "",
                    "agrees": False,
                    "reason": str(e),
                    "reason_key": "refused",
                }
            )
    return out


def rows(recordings) -> list[dict]:
    """Every published memory figure against kvcore, in the recordings' order: `memory` sections, and the peaks of
    `benchmark` sections (recording_rows)."""
    return [row for rec in recordings for row in recording_rows(rec)]
