"""DataFrames for the site's chapters, built from the engine and from recordings (no Streamlit).

Every number a page shows comes from here, from a recording, or from kvcore/published.yaml.
Long-form frames (one row per point and series) feed kvcore.charts directly.
Example: trap_curve(preset_geometry("llama-3.2-1b"), 300) -> allocated jumps 8.0 -> 16.0 MiB at 257.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from . import allocsim
from .calculator import doubling_contexts, max_context, memory_curves
from .decode_model import worked_check
from .errors import KvError
from .formats import FORMATS, get_format, padding_formats
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
from .recordings import Recording
from .units import GIB, MIB

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


def trap_format(rec: Recording) -> str:
    """The cache format a recording's trap section measured (its method, else its geometry's or model's KV format)."""
    method = rec.data.get("method", {})
    trap = method.get("trap", {}) if isinstance(method, dict) else {}
    model = rec.data["model"]
    return str(
        (trap.get("kv_dtype") if isinstance(trap, dict) else None)
        or model.get("geometry_kv_format")
        or model.get("kv_format")
        or "fp16"
    )


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
                "slack_pct": 100 * (state.capacity - state.offset) / state.offset,
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


# ---------------------------------------------------------------- 5 savings


def _with_kv_heads(geometry: Geometry, heads: int) -> Geometry:
    layers = tuple(
        dataclasses.replace(l, kv_heads=heads) if l.kind in ("full", "sliding") else l
        for l in geometry.layers
    )
    return dataclasses.replace(geometry, layers=layers)


def mla_mha_dims(config: dict) -> tuple[int, int] | None:
    """For an MLA model, the per-head K and V dims of the multi-head attention its latent replaces
    (qk_nope_head_dim + qk_rope_head_dim, v_head_dim), from its config.json; None for other models."""
    if not all(
        isinstance(config.get(k), int)
        for k in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
    ):
        return None
    return config["qk_nope_head_dim"] + config["qk_rope_head_dim"], config["v_head_dim"]


def heads_compare(
    geometry: Geometry,
    context: int,
    spec: KvSpec = KvSpec(),
    mha_dims: tuple[int, int] | None = None,
) -> pd.DataFrame:
    """KV bytes at `context` if every attention head kept its own K/V (MHA), as configured, or one shared (MQA).

    An MLA model caches one latent per token: compared with the MHA it replaces (every head's K and V at
    `mha_dims`, see mla_mha_dims) when those dims are known.
    """
    actual = max((l.kv_heads for l in geometry.layers if l.kind in ("full", "sliding")), default=0)
    if any(l.kind == "mla" for l in geometry.layers):
        variants = (
            [("mha", geometry.num_attention_heads, _mla_as_mha(geometry, mha_dims))]
            if mha_dims
            else []
        )
        variants.append(("mla", None, geometry))
    else:
        variants = [
            ("mha", geometry.num_attention_heads),
            ("gqa" if 1 < actual < geometry.num_attention_heads else "this", actual),
            ("mqa", 1),
        ]
        variants = [
            (name, heads, geometry if heads == actual else _with_kv_heads(geometry, heads))
            for name, heads in variants
        ]
    rows = [
        {"variant": name, "kv_heads": heads, "kv_bytes": kv_bytes(g, context, spec)}
        for name, heads, g in variants
    ]
    df = pd.DataFrame(rows)
    df["gib"] = df["kv_bytes"] / GIB
    df["vs_mha"] = df["kv_bytes"] / df["kv_bytes"].max()
    return df


def _mla_as_mha(geometry: Geometry, dims: tuple[int, int]) -> Geometry:
    k_dim, v_dim = dims
    layers = tuple(
        dataclasses.replace(
            l, kind="full", kv_heads=geometry.num_attention_heads, k_dim=k_dim, v_dim=v_dim
        )
        if l.kind == "mla"
        else l
        for l in geometry.layers
    )
    return dataclasses.replace(geometry, layers=layers)


def misfits(geometry: Geometry, formats: list[str]) -> dict[str, KvError]:
    """The formats that cannot store this model's cache, each with the engine's refusal (format_table leaves them
    out). Example: misfits(preset_geometry("phi-3-mini-4k"), ["fp16", "mlx-q4"]) -> {"mlx-q4": KvError(...)}."""
    out = {}
    for name in formats:
        try:
            kv_bytes_per_token(geometry, KvSpec(name, name))
        except KvError as e:
            out[name] = e
    return out


def format_table(
    geometry: Geometry, formats: list[str], activation_dtype: str = "fp16"
) -> pd.DataFrame:
    """Bits per value and bytes per token for each format on this model (padding included); skips misfits (misfits())."""
    rows = []
    fp16 = kv_bytes_per_token(geometry, KvSpec(activation_dtype=activation_dtype))
    for name in formats:
        try:
            per = kv_bytes_per_token(
                geometry, KvSpec(name, name, activation_dtype=activation_dtype)
            )
        except KvError:
            continue
        dim = next((l.k_dim for l in geometry.layers if l.kind in ("full", "sliding", "mla")), 128)
        rows.append(
            {
                "format": name,
                "bits_per_value": get_format(name).bits_per_value(dim),
                "bytes_per_token": per,
                "vs_fp16": per / fp16,
                "source": get_format(name).source,
            }
        )
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
    df = one_line_per_cost(
        pd.DataFrame(
            memory_curves(geometry, doubling_contexts(max_context), 0, 1, KvSpec(), listed)
        ),
        geometry,
    )
    return df.assign(gib=df["kv_bytes"] / GIB)[["context", "format", "gib"]]


def fits_table(
    geometry: Geometry,
    weights_format: str,
    memory_gib: float,
    formats: list[str],
    sequences: int = 1,
) -> pd.DataFrame:
    """Longest context per KV format that the calculator calls "fits" in `memory_gib` (vendors' "GB" of RAM are GiB),
    capped at the model's max_position_embeddings (`capped` says where the model, not the memory, sets the limit)."""
    weights, available = weights_bytes(geometry, weights_format), int(memory_gib * GIB)
    model_max = geometry.max_position_embeddings
    rows = []
    for name in format_table(geometry, formats)["format"]:
        memory_max = max_context(geometry, KvSpec(name, name), sequences, weights, available)
        capped = bool(model_max and memory_max > model_max)
        rows.append(
            {
                "format": name,
                "max_context": model_max if capped else memory_max,
                "memory_max_context": memory_max,
                "capped": capped,
            }
        )
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
            gib = (
                kv_bytes(geometry, item["context"], KvSpec(claim["format"], claim["format"])) / GIB
            )
            bits = get_format(claim["format"]).bits_per_value(geometry.layers[0].k_dim)
        else:
            bits = claim["bits_per_value"]
            gib = fp16 * bits / 16 / GIB
        rows.append(
            {
                "claim": claim["id"],
                "bits_per_value": bits,
                "gib": gib,
                "vs_fp16": fp16 / GIB / gib,
                "source": figures()["sources"][claim["source"]],
            }
        )
    return pd.DataFrame(rows)


def turbo_padding() -> pd.DataFrame:
    """Bits per value of the turbo formats at head_dim 128 and at head_dim 64 padded to one 128-value block."""
    return pd.DataFrame(
        [
            {
                "format": n,
                "head_dim_128": FORMATS[n].bits_per_value(128),
                "head_dim_64": FORMATS[n].bits_per_value(64),
            }
            for n in sorted(padding_formats(), reverse=True)
        ]
    )


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


# ---------------------------------------------------------------- 6 savings: what a smaller cache costs


def quality_trade(recs: list[Recording]) -> pd.DataFrame:
    """Each KV format of each run with a quality section, at the run's largest scored length: bytes per token
    (measured from the cache, or by llama.cpp's rules for its preallocated one), KL from the run's own baseline,
    top-1 agreement, perplexity, and the runtime that ran it."""
    frames = []
    for r in recs:
        rows = r.rows("quality")
        if not rows:
            continue
        longest = max(row["tokens"] for row in rows)
        df = pd.DataFrame([row for row in rows if row["tokens"] == longest])
        frames.append(
            df.assign(
                source=r.label,
                recording=r.id,
                runtime=quality_runtime(r),
                format=df.get("label", df["kv_format"]),
            )
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def quality_runtime(rec: Recording) -> str:
    """The runtime a quality run measured: its recording's runtime (mlx_lm's runs name none: the default)."""
    from .runtimes import engine_runtime

    return engine_runtime((rec.data.get("runtime") or {}).get("name", "")).name


def quality_model(rec: Recording) -> str:
    """The model a run scored, as the bundled preset it is (a GGUF run names the preset its geometry equals)."""
    model = rec.data.get("model") or {}
    return str(model.get("preset") or model.get("name", ""))


def quality_companions(rec: Recording, recs: list[Recording]) -> list[Recording]:
    """The other runtimes' quality runs on the same model as `rec` (one per runtime, the first found), to show
    beside it: two runtimes' KV formats on one chart."""
    seen = {quality_runtime(rec)}
    out = []
    for other in recs:
        runtime = quality_runtime(other)
        if (
            other.has("quality")
            and runtime not in seen
            and quality_model(other) == quality_model(rec)
        ):
            seen.add(runtime)
            out.append(other)
    return out


def quality_by_context(rec: Recording) -> pd.DataFrame:
    """One run's figures per format at every scored length (the price against context), quantized formats only."""
    df = pd.DataFrame(rec.rows("quality"))
    if df.empty or "bits" not in df:
        return pd.DataFrame()
    df = df[df["bits"].notna()]
    return df.assign(format=df.get("label", df["kv_format"])).sort_values(
        ["format", "tokens"], ignore_index=True
    )


def quality_answers(rec: Recording) -> dict[str, list[dict]]:
    """A run's answers grouped by prompt, the baseline first (as recorded)."""
    out: dict[str, list[dict]] = {}
    for row in rec.rows("answers"):
        out.setdefault(row["prompt"], []).append(row)
    return out
