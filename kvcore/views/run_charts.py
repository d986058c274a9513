"""Charts that hold runs against a model: every run's measured slowdown against the slowdown its bytes predict
(the identity line), and what each KV format costs in quality against the bytes it saves. Pure functions, no
Streamlit (kvcore.views.charts has the series and bar charts every chapter draws).
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from kvcore.views.chart_parts import (
    LABEL_PLACES,
    NARROW_PX,
    PAD_PX,
    SELECTION,
    axis_for,
    axis_scale,
    color_scale,
    label_places,
    legend,
    picked,
    positive_rows,
    shown_when,
    tooltips,
)


def slowdown_scatter(
    df: pd.DataFrame,
    x: str,
    y: str,
    color: str,
    x_title: str,
    y_title: str,
    identity_title: str,
    *,
    tooltip: tuple[str, ...] = (),
    height: int = 380,
    colors: dict | None = None,
    titles: dict | None = None,
    detail: str | None = None,
    faded: str | None = None,
) -> alt.LayerChart:
    """Each run's points joined in context order, against the identity line y = x (drawn dashed, named in its
    tooltip). The legend sits under the plot, one run per line, and selects; autosize fit-x keeps the plot's
    height however long the legend is (Streamlit's default "fit" would squeeze the plot to make room for it).

    Used for measured slowdown (y) against the slowdown the bytes model predicts (x): on the line decode is a
    memory read; above it something besides bytes grows with the context; below it a fixed cost hides growth.
    detail: the column that tells one run's line from another's where `color` groups several (default `color`);
    faded: the `color` value of runs drawn in grey, thin and faint, behind the others (the reader picks which runs
    keep a colour of their own: at most about eight colours can be told apart).
    Example: slowdown_scatter(decode_runs.slowdown_vs_bytes(recs), "predicted_slowdown", "measured_slowdown", "run", ...).
    """
    domain = [c for c in dict.fromkeys(df[color]) if c != faded]
    if faded is not None and (df[color] == faded).any():
        colors = {**(colors or {}), faded: "#c7c7c7"}
        domain.append(faded)
    hi = float(max(df[x].max(), df[y].max(), 1.0)) if not df.empty else 1.0
    lo = (
        float(min(df[x].min(), df[y].min(), 1.0)) if not df.empty else 1.0
    )  # a run faster at length
    sel = alt.selection_point(name=SELECTION, fields=[color], bind="legend")
    enc_color = alt.Color(
        f"{color}:N", scale=color_scale(domain, colors), legend=legend(symbolLimit=0)
    )
    # log axes: a ratio of 2 is as far from 1 as 4 from 2, and one steep run does not flatten the rest
    scale = alt.Scale(type="log", domain=[lo, hi], nice=False, padding=PAD_PX)
    ticks = [t for t in (1, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8, 10, 15, 20) if t <= hi * 1.000001]
    ticks = [0.9] * (lo < 0.95) + ticks
    x_enc = alt.X(f"{x}:Q", title=x_title, scale=scale, axis=alt.Axis(values=ticks, format="~g"))
    y_enc = alt.Y(f"{y}:Q", title=y_title, scale=scale, axis=alt.Axis(values=ticks, format="~g"))
    opacity = picked(sel, 0.12)
    tip = tooltips(df, [color, *tooltip, x, y], titles)
    identity = pd.DataFrame({x: [1.0, hi], y: [1.0, hi], "line": [identity_title] * 2})
    line_id = (
        alt.Chart(identity)
        .mark_line(color="#888888", strokeDash=[6, 4], strokeWidth=1.5)
        .encode(x=x_enc, y=y_enc, tooltip=[alt.Tooltip("line:N", title=None)])
    )
    order = "context" if "context" in df else x
    runs = (
        alt.Chart(df)
        .mark_line(strokeWidth=1.6, point=alt.OverlayMarkDef(size=70, filled=True))
        .encode(
            x=x_enc,
            y=y_enc,
            color=enc_color,
            opacity=opacity,
            order=alt.Order(f"{order}:Q"),
            tooltip=tip,
            detail=alt.Detail(f"{detail or color}:N"),
        )
        .add_params(sel)
    )
    return alt.layer(
        line_id, runs, height=height, autosize=alt.AutoSizeParams(type="fit-x", contains="padding")
    )


def quality_trade(
    df: pd.DataFrame,
    x: str,
    y: str,
    color: str,
    labels: str,
    x_title: str,
    y_title: str,
    *,
    colors: dict | None = None,
    titles: dict | None = None,
    tooltip: tuple[str, ...] = (),
    height: int = 340,
    shape: str | None = None,
) -> alt.LayerChart:
    """Formats as points: bytes per token (x, log) against quality loss (y, log: KL from the unquantized run); each
    point labelled (e.g. its top-1 agreement), its marker's shape by `shape` (e.g. the runtime) when given, a value
    the colour's labels must name as well (the shapes have no legend). The
    unquantized baseline (KL 0) cannot sit on a log axis: it is left to the table. Labels sit above their points;
    on a chart narrower than NARROW_PX (a phone) each goes where chart_parts.label_places finds room (above, right,
    below, left), or only in the tooltip when nowhere is free, so no two overlap.
    Example: quality_trade(savings_views.quality_trade(recs), "bytes_per_token", "kl_vs_baseline", "format", ...)."""
    df = positive_rows(df, [x, y])
    df = df.assign(label_place=label_places(list(df[x]), list(df[y]), [str(v) for v in df[labels]]))
    domain = list(dict.fromkeys(df[color]))
    sel = alt.selection_point(name=SELECTION, fields=[color], bind="legend")
    # legend marks a reader can tell apart: large swatches of the colour with no outline (the points' black
    # outline, at a legend's size, left a dot of colour too small to read)
    enc_color = alt.Color(
        f"{color}:N",
        legend=legend(symbolSize=160, symbolStrokeWidth=0, symbolType="square"),
        scale=color_scale(domain, colors),
    )
    x_enc = alt.X(f"{x}:Q", axis=axis_for(True, df[x], x_title), scale=axis_scale(True, df[x]))
    y_enc = alt.Y(f"{y}:Q", axis=axis_for(True, df[y], y_title), scale=axis_scale(True, df[y]))
    opacity = picked(sel, 0.15)
    tip = tooltips(df, [color, x, y, *tooltip], titles)
    base = alt.Chart(df).encode(x=x_enc, y=y_enc, opacity=opacity, tooltip=tip)
    marks = {"color": enc_color}
    if shape:
        # no legend of its own: the colour's labels name the shape's value too ("mlx_lm · mlx-q4 (group 64)"),
        # and a second legend under a phone's chart was two more lines to scroll past
        marks["shape"] = alt.Shape(f"{shape}:N", legend=None)
    points = (
        base.mark_point(size=140, filled=True, stroke="black", strokeWidth=0.8)
        .encode(**marks)
        .add_params(sel)
    )
    texts = [
        base.mark_text(dy=-14, fontSize=11).encode(
            text=alt.Text(f"{labels}:N"), opacity=shown_when(f"width >= {NARROW_PX}")
        )
    ]
    for place, dx, dy, align in LABEL_PLACES:  # a phone's: where label_places found room
        texts.append(
            base.transform_filter(f"datum.label_place == '{place}'")
            .mark_text(dx=dx, dy=dy, align=align, fontSize=11)
            .encode(text=alt.Text(f"{labels}:N"), opacity=shown_when(f"width < {NARROW_PX}"))
        )
    return alt.layer(points, *texts, height=height)


def price_by_context(
    df: pd.DataFrame,
    color: str,
    x_title: str,
    choice,
    *,
    titles: dict | None = None,
    height: int = 300,
    dash: str | None = None,
) -> alt.LayerChart:
    """Each format's price against context length, one line per `color` value (runtime and format), the metric
    picked inside the chart (`choice`: a chart_parts.Choice over the frame's `metric` column, e.g. mean KL, its
    99th percentile, top-1 agreement); x and y on log scales (1,024 to 8,192 tokens; KL spans decades). With
    `dash` (e.g. the runtime) each value's lines have a dash and points a shape of their own, with no legend:
    the colour's labels name it as well.
    Example: price_by_context(savings_views.long_context(recs), "series", "Context (tokens)", choice)."""
    df = positive_rows(df, ["context", "value"])
    domain = list(dict.fromkeys(df[color]))
    sel = alt.selection_point(name=SELECTION, fields=[color], bind="legend")
    pick = choice.param()
    enc_color = alt.Color(f"{color}:N", legend=legend(), scale=color_scale(domain))
    x_enc = alt.X(
        "context:Q",
        axis=alt.Axis(title=x_title, values=sorted(set(df["context"])), format=",d"),
        scale=alt.Scale(type="log", base=2, nice=False),
    )
    y_enc = alt.Y(
        "value:Q", axis=alt.Axis(title=None), scale=alt.Scale(type="log", zero=False, nice=True)
    )
    tip = tooltips(df, [color, "context", "value", "perplexity"], titles)
    base = (
        alt.Chart(df)
        .transform_filter(choice.test(pick))
        .encode(x=x_enc, y=y_enc, color=enc_color, opacity=picked(sel, 0.15), tooltip=tip)
    )
    lines, points = base.mark_line(strokeWidth=2.2), base.mark_point(size=60, filled=True)
    if dash:
        lines = lines.encode(strokeDash=alt.StrokeDash(f"{dash}:N", legend=None))
        points = points.encode(shape=alt.Shape(f"{dash}:N", legend=None))
    return alt.layer(lines.add_params(sel, pick), points, height=height)
