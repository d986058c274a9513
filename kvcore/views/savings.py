"""The Savings chapter's frames: what a smaller cache saves (fewer KV heads, MLA, each format's
bytes, what fits in a chip's memory, TurboQuant's claims and padding) and what it costs a real
model (quality against bytes per token, by context, the answers), from the engine and recordings.

Example: fits_table(preset_geometry("llama-3.1-8b"), "mlx-q4", 36, ["fp16", "turbo3"]) -> one row per
format with the longest context whose weights + KV stay within the 27 GiB the GPU may use on a 36 GB Mac.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

from kvcore.capacity.calculator import max_context_kv_only
from kvcore.capacity.memory_fit import gpu_limit
from kvcore.errors import KvError
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import FORMATS, KvSpec, get_format, padding_formats
from kvcore.memory.formulas import kv_bytes, kv_bytes_per_token, weights_bytes
from kvcore.model.geometry import Geometry
from kvcore.recordings.published import figures
from kvcore.recordings.store import Recording
from kvcore.units import GIB

# ---------------------------------------------------------------- 5 savings
from kvcore.views.what_if import doubling_contexts, memory_curves

# ---------------------------------------------------------------- 5 savings


def _with_kv_heads(geometry: Geometry, heads: int) -> Geometry:
    layers = tuple(
        dataclasses.replace(x, kv_heads=heads) if x.kind in ("full", "sliding") else x
        for x in geometry.layers
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
    actual = max((x.kv_heads for x in geometry.layers if x.kind in ("full", "sliding")), default=0)
    if any(x.kind == "mla" for x in geometry.layers):
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
            x, kind="full", kv_heads=geometry.num_attention_heads, k_dim=k_dim, v_dim=v_dim
        )
        if x.kind == "mla"
        else x
        for x in geometry.layers
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
        dim = next((x.k_dim for x in geometry.layers if x.kind in ("full", "sliding", "mla")), 128)
        rows.append(
            {
                "format": name,
                "bits_per_value": get_format(name).bits_per_value(dim),
                "bytes_per_token": per,
                "vs_fp16": per / fp16
                if fp16
                else 1.0,  # no attention layer: every format costs 0 B per token
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
    ram_gb: float,
    formats: list[str],
    sequences: int = 1,
) -> pd.DataFrame:
    """Longest context per KV format whose weights + KV stay within the memory the GPU may use on a Mac with
    `ram_gb` GB of RAM (kvcore.capacity.memory_fit.gpu_limit: macOS's default working set; vendors' "GB" of RAM are
    GiB), nothing else counted: an upper bound that compares the formats by their bytes alone (the Calculator counts
    everything the runtime holds), capped at the model's max_position_embeddings (`capped` says where the model,
    not the memory, sets the limit)."""
    weights, available = weights_bytes(geometry, weights_format), gpu_limit(ram_gb).bytes
    model_max = geometry.max_position_embeddings
    rows = []
    for name in format_table(geometry, formats)["format"]:
        memory_max = max_context_kv_only(
            geometry, KvSpec(name, name), sequences, weights, available
        )
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


# ---------------------------------------------------------------- 6 savings: what a smaller cache costs


# the quality rows' optional numbers (kvcore.recordings.schema), present as columns whether a run gave them or not
QUALITY_OPTIONAL = ("bits", "group_size", "quantized_kv_start", "bytes_per_token", "seconds")


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
        for (
            name
        ) in QUALITY_OPTIONAL:  # an optional number a run left out is missing (NaN), not a KeyError
            if name not in df:
                df[name] = float("nan")
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
    from kvcore.runtimes.registry import engine_runtime

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


# the metrics the price-against-context chart offers, in the order its choice lists them
LONG_METRICS = ("kl_mean", "kl_p99", "top1_agreement")


def long_context(
    recs: list[Recording], scope: str = "window", both_quantized: bool = True
) -> pd.DataFrame:
    """Each quantized cache's figures against context length from runs with a long_context section, one row per
    run, format, length and metric (LONG_METRICS, long: a chart picks one): scope "window" prices a token that
    deep (positions [L - 512, L)), "prefix" the whole first L positions. The baseline (KL 0) is left out, and
    with `both_quantized` a cache with one half unquantized (llama.cpp's f16/q4_0): mlx_lm quantizes K and V
    alike, so these are the caches both runtimes have."""
    frames = []
    for r in recs:
        df = pd.DataFrame(r.rows("long_context"))
        if df.empty:
            continue
        df = df[(df["scope"] == scope) & (df["kl_mean"] > 0)]
        for name in ("group_size", "v_format"):  # optional: NaN where a run left it out
            if name not in df:
                df[name] = float("nan")
        if both_quantized:
            df = df[
                [_quantized(k) and _quantized(v) for k, v in zip(df["kv_format"], df["v_format"])]
            ]
        frames.append(
            df.assign(
                runtime=quality_runtime(r),
                recording=r.id,
                source=r.label,
                format=df.get("label", df["kv_format"]),
                context=df["end"],
            )
        )
    if not frames:
        return pd.DataFrame()
    wide = pd.concat(frames, ignore_index=True)
    keep = ["runtime", "recording", "source", "format", "kv_format", "v_format", "group_size"]
    keep += ["context", "start", "end", "perplexity"]
    return wide.melt(keep, list(LONG_METRICS), "metric", "value").sort_values(
        ["metric", "runtime", "format", "context"], ignore_index=True
    )


def _quantized(name) -> bool:
    """A cache format stored in fewer bits than its values (NaN, a V the row did not name apart, counts as K's)."""
    return not isinstance(name, str) or get_format(name).kind != "plain"


def baseline_reach(rec: Recording) -> tuple[int, int] | None:
    """(the longest context up to which the run's baseline answers every question right, the first at which it
    misses one), or None where it is right at every length: past that length the check shows the model's own
    limit, not a cache's. Example: SmolLM2-135M's secret code -> (2048, 4096) in a run to 8,192 tokens."""
    rows = rec.rows("retrieval")
    if not rows:
        return None
    base = rows[0]["label"]
    right: dict[int, bool] = {}
    for r in rows:
        if r["label"] == base:
            right[r["context"]] = right.get(r["context"], True) and bool(r["correct"])
    missed = [c for c in sorted(right) if not right[c]]
    if not missed:
        return None
    reached = [c for c in sorted(right) if c < missed[0]]
    return (reached[-1] if reached else 0), missed[0]


def retrieval(rec: Recording) -> pd.DataFrame:
    """A run's retrieval answers: one row per question, context and format (the baseline first, as recorded)."""
    return pd.DataFrame(rec.rows("retrieval"))
