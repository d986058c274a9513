"""mlx_lm's peak memory as a recording measured it (section `peak`: mx.get_peak_memory() around generate_step,
kvcore.measure.peaks) beside kvcore's plan for the same runs (kvcore.runtimes.mlx_lm_plan, CPU backend) and the
trap's two lines, allocated (.nbytes) and used: the third line of the trap. The recording holds only what was
measured; the plan is computed here, from the recording's own model config.

Example: peak_lines(rec, 512)["points"] -> one row per measured prompt at prefill step 512, peak_mib above weights.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from kvcore.errors import KvError
from kvcore.inputs.config import parse_config
from kvcore.memory.formats import KvSpec, get_format
from kvcore.memory.formulas import kv_bytes
from kvcore.model.geometry import Geometry
from kvcore.recordings.store import Recording
from kvcore.runtimes import mlx_lm_plan
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.units import MIB

SECTION = "peak"
GROUP_SIZE = (
    64  # mlx_lm's kv_group_size default, the one the sweep ran with (method.peak.quantized)
)
SERIES = ("measured", "plan", "allocated", "used")  # the chart's series, in legend order
# What mlx holds beside the plan's parts (token ids, RoPE tables, the sampler's arrays): a run is within the plan's
# tolerance when |plan - peak| <= TRANSIENT_TOLERANCE x the plan's transient parts + FLOOR
FLOOR = MIB


def allowed(plan: dict) -> float:
    """Bytes a measured peak may be from the plan: its stated share of the transient parts, plus FLOOR."""
    return plan["compute_tolerance_share"] * plan["compute_bytes"] + FLOOR


def within(plan: dict, peak_bytes: float) -> bool:
    """A measured peak within the plan's stated tolerance (both with the weights, or both without)."""
    return abs(plan["total_bytes"] - peak_bytes) <= allowed(plan)


def peak_recordings(recs: list[Recording]) -> list[Recording]:
    """The recordings that measured mlx_lm's peak and give the model config its plan needs: bundled runs first,
    then measured ones (in the list's order): a reader's upload never takes the bundled run's place."""
    have = [r for r in recs if r.has(SECTION) and isinstance(r.data["model"].get("config"), dict)]
    return sorted(have, key=lambda r: (not r.bundled, r.kind != "measured"))


def geometry(rec: Recording) -> Geometry:
    """The recorded model's geometry under mlx_lm (its config, as the run built it); a KvError when the recording
    has no config (the plan needs one)."""
    model = rec.data["model"]
    if not isinstance(model.get("config"), dict):
        raise KvError(f"{rec.id} gives no model config: kvcore cannot plan its runs.")
    return parse_config(model["config"], str(model["name"]), MLX_LM)


def _spec(rec: Recording, kv_format: str) -> KvSpec:
    act = rec.data["model"].get("activation_dtype", "fp32")
    return KvSpec(kv_format, kv_format, GROUP_SIZE, act)


def plan_for(rec: Recording, row: dict, g: Geometry | None = None) -> dict:
    """kvcore's plan (weights left out) for one recorded row: same prompt, tokens, prefill step, KV format and
    quantized_kv_start, on the CPU backend the recording ran on."""
    g = g or geometry(rec)
    start = row.get("quantized_kv_start", mlx_lm_plan.QUANTIZED_KV_START)
    return mlx_lm_plan.plan(
        g,
        int(row["prompt_tokens"]),
        _spec(rec, row["kv_format"]),
        0,
        int(row["generated"]),
        "cpu",
        int(row["prefill_step"]),
        int(start),
    )


def checks(rec: Recording) -> pd.DataFrame:
    """Every recorded row against the plan: the measured peaks (median and each repeat), the plan's peak and its
    transient part (MiB, above the weights), and the worst repeat's distance from the plan as a share of the
    transient part (`share`: negative where the plan is below the run), what the tolerance allows there
    (`allowed_mib`) and whether every repeat is `within` it."""
    g, out = geometry(rec), []
    for row in rec.rows(SECTION):
        plan = plan_for(rec, row, g)
        runs = row.get("peak_runs_mib") or [row["peak_mib"]]
        planned = plan["total_bytes"] / MIB
        worst = max((planned - p for p in runs), key=abs)
        out.append(
            {
                "prompt_tokens": row["prompt_tokens"],
                "generated": row["generated"],
                "prefill_step": row["prefill_step"],
                "kv_format": row["kv_format"],
                "peak_mib": row["peak_mib"],
                "plan_mib": planned,
                "transient_mib": plan["compute_bytes"] / MIB,
                "worst_mib": worst,
                "share": worst * MIB / plan["compute_bytes"] if plan["compute_bytes"] else 0.0,
                "tolerance": plan["compute_tolerance_share"],
                "allowed_mib": allowed(plan) / MIB,
                "within": all(within(plan, p * MIB) for p in runs),
            }
        )
    return pd.DataFrame(out)


def plain_rows(rec: Recording, prefill_step: int) -> list[dict]:
    """The rows of one prefill step in a plain (unquantized) cache, at the run's most common number of generated
    tokens (the dense sweep's), by prompt: the points of one line."""
    rows = [
        r
        for r in rec.rows(SECTION)
        if r["prefill_step"] == prefill_step and get_format(r["kv_format"]).kind == "plain"
    ]
    if not rows:
        return []
    generated = Counter(r["generated"] for r in rows).most_common(1)[0][0]
    return sorted(
        (r for r in rows if r["generated"] == generated), key=lambda r: r["prompt_tokens"]
    )


def prefill_steps(rec: Recording) -> list[int]:
    """The prefill steps with a line's worth of plain-cache rows (at least 3 prompts), smallest first."""
    steps = sorted({int(r["prefill_step"]) for r in rec.rows(SECTION)})
    return [s for s in steps if len(plain_rows(rec, s)) >= 3]


def peak_lines(rec: Recording, prefill_step: int) -> dict:
    """The chart's data for one prefill step: `points` (tokens, series "measured", mib: the median peak above the
    weights), `lines` (tokens, series "plan" | "allocated" | "used", mib) at every prompt
    between the first and last measured one, with the same generated tokens and format, and the rows themselves.
    allocated and used are kvcore's (the cache simulator's capacity after the plan's last step, and the formula's
    bytes of the tokens held)."""
    rows = plain_rows(rec, prefill_step)
    if not rows:
        raise KvError(f"{rec.id} has no plain-cache peak rows at prefill step {prefill_step}.")
    g = geometry(rec)
    fmt, generated = rows[0]["kv_format"], int(rows[0]["generated"])
    spec = _spec(rec, fmt)
    lines = []
    for prompt in range(int(rows[0]["prompt_tokens"]), int(rows[-1]["prompt_tokens"]) + 1):
        # the steps plan() keeps: its peak (weights left out) is their largest, and the last is the end
        steps = mlx_lm_plan.moments(g, prompt, spec, generated, "cpu", prefill_step, every=False)
        end = steps[-1]
        lines += [
            {"tokens": prompt, "series": "plan", "mib": max(m.bytes for m in steps) / MIB},
            {"tokens": prompt, "series": "allocated", "mib": end.kv_bytes / MIB},
            {
                "tokens": prompt,
                "series": "used",
                "mib": kv_bytes(g, prompt + generated, spec) / MIB,
            },
        ]
    points = pd.DataFrame(
        [{"tokens": r["prompt_tokens"], "series": "measured", "mib": r["peak_mib"]} for r in rows]
    )
    return {
        "lines": pd.DataFrame(lines),
        "points": points,
        "rows": rows,
        "kv_format": fmt,
        "generated": generated,
    }


def boundary(rec: Recording, prefill_step: int, at: int = 256) -> dict | None:
    """The measured rows either side of a 256 boundary at one prefill step: the runs whose caches end holding `at`
    and `at` + 1 tokens (prompt + generated), with the plan's peak for each: {"a": ..., "b": ...} of prompt, tokens,
    allocated, used, peak and plan MiB; None where the run has not both, or did not measure the caches."""
    rows = {r["prompt_tokens"] + r["generated"]: r for r in plain_rows(rec, prefill_step)}
    if at not in rows or at + 1 not in rows:
        return None
    if any(k not in rows[t] for t in (at, at + 1) for k in ("allocated_mib", "used_mib")):
        return None
    g = geometry(rec)
    out = {}
    for key, tokens in (("a", at), ("b", at + 1)):
        r = rows[tokens]
        out[key] = {
            "prompt": r["prompt_tokens"],
            "tokens": tokens,
            "allocated": r["allocated_mib"],
            "used": r["used_mib"],
            "peak": r["peak_mib"],
            "plan": plan_for(rec, r, g)["total_bytes"] / MIB,
        }
    return out
