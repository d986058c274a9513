"""DataFrames for the site's chapters, built from the engine and from recordings (no Streamlit).

Every number a page shows comes from here, from a recording, or from kvcore/published.yaml.
Long-form frames (one row per point and series) feed kvcore.charts directly.
Example: trap_curve(load_geometry("llama-3.2-1b"), 300) -> allocated jumps 8.0 -> 16.0 MiB at 257.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from . import allocsim, decode_model, hardware
from .errors import KvError
from .formats import FORMATS, get_format
from .formulas import (
    MAX_CONTEXT,
    KvSpec,
    bytes_per_token,
    kv_bytes,
    kv_bytes_per_token,
    max_context_within,
    per_layer_kv,
    prefill_chunks,
    state_bytes,
    weights_bytes,
)
from .geometry import Geometry, load_preset, parse_config
from .published import figures
from .calculator import max_context, memory_curves, predict_decode
from .decode_model import chip_for, geometry_for
from .recordings import Recording
from .units import GIB, MIB

ARTICLE_MODEL = "llama-3.2-1b"  # Article A's model (mlx-community/Llama-3.2-1B-Instruct-4bit)
MAX_UPDATES = 4096  # a chunking pattern longer than this is refused (it is a demo, not a fuzzer)


def load_geometry(preset: str) -> Geometry:
    return parse_config(load_preset(preset)["config"], preset)


# ---------------------------------------------------------------- recordings


def source_class(rec: Recording) -> str:
    """'published', 'apple' (measured on Apple Silicon) or 'other' (measured anywhere else)."""
    if rec.kind == "published":
        return "published"
    machine = rec.data.get("provenance", {}).get("machine", {})
    apple = "apple" in str(machine.get("chip", "")).lower() and str(machine.get("os", "")).lower().startswith(("mac", "darwin"))
    return "apple" if apple else "other"


def provenance(rec: Recording) -> dict:
    """The badge's fields: kind, label, chip, machine, model, method, versions, date, citation."""
    d, prov = rec.data, rec.data.get("provenance", {})
    machine = prov.get("machine", {})
    hw = d.get("hardware", {})
    method = d.get("method", {})
    versions = prov.get("versions", {})
    return {
        "kind": rec.kind,
        "class": source_class(rec),
        "label": rec.label,
        "chip": machine.get("chip") or hw.get("chip", ""),
        "machine": ", ".join(str(v) for v in (machine.get("os"), prov.get("backend") or hw.get("backend"), prov.get("device")) if v),
        "model": d["model"]["name"],
        "kv_format": d["model"].get("kv_format", ""),
        "method": ", ".join(f"{k}: {v}" for k, v in method.items()) if isinstance(method, dict) else str(method),
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "date": str(prov.get("date", "")),
        "citation": d.get("citation", {}).get("source", ""),
    }


def section_frame(recs: list[Recording], section: str) -> pd.DataFrame:
    """Rows of one section from several recordings, with the recording's id and label as columns."""
    frames = [pd.DataFrame(r.rows(section)).assign(source=r.label, recording=r.id) for r in recs if r.has(section)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def recordings_table(recs: list[Recording], local_ids: set[str]) -> pd.DataFrame:
    rows = []
    for r in recs:
        p = provenance(r)
        rows.append({"recording": r.id, "kind": r.kind, "where": "local" if r.id in local_ids else "bundled",
                     "label": r.label, "chip": p["chip"], "model": p["model"], "date": p["date"],
                     "sections": ", ".join(r.data["sections"])})
    return pd.DataFrame(rows)


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
            rows.append({"step": step, "mode": mode, "rows_per_step": work, "cumulative_rows": cum[mode]})
    return pd.DataFrame(rows)


def mechanism_measured(recs: list[Recording]) -> pd.DataFrame:
    df = section_frame(recs, "mechanism")
    if df.empty:
        return df
    df["speedup"] = df["without_cache_s"] / df["with_cache_s"]
    return df.melt(id_vars=["source", "recording", "new_tokens", "speedup"],
                   value_vars=["with_cache_s", "without_cache_s"], var_name="mode", value_name="seconds")


# ---------------------------------------------------------------- 2 the .nbytes trap


def _full_layers(geometry: Geometry):
    layers = [layer for layer in geometry.layers if layer.kind in ("full", "mla")]
    if not layers:
        raise KvError(f"{geometry.name} has no full-attention layers to show the trap on.")
    return layers


def trap_curve(geometry: Geometry, max_tokens: int, kv_format: str = "fp16", updates: list[int] | None = None) -> pd.DataFrame:
    """Allocated (`.nbytes`), used (offset) and theory MiB after each update (default: one token at a time)."""
    updates = updates or [1] * max_tokens
    spec = KvSpec(kv_format, kv_format)
    layers = _full_layers(geometry)
    per_token = sum(bytes_per_token(layer, spec) for layer in layers)
    rows = []
    for state in allocsim.trace("KVCache", updates):
        rows += [
            {"tokens": state.offset, "series": "allocated", "mib": state.capacity * per_token / MIB},
            {"tokens": state.offset, "series": "used", "mib": state.offset * per_token / MIB},
            {"tokens": state.offset, "series": "theory", "mib": kv_bytes(geometry, state.offset, spec) / MIB},
        ]
    return pd.DataFrame(rows)


def trap_measured(recs: list[Recording]) -> pd.DataFrame:
    df = section_frame(recs, "trap")
    if df.empty:
        return df
    return df.melt(id_vars=["source", "recording", "tokens"], value_vars=["allocated_mib", "used_mib", "theory_mib"],
                   var_name="series", value_name="mib").assign(series=lambda d: d["series"].str.removesuffix("_mib"))


def parse_updates(text: str) -> list[int]:
    """'300, 300' -> [300, 300]; '2048+2047+1' and '500x8' work too. KvError on anything else."""
    out: list[int] = []
    for part in text.replace("+", ",").replace(" ", "").split(","):
        if not part:
            continue
        count = 1
        if "x" in part:
            part, _, times = part.partition("x")
            count = int(times) if times.isdigit() else -1
        if not part.isdigit() or count < 1 or int(part) < 1 or int(part) > MAX_CONTEXT:
            raise KvError(f"{text!r} is not a list of positive token counts such as '300, 300' or '500x8'.", "updates_bad", text=text)
        out += [int(part)] * count
        if len(out) > MAX_UPDATES:
            raise KvError(f"At most {MAX_UPDATES:,} updates, please.", "updates_many", n=MAX_UPDATES)
    if not out:
        raise KvError("Give at least one update, such as '1, 256'.", "updates_none")
    return out


def chunking_table(geometry: Geometry, patterns: list[str], kv_format: str = "fp16") -> pd.DataFrame:
    """Capacity after each update pattern (allocsim), against the tokens actually held."""
    per_token = sum(bytes_per_token(layer, KvSpec(kv_format, kv_format)) for layer in _full_layers(geometry))
    rows = []
    for text in patterns:
        state = allocsim.simulate("KVCache", parse_updates(text))
        rows.append({"updates": text, "tokens": state.offset, "capacity": state.capacity,
                     "allocated_mib": state.capacity * per_token / MIB, "used_mib": state.offset * per_token / MIB,
                     "slack_pct": 100 * (state.capacity - state.offset) / state.offset})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- 3 linear growth


def contexts(max_context: int, start: int = 1024) -> list[int]:
    """Powers of two from `start` to `max_context` (all multiples of 256)."""
    return [2**k for k in range(int(math.log2(start)), int(math.log2(max_context)) + 1)]


def allocated_bytes(geometry: Geometry, context: int, spec: KvSpec) -> int:
    """What the caches' `.nbytes` report after mlx_lm's chunked prefill of `context` tokens (allocsim)."""
    chunks = prefill_chunks(context)
    total = 0
    for layer in geometry.layers:
        if layer.kind == "linear":
            total += state_bytes(layer, spec)
            continue
        if layer.kind == "sliding" and context > layer.window:
            cap = allocsim.simulate("RotatingKVCache", chunks, max_size=layer.window).capacity
        else:
            cap = allocsim.simulate("KVCache", chunks).capacity
        total += cap * bytes_per_token(layer, spec)
    return total


def growth_curve(geometry: Geometry, max_context: int, spec: KvSpec, weights_format: str, sequences: int = 1) -> pd.DataFrame:
    """Allocated / used / theory KV bytes at each power-of-two context, with the weights as a level."""
    w = weights_bytes(geometry, weights_format)
    rows = []
    for t in contexts(max_context):
        used = kv_bytes(geometry, t, spec, sequences)
        for series, value in (("allocated", sequences * allocated_bytes(geometry, t, spec)), ("used", used),
                              ("theory", used), ("weights", w)):
            rows.append({"context": t, "series": series, "bytes": value, "gib": value / GIB})
    return pd.DataFrame(rows)


def crossover_context(geometry: Geometry, weights_format: str, spec: KvSpec, sequences: int = 1) -> int | None:
    """The smallest context whose KV bytes exceed the weights' bytes (None beyond MAX_CONTEXT)."""
    within = max_context_within(geometry, weights_bytes(geometry, weights_format), spec, sequences)
    return None if within == MAX_CONTEXT else within + 1


def per_layer(geometry: Geometry, context: int, spec: KvSpec, sequences: int = 1) -> pd.DataFrame:
    df = pd.DataFrame(per_layer_kv(geometry, context, spec, sequences))
    return df.assign(mib=df["kv_bytes"] / MIB)


def growth_measured(recs: list[Recording]) -> pd.DataFrame:
    df = section_frame(recs, "growth")
    if df.empty:
        return df
    out = df.melt(id_vars=["source", "recording", "context"], value_vars=["allocated_mib", "used_mib", "theory_mib"],
                  var_name="series", value_name="mib")
    out["series"] = out["series"].str.removesuffix("_mib")
    out["gib"] = out["mib"] / 1024
    return out


# ---------------------------------------------------------------- 4 decode slowdown


def decode_points(rec: Recording) -> pd.DataFrame:
    """Measured decode points with the bytes each generated token reads and the bandwidth that implies."""
    df = pd.DataFrame(rec.rows("decode"))
    model = geometry_for(rec)
    if df.empty or model is None:
        return df
    geometry, weights, spec = model
    df["weights_bytes"] = weights_bytes(geometry, weights, active=True)
    df["kv_bytes"] = [kv_bytes(geometry, int(t), spec) for t in df["context"]]
    df["bytes_per_token"] = df["weights_bytes"] + df["kv_bytes"]
    df["implied_gbps"] = df["bytes_per_token"] * df["tokens_per_s"] / 1e9
    return df.assign(source=rec.label, recording=rec.id)


SPREADS = {"iqr": ("q1_ms", "q3_ms"), "range": ("min_ms", "max_ms")}


def decode_spread(points: pd.DataFrame, spread: str = "iqr") -> pd.DataFrame:
    """Each decode point's spread over passes as tokens/s bounds for error bars: tokens_per_s_low =
    1000 / slower ms, tokens_per_s_high = 1000 / faster ms, from the interquartile range ("iqr":
    q1_ms/q3_ms) or the min-max ("range"). Rows without those fields (older recordings) get NaN.

    Example: a row with q1_ms 20, q3_ms 25 -> tokens_per_s_low 40.0, tokens_per_s_high 50.0.
    """
    fast, slow = SPREADS[spread]
    out = points.copy()
    for col, ms in (("tokens_per_s_low", slow), ("tokens_per_s_high", fast)):
        out[col] = 1000 / out[ms] if ms in out else float("nan")
    return out


def decode_fit(rec: Recording) -> tuple[decode_model.Fit, pd.DataFrame] | None:
    """The fitted bytes/BW_eff model for a run and its curve over the run's context range (log-spaced)."""
    points = decode_points(rec)
    if points.empty or "bytes_per_token" not in points:
        return None
    fit = decode_model.fit_run(rec)
    geometry, weights, spec = geometry_for(rec)
    lo, hi = int(points["context"].min()), int(points["context"].max())
    grid = sorted({int(round(lo * (hi / lo) ** (i / 40))) for i in range(41)} if hi > lo else {lo})
    curve = pd.DataFrame({"context": grid})
    curve["tokens_per_s"] = [fit.predict(decode_model.bytes_per_generated_token(geometry, t, spec, weights)) for t in grid]
    return fit, curve.assign(source=rec.label, recording=rec.id)


def worked_check(rec: Recording) -> dict | None:
    """First vs last decode point: bytes per token, predicted and measured slowdown, implied bandwidths."""
    points = decode_points(rec)
    if len(points) < 2 or "bytes_per_token" not in points:
        return None
    a, b = points.iloc[0], points.iloc[-1]
    return {"context_a": int(a["context"]), "context_b": int(b["context"]),
            "tokens_per_s_a": float(a["tokens_per_s"]), "tokens_per_s_b": float(b["tokens_per_s"]),
            "weights_bytes": int(a["weights_bytes"]), "kv_bytes_a": int(a["kv_bytes"]), "kv_bytes_b": int(b["kv_bytes"]),
            "bytes_a": int(a["bytes_per_token"]), "bytes_b": int(b["bytes_per_token"]),
            "predicted_slowdown": float(b["bytes_per_token"] / a["bytes_per_token"]),
            "measured_slowdown": float(a["tokens_per_s"] / b["tokens_per_s"]),
            "gbps_a": float(a["implied_gbps"]), "gbps_b": float(b["implied_gbps"])}


def what_if(geometry: Geometry, weights_format: str, spec: KvSpec, chip: hardware.Chip, efficiency: float,
            max_context: int) -> pd.DataFrame:
    """Predicted tok/s vs context on a chip: at its peak bandwidth and at `efficiency` x peak."""
    ctxs = contexts(max_context, 256)
    frames = [pd.DataFrame(predict_decode(geometry, ctxs, spec, weights_format, chip.chip, share)).assign(series=series)
              for series, share in (("peak", 1.0), ("effective", efficiency))]
    return pd.concat(frames, ignore_index=True)[["context", "series", "tokens_per_s", "bytes_per_token"]]


# ---------------------------------------------------------------- 5 savings


def _with_kv_heads(geometry: Geometry, heads: int) -> Geometry:
    layers = tuple(dataclasses.replace(l, kv_heads=heads) if l.kind in ("full", "sliding") else l for l in geometry.layers)
    return dataclasses.replace(geometry, layers=layers)


def heads_compare(geometry: Geometry, context: int, spec: KvSpec = KvSpec()) -> pd.DataFrame:
    """KV bytes at `context` if every attention head kept its own K/V (MHA), as configured, or one shared (MQA)."""
    actual = max((l.kv_heads for l in geometry.layers if l.kind in ("full", "sliding")), default=0)
    variants = [("mha", geometry.num_attention_heads), ("gqa" if 1 < actual < geometry.num_attention_heads else "this", actual), ("mqa", 1)]
    if any(l.kind == "mla" for l in geometry.layers):
        variants = [("mla", 0)]
    rows = []
    for name, heads in variants:
        g = geometry if heads in (0, actual) else _with_kv_heads(geometry, heads)
        rows.append({"variant": name, "kv_heads": heads or None, "kv_bytes": kv_bytes(g, context, spec)})
    df = pd.DataFrame(rows)
    df["gib"] = df["kv_bytes"] / GIB
    df["vs_mha"] = df["kv_bytes"] / df["kv_bytes"].max()
    return df


def format_table(geometry: Geometry, formats: list[str], activation_dtype: str = "fp16") -> pd.DataFrame:
    """Bits per value and bytes per token for each format on this model (padding included); skips misfits."""
    rows = []
    fp16 = kv_bytes_per_token(geometry, KvSpec(activation_dtype=activation_dtype))
    for name in formats:
        try:
            per = kv_bytes_per_token(geometry, KvSpec(name, name, activation_dtype=activation_dtype))
        except KvError:
            continue
        dim = next((l.k_dim for l in geometry.layers if l.kind in ("full", "sliding", "mla")), 128)
        rows.append({"format": name, "bits_per_value": get_format(name).bits_per_value(dim), "bytes_per_token": per,
                     "vs_fp16": per / fp16, "source": get_format(name).source})
    return pd.DataFrame(rows)


def formats_curve(geometry: Geometry, formats: list[str], max_context: int) -> pd.DataFrame:
    df = pd.DataFrame(memory_curves(geometry, contexts(max_context), 0, 1, KvSpec(), list(format_table(geometry, formats)["format"])))
    return df.assign(gib=df["kv_bytes"] / GIB)[["context", "format", "gib"]]


def fits_table(geometry: Geometry, weights_format: str, memory_gib: float, formats: list[str], sequences: int = 1) -> pd.DataFrame:
    """Longest context per KV format that the calculator calls "fits" in `memory_gib` (vendors' "GB" of RAM are GiB)."""
    weights, available = weights_bytes(geometry, weights_format), int(memory_gib * GIB)
    rows = [{"format": name, "max_context": max_context(geometry, KvSpec(name, name), sequences, weights, available)}
            for name in format_table(geometry, formats)["format"]]
    return pd.DataFrame(rows)


def turbo3_claims() -> pd.DataFrame:
    """Article B's 3.72 GiB against the fork's block layout (3.125 bits) and its older 3.5-bit comments."""
    item = figures()["turbo3_llama31_8b_131k"]
    geometry = load_geometry(item["model"])
    fp16 = kv_bytes(geometry, item["context"])
    rows = []
    for claim in item["claims"]:
        if "gib" in claim:
            gib = claim["gib"]
            bits = 16 * gib * GIB / fp16
        elif "format" in claim:
            gib = kv_bytes(geometry, item["context"], KvSpec(claim["format"], claim["format"])) / GIB
            bits = get_format(claim["format"]).bits_per_value(geometry.layers[0].k_dim)
        else:
            bits = claim["bits_per_value"]
            gib = fp16 * bits / 16 / GIB
        rows.append({"claim": claim["id"], "bits_per_value": bits, "gib": gib, "vs_fp16": fp16 / GIB / gib,
                     "source": figures()["sources"][claim["source"]]})
    return pd.DataFrame(rows)


def turbo_padding() -> pd.DataFrame:
    """Bits per value of the turbo formats at head_dim 128 and at head_dim 64 padded to one 128-value block."""
    return pd.DataFrame([{"format": n, "head_dim_128": FORMATS[n].bits_per_value(128), "head_dim_64": FORMATS[n].bits_per_value(64)}
                         for n in ("turbo4", "turbo3", "turbo2")])


# ---------------------------------------------------------------- home


def key_numbers(rec: Recording | None) -> dict:
    """The home page's numbers: Article A's model from the engine, decode figures from the recording."""
    g = load_geometry(ARTICLE_MODEL)
    out = {"kv_per_token": kv_bytes_per_token(g), "kv_32k": kv_bytes(g, 32768),
           "weights_q4": weights_bytes(g, "mlx-q4", active=True), "crossover": crossover_context(g, "mlx-q4", KvSpec())}
    check = worked_check(rec) if rec is not None else None
    if check:
        out.update(check)
    return out
