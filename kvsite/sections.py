"""One cached function per page section: cheap keys in (widget values, language, recordings), everything
the section shows out (chart with Arrow data, tables, numbers), so a rerun only re-sends it.

Results are shared between reruns and sessions (kvsite.cache.section_cache, a cheaper st.cache_resource: no
copy per rerun): treat them as read-only. Recordings key by content, once per recording object.
Example: mechanism_work(16, 50, False, "en")["with"] -> 50 rows computed with a cache.
"""

from __future__ import annotations

import pandas as pd

from kvcore import allocsim, calculator, decode_model, hardware, provenance as run_info, views
from kvcore.decode_model import FAR_BELOW_PEAK, Fit
from kvcore.errors import KvError
from kvcore.formats import FORMATS
from kvcore.formulas import KvSpec, crossover_context, formula_terms, weights_bytes
from kvcore.geometry import load_preset, preset_geometry
from kvcore.published import figures
from kvcore.recordings import Recording
from kvcore.units import GIB, fmt_num, fmt_pct, fmt_ratio, fmt_size

from . import i18n
from .cache import section_cache
from .tables import arrow, md_table
from .chart import make_chart
from .recording_text import group_name, translated_table

cached = section_cache(max_entries=64)


def cols(lang: str, *fields: str) -> dict[str, str]:
    """Column and tooltip titles for a chart's fields, in `lang` (cols.<field>)."""
    return {f: i18n.translate(lang, f"cols.{f}") for f in fields}


def source_names(
    recs: list[Recording], lang: str, local_ids: tuple[str, ...] = ()
) -> dict[str, str]:
    """{recording id: its name in legends and pickers} in `lang`, plus "live"."""
    from .sources import source_label

    names = {
        r.id: source_label(r, lang, short=True) for r in recs
    }  # short where made (Recording.short_name)
    taken = list(names.values())
    for r in recs:  # two runs kvcore names alike keep their full names
        if taken.count(names[r.id]) > 1 or r.id in local_ids:
            names[r.id] = source_label(r, lang, "local" if r.id in local_ids else "")
    return {"live": i18n.translate(lang, "source.live"), **names}


def source_colors(recs: list[Recording], lang: str) -> dict[str, str]:
    """{legend name: colour}: each recording keeps one colour on every page (kvcore.provenance.source_colors)."""
    names, by_id = source_names(recs, lang), run_info.source_colors(recs)
    return {names[rid]: colour for rid, colour in by_id.items()}


# ---------------------------------------------------------------- facts the prose quotes


@cached
def key_numbers(rec: Recording | None) -> dict:
    """The home page's key numbers (kvcore.views.key_numbers), once per recording."""
    return views.key_numbers(rec)


@cached
def article_geometry() -> dict:
    """Article A's model as the prose states it (shared: read it, never change it): layers, KV heads, head_dim, fp16 bytes per value, block step."""
    g = preset_geometry(views.ARTICLE_MODEL)
    first = next(layer for layer in g.layers if layer.kind == "full")
    return {
        "layers": g.count("full"),
        "kv_heads": first.kv_heads,
        "head_dim": first.k_dim,
        "value_bytes": FORMATS["fp16"].bits // 8,
        "step": allocsim.STEP,
        "step_next": allocsim.STEP + 1,
    }


def _k(tokens: int) -> str:
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else f"{tokens:,}"


def home_decode(rec: Recording | None, numbers: dict) -> dict:
    """The home page's decode labels: first/last context of the worked check, the recording's chip and model."""
    p = run_info.provenance(rec) if rec is not None else {"chip": "", "model": ""}
    vendor = rec.data.get("hardware", {}).get("vendor", "") if rec is not None else ""
    return {
        "a": _k(numbers["context_a"]),
        "b": _k(numbers["context_b"]),
        "chip": " ".join(filter(None, (vendor, p["chip"]))),
        "model": p["model"].split("/")[-1],
    }


@cached
def article_trap(rec: Recording | None) -> dict | None:
    """Article A's own trap figures at the block edge (allocated and used MiB), from its recording's rows."""
    rows = {r["tokens"]: r for r in rec.rows("trap")} if rec is not None else {}
    a, b = rows.get(allocsim.STEP), rows.get(allocsim.STEP + 1)
    if a is None or b is None:
        return None
    return {
        "alloc_a": a["allocated_mib"],
        "alloc_b": b["allocated_mib"],
        "used_a": a["used_mib"],
        "used_b": b["used_mib"],
    }


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
    t = i18n.translator(lang, "decode.verdict_")
    nums = {
        "bw": fmt_num(fit.bandwidth_gbps),
        "peak": fmt_num(fit.peak_gbps or 0),
        "rms": fmt_pct(fit.rms_residual),
        "limit": fmt_pct(FAR_BELOW_PEAK),
    }
    if (
        fit.verdict_code == "below_any_memory"
    ):  # the one verdict that quotes the floor (a table lookup)
        nums["floor"] = fmt_num(hardware.slowest_memory()[0])
    parts = [t(fit.verdict_code, **nums)]
    if fit.verdict_code == "memory_bound":
        if fit.peak_gbps:
            parts.append(
                t("share", share=fmt_pct(fit.bandwidth_gbps / fit.peak_gbps), peak=nums["peak"])
            )
        if fit.overhead_s > 0:
            parts.append(t("overhead", ms=fmt_num(fit.overhead_s * 1e3)))
    return i18n.join(lang, *parts)


@cached
def published_numbers() -> dict:
    """The quoted trade-off figures of kvcore/published.yaml, by the names the prose uses."""
    p = figures()
    quality = {r["outcome"]: r["bits_per_channel"] for r in p["turboquant_quality"]["results"]}
    return {
        "lo": p["turbo3_speed"]["drop_pct_low"],
        "hi": p["turbo3_speed"]["drop_pct_high"],
        "speedup": p["turboquant_kernel"]["speedup_max"],
        "kernel_bits": p["turboquant_kernel"]["bits"],
        "q_same": quality["same"],
        "q_lower": quality["slightly_lower"],
    }


# ---------------------------------------------------------------- 1 mechanism


@cached
def mechanism_work(prompt: int, new: int, per_step: bool, lang: str) -> dict:
    work = views.mechanism_work(prompt, new)
    y = "rows_per_step" if per_step else "cumulative_rows"
    data = work.assign(mode=work["mode"].map(i18n.translator(lang, "mechanism.")))[
        ["step", "mode", y]
    ]
    t = i18n.translator(lang)
    titles = cols(lang, "step", "mode", y)
    last = work[work["step"] == new].set_index("mode")["cumulative_rows"]
    return {
        "chart": make_chart(
            data.rename(columns=titles),
            "series_chart",
            data,
            "step",
            y,
            "mode",
            t("mechanism.x_step"),
            t(f"mechanism.y_{y}"),
            titles=titles,
        ),
        "with": int(last["with_cache"]),
        "without": int(last["without_cache"]),
    }


@cached
def mechanism_measured(recs: list[Recording], rec_id: str, lang: str) -> dict:
    """Every run's totals (its largest N) as bars, with and without a cache; the chosen run's speed-up."""
    t = i18n.translator(lang)
    df = views.mechanism_measured(recs)
    names = source_names(recs, lang)
    chips = {
        r.id: run_info.provenance(r)["chip"] or names[r.id] for r in recs
    }  # short enough for a phone's axis
    totals = df[df["recording"] == rec_id].iloc[0]
    df = df.assign(
        run=df["recording"].map(chips)
        + df["new_tokens"].map(lambda n: t("mechanism.run_tokens", n=fmt_num(n))),
        source=df["recording"].map(names),
        mode=df["mode"].map(i18n.translator(lang, "mechanism.")),
        label=df["seconds"].map(lambda v: fmt_num(v, unit="s")),
    )
    titles = cols(lang, "run", "source", "mode", "seconds", "new_tokens")
    table = df[["source", "mode", "seconds", "new_tokens"]].rename(columns=titles)
    return {
        "chart": make_chart(
            table,
            "measured_bars",
            df,
            "run",
            "mode",
            "seconds",
            t("mechanism.seconds"),
            "label",
            titles=titles,
            tooltip=("source", "new_tokens"),
        ),
        "new_tokens": int(totals["new_tokens"]),
        "speedup": float(totals["speedup"]),
    }


# ---------------------------------------------------------------- 2 the .nbytes trap


TRAP_SERIES = ("allocated", "used", "theory")


def trap_chart(
    tokens: int, fmt: str, lang: str, points: pd.DataFrame | None, names: dict[str, str]
) -> dict:
    """The simulated curve from its breakpoints and measured points (already cut at `tokens`), the 256/257 numbers.

    points: long rows (recording, tokens, series, mib); names: recording id -> legend name."""
    t = i18n.translator(lang)
    g = preset_geometry(views.ARTICLE_MODEL)
    series = {s: t(f"trap.{s}") for s in TRAP_SERIES}
    curve = views.trap_curve(g, tokens, fmt)
    curve = curve.assign(series=curve["series"].map(series), source=t("trap.simulated"))
    pts = None
    if points is not None and not points.empty:
        pts = points.assign(
            series=points["series"].map(series), source=points["recording"].map(names)
        )[["tokens", "series", "mib", "source"]]
    titles = cols(lang, "tokens", "series", "mib", "source")
    table = (curve if pts is None else pd.concat([curve, pts], ignore_index=True)).rename(
        columns=titles
    )
    return {
        "chart": make_chart(
            table, "trap_chart", curve, pts, series, t("trap.x"), "MiB", titles=titles
        ),
        "at": views.trap_at(g, (allocsim.STEP, allocsim.STEP + 1), fmt),
    }


@cached
def trap_recorded(tokens: int, fmt: str, lang: str, recs: list[Recording]) -> dict:
    """trap_chart with the points of every recording that measured KVCache token by token in `fmt`."""
    points = views.trap_measured(recs, fmt)
    return trap_chart(
        tokens, fmt, lang, points[points["tokens"] <= tokens], source_names(recs, lang)
    )


@cached
def chunking(fmt: str, patterns: tuple[str, ...], custom: str, lang: str) -> tuple:
    """(markdown table, error text or None): the reader's pattern added unless it is one of ours or invalid."""
    g = preset_geometry(views.ARTICLE_MODEL)
    error = None
    try:
        rows = views.chunking_table(
            g, [*patterns, custom] if custom not in patterns else list(patterns), fmt
        )
    except KvError as e:
        rows, error = views.chunking_table(g, list(patterns), fmt), i18n.error_text(lang, e)
    t = i18n.translator(lang, "trap.col_")
    return md_table(
        rows,
        {
            "updates": (t("updates"), "`{}`"),
            "tokens": (t("tokens"), "{:,}"),
            "capacity": (t("capacity"), "{:,}"),
            "allocated_mib": (t("alloc"), "{:.3f}"),
            "used_mib": (t("used"), "{:.3f}"),
            "slack_pct": (t("slack"), "{:.1f}%"),
        },
    ), error


# ---------------------------------------------------------------- 3 linear growth


def formula_markdown(terms: dict, spec: KvSpec, lang: str) -> str:
    """kvcore.formulas.formula_terms written out in `lang`, the way Article A writes the formula:
    (16 full-attention layers × 2 × 8 KV heads × 64 dims × 2 bytes × 32,768 tokens) = 1,073,741,824 bytes."""
    t = i18n.translator(lang)
    parts = []
    for term in terms["terms"]:
        kind = t(f"growth.f_kind_{term['kind']}")
        if term["kind"] == "linear":
            parts.append(
                t("growth.f_linear", n=term["layers"], kind=kind, state=f"{term['state_bytes']:,}")
            )
            continue
        tokens = (
            t("growth.f_min", context=f"{terms['context']:,}", window=f"{term['window']:,}")
            if term["kind"] == "sliding"
            else t("growth.f_tokens", n=f"{term['tokens']:,}")
        )
        values = dict(
            n=term["layers"],
            kind=kind,
            heads=term["kv_heads"],
            k=term["k_dim"],
            v=term["v_dim"],
            kb=f"{term['k_bytes']:g}",
            vb=f"{term['v_bytes']:g}",
            tokens=tokens,
        )
        parts.append(
            t(
                "growth.f_"
                + ("mla" if term["kind"] == "mla" else "same" if term["same"] else "split"),
                **values,
            )
        )
    seqs = t("growth.f_seqs", n=terms["sequences"]) if terms["sequences"] > 1 else ""
    fmt = (
        t("growth.f_same_format", k=spec.k_format)
        if spec.k_format == spec.v_format
        else t("growth.f_formats", k=spec.k_format, v=spec.v_format)
    )
    return (
        f"{seqs}("
        + " + ".join(parts)
        + ")"
        + t("growth.f_total", total=f"{terms['total']:,}", formats=fmt)
        + "\n"
        + t(
            "growth.f_per_token",
            per=f"{terms['per_token']:,}",
            kib=fmt_num(terms["per_token"] / 1024),
        )
    )


@cached
def growth(
    model: str, ctx: int, weights: str, kv: str, seqs: int, lang: str, rec: Recording | None
) -> dict:
    """Formula, allocated / used / theory / weights curve (with the recording's points when it is this model); or
    {"error": the engine's sentence} when this model's cache cannot be stored in `kv` (mlx-q4 on head_dim 96)."""
    g, spec = preset_geometry(model), KvSpec(kv, kv)
    if kv in views.misfits(g, [kv]):
        return {"error": i18n.error_text(lang, views.misfits(g, [kv])[kv])}
    curve = views.growth_curve(g, ctx, spec, weights, seqs)
    points = None
    if (
        rec is not None
        and rec.data["model"].get("preset") == model
        and kv == rec.data["model"].get("kv_format")
        and seqs == 1
    ):
        points = views.growth_measured([rec])
    name = lambda d: d.assign(series=d["series"].map(i18n.translator(lang, "growth.")))  # noqa: E731
    t = i18n.translator(lang)
    titles = cols(lang, "context", "series", "gib", "bytes", "source")
    data = name(curve)[["context", "series", "gib", "bytes"]]
    pts = None
    if points is not None and not points.empty:
        pts = name(points).assign(source=source_names([rec], lang)[rec.id])[
            ["context", "series", "gib", "source"]
        ]
    top = curve[curve["context"] == curve["context"].max()].set_index("series")["bytes"]
    return {
        "formula": formula_markdown(formula_terms(g, ctx, spec, seqs), spec, lang),
        "chart": make_chart(
            data.rename(columns=titles),
            "series_chart",
            data,
            "context",
            "gib",
            "series",
            t("common.context"),
            "GiB",
            points=pts,
            log_x=True,
            log_y=True,
            dashed=t("growth.theory"),
            titles=titles,
            rules=limit_rule(g, ctx, lang),
        ),
        "points": points is not None,
        "max_context": int(curve["context"].max()),
        "used": int(top["used"]),
        "weights": int(top["weights"]),
        "crossover": crossover_context(g, weights, spec, seqs),
        "model_max": g.max_position_embeddings,
    }


def limit_rule(g, shown_max: int, lang: str) -> pd.DataFrame | None:
    """A vertical mark at the model's max_position_embeddings when a chart's contexts reach past it."""
    limit = g.max_position_embeddings
    if not limit or shown_max <= limit:
        return None
    return pd.DataFrame(
        [{"context": limit, "label": i18n.translate(lang, "common.model_limit", n=f"{limit:,}")}]
    )


@cached
def growth_layers(model: str, ctx: int, kv: str, seqs: int, lang: str) -> dict:
    layers = views.per_layer(preset_geometry(model), ctx, KvSpec(kv, kv), seqs)
    layers["kind"] = layers["kind"].map(i18n.translator(lang, "growth.kind_"))
    t = i18n.translator(lang)
    titles = cols(lang, "layer", "mib", "kind", "tokens_held")
    data = layers.assign(layer=layers["layer"].astype(str))
    return {
        "chart": make_chart(
            data[["layer", "kind", "tokens_held", "mib"]].rename(columns=titles),
            "bar_chart",
            data,
            "layer",
            "mib",
            "kind",
            t("growth.layer"),
            "MiB",
            extra_tooltip=("tokens_held",),
            sort=[str(i) for i in layers["layer"]],
            height={"step": 11},
            titles=titles,
        )
    }


# ---------------------------------------------------------------- 4 decode slowdown


@cached
def decode(runs: list[Recording], lang: str, all_recs: list[Recording]) -> dict | None:
    """Measured points and fitted curves of every run (a fit that does not describe its run is dashed); the first
    run's worked check, fit and chip. None: no run names a model. all_recs: every recording, for the colours."""
    runs_decode = [decode_model.analyse(r) for r in runs]
    # a run without a model geometry is still drawn: its measured points, no bytes line (no_fit says why)
    pts = [
        a.points if a is not None else pd.DataFrame(r.rows("decode")).assign(recording=r.id)
        for r, a in zip(runs, runs_decode)
        if r.rows("decode")
    ]
    if not pts:
        return None
    t, names = i18n.translator(lang), source_names(runs, lang)
    no_fit = [
        {"run": names[r.id], "why": no_fit_reason(r)}
        for r, a in zip(runs, runs_decode)
        if a is None and r.rows("decode")
    ]
    points = pd.concat(pts, ignore_index=True)
    for col in ("bytes_per_token", "implied_gbps"):
        if col not in points:
            points[col] = float("nan")
    points = points.assign(
        series=points["recording"].map(names), source=points["recording"].map(names)
    )
    points = views.decode_spread(
        points, "iqr", fallback="range"
    )  # spread over passes, where recorded
    lines = pd.concat(
        [a.curve for a in runs_decode if a is not None]
        or [pd.DataFrame(columns=["context", "tokens_per_s", "recording"])],
        ignore_index=True,
    )
    lines = lines.assign(series=lines["recording"].map(names), source=lines["recording"].map(names))
    unfit = [
        names[r.id] for r, a in zip(runs, runs_decode) if a is not None and not a.fit.memory_bound
    ]
    titles = cols(
        lang, "context", "tokens_per_s", "series", "bytes_per_token", "implied_gbps", "source"
    )
    table = points[["series", "context", "tokens_per_s", "bytes_per_token", "implied_gbps"]].rename(
        columns=titles
    )
    chart = make_chart(
        table,
        "series_chart",
        lines,
        "context",
        "tokens_per_s",
        "series",
        t("common.context"),
        t("common.tok_s"),
        points=points,
        log_x=True,
        log_y=True,
        dashed=unfit,
        colors=source_colors(all_recs, lang),
        titles=titles,
        error=("tokens_per_s_low", "tokens_per_s_high"),
    )
    first = runs_decode[0]
    return {
        "chart": chart,
        "fit": first and first.fit,
        "check": first and first.check,
        "chip": first and first.chip,
        "unfit": bool(unfit),
        "spread": bool(points["tokens_per_s_low"].notna().any()),
        "no_fit": no_fit,
    }


def no_fit_reason(rec: Recording) -> str:
    """Why a run has no bytes line: "hybrid" (linear-attention layers kvcore has no geometry for), "unusual" (a model
    whose attention kvcore does not model) or "no_model" (the recording names no model configuration)."""
    model = rec.data["model"]
    return "hybrid" if model.get("hybrid") else "unusual" if model.get("unusual") else "no_model"


def check_text(check: dict, fit: Fit, lang: str) -> str:
    """The worked check in words; whether both points imply the same bandwidth is the fit's verdict, not assumed."""
    values = dict(
        a=f"{check['context_a']:,}",
        b=f"{check['context_b']:,}",
        w=fmt_size(check["weights_bytes"]),
        kva=fmt_size(check["kv_bytes_a"]),
        kvb=fmt_size(check["kv_bytes_b"]),  # sizes in GiB/MiB site-wide
        ta=fmt_num(check["tokens_per_s_a"]),
        tb=fmt_num(check["tokens_per_s_b"]),
        ga=fmt_num(check["gbps_a"]),
        gb=fmt_num(check["gbps_b"]),
        pred=fmt_num(check["predicted_slowdown"]),
        meas=fmt_num(check["measured_slowdown"]),
    )
    return i18n.translate(
        lang,
        "decode.check_text"
        if fit.verdict_code == "memory_bound"
        else "decode.check_text_not_bound",
        **values,
    )


@cached
def default_efficiency(rec: Recording | None) -> float:
    """The efficiency Article A's run implies on its M5 Pro (the calculator's assumption without it)."""
    return round(calculator.efficiency([rec] if rec is not None else []).share, 2)


@cached
def what_if(chip: str, model: str, weights: str, eff: float, lang: str) -> dict:
    """Predicted tok/s on a chip where the model fits and supports the context; why not, where it does not."""
    t = i18n.translator(lang)
    g, c = preset_geometry(model), hardware.get_chip(chip)
    pred = calculator.what_if(g, weights, KvSpec(), c, eff, WHAT_IF_MAX)
    memory = calculator.chip_memory_bytes(c)
    caveat = t("decode.caveat" if c.unified else "decode.caveat_gpu")
    if pred.empty:
        return {
            "chart": None,
            "caveat": caveat,
            "text": t(
                "decode.whatif_no_fit",
                model=model,
                weights=weights,
                need=fmt_num(weights_bytes(g, weights) / GIB),
                chip=chip,
                memory=fmt_num(memory / GIB),
            ),
        }
    notes = []
    top = int(pred["context"].max())
    if g.max_position_embeddings and top == g.max_position_embeddings < WHAT_IF_MAX:
        notes.append(t("decode.whatif_model_limit", model=model, n=f"{top:,}"))
    elif top < min(WHAT_IF_MAX, g.max_position_embeddings or WHAT_IF_MAX):
        notes.append(
            t("decode.whatif_memory_limit", n=f"{top:,}", chip=chip, memory=fmt_num(memory / GIB))
        )
    pred["series"] = pred["series"].map(i18n.translator(lang, "decode."))
    titles = cols(lang, "context", "series", "tokens_per_s", "bytes_per_token")
    return {
        "chart": make_chart(
            pred.rename(columns=titles),
            "series_chart",
            pred,
            "context",
            "tokens_per_s",
            "series",
            t("common.context"),
            t("common.tok_s"),
            log_x=True,
            log_y=True,
            titles=titles,
        ),
        "text": i18n.join(lang, *notes),
        "caveat": caveat,
    }


WHAT_IF_MAX = 131072  # the what-if's longest context, unless the model's own limit is shorter


@cached
def slowdown_vs_bytes(recs: list[Recording], lang: str) -> dict | None:
    """Every run's measured slowdown against the bytes model's (decode_model.slowdown_vs_bytes): the chart (each run named
    and coloured as everywhere on the site), a table of each run's longest context, and the runs shown.
    None when no run has two points and a model."""
    frame = decode_model.slowdown_vs_bytes(recs)
    if frame.empty:
        return None
    t, names = i18n.translator(lang, "decode."), source_names(recs, lang)
    frame = frame.assign(run=frame["recording"].map(names))
    fields = [
        "run",
        "chip",
        "runtime",
        "model",
        "context",
        "tokens_per_s",
        "predicted_slowdown",
        "measured_slowdown",
    ]
    titles = cols(lang, *fields)
    chart = make_chart(
        frame[fields].rename(columns=titles),
        "slowdown_scatter",
        frame,
        "predicted_slowdown",
        "measured_slowdown",
        "run",
        t("sb_x"),
        t("sb_y"),
        t("sb_identity"),
        tooltip=("chip", "runtime", "model", "context", "tokens_per_s"),
        colors=source_colors(recs, lang),
        titles=titles,
    )
    summary = decode_model.slowdown_summary(frame)
    table = md_table(
        summary,
        {
            "run": (t("sb_run"), None),
            "context_first": (t("sb_from"), "{:,}"),
            "context": (t("sb_to"), "{:,}"),
            "predicted_slowdown": (t("sb_predicted"), "{:.2f}×"),
            "measured_slowdown": (t("sb_measured"), "{:.2f}×"),
            "ratio": (t("sb_ratio"), "{:.2f}"),
        },
    )
    return {"chart": chart, "table": table, "runs": tuple(summary["run"])}


# ---------------------------------------------------------------- 5 savings


@cached
def heads(model: str, ctx: int, lang: str) -> dict:
    """The MHA / this model / MQA chart (an MLA model: its latent against the MHA it replaces) and one sentence on
    this model's own query and KV heads."""
    g = preset_geometry(model)
    df = views.heads_compare(g, ctx, mha_dims=views.mla_mha_dims(load_preset(model)["config"]))
    df["variant"] = df["variant"].map(i18n.translator(lang, "savings.variant_"))
    df["label"] = [
        fmt_num(v, unit="GiB") + ("" if share == 1 else f" ({fmt_num(share * 100)}%)")
        for v, share in zip(df["gib"], df["vs_mha"])
    ]
    t = i18n.translator(lang)
    mla = next((layer for layer in g.layers if layer.kind == "mla"), None)
    kv = max((layer.kv_heads for layer in g.layers if layer.kind in ("full", "sliding")), default=0)
    if mla is not None:
        text = t(
            "savings.heads_mla",
            model=model,
            latent=mla.k_dim,
            rope=mla.v_dim,
            share=fmt_pct(df["vs_mha"].min()),
        )
    elif kv and kv < g.num_attention_heads:
        text = t(
            "savings.heads_shared",
            model=model,
            q_heads=g.num_attention_heads,
            kv_heads=kv,
            ratio=g.num_attention_heads // kv,
        )
    else:
        text = t("savings.heads_mha", model=model, q_heads=g.num_attention_heads)
    titles = cols(lang, "variant", "gib", "kv_heads", "vs_mha")
    table = df[["variant", "kv_heads", "gib", "vs_mha"]].rename(columns=titles)
    return {
        "chart": make_chart(
            table,
            "bar_chart",
            df,
            "variant",
            "gib",
            "variant",
            t("savings.variant"),
            "GiB",
            extra_tooltip=("kv_heads", "vs_mha"),
            titles=titles,
            labels="label",
            show_legend=False,
        ),
        "text": text,
    }


@cached
def formats(model: str, fmts: tuple[str, ...], ctx: int, lang: str) -> dict:
    """KV GiB vs context per format (formats of equal cost share a line and say so) up to the model's limit, and
    the formats table; `kept`: the formats this model's cache can be stored in, `left_out`: why the others cannot
    (the engine's sentences), chart None when none can."""
    g = preset_geometry(model)
    top = max(ctx, 8192)
    misfits = views.misfits(g, list(fmts))
    kept = tuple(f for f in fmts if f not in misfits)
    left_out = i18n.join(lang, *(i18n.error_text(lang, e) for e in misfits.values()))
    if not kept:
        return {"chart": None, "table": "", "kept": kept, "left_out": left_out}
    curve = views.formats_curve(g, list(kept), top)
    t = i18n.translator(lang)
    titles = cols(lang, "context", "format", "gib")
    return {
        "kept": kept,
        "left_out": left_out,
        "chart": make_chart(
            curve.rename(columns=titles),
            "series_chart",
            curve,
            "context",
            "gib",
            "format",
            t("common.context"),
            "GiB",
            log_x=True,
            log_y=True,
            titles=titles,
            rules=limit_rule(g, top, lang),
        ),
        "table": md_table(
            views.format_table(g, list(fmts)),
            {
                "format": (t("savings.format"), None),
                "bits_per_value": (t("savings.bits"), "{:.3f}"),
                "bytes_per_token": (t("savings.bytes_token"), "{:,}"),
                "vs_fp16": ("× fp16", "{:.3f}"),
                "source": (t("savings.source"), None),
            },
            lang=lang,
        ),
    }


@cached
def fits(model: str, weights: str, mem: float, fmts: tuple[str, ...], lang: str) -> dict | None:
    """Longest context per format beside the weights, capped at the model's limit (and saying so); None when nothing fits."""
    g = preset_geometry(model)
    df = views.fits_table(g, weights, mem, list(fmts))
    if df["max_context"].max() == 0:
        return None
    t = i18n.translator(lang)
    df["label"] = [
        t("savings.fits_capped", n=f"{n:,}", memory=f"{m:,}") if capped else f"{n:,}"
        for n, m, capped in zip(df["max_context"], df["memory_max_context"], df["capped"])
    ]
    titles = cols(lang, "format", "max_context", "memory_max_context")
    table = df[["format", "max_context", "memory_max_context"]].rename(columns=titles)
    capped = bool(df["capped"].any())
    note = (
        t("savings.fits_model_limit", model=model, n=f"{g.max_position_embeddings:,}")
        if capped
        else ""
    )
    # at the model's limit every capped bar would be the same length: draw what memory holds, which differs by format
    value, other = (
        ("memory_max_context", "max_context") if capped else ("max_context", "memory_max_context")
    )
    return {
        "chart": make_chart(
            table,
            "bar_chart",
            df,
            "format",
            value,
            "format",
            t("savings.format"),
            titles[value],
            extra_tooltip=(other,),
            titles=titles,
            labels="label",
            show_legend=False,
        ),
        "note": note,
    }


@cached
def turbo(lang: str) -> dict:
    claims = views.turbo3_claims()
    item, fmt = figures()["turbo3_llama31_8b_131k"], FORMATS["turbo3"]
    by = claims.set_index("claim")
    values = {
        "model": item["model"],
        "context": item["context"],
        "fp16_gib": by.loc["article_b", "gib"] * by.loc["article_b", "vs_fp16"],
        "b_gib": by.loc["article_b", "gib"],
        "b_bits": by.loc["article_b", "bits_per_value"],
        "ratio": item["ratio_vs_f16"],
        "block_values": fmt.block_values,
        "block_bytes": fmt.block_bytes,
        "block_bits": by.loc["block_layout", "bits_per_value"],
        "block_gib": by.loc["block_layout", "gib"],
        "header_bits": by.loc["header_comment", "bits_per_value"],
    }
    claims["claim"] = claims["claim"].map(i18n.translator(lang, "savings.claim_"))
    t = i18n.translator(lang)
    # the sources as numbered notes under the table: a column of long citations squeezed the first to a letter a
    # line on a phone
    refs = list(dict.fromkeys(claims["source"]))
    claims["ref"] = claims["source"].map(lambda s: f"[{refs.index(s) + 1}]")
    notes = "\n".join(f"{i}. {i18n.data_text(lang, s)}" for i, s in enumerate(refs, 1))
    return {
        "claims": md_table(
            claims,
            {
                "claim": (t("savings.claim"), None),
                "bits_per_value": (t("savings.bits"), "{:.3f}"),
                "gib": ("GiB", "{:.3f}"),
                "vs_fp16": ("fp16 ÷", "{:.2f}"),
                "ref": (t("savings.source"), None),
            },
            lang=lang,
        )
        + "\n\n"
        + notes,
        "padding": md_table(
            views.turbo_padding(),
            {
                "format": (t("savings.format"), None),
                "head_dim_128": (t("savings.hd128"), "{:.3f}"),
                "head_dim_64": (t("savings.hd64"), "{:.3f}"),
            },
        ),
        "text": i18n.translate(lang, "savings.turbo_text", **values),
    }


@cached
def benchmark(rec: Recording, lang: str) -> dict:
    """The weight-precision table of a published benchmark, with its model and chip named."""
    rows = views.section_frame([rec], "benchmark")
    rows["label"] = rows["tokens_per_s"].map(lambda v: fmt_num(v, unit="tok/s"))
    t = i18n.translator(lang)
    p = run_info.provenance(rec)
    titles = cols(lang, "name", "tokens_per_s", "peak_memory_gb")
    table = rows[["name", "tokens_per_s", "peak_memory_gb"]].rename(columns=titles)
    return {
        "chart": make_chart(
            table,
            "bar_chart",
            rows,
            "name",
            "tokens_per_s",
            "name",
            t("savings.weights_precision"),
            t("common.tok_s"),
            extra_tooltip=("peak_memory_gb",),
            sort=list(rows["name"]),
            titles=titles,
            labels="label",
            show_legend=False,
        ),
        "title": t("savings.bench_title", model=p["model"], chip=p["chip"], kv=p["kv_format"]),
    }


# ---------------------------------------------------------------- recordings


@cached
def recordings_table(recs: list[Recording], local_ids: tuple[str, ...], lang: str) -> object:
    """Every recording, one row each, with headers, kinds, places and section names in `lang`."""
    df = run_info.recordings_table(recs, set(local_ids))
    if df.empty:
        return arrow(df)
    t = i18n.translator(lang)
    sep = t("recordings.list_sep")
    df = df.assign(
        kind=df["kind"].map(lambda k: t(f"recordings.kind_{k}")),
        where=df["where"].map(lambda w: t(f"recordings.where_{w}")),
        date=df["date"].str[:10],
        label=df["recording"].map(source_names(recs, lang, local_ids)),
        sections=[sep.join(group_name(lang, s) for s in r.data["sections"]) for r in recs],
    )
    return arrow(translated_table(df, lang, "recordings.col_"))


@cached
def recording_sections(rec: Recording, lang: str) -> list[tuple]:
    """(section, its name in `lang`, rows as recorded, Arrow table with headers in `lang`) per section of one recording."""
    out = []
    for section in rec.data["sections"]:
        rows = views.section_frame([rec], section).drop(columns=["source", "recording"])
        out.append((section, group_name(lang, section), rows, arrow(translated_table(rows, lang))))
    return out


@cached
def compare(recs: list[Recording], lang: str, all_recs: list[Recording]) -> dict:
    """Decode speed vs context of the chosen runs, each in its site-wide colour."""
    names = source_names(recs, lang)
    rows = views.section_frame(recs, "decode")
    rows = rows.assign(source=rows["recording"].map(names))
    titles = cols(lang, "context", "tokens_per_s", "source")
    return {
        "chart": make_chart(
            rows[["source", "context", "tokens_per_s"]].rename(columns=titles),
            "series_chart",
            None,
            "context",
            "tokens_per_s",
            "source",
            i18n.translate(lang, "common.context"),
            i18n.translate(lang, "common.tok_s"),
            points=rows,
            log_x=True,
            log_y=True,
            colors=source_colors(all_recs, lang),
            titles=titles,
        )
    }


# ---------------------------------------------------------------- 6 savings: what a smaller cache costs


@cached
def quality(rec: Recording, lang: str, others: tuple = ()) -> dict:
    """A real model's quality per KV format: the bytes-per-token vs KL chart (top-1 agreement on each point), the
    figures as a table, the price against context, the published figures, and the answers per prompt. Other
    runtimes' runs on the same model among `others` (views.quality_companions) join the chart and the table,
    each format named with its runtime, and a note compares them at the same bit width."""
    from kvcore import real_model
    from kvcore.published import figures
    from kvcore.units import fmt_small

    t = i18n.translator(lang)
    df = views.quality_trade([rec, *views.quality_companions(rec, list(others))])
    several = df["runtime"].nunique() > 1
    df = df.assign(
        format=[
            t("savings.quality_runtime_format", runtime=r["runtime"], label=format_label(r, lang))
            if several
            else format_label(r, lang)
            for r in df.to_dict("records")
        ]
    )
    df = df.assign(
        top1=df["top1_agreement"].map(lambda v: t("savings.quality_point", pct=f"{v:.1%}"))
    )
    titles = cols(
        lang,
        "format",
        "bytes_per_token",
        "kl_vs_baseline",
        "top1_agreement",
        "perplexity",
        "runtime",
    )
    keep = ["format", "bytes_per_token", "kl_vs_baseline", "top1_agreement", "perplexity"]
    keep += ["runtime"] if several else []
    shown = df[df["kl_vs_baseline"] > 0][[*keep, "top1"]]
    chart = make_chart(
        shown[keep].rename(columns=titles),
        "quality_trade",
        shown,
        "bytes_per_token",
        "kl_vs_baseline",
        "format",
        "top1",
        t("savings.quality_x"),
        t("savings.quality_y"),
        titles=titles,
        tooltip=("top1_agreement", "perplexity"),
        shape=titles["runtime"] if several else None,
    )
    rows = df.assign(kl=df["kl_vs_baseline"].map(fmt_small))
    table = md_table(
        rows,
        {
            "format": (titles["format"], None),
            "bytes_per_token": (titles["bytes_per_token"], "{:,.0f}"),
            "perplexity": (titles["perplexity"], "{:.2f}"),
            "kl": (titles["kl_vs_baseline"], None),
            "top1_agreement": (titles["top1_agreement"], "{:.1%}"),
        },
        lang,
    )
    growth = views.quality_by_context(rec)
    context_table = None
    lengths = ""
    if not growth.empty and growth["tokens"].nunique() > 1:
        growth = growth.assign(format=[format_label(r, lang) for r in growth.to_dict("records")])
        growth = growth.assign(kl=growth["kl_vs_baseline"].map(fmt_small))
        context_table = md_table(
            growth,
            {
                "format": (titles["format"], None),
                "tokens": (t("cols.tokens"), "{:,}"),
                "perplexity": (titles["perplexity"], "{:.2f}"),
                "kl": (titles["kl_vs_baseline"], None),
                "top1_agreement": (titles["top1_agreement"], "{:.1%}"),
            },
            lang,
        )
        lengths = " / ".join(f"{n:,}" for n in sorted(growth["tokens"].unique()))
    pub = pd.DataFrame(figures()["kv_quality"])
    pub = pub.assign(src=[f"[{s}]({u})" for s, u in zip(pub["source"], pub["url"])])
    published = md_table(
        pub,
        {
            "src": (t("savings.col_source"), "{}"),
            "model": (t("savings.col_model"), None),
            "kv": (t("savings.col_kv"), None),
            "figure": (t("savings.col_figure"), "`{}`"),
        },
        lang,
    )  # as stated
    return {
        "chart": chart,
        "table": table,
        "context_table": context_table,
        "lengths": lengths,
        "tokens": int(df["tokens"].max()),
        "published": published,
        "answers": views.quality_answers(rec),
        "baseline": df["format"].iloc[0],
        "install_note": None if real_model.available() else t("savings.quality_install"),
        "runtimes_note": _runtimes_note(df, lang) if several else None,
    }


def _runtimes_note(df: pd.DataFrame, lang: str) -> str:
    """Two runtimes' quantized caches at the same bit width, figure by figure, and why they differ."""
    from kvcore.units import fmt_small

    t = i18n.translator(lang)
    quantized = df[df["bits"].notna()] if "bits" in df else df.iloc[0:0]
    pairs = []
    for bits, rows in quantized.groupby("bits", sort=False):
        if rows["runtime"].nunique() < 2:
            continue
        pairs.append(
            t(
                "savings.quality_runtimes_pair",
                bits=int(bits),
                rows=t("recordings.list_sep").join(
                    t(
                        "savings.quality_runtimes_row",
                        fmt=r["format"],
                        kl=fmt_small(r["kl_vs_baseline"]),
                        top1=f"{r['top1_agreement']:.1%}",
                    )
                    for r in rows.to_dict("records")
                ),
            )
        )
    baselines = t("savings.quality_runtimes_baseline_sep").join(
        t(
            "savings.quality_runtimes_baseline",
            runtime=runtime,
            fmt=base["kv_format"],
            ppl=f"{base['perplexity']:.2f}",
        )
        for runtime, rows in df.groupby("runtime", sort=False)
        for base in [rows[rows["kl_vs_baseline"] == rows["kl_vs_baseline"].min()].iloc[0]]
    )
    pairs_text = t("savings.quality_runtimes_pair_sep").join(pairs)
    return t("savings.quality_runtimes", baselines=baselines, pairs=pairs_text)


def format_label(row: dict, lang: str) -> str:
    """A scored cache's name in `lang`: the format, with its group size (and start) when quantized."""
    import re

    t = i18n.translator(lang)
    group = row.get("group_size")
    if (
        group is None or group != group
    ):  # an answers row names its group in its label only: "mlx-q4 (group 32)"
        named = re.search(r"\(group (\d+)", str(row.get("label", "")))
        if named is None:
            return row["kv_format"]
        group = int(named[1])
    label = t("savings.quality_format", fmt=row["kv_format"], group=int(group))
    start = row.get("quantized_kv_start") or 0
    return (
        label
        if start != start or not start
        else t("savings.quality_format_start", label=label, start=fmt_num(start))
    )


def answer_text(row: dict, lang: str) -> str:
    """Where an answer parts from the baseline's, in words (or that it does not)."""
    t = i18n.translator(lang)
    if "first_divergence" not in row:
        return t("savings.quality_same")
    margin = fmt_num(row.get("margin", float("nan")))
    if row["first_divergence"] == 0:
        return t("savings.quality_parts_first", margin=margin)
    return t(
        "savings.quality_parts",
        n=fmt_num(row["first_divergence"] + 1),
        agreed=row.get("agreed_text", ""),
        margin=margin,
    )


@cached
def mechanism_text(rec: Recording, published: Recording | None, lang: str) -> dict | None:
    """A real model's mechanism run in words: prompt, generated text, both totals, beside the published run's ratio."""
    text = views.mechanism_text(rec)
    if text is None:
        return None
    t = i18n.translator(lang)
    totals = views.mechanism_totals(rec)
    published = (
        fmt_ratio(views.mechanism_totals(published)["speedup"]) if published is not None else "—"
    )
    note = t(
        "mechanism.text_note",
        model=rec.data["model"]["name"],
        n=fmt_num(text["new_tokens"]),
        with_s=fmt_num(totals["with_cache_s"], unit="s"),
        without_s=fmt_num(totals["without_cache_s"], unit="s"),
        ratio=fmt_ratio(totals["speedup"]),
        published=published,
    )
    return {**text, "note": note}
