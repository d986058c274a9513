"""DataFrames for the site's chapters, built from the engine and from recordings (no Streamlit); the
Savings chapter's are in kvcore.views.savings.

Every number a page shows comes from here, from a recording, or from kvcore/recordings/published.yaml.
Long-form frames (one row per point and series) feed kvcore.views.charts directly.
Example: trap_curve(preset_geometry("llama-3.2-1b"), 300) -> allocated jumps 8.0 -> 16.0 MiB at 257.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kvcore.errors import KvError
from kvcore.fits.decode import worked_check
from kvcore.inputs.presets import preset_geometry
from kvcore.memory import allocsim
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import (
    allocated_bytes,
    bytes_per_token,
    crossover_context,
    kv_bytes,
    kv_bytes_per_token,
    per_layer_kv,
    weights_bytes,
)
from kvcore.model.geometry import Geometry
from kvcore.recordings.store import Recording
from kvcore.units import GIB, MIB
from kvcore.views.what_if import doubling_contexts

ARTICLE_MODEL = "llama-3.2-1b"  # Article A's model (mlx-community/Llama-3.2-1B-Instruct-4bit)


# ---------------------------------------------------------------- recordings


def section_frame(recs: list[Recording], section: str) -> pd.DataFrame:
    """Rows of one section from several recordings, with the recording's id and label as columns."""
    frames = [
        pd.DataFrame(r.rows(section)).assign(source=r.label, recording=r.id)
        for r in recs
        if r.has(section)
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


# ---------------------------------------------------------------- 1 mechanism


def mechanism_work(prompt_tokens: int, new_tokens: int) -> pd.DataFrame:
    """K/V rows computed per layer at each generation step, with and without a cache (prefill excluded).

    With a cache a step computes the new token only; without, the prompt plus every token so far.
    """
    rows = []
    cum = {"with_cache": 0, "without_cache": 0}
    for step in range(1, new_tokens + 1):
        for mode, work in (("with_cache", 1), ("without_cache", prompt_tokens + step)):
            cum[mode] += work
            rows.append(
                {"step": step, "mode": mode, "rows_per_step": work, "cumulative_rows": cum[mode]}
            )
    return pd.DataFrame(rows)


def mechanism_totals(rec: Recording) -> dict:
    """A run's totals: its mechanism rows are running totals (one per new token), so the run is its last row,
    the largest N. Example (Article B): {"new_tokens": 300, "with_cache_s": 11.7, "without_cache_s": 61, "speedup": 5.21}."""
    last = max(rec.rows("mechanism"), key=lambda r: r["new_tokens"])
    return {
        "new_tokens": int(last["new_tokens"]),
        "with_cache_s": float(last["with_cache_s"]),
        "without_cache_s": float(last["without_cache_s"]),
        "speedup": float(last["without_cache_s"]) / float(last["with_cache_s"]),
    }


def mechanism_measured(recs: list[Recording]) -> pd.DataFrame:
    """Two rows per run with a mechanism section (with / without a cache): the run's totals at its largest N."""
    rows = []
    for r in recs:
        if not r.has("mechanism"):
            continue
        t = mechanism_totals(r)
        rows += [
            {
                "recording": r.id,
                "new_tokens": t["new_tokens"],
                "mode": mode,
                "seconds": t[f"{mode}_s"],
                "speedup": t["speedup"],
            }
            for mode in ("with_cache", "without_cache")
        ]
    return pd.DataFrame(rows, columns=["recording", "new_tokens", "mode", "seconds", "speedup"])


def mechanism_text(rec: Recording) -> dict | None:
    """A real model's mechanism run: the prompt (the recording's method) and the text it generated, token by token;
    None for a run without token texts (random weights)."""
    rows = rec.rows("mechanism")
    if not rows or not all("token" in r for r in rows):
        return None
    prompt = rows[0].get("prompt", "")
    return {
        "prompt": prompt,
        "generated": "".join(r["token"] for r in rows),
        "new_tokens": len(rows),
    }


# ---------------------------------------------------------------- 2 the .nbytes trap


def _trap_token_bytes(geometry: Geometry, kv_format: str) -> int:
    """Bytes one cached token costs across the layers the trap is shown on (every full-attention or MLA layer)."""
    layers = [layer for layer in geometry.layers if layer.kind in ("full", "mla")]
    if not layers:
        raise KvError(f"{geometry.name} has no full-attention layers to show the trap on.")
    return sum(bytes_per_token(layer, KvSpec(kv_format, kv_format)) for layer in layers)


TRAP_CACHE, TRAP_PATTERN = (
    "KVCache",
    "token by token",
)  # the trap chart's cache class and update pattern


def trap_curve(geometry: Geometry, max_tokens: int, kv_format: str = "fp16") -> pd.DataFrame:
    """Allocated (`.nbytes`), used (offset) and theory MiB of KVCache fed one token at a time, from breakpoints:
    allocated where the capacity steps (1, 257, 513, ...) and at the end, used and theory (straight lines) at
    both ends. A handful of rows whatever `max_tokens` is; draw allocated with step-after interpolation.

    Example: trap_curve(Llama-3.2-1B, 600) allocated rows at 1, 257, 513, 600: 8, 16, 24, 24 MiB.
    """
    spec = KvSpec(kv_format, kv_format)
    per_token = _trap_token_bytes(geometry, kv_format)
    rows, capacity = [], None
    for state in allocsim.trace("KVCache", [1] * max_tokens):
        if state.capacity != capacity or state.offset == max_tokens:
            capacity = state.capacity
            rows.append(
                {"tokens": state.offset, "series": "allocated", "mib": capacity * per_token / MIB}
            )
    for t in (1, max_tokens):
        rows += [
            {"tokens": t, "series": "used", "mib": t * per_token / MIB},
            {"tokens": t, "series": "theory", "mib": kv_bytes(geometry, t, spec) / MIB},
        ]
    return pd.DataFrame(rows)


def trap_at(geometry: Geometry, tokens: tuple[int, ...], kv_format: str = "fp16") -> dict:
    """{(n, "allocated" | "used"): MiB} after n single-token updates, for each n in `tokens` (allocsim)."""
    per_token = _trap_token_bytes(geometry, kv_format)
    out = {}
    for n in tokens:
        state = allocsim.simulate("KVCache", [1] * n)
        out[n, "allocated"], out[n, "used"] = (
            state.capacity * per_token / MIB,
            state.offset * per_token / MIB,
        )
    return out


def trap_format(rec: Recording) -> str | None:
    """The cache format a recording's trap section measured (its method, else its geometry's or model's KV format);
    None when the recording states none (its points are then drawn under no format, never as fp16's)."""
    method = rec.data.get("method", {})
    trap = method.get("trap", {}) if isinstance(method, dict) else {}
    model = rec.data["model"]
    stated = (
        (trap.get("kv_dtype") if isinstance(trap, dict) else None)
        or model.get("geometry_kv_format")
        or model.get("kv_format")
    )
    return str(stated) if stated else None


def trap_measured(recs: list[Recording], kv_format: str = "fp16") -> pd.DataFrame:
    """Measured points of the trap chart: KVCache fed token by token, in `kv_format`, from every recording that
    measured that; rows of other cache classes (QuantizedKVCache, RotatingKVCache) and update patterns are left out."""
    frames = []
    for r in recs:
        if not r.has("trap") or trap_format(r) != kv_format:
            continue
        rows = [
            row
            for row in r.rows("trap")
            if row.get("cache", TRAP_CACHE) == TRAP_CACHE
            and row.get("pattern", TRAP_PATTERN) == TRAP_PATTERN
        ]
        if rows:
            frames.append(pd.DataFrame(rows).assign(recording=r.id))
    if not frames:
        return pd.DataFrame(columns=["recording", "tokens", "series", "mib"])
    df = pd.concat(frames, ignore_index=True)
    return df.melt(
        id_vars=["recording", "tokens"],
        value_vars=["allocated_mib", "used_mib", "theory_mib"],
        var_name="series",
        value_name="mib",
    ).assign(series=lambda d: d["series"].str.removesuffix("_mib"))


def chunking_table(
    geometry: Geometry, patterns: list[str], kv_format: str = "fp16"
) -> pd.DataFrame:
    """Capacity after each update pattern (allocsim), against the tokens actually held."""
    per_token = _trap_token_bytes(geometry, kv_format)
    rows = []
    for text in patterns:
        state = allocsim.simulate("KVCache", allocsim.parse_updates(text))
        rows.append(
            {
                "updates": text,
                "tokens": state.offset,
                "capacity": state.capacity,
                "allocated_mib": state.capacity * per_token / MIB,
                "used_mib": state.offset * per_token / MIB,
                # the share of allocated rows not in use: (capacity - tokens) / capacity (49.8 % at 257)
                "slack_pct": 100 * (state.capacity - state.offset) / state.capacity,
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- 3 linear growth


def growth_curve(
    geometry: Geometry, max_context: int, spec: KvSpec, weights_format: str, sequences: int = 1
) -> pd.DataFrame:
    """Allocated / used / theory KV bytes at each power-of-two context, with the weights as a level."""
    w = weights_bytes(geometry, weights_format)
    rows = []
    for t in doubling_contexts(max_context):
        used = kv_bytes(geometry, t, spec, sequences)
        for series, value in (
            ("allocated", sequences * allocated_bytes(geometry, t, spec)),
            ("used", used),
            ("theory", used),
            ("weights", w),
        ):
            rows.append({"context": t, "series": series, "bytes": value, "gib": value / GIB})
    return pd.DataFrame(rows)


def one_line_each(
    curve: pd.DataFrame, log: bool = False, within: float = 0.005
) -> dict[str, tuple[str, ...]]:
    """Series of a growth_curve that draw as one line, grouped: two series whose values differ by less than
    `within` of the y axis' span at every context (of its decades on a log axis: `log`) are one line to a reader,
    and get one legend entry. Returns {the series that draws the line: every series it stands for}, in order.

    Example: Llama-3.2-1B to 32,768 tokens on linear axes -> {"allocated": ("allocated", "used", "theory"),
    "weights": ("weights",)}; on log axes allocated's 256-token blocks part from used at short contexts."""
    wide = curve.pivot_table(index="context", columns="series", values="bytes", sort=False)
    values = np.log10(wide.clip(lower=1)) if log else wide
    span = float(values.to_numpy().max() - values.to_numpy().min()) or 1.0
    groups: dict[str, tuple[str, ...]] = {}
    for series in dict.fromkeys(curve["series"]):
        first = next(
            (g for g in groups if (values[g] - values[series]).abs().max() < within * span), None
        )
        groups[first or series] = (*groups.get(first, ()), series) if first else (series,)
    return groups


def per_layer(geometry: Geometry, context: int, spec: KvSpec, sequences: int = 1) -> pd.DataFrame:
    df = pd.DataFrame(per_layer_kv(geometry, context, spec, sequences))
    return df.assign(mib=df["kv_bytes"] / MIB)


def growth_measured(recs: list[Recording]) -> pd.DataFrame:
    df = section_frame(recs, "growth")
    if df.empty:
        return df
    out = df.melt(
        id_vars=["source", "recording", "context"],
        value_vars=["allocated_mib", "used_mib", "theory_mib"],
        var_name="series",
        value_name="mib",
    )
    out["series"] = out["series"].str.removesuffix("_mib")
    out["gib"] = out["mib"] / 1024
    return out


# ---------------------------------------------------------------- 4 decode slowdown


SPREADS = {"iqr": ("q1_ms", "q3_ms"), "range": ("min_ms", "max_ms")}


def decode_spread(
    points: pd.DataFrame, spread: str = "iqr", fallback: str | None = None
) -> pd.DataFrame:
    """Each decode point's spread over passes as tokens/s bounds for error bars: tokens_per_s_low =
    1000 / slower ms, tokens_per_s_high = 1000 / faster ms, from the interquartile range ("iqr":
    q1_ms/q3_ms) or the min-max ("range"). Rows without those fields (older recordings) get NaN, or the
    `fallback` spread where they have that one (the decode chart: "iqr" falling back to "range").

    Example: a row with q1_ms 20, q3_ms 25 -> tokens_per_s_low 40.0, tokens_per_s_high 50.0.
    """
    fast, slow = SPREADS[spread]
    out = points.copy()
    for col, ms in (("tokens_per_s_low", slow), ("tokens_per_s_high", fast)):
        out[col] = 1000 / out[ms] if ms in out else float("nan")
    if fallback is not None:
        other = decode_spread(points, fallback)
        for col in ("tokens_per_s_low", "tokens_per_s_high"):
            out[col] = out[col].fillna(other[col])
    return out


# ---------------------------------------------------------------- home


def key_numbers(rec: Recording | None) -> dict:
    """The home page's numbers: Article A's model from the engine, decode figures from the recording."""
    g = preset_geometry(ARTICLE_MODEL)
    out = {
        "kv_per_token": kv_bytes_per_token(g),
        "kv_32k": kv_bytes(g, 32768),
        "weights_q4": weights_bytes(g, "mlx-q4", active=True),
        "crossover": crossover_context(g, "mlx-q4", KvSpec()),
    }
    check = worked_check(rec) if rec is not None else None
    if check:
        out.update(check)
    return out
