"""One cached function per page section: cheap keys in (widget values, language, recordings), everything
the section shows out (chart with Arrow data, tables, numbers), so a rerun only re-sends it.

Results are shared between reruns and sessions (kvsite.data.section_cache, a cheaper st.cache_resource: no
copy per rerun): treat them as read-only. Recordings key by content, once per recording object.
Example: mechanism_work(16, 50, False, "en")["with"] -> 50 rows computed with a cache.
"""

from __future__ import annotations

import pandas as pd

from kvcore import allocsim, calculator, hardware, views
from kvcore.decode_model import FAR_BELOW_PEAK, Fit
from kvcore.errors import KvError
from kvcore.formats import FORMATS
from kvcore.formulas import KvSpec, formula_text
from kvcore.published import figures
from kvcore.recordings import Recording

from . import i18n
from .data import arrow, md_table, section_cache
from .export import make_chart

cached = section_cache(max_entries=64)


def _tr(lang: str, prefix: str):
    return lambda v: i18n.translate(lang, f"{prefix}{v}")


# ---------------------------------------------------------------- facts the prose quotes


@cached
def article_geometry() -> dict:
    """Article A's model as the prose states it (shared: read it, never change it): layers, KV heads, head_dim, fp16 bytes per value, block step."""
    g = views.load_geometry(views.ARTICLE_MODEL)
    first = next(layer for layer in g.layers if layer.kind == "full")
    return {"layers": g.count("full"), "kv_heads": first.kv_heads, "head_dim": first.k_dim,
            "value_bytes": FORMATS["fp16"].bits // 8, "step": allocsim.STEP, "step_next": allocsim.STEP + 1}


def _k(tokens: int) -> str:
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else f"{tokens:,}"


def home_decode(rec: Recording | None, numbers: dict) -> dict:
    """The home page's decode labels: first/last context of the worked check, the recording's chip and model."""
    p = views.provenance(rec) if rec is not None else {"chip": "", "model": ""}
    vendor = rec.data.get("hardware", {}).get("vendor", "") if rec is not None else ""
    return {"a": _k(numbers["context_a"]), "b": _k(numbers["context_b"]), "chip": " ".join(filter(None, (vendor, p["chip"]))),
            "model": p["model"].split("/")[-1]}


@cached
def article_trap(rec: Recording | None) -> dict | None:
    """Article A's own trap figures at the block edge (allocated and used MiB), from its recording's rows."""
    rows = {r["tokens"]: r for r in rec.rows("trap")} if rec is not None else {}
    a, b = rows.get(allocsim.STEP), rows.get(allocsim.STEP + 1)
    if a is None or b is None:
        return None
    return {"alloc_a": a["allocated_mib"], "alloc_b": b["allocated_mib"], "used_a": a["used_mib"], "used_b": b["used_mib"]}


@cached
def chunk_examples(patterns: tuple[tuple[int, ...], ...]) -> dict:
    """{p1: '1 + 256', c1: 257, ...}: the capacity mlx_lm's allocator ends at for each update pattern (allocsim)."""
    out = {"step": allocsim.STEP}
    for i, updates in enumerate(patterns, 1):
        out[f"p{i}"] = " + ".join(str(n) for n in updates)
        out[f"c{i}"] = allocsim.simulate("KVCache", list(updates)).capacity
    return out


def verdict_text(fit: Fit, lang: str) -> str:
    """The decode fit's verdict in `lang`, from its code and numbers (Fit.verdict is the English CLI sentence)."""
    t = lambda k, **v: i18n.translate(lang, f"decode.verdict_{k}", **v)  # noqa: E731
    nums = {"bw": fit.bandwidth_gbps, "peak": fit.peak_gbps or 0, "rms": f"{fit.rms_residual:.0%}", "limit": f"{FAR_BELOW_PEAK:.0%}"}
    text = t(fit.verdict_code, **nums)
    if fit.verdict_code == "memory_bound":
        if fit.peak_gbps:
            text += " " + t("share", share=f"{fit.bandwidth_gbps / fit.peak_gbps:.0%}", peak=fit.peak_gbps)
        if fit.overhead_s > 0:
            text += " " + t("overhead", ms=fit.overhead_s * 1e3)
    return text


@cached
def published_numbers() -> dict:
    """The quoted trade-off figures of kvcore/published.yaml, by the names the prose uses."""
    p = figures()
    quality = {r["outcome"]: r["bits_per_channel"] for r in p["turboquant_quality"]["results"]}
    return {"lo": p["turbo3_speed"]["drop_pct_low"], "hi": p["turbo3_speed"]["drop_pct_high"],
            "speedup": p["turboquant_kernel"]["speedup_max"], "kernel_bits": p["turboquant_kernel"]["bits"],
            "q_same": quality["same"], "q_lower": quality["slightly_lower"]}


# ---------------------------------------------------------------- 1 mechanism


@cached
def mechanism_work(prompt: int, new: int, per_step: bool, lang: str) -> dict:
    work = views.mechanism_work(prompt, new)
    y = "rows_per_step" if per_step else "cumulative_rows"
    data = work.assign(mode=work["mode"].map(_tr(lang, "mechanism.")))[["step", "mode", y]]
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    last = work[work["step"] == new].set_index("mode")["cumulative_rows"]
    return {"chart": make_chart(data, "series_chart", data, "step", y, "mode", t("mechanism.x_step"), t(f"mechanism.y_{y}")),
            "with": int(last["with_cache"]), "without": int(last["without_cache"])}


@cached
def mechanism_measured(recs: list[Recording], rec_id: str, lang: str) -> dict:
    measured = views.mechanism_measured(recs)
    measured["mode"] = measured["mode"].map(lambda m: i18n.translate(lang, f"mechanism.{m.removesuffix('_s')}"))
    row = measured[measured["recording"] == rec_id].iloc[0]
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    return {"chart": make_chart(measured, "grouped_bars", measured, "source", "mode", "seconds", t("mechanism.run"),
                                t("mechanism.seconds")),
            "new_tokens": int(row["new_tokens"]), "speedup": float(row["speedup"])}


# ---------------------------------------------------------------- 2 the .nbytes trap


def trap_chart(tokens: int, fmt: str, lang: str, points: pd.DataFrame | None) -> dict:
    """The simulated curve (and measured points, already cut at `tokens`), the 256/257 numbers."""
    sim = views.trap_curve(views.load_geometry(views.ARTICLE_MODEL), tokens, fmt)
    series = lambda d: d.assign(series=d["series"].map(_tr(lang, "trap.")))  # noqa: E731
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    data = series(sim.assign(source=t("trap.simulated")))
    pts = series(points) if points is not None and not points.empty else None
    table = data if pts is None else pd.concat([data, pts], ignore_index=True)
    at = sim.pivot_table(index="tokens", columns="series", values="mib")
    return {"chart": make_chart(table, "series_chart", data, "tokens", "mib", "series", t("trap.x"), "MiB", points=pts,
                                step=True, dashed=t("trap.theory")),
            "at": {(n, s): float(at.loc[n, s]) for n in (256, 257) for s in ("allocated", "used")}}


@cached
def trap_recorded(tokens: int, fmt: str, lang: str, recs: list[Recording]) -> dict:
    """trap_chart with the points of every recording with a trap section (fp16 only; none: recs empty)."""
    points = None
    if recs:
        points = views.trap_measured(recs)
        points = points[points["tokens"] <= tokens]
    return trap_chart(tokens, fmt, lang, points)


@cached
def chunking(fmt: str, patterns: tuple[str, ...], custom: str, lang: str) -> tuple:
    """(markdown table, error text or None): the reader's pattern added unless it is one of ours or invalid."""
    g = views.load_geometry(views.ARTICLE_MODEL)
    error = None
    try:
        rows = views.chunking_table(g, [*patterns, custom] if custom not in patterns else list(patterns), fmt)
    except KvError as e:
        rows, error = views.chunking_table(g, list(patterns), fmt), i18n.error_text(lang, e)
    t = lambda k: i18n.translate(lang, f"trap.col_{k}")  # noqa: E731
    return md_table(rows, {"updates": (t("updates"), "`{}`"), "tokens": (t("tokens"), "{:,}"), "capacity": (t("capacity"), "{:,}"),
                           "allocated_mib": (t("alloc"), "{:.3f}"), "used_mib": (t("used"), "{:.3f}"),
                           "slack_pct": (t("slack"), "{:.1f} %")}), error


# ---------------------------------------------------------------- 3 linear growth


@cached
def growth(model: str, ctx: int, weights: str, kv: str, seqs: int, lang: str, rec: Recording | None) -> dict:
    """Formula, allocated / used / theory / weights curve (with the recording's points when it is this model)."""
    g, spec = views.load_geometry(model), KvSpec(kv, kv)
    curve = views.growth_curve(g, ctx, spec, weights, seqs)
    points = None
    if rec is not None and rec.data["model"].get("preset") == model and kv == rec.data["model"].get("kv_format") and seqs == 1:
        points = views.growth_measured([rec])
    name = lambda d: d.assign(series=d["series"].map(_tr(lang, "growth.")))  # noqa: E731
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    data = name(curve)[["context", "series", "gib", "bytes"]]
    pts = name(points)[["context", "series", "gib", "source"]] if points is not None and not points.empty else None
    top = curve[curve["context"] == curve["context"].max()].set_index("series")["bytes"]
    return {"formula": formula_text(g, ctx, spec, seqs),
            "chart": make_chart(data, "series_chart", data, "context", "gib", "series", t("common.context"), "GiB", points=pts,
                                log_x=True, log_y=True, dashed=t("growth.theory")),
            "points": points is not None, "max_context": int(curve["context"].max()),
            "used": int(top["used"]), "weights": int(top["weights"]),
            "crossover": views.crossover_context(g, weights, spec, seqs)}


@cached
def growth_layers(model: str, ctx: int, kv: str, seqs: int, lang: str) -> dict:
    layers = views.per_layer(views.load_geometry(model), ctx, KvSpec(kv, kv), seqs)
    layers["kind"] = layers["kind"].map(_tr(lang, "growth.kind_"))
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    return {"chart": make_chart(layers, "bar_chart", layers.assign(layer=layers["layer"].astype(str)), "layer", "mib", "kind",
                                t("growth.layer"), "MiB", extra_tooltip=("tokens_held",),
                                sort=[str(i) for i in layers["layer"]], height={"step": 11})}


# ---------------------------------------------------------------- 4 decode slowdown


@cached
def decode(runs: list[Recording], lang: str) -> dict | None:
    """Measured points and fitted curves of every run; the first run's worked check, fit and chip. None: no model."""
    fits = [views.decode_fit(r) for r in runs]
    pts = [views.decode_points(r) for r, fit in zip(runs, fits) if fit is not None]
    if not pts:
        return None
    points = pd.concat(pts, ignore_index=True)
    lines = pd.concat([fit[1] for fit in fits if fit is not None], ignore_index=True)
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    chart = make_chart(points, "series_chart", lines.assign(series=lines["source"]), "context", "tokens_per_s", "series",
                       t("common.context"), "tokens/s", points=points.assign(series=points["source"]), log_x=True, log_y=True)
    rec = runs[0]
    return {"chart": chart, "fit": fits[0] and fits[0][0], "check": fits[0] and views.worked_check(rec),
            "chip": fits[0] and views.chip_for(rec)}


@cached
def default_efficiency(rec: Recording | None) -> float:
    """The efficiency Article A's run implies on its M5 Pro (the calculator's assumption without it)."""
    return round(calculator.efficiency([rec] if rec is not None else []).share, 2)


@cached
def what_if(chip: str, model: str, weights: str, eff: float, lang: str) -> dict:
    pred = views.what_if(views.load_geometry(model), weights, KvSpec(), hardware.get_chip(chip), eff, 131072)
    pred["series"] = pred["series"].map(_tr(lang, "decode."))
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    return {"chart": make_chart(pred, "series_chart", pred, "context", "tokens_per_s", "series", t("common.context"), "tokens/s",
                                log_x=True, log_y=True)}


@cached
def slowdown_vs_bytes(recs: list[Recording], lang: str) -> dict | None:
    """Every run's measured slowdown against the bytes model's (views.slowdown_vs_bytes): the chart, a table of
    each run's longest context, and the runs shown. None when no run has two points and a model."""
    frame = views.slowdown_vs_bytes(recs)
    if frame.empty:
        return None
    t = lambda k: i18n.translate(lang, f"decode.{k}")  # noqa: E731
    chart = make_chart(frame, "slowdown_scatter", frame, "predicted_slowdown", "measured_slowdown", "run", t("sb_x"), t("sb_y"),
                       t("sb_identity"), tooltip=("chip", "runtime", "model", "context", "tokens_per_s"))
    summary = views.slowdown_summary(frame)
    table = md_table(summary, {"run": (t("sb_run"), None), "context_first": (t("sb_from"), "{:,}"),
                               "context": (t("sb_to"), "{:,}"), "predicted_slowdown": (t("sb_predicted"), "{:.2f}×"),
                               "measured_slowdown": (t("sb_measured"), "{:.2f}×"), "ratio": (t("sb_ratio"), "{:.2f}")})
    return {"chart": chart, "table": table, "runs": tuple(summary["run"])}


# ---------------------------------------------------------------- 5 savings


@cached
def heads(model: str, ctx: int, lang: str) -> dict:
    """The MHA / this model / MQA chart and one sentence on this model's own query and KV heads."""
    g = views.load_geometry(model)
    df = views.heads_compare(g, ctx)
    df["variant"] = df["variant"].map(_tr(lang, "savings.variant_"))
    t = lambda k, **v: i18n.translate(lang, k, **v)  # noqa: E731
    mla = next((layer for layer in g.layers if layer.kind == "mla"), None)
    kv = max((layer.kv_heads for layer in g.layers if layer.kind in ("full", "sliding")), default=0)
    if mla is not None:
        text = t("savings.heads_mla", model=model, latent=mla.k_dim, rope=mla.v_dim)
    elif kv and kv < g.num_attention_heads:
        text = t("savings.heads_shared", model=model, q_heads=g.num_attention_heads, kv_heads=kv, ratio=g.num_attention_heads // kv)
    else:
        text = t("savings.heads_mha", model=model, q_heads=g.num_attention_heads)
    return {"chart": make_chart(df, "bar_chart", df, "variant", "gib", "variant", t("savings.variant"), "GiB",
                                extra_tooltip=("kv_heads", "vs_mha")), "text": text}


@cached
def formats(model: str, fmts: tuple[str, ...], ctx: int, lang: str) -> dict:
    g = views.load_geometry(model)
    curve = views.formats_curve(g, list(fmts), max(ctx, 8192))
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    return {"chart": make_chart(curve, "series_chart", curve, "context", "gib", "format", t("common.context"), "GiB",
                                log_x=True, log_y=True),
            "table": md_table(views.format_table(g, list(fmts)), {
                "format": (t("savings.format"), None), "bits_per_value": (t("savings.bits"), "{:.3f}"),
                "bytes_per_token": (t("savings.bytes_token"), "{:,}"), "vs_fp16": ("× fp16", "{:.3f}"),
                "source": (t("savings.source"), None)})}


@cached
def fits(model: str, weights: str, mem: float, fmts: tuple[str, ...], lang: str) -> dict | None:
    """Longest context per format beside the weights; None when nothing fits."""
    df = views.fits_table(views.load_geometry(model), weights, mem, list(fmts))
    if df["max_context"].max() == 0:
        return None
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    return {"chart": make_chart(df, "bar_chart", df, "format", "max_context", "format", t("savings.format"), t("savings.max_context"))}


@cached
def turbo(lang: str) -> dict:
    claims = views.turbo3_claims()
    item, fmt = figures()["turbo3_llama31_8b_131k"], FORMATS["turbo3"]
    by = claims.set_index("claim")
    values = {"model": item["model"], "context": item["context"], "fp16_gib": by.loc["article_b", "gib"] * by.loc["article_b", "vs_fp16"],
              "b_gib": by.loc["article_b", "gib"], "b_bits": by.loc["article_b", "bits_per_value"], "ratio": item["ratio_vs_f16"],
              "block_values": fmt.block_values, "block_bytes": fmt.block_bytes, "block_bits": by.loc["block_layout", "bits_per_value"],
              "block_gib": by.loc["block_layout", "gib"], "header_bits": by.loc["header_comment", "bits_per_value"]}
    claims["claim"] = claims["claim"].map(_tr(lang, "savings.claim_"))
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    return {"claims": md_table(claims, {"claim": (t("savings.claim"), None), "bits_per_value": (t("savings.bits"), "{:.3f}"),
                                        "gib": ("GiB", "{:.3f}"), "vs_fp16": ("fp16 ÷", "{:.2f}"), "source": (t("savings.source"), None)}),
            "padding": md_table(views.turbo_padding(), {"format": (t("savings.format"), None), "head_dim_128": (t("savings.hd128"), "{:.3f}"),
                                                        "head_dim_64": (t("savings.hd64"), "{:.3f}")}),
            "text": i18n.translate(lang, "savings.turbo_text", **values)}


@cached
def benchmark(rec: Recording, lang: str) -> dict:
    rows = views.section_frame([rec], "benchmark")
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    return {"chart": make_chart(rows, "bar_chart", rows, "name", "tokens_per_s", "name", t("savings.weights_precision"), "tokens/s",
                                extra_tooltip=("peak_memory_gb",), sort=list(rows["name"]))}


# ---------------------------------------------------------------- recordings


@cached
def recordings_table(recs: list[Recording], local_ids: tuple[str, ...]) -> object:
    return arrow(views.recordings_table(recs, set(local_ids)))


@cached
def recording_sections(rec: Recording) -> list[tuple]:
    """(section, rows, Arrow table) per section of one recording."""
    out = []
    for section in rec.data["sections"]:
        rows = views.section_frame([rec], section).drop(columns=["source", "recording"])
        out.append((section, rows, arrow(rows)))
    return out


@cached
def compare(recs: list[Recording], lang: str) -> dict:
    rows = views.section_frame(recs, "decode")
    return {"chart": make_chart(rows, "series_chart", None, "context", "tokens_per_s", "source",
                                i18n.translate(lang, "common.context"), "tokens/s", points=rows, log_x=True, log_y=True)}
