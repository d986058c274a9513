"""The linear growth chapter's sections: the formula with the reader's numbers, the curves, the
layers.

Example: growth("llama-3.2-1b", 32768, "bf16", "fp16", 1, "en", None)["formula"] -> the substituted
formula.
"""

from __future__ import annotations

import pandas as pd

from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import crossover_context, formula_terms
from kvcore.recordings.store import Recording
from kvcore.units import fmt_num
from kvcore.views import memory as views
from kvcore.views import savings as savings_views
from kvcore.views.chart_parts import Choice
from kvsite import i18n
from kvsite.charts.chart import make_chart

from .shared import cached, cols, limit_rule, source_names


def formula_markdown(terms: dict, spec: KvSpec, lang: str) -> str:
    """kvcore.memory.formulas.formula_terms written out in `lang`, the way Article A writes the formula:
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
    model: str,
    ctx: int,
    weights: str,
    kv: str,
    seqs: int,
    lang: str,
    rec: Recording | None,
    log: bool = False,
) -> dict:
    """Formula, allocated / used / theory / weights curve (with the recording's points when it is this model); or
    {"error": the engine's sentence} when this model's cache cannot be stored in `kv` (mlx-q4 on head_dim 96).
    Linear axes by default, where the chapter's point (a straight line through zero) shows; log: both axes
    logarithmic (the reader's choice, to read the small contexts)."""
    g, spec = preset_geometry(model), KvSpec(kv, kv)
    if kv in savings_views.misfits(g, [kv]):
        return {"error": i18n.error_markdown(lang, savings_views.misfits(g, [kv])[kv])}
    curve = views.growth_curve(g, ctx, spec, weights, seqs)
    points = None
    if (
        rec is not None
        and rec.data["model"].get("preset") == model
        and kv == rec.data["model"].get("kv_format")
        and seqs == 1
    ):
        points = views.growth_measured([rec])
    # series that draw one line (allocated, used and theory, at these contexts) have one legend entry, which
    # names them all: "allocated = used = theory, one line"
    tr = i18n.translator(lang, "growth.")
    groups = views.one_line_each(curve, log)
    label = {
        s: tr(members[0])
        if len(members) == 1
        else tr("one_line", names=" = ".join(tr(f"short_{m}") for m in members))
        for members in groups.values()
        for s in members
    }
    drawn = curve[curve["series"].isin(groups)]
    name = lambda d: d.assign(series=d["series"].map(label))  # noqa: E731
    t = i18n.translator(lang)
    titles = cols(lang, "context", "series", "gib", "bytes", "source")
    data = name(drawn)[["context", "series", "gib", "bytes"]]
    table = curve.assign(series=curve["series"].map(tr))[["context", "series", "gib", "bytes"]]
    pts = None
    if points is not None and not points.empty:
        pts = name(points).assign(source=source_names([rec], lang)[rec.id])[
            ["context", "series", "gib", "source"]
        ]
    top = curve[curve["context"] == curve["context"].max()].set_index("series")["bytes"]
    return {
        "formula": formula_markdown(formula_terms(g, ctx, spec, seqs), spec, lang),
        "chart": make_chart(
            table.rename(columns=titles),  # every series in the numbers, its own name
            "series_chart",
            data,
            "context",
            "gib",
            "series",
            t("common.context"),
            "GiB",
            points=pts,
            log_x=log,
            log_y=log,
            dashed=t("growth.theory"),
            titles=titles,
            rules=limit_rule(g, ctx, lang),
            height=290,
        ),
        "points": points is not None,
        "max_context": int(curve["context"].max()),
        "used": int(top["used"]),
        "weights": int(top["weights"]),
        "crossover": crossover_context(g, weights, spec, seqs),
        "model_max": g.max_position_embeddings,
        "axes": axes_note(model, log, lang),
    }


def axes_note(model: str, log: bool, lang: str) -> str:
    """What the chart's axes make of linear growth, and why this model's line is not straight when it is not: layers
    that stop growing (a sliding window) or never grow (a linear-attention state) add a fixed part to a growing one.

    Example: axes_note("gemma-3-4b", True, "en") -> "Both axes are logarithmic: ... its 29 sliding-window layers ..."
    """
    t = i18n.translator(lang, "growth.")
    g = preset_geometry(model)
    axes = t("axes_log" if log else "axes_linear")
    windows = [layer.window for layer in g.layers if layer.kind == "sliding"]
    states = [layer for layer in g.layers if layer.kind == "linear"]
    if not windows and not states:
        return axes
    scale = "log" if log else "linear"
    fixed = len(windows) or len(states)
    why = t(
        f"fixed_{'window' if windows else 'state'}_{scale}",
        model=model,
        n=fixed,
        rest=len(g.layers) - fixed,
        window=f"{max(windows):,}" if windows else "",
    )
    return i18n.join(lang, axes, why)


@cached
def growth_layers(
    model: str, contexts: tuple[int, ...], ctx: int, kv: str, seqs: int, lang: str
) -> dict:
    """Bytes per layer at each of `contexts`, one chart: radio buttons inside it pick the context (`ctx` first),
    repainted in the browser with no round trip; its table and CSV hold every context."""
    g, spec = preset_geometry(model), KvSpec(kv, kv)
    layers = pd.concat(
        [views.per_layer(g, n, spec, seqs).assign(context=n) for n in contexts], ignore_index=True
    )
    layers["kind"] = layers["kind"].map(i18n.translator(lang, "growth.kind_"))
    t = i18n.translator(lang)
    titles = cols(lang, "context", "layer", "mib", "kind", "tokens_held")
    data = layers.assign(layer=layers["layer"].astype(str))
    choice = Choice(
        "context", contexts, ctx, t("growth.layers_pick"), tuple(f"{n:,}" for n in contexts)
    )
    return {
        "chart": make_chart(
            data[["context", "layer", "kind", "tokens_held", "mib"]].rename(columns=titles),
            "bar_chart",
            data,
            "layer",
            "mib",
            "kind",
            t("growth.layer"),
            "MiB",
            extra_tooltip=("tokens_held",),
            sort=[str(i) for i in dict.fromkeys(layers["layer"])],
            height={"step": 11},
            choice=choice,
            titles=titles,
        )
    }
