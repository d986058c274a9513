"""One cached function per page section: cheap keys in (widget values, language, recordings), everything
the section shows out (chart with Arrow data, tables, numbers), so a rerun only re-sends it.

Results are shared between reruns and sessions (kvsite.data.section_cache, a cheaper st.cache_resource: no
copy per rerun): treat them as read-only. Recordings key by content, once per recording object.
Example: mechanism_work(16, 50, False, "en")["with"] -> 50 rows computed with a cache.
"""

from __future__ import annotations

import pandas as pd

from kvcore import calculator, hardware, views
from kvcore.errors import KvError
from kvcore.formulas import KvSpec, formula_text
from kvcore.recordings import Recording

from . import i18n
from .data import arrow, section_cache
from .export import make_chart

cached = section_cache(max_entries=64)


def _tr(lang: str, prefix: str):
    return lambda v: i18n.translate(lang, f"{prefix}{v}")


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
def chunking(fmt: str, patterns: tuple[str, ...], custom: str) -> tuple:
    """(Arrow table, error text or None): the reader's pattern added unless it is one of ours or invalid."""
    g = views.load_geometry(views.ARTICLE_MODEL)
    try:
        return arrow(views.chunking_table(g, [*patterns, custom] if custom not in patterns else list(patterns), fmt)), None
    except KvError as e:
        return arrow(views.chunking_table(g, list(patterns), fmt)), str(e)


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


# ---------------------------------------------------------------- 5 savings


@cached
def heads(model: str, ctx: int, lang: str) -> dict:
    df = views.heads_compare(views.load_geometry(model), ctx)
    df["variant"] = df["variant"].map(_tr(lang, "savings.variant_"))
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    return {"chart": make_chart(df, "bar_chart", df, "variant", "gib", "variant", t("savings.variant"), "GiB",
                                extra_tooltip=("kv_heads", "vs_mha"))}


@cached
def formats(model: str, fmts: tuple[str, ...], ctx: int, lang: str) -> dict:
    g = views.load_geometry(model)
    curve = views.formats_curve(g, list(fmts), max(ctx, 8192))
    t = lambda k: i18n.translate(lang, k)  # noqa: E731
    return {"chart": make_chart(curve, "series_chart", curve, "context", "gib", "format", t("common.context"), "GiB",
                                log_x=True, log_y=True),
            "table": arrow(views.format_table(g, list(fmts)))}


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
    claims["claim"] = claims["claim"].map(_tr(lang, "savings.claim_"))
    return {"claims": arrow(claims), "padding": arrow(views.turbo_padding())}


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
