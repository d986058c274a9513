"""DataFrames for the site's chapters, built from the engine and from recordings (no Streamlit).

Every number a page shows comes from here, from a recording, or from kvcore/published.yaml.
Long-form frames (one row per point and series) feed kvcore.charts directly.
Example: trap_curve(preset_geometry("llama-3.2-1b"), 300) -> allocated jumps 8.0 -> 16.0 MiB at 257.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd

from . import allocsim, decode_model, hardware
from .errors import KvError
from .formats import FORMATS, get_format
from .formulas import (
    allocated_bytes,
    bytes_per_token,
    crossover_context,
    kv_bytes,
    kv_bytes_per_token,
    KvSpec,
    per_layer_kv,
    weights_bytes,
)
from .geometry import Geometry, preset_geometry
from .published import figures
from .calculator import max_context, memory_curves, predict_decode
from .decode_model import chip_for, geometry_for
from .recordings import Recording, is_apple_silicon
from .units import GIB, MIB

ARTICLE_MODEL = "llama-3.2-1b"  # Article A's model (mlx-community/Llama-3.2-1B-Instruct-4bit)


# ---------------------------------------------------------------- recordings


def source_class(rec: Recording) -> str:
    """'published', 'apple' (measured on Apple Silicon) or 'other' (measured anywhere else)."""
    if rec.kind == "published":
        return "published"
    return "apple" if is_apple_silicon(rec.data.get("provenance", {})) else "other"


def provenance(rec: Recording) -> dict:
    """The badge's fields: kind, class, label, chip, machine, memory, model, weights and KV format, method (as recorded:
    method_groups reads it), versions, date, command, citation (source, url, note). Empty where the recording is silent."""
    d, prov = rec.data, rec.data.get("provenance", {})
    machine = prov.get("machine", {})
    hw = d.get("hardware", {})
    versions = prov.get("versions", {})
    citation = d.get("citation", {})
    return {
        "kind": rec.kind,
        "class": source_class(rec),
        "label": rec.label,
        "chip": machine.get("chip") or hw.get("chip", ""),
        "vendor": hw.get("vendor", ""),
        "machine": ", ".join(str(v) for v in (machine.get("os"), prov.get("backend") or hw.get("backend"), prov.get("device")) if v),
        "memory_gb": machine.get("memory_gb") or hw.get("memory_gb") or "",
        "model": d["model"]["name"],
        "weights_format": d["model"].get("weights_format", ""),
        "kv_format": d["model"].get("kv_format", ""),
        "method": d.get("method", {}),
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "date": str(prov.get("date", "")),
        "command": str(prov.get("command", "")),
        "citation": citation.get("source", ""),
        "url": citation.get("url", ""),
        "note": citation.get("note", ""),
        # a published run's source details (empty when the recording has none)
        "author": citation.get("author", ""),
        "published": str(citation.get("date", "")),
        "grade": citation.get("grade", ""),
        "runtime": _runtime(rec) if isinstance(d.get("runtime"), dict) else "",
    }


def source_colors(recs: list[Recording]) -> dict[str, str]:
    """One colour per recording id, the same on every page and chart: the palette in order of the sorted ids.

    Example: source_colors(all recordings)["published-article-a-m5-pro"] -> '#4c78a8' wherever it is drawn.
    """
    from .charts import PALETTE

    return {rid: PALETTE[i % len(PALETTE)] for i, rid in enumerate(sorted({r.id for r in recs}))}


def method_groups(method) -> list[tuple[str, list[tuple[str, object]]]]:
    """A recording's free-form method as (group, [(field, value), ...]): "" for the top-level fields, then one group
    per nested mapping (a section's method, the backend) and per list of mappings (cross-checks: one item per entry,
    named by its `check` field). Order as recorded.

    Example: {"fill": "synthetic", "decode": {"warmup": 3}} -> [("", [("fill", "synthetic")]), ("decode", [("warmup", 3)])]
    """
    if not isinstance(method, dict):
        return [("", [("note", str(method))])] if method else []
    top, groups = [], []
    for key, value in method.items():
        if isinstance(value, dict):
            groups.append((str(key), list(value.items())))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            groups.append((str(key), [(str(v.get("check", i + 1)), {k: x for k, x in v.items() if k != "check"})
                                      for i, v in enumerate(value)]))
        else:
            top.append((str(key), value))
    return ([("", top)] if top else []) + groups


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


def mechanism_totals(rec: Recording) -> dict:
    """A run's totals: its mechanism rows are running totals (one per new token), so the run is its last row,
    the largest N. Example (Article B): {"new_tokens": 300, "with_cache_s": 11.7, "without_cache_s": 61, "speedup": 5.21}."""
    last = max(rec.rows("mechanism"), key=lambda r: r["new_tokens"])
    return {"new_tokens": int(last["new_tokens"]), "with_cache_s": float(last["with_cache_s"]),
            "without_cache_s": float(last["without_cache_s"]), "speedup": float(last["without_cache_s"]) / float(last["with_cache_s"])}


def mechanism_measured(recs: list[Recording]) -> pd.DataFrame:
    """Two rows per run with a mechanism section (with / without a cache): the run's totals at its largest N."""
    rows = []
    for r in recs:
        if not r.has("mechanism"):
            continue
        t = mechanism_totals(r)
        rows += [{"recording": r.id, "new_tokens": t["new_tokens"], "mode": mode, "seconds": t[f"{mode}_s"], "speedup": t["speedup"]}
                 for mode in ("with_cache", "without_cache")]
    return pd.DataFrame(rows, columns=["recording", "new_tokens", "mode", "seconds", "speedup"])


# ---------------------------------------------------------------- 2 the .nbytes trap


def _trap_token_bytes(geometry: Geometry, kv_format: str) -> int:
    """Bytes one cached token costs across the layers the trap is shown on (every full-attention or MLA layer)."""
    layers = [layer for layer in geometry.layers if layer.kind in ("full", "mla")]
    if not layers:
        raise KvError(f"{geometry.name} has no full-attention layers to show the trap on.")
    return sum(bytes_per_token(layer, KvSpec(kv_format, kv_format)) for layer in layers)


TRAP_CACHE, TRAP_PATTERN = "KVCache", "token by token"  # the trap chart's cache class and update pattern


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
            rows.append({"tokens": state.offset, "series": "allocated", "mib": capacity * per_token / MIB})
    for t in (1, max_tokens):
        rows += [{"tokens": t, "series": "used", "mib": t * per_token / MIB},
                 {"tokens": t, "series": "theory", "mib": kv_bytes(geometry, t, spec) / MIB}]
    return pd.DataFrame(rows)


def trap_at(geometry: Geometry, tokens: tuple[int, ...], kv_format: str = "fp16") -> dict:
    """{(n, "allocated" | "used"): MiB} after n single-token updates, for each n in `tokens` (allocsim)."""
    per_token = _trap_token_bytes(geometry, kv_format)
    out = {}
    for n in tokens:
        state = allocsim.simulate("KVCache", [1] * n)
        out[n, "allocated"], out[n, "used"] = state.capacity * per_token / MIB, state.offset * per_token / MIB
    return out


def trap_format(rec: Recording) -> str:
    """The cache format a recording's trap section measured (its method, else its geometry's or model's KV format)."""
    method = rec.data.get("method", {})
    trap = method.get("trap", {}) if isinstance(method, dict) else {}
    model = rec.data["model"]
    return str((trap.get("kv_dtype") if isinstance(trap, dict) else None) or model.get("geometry_kv_format") or model.get("kv_format") or "fp16")


def trap_measured(recs: list[Recording], kv_format: str = "fp16") -> pd.DataFrame:
    """Measured points of the trap chart: KVCache fed token by token, in `kv_format`, from every recording that
    measured that; rows of other cache classes (QuantizedKVCache, RotatingKVCache) and update patterns are left out."""
    frames = []
    for r in recs:
        if not r.has("trap") or trap_format(r) != kv_format:
            continue
        rows = [row for row in r.rows("trap")
                if row.get("cache", TRAP_CACHE) == TRAP_CACHE and row.get("pattern", TRAP_PATTERN) == TRAP_PATTERN]
        if rows:
            frames.append(pd.DataFrame(rows).assign(recording=r.id))
    if not frames:
        return pd.DataFrame(columns=["recording", "tokens", "series", "mib"])
    df = pd.concat(frames, ignore_index=True)
    return df.melt(id_vars=["recording", "tokens"], value_vars=["allocated_mib", "used_mib", "theory_mib"],
                   var_name="series", value_name="mib").assign(series=lambda d: d["series"].str.removesuffix("_mib"))


def chunking_table(geometry: Geometry, patterns: list[str], kv_format: str = "fp16") -> pd.DataFrame:
    """Capacity after each update pattern (allocsim), against the tokens actually held."""
    per_token = _trap_token_bytes(geometry, kv_format)
    rows = []
    for text in patterns:
        state = allocsim.simulate("KVCache", allocsim.parse_updates(text))
        rows.append({"updates": text, "tokens": state.offset, "capacity": state.capacity,
                     "allocated_mib": state.capacity * per_token / MIB, "used_mib": state.offset * per_token / MIB,
                     "slack_pct": 100 * (state.capacity - state.offset) / state.offset})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- 3 linear growth


def contexts(max_context: int, start: int = 1024) -> list[int]:
    """Powers of two from `start` to `max_context` (all multiples of 256)."""
    return [2**k for k in range(int(math.log2(start)), int(math.log2(max_context)) + 1)]


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


def decode_spread(points: pd.DataFrame, spread: str = "iqr", fallback: str | None = None) -> pd.DataFrame:
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


def chip_memory_bytes(chip: hardware.Chip) -> int | None:
    """The most memory a model may use on `chip`: its largest memory option (vendors' "GB" are GiB) within
    macOS's default GPU share on a Mac; None when the hardware table lists no sizes for it."""
    if not chip.memory_gb:
        return None
    gb, _ = hardware.gpu_memory_limit_gb(float(max(chip.memory_gb)), chip.unified)
    return int(gb * GIB)


def what_if(geometry: Geometry, weights_format: str, spec: KvSpec, chip: hardware.Chip, efficiency: float,
            max_context: int) -> pd.DataFrame:
    """Predicted tok/s vs context on a chip, at its peak bandwidth and at `efficiency` x peak: only at contexts the
    model supports (max_position_embeddings) and whose weights + KV fit in the chip's largest memory.

    Empty when not even the shortest context fits (e.g. Llama-3.1-70B in bf16 on an 80 GB GPU).
    """
    limit = min(max_context, geometry.max_position_embeddings or max_context)
    ctxs = sorted({*(t for t in contexts(max_context, 256) if t <= limit), limit})  # the model's own limit is drawn too
    memory = chip_memory_bytes(chip)
    if memory is not None:
        weights = weights_bytes(geometry, weights_format)
        ctxs = [t for t in ctxs if weights + kv_bytes(geometry, t, spec) <= memory]
    if not ctxs:
        return pd.DataFrame(columns=["context", "series", "tokens_per_s", "bytes_per_token"])
    frames = [pd.DataFrame(predict_decode(geometry, ctxs, spec, weights_format, chip.chip, share)).assign(series=series)
              for series, share in (("peak", 1.0), ("effective", efficiency))]
    return pd.concat(frames, ignore_index=True)[["context", "series", "tokens_per_s", "bytes_per_token"]]


# ---------------------------------------------------------------- 5 savings


def _with_kv_heads(geometry: Geometry, heads: int) -> Geometry:
    layers = tuple(dataclasses.replace(l, kv_heads=heads) if l.kind in ("full", "sliding") else l for l in geometry.layers)
    return dataclasses.replace(geometry, layers=layers)


def mla_mha_dims(config: dict) -> tuple[int, int] | None:
    """For an MLA model, the per-head K and V dims of the multi-head attention its latent replaces
    (qk_nope_head_dim + qk_rope_head_dim, v_head_dim), from its config.json; None for other models."""
    if not all(isinstance(config.get(k), int) for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")):
        return None
    return config["qk_nope_head_dim"] + config["qk_rope_head_dim"], config["v_head_dim"]


def heads_compare(geometry: Geometry, context: int, spec: KvSpec = KvSpec(), mha_dims: tuple[int, int] | None = None) -> pd.DataFrame:
    """KV bytes at `context` if every attention head kept its own K/V (MHA), as configured, or one shared (MQA).

    An MLA model caches one latent per token: compared with the MHA it replaces (every head's K and V at
    `mha_dims`, see mla_mha_dims) when those dims are known.
    """
    actual = max((l.kv_heads for l in geometry.layers if l.kind in ("full", "sliding")), default=0)
    if any(l.kind == "mla" for l in geometry.layers):
        variants = [("mha", geometry.num_attention_heads, _mla_as_mha(geometry, mha_dims))] if mha_dims else []
        variants.append(("mla", None, geometry))
    else:
        variants = [("mha", geometry.num_attention_heads), ("gqa" if 1 < actual < geometry.num_attention_heads else "this", actual), ("mqa", 1)]
        variants = [(name, heads, geometry if heads == actual else _with_kv_heads(geometry, heads)) for name, heads in variants]
    rows = [{"variant": name, "kv_heads": heads, "kv_bytes": kv_bytes(g, context, spec)} for name, heads, g in variants]
    df = pd.DataFrame(rows)
    df["gib"] = df["kv_bytes"] / GIB
    df["vs_mha"] = df["kv_bytes"] / df["kv_bytes"].max()
    return df


def _mla_as_mha(geometry: Geometry, dims: tuple[int, int]) -> Geometry:
    k_dim, v_dim = dims
    layers = tuple(dataclasses.replace(l, kind="full", kv_heads=geometry.num_attention_heads, k_dim=k_dim, v_dim=v_dim)
                   if l.kind == "mla" else l for l in geometry.layers)
    return dataclasses.replace(geometry, layers=layers)


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


def format_groups(geometry: Geometry, formats: list[str]) -> dict[str, str]:
    """Each format's legend name: formats that cost the same bytes per token on this model share one line and one
    name (mlx-q8 and q8_0 both take 8.5 bits per value at group 64 / block 32). Example: {"mlx-q8": "mlx-q8 = q8_0", ...}."""
    table = format_table(geometry, formats)
    names = {}
    for _, group in table.groupby("bytes_per_token", sort=False):
        label = " = ".join(group["format"])
        names.update({name: label for name in group["format"]})
    return names


def one_line_per_cost(curves: pd.DataFrame, geometry: Geometry) -> pd.DataFrame:
    """memory_curves rows with formats of equal cost (format_groups) kept once, under the group's name: the first
    format of each group draws its line. Example: mlx-q8 and q8_0 rows -> one "mlx-q8 = q8_0" line."""
    names = format_groups(geometry, list(dict.fromkeys(curves["format"])))
    drawn = {label: name for name, label in reversed(list(names.items()))}
    keep = curves["format"].map(lambda f: drawn.get(names.get(f), f) == f)
    return curves[keep].assign(format=curves.loc[keep, "format"].map(lambda f: names.get(f, f)))


def formats_curve(geometry: Geometry, formats: list[str], max_context: int) -> pd.DataFrame:
    """KV GiB vs context per format, one line per distinct cost (see one_line_per_cost)."""
    listed = list(format_table(geometry, formats)["format"])
    df = one_line_per_cost(pd.DataFrame(memory_curves(geometry, contexts(max_context), 0, 1, KvSpec(), listed)), geometry)
    return df.assign(gib=df["kv_bytes"] / GIB)[["context", "format", "gib"]]


def fits_table(geometry: Geometry, weights_format: str, memory_gib: float, formats: list[str], sequences: int = 1) -> pd.DataFrame:
    """Longest context per KV format that the calculator calls "fits" in `memory_gib` (vendors' "GB" of RAM are GiB),
    capped at the model's max_position_embeddings (`capped` says where the model, not the memory, sets the limit)."""
    weights, available = weights_bytes(geometry, weights_format), int(memory_gib * GIB)
    model_max = geometry.max_position_embeddings
    rows = []
    for name in format_table(geometry, formats)["format"]:
        memory_max = max_context(geometry, KvSpec(name, name), sequences, weights, available)
        capped = bool(model_max and memory_max > model_max)
        rows.append({"format": name, "max_context": model_max if capped else memory_max, "memory_max_context": memory_max,
                     "capped": capped})
    return pd.DataFrame(rows)


def turbo3_claims() -> pd.DataFrame:
    """Article B's 3.72 GiB against the fork's block layout (3.125 bits) and its older 3.5-bit comments."""
    item = figures()["turbo3_llama31_8b_131k"]
    geometry = preset_geometry(item["model"])
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
    g = preset_geometry(ARTICLE_MODEL)
    out = {"kv_per_token": kv_bytes_per_token(g), "kv_32k": kv_bytes(g, 32768),
           "weights_q4": weights_bytes(g, "mlx-q4", active=True), "crossover": crossover_context(g, "mlx-q4", KvSpec())}
    check = worked_check(rec) if rec is not None else None
    if check:
        out.update(check)
    return out


# ---------------------------------------------------------------- 4 decode: slowdown against the bytes model


def slowdown_vs_bytes(recs: list[Recording]) -> pd.DataFrame:
    """Every run's measured slowdown against what the bytes model predicts, one row per decode point.

    measured_slowdown = time per token at the context / at the run's shortest context (= tok/s there / here);
    predicted_slowdown = bytes read per token at the context / at the shortest (active weights + KV, with the
    run's own model, weights format and KV format). A memory-bound run sits on the identity line; one whose
    measured slowdown is steeper than its bytes (kernels, latency) sits above it. The first point of every
    run is (1, 1). Runs without a model geometry or with fewer than two points are left out.
    Example: Article A's M5 Pro run -> (1, 1) at 1,024 tokens, (2.43, 2.45) at 32,768.
    """
    frames = []
    for rec in recs:
        points = decode_points(rec)
        if len(points) < 2 or "bytes_per_token" not in points:
            continue
        points = points.sort_values("context", kind="stable").reset_index(drop=True)
        first = points.iloc[0]
        p = provenance(rec)
        frames.append(pd.DataFrame({
            "run": rec.short_label, "recording": rec.id, "kind": source_class(rec), "chip": p["chip"] or "—",
            "runtime": _runtime(rec), "model": p["model"],
            "context": points["context"].astype(int), "tokens_per_s": points["tokens_per_s"].astype(float),
            "ms_per_token": 1e3 / points["tokens_per_s"].astype(float),
            "bytes_per_token": points["bytes_per_token"].astype(int),
            "predicted_slowdown": points["bytes_per_token"] / first["bytes_per_token"],
            "measured_slowdown": first["tokens_per_s"] / points["tokens_per_s"],
        }))
    columns = ["run", "recording", "kind", "chip", "runtime", "model", "context", "tokens_per_s", "ms_per_token",
               "bytes_per_token", "predicted_slowdown", "measured_slowdown"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)


def _runtime(rec: Recording) -> str:
    """The engine a run used: a published run's runtime (name and version), a measured run's backend."""
    runtime = rec.data.get("runtime")
    if isinstance(runtime, dict):
        name, version = str(runtime.get("name", "")), str(runtime.get("version", ""))
        return version if version.lower().startswith(name.lower()) else " ".join(filter(None, (name, version)))
    prov = rec.data.get("provenance", {})
    return str(prov.get("backend") or rec.data.get("hardware", {}).get("backend") or "—")


def slowdown_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's last (longest-context) point of slowdown_vs_bytes, with measured ÷ predicted:
    1 on the identity line, above 1 when decode slows more than its bytes grow."""
    if frame.empty:
        return frame.assign(context_first=[], ratio=[])
    first = frame.groupby("recording", sort=False)["context"].min().rename("context_first")
    last = frame.loc[frame.groupby("recording", sort=False)["context"].idxmax()].join(first, on="recording")
    return last.assign(ratio=last["measured_slowdown"] / last["predicted_slowdown"]).reset_index(drop=True)
