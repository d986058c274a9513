"""Altair charts from the long-form DataFrames of kvcore.views.memory: pure functions, no Streamlit.

Every chart has tooltips and a legend that selects (a named point selection bound to the legend, so
Streamlit can report it). Legends sit under the plot, so a phone's 390 px go to the plot. Titles and
labels come in as arguments: the pages translate them. A source (recording) keeps one colour everywhere:
callers pass `colors` from kvcore.views.chart_parts.source_colors.
Example: series_chart(df, "tokens", "mib", "series", "tokens", "MiB") -> alt.LayerChart.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from kvcore.views.chart_parts import (
    PAD_PX,
    SELECTION,
    Choice,
    axis_for,
    axis_scale,
    color_scale,
    error_bars,
    legend,
    picked,
    positive_rows,
    rule_marks,
    tooltips,
    with_points,
)

INSIDE, ROOM = "label_inside", "label_room"  # bar_chart's label placement, as data columns
POINT_STROKE = 0.8  # px: a measured point's black outline (and its legend symbol's)


def series_chart(
    df: pd.DataFrame | None,
    x: str,
    y: str,
    color: str,
    x_title: str,
    y_title: str,
    *,
    points: pd.DataFrame | None = None,
    log_x: bool = False,
    log_y: bool = False,
    dashed: str | list | None = None,
    height: int = 340,
    legend_title: str = "",
    step: bool = False,
    colors: dict | None = None,
    rules: pd.DataFrame | None = None,
    titles: dict | None = None,
    error: tuple[str, str] | None = None,
) -> alt.LayerChart:
    """Lines per `color` value, optional measured points (same columns) on top, one legend that selects.

    dashed: `color` values drawn dashed (e.g. 'theory' over 'used', which it equals).
    rules: vertical marks (columns `x`, `label`), e.g. the model's context limit.
    titles: tooltip titles by field (the pages' translations).
    error: (low, high) columns of the points (of the lines when there are no points) drawn as a
    vertical bar at each x, e.g. a decode point's spread over passes in tokens/s; rows without
    them (older recordings) get no bar. Example: error=("tokens_per_s_low", "tokens_per_s_high").
    """
    frames = [d for d in (df, points) if d is not None and not d.empty]
    if log_x or log_y:
        frames = [positive_rows(d, [c for c, on in ((x, log_x), (y, log_y)) if on]) for d in frames]
    both = pd.concat(frames, ignore_index=True)
    xs = (
        both[x]
        if rules is None or rules.empty
        else pd.concat([both[x], rules[x]], ignore_index=True)
    )
    domain = list(dict.fromkeys(both[color]))
    sel = alt.selection_point(name=SELECTION, fields=[color], bind="legend")
    only_points = df is None or df.empty
    # points alone: the legend's symbols are the points' own, outlined as thinly (the theme's thick outline left
    # a black shape around a speck of colour)
    key = legend(legend_title, **({"symbolStrokeWidth": POINT_STROKE} if only_points else {}))
    enc_color = alt.Color(f"{color}:N", legend=key, scale=color_scale(domain, colors))
    x_scale = axis_scale(log_x, xs)
    x_enc = alt.X(f"{x}:Q", axis=axis_for(log_x, xs, x_title), scale=x_scale)
    y_values = pd.concat(
        [both[y], *[both[c].dropna() for c in (error or ()) if c in both]], ignore_index=True
    )
    y_scale = axis_scale(log_y, y_values)
    y_axis = axis_for(log_y, y_values, y_title)
    y_enc = alt.Y(f"{y}:Q", axis=y_axis, scale=y_scale)
    opacity = picked(sel, 0.15)
    dashed_values = [dashed] if isinstance(dashed, str) else list(dashed or [])
    layers = []
    line_df = frames[0] if df is not None and not df.empty else None
    if line_df is not None:
        tip = tooltips(line_df, [color, x, y, "source"], titles)
        line = alt.Chart(line_df).mark_line(
            interpolate="step-after" if step else "linear", strokeWidth=2.2
        )
        enc = dict(x=x_enc, y=y_enc, color=enc_color, opacity=opacity, tooltip=tip)
        if dashed_values:
            enc["strokeDash"] = alt.StrokeDashValue(
                value=[1, 0],
                condition={"test": {"field": color, "oneOf": dashed_values}, "value": [6, 4]},
            )
        layers.append(line.encode(**enc).add_params(sel))
    if points is not None and not points.empty:
        pts = frames[-1]
        tip = tooltips(pts, [color, x, y, "source"], titles)
        mark = alt.Chart(pts).mark_point(
            size=90, filled=True, stroke="black", strokeWidth=POINT_STROKE
        )
        same = "source" not in pts or set(pts["source"]) <= set(
            pts[color]
        )  # the colour already names the source
        # the source's shape, in a legend of its own: outlined and unfilled (its points take their series' colours)
        outline = legend(
            symbolFillColor="white", symbolStrokeColor="black", symbolStrokeWidth=POINT_STROKE
        )
        shape = alt.Shape("source:N", legend=None if same else outline)
        layer = mark.encode(
            x=x_enc, y=y_enc, color=enc_color, opacity=opacity, shape=shape, tooltip=tip
        )
        layers.append(layer if layers else layer.add_params(sel))
    if error:
        layers.append(
            error_bars(
                frames[-1], x, error, color, x_enc, y_scale, enc_color, opacity, log_y, y_axis
            )
        )  # one y axis
    layers += rule_marks(rules, x, x_scale)
    return alt.layer(*layers, height=height)


def trap_chart(
    curve: pd.DataFrame,
    points: pd.DataFrame | None,
    names: dict,
    x_title: str,
    y_title: str,
    titles: dict | None = None,
    height: int = 340,
) -> alt.LayerChart:
    """The .nbytes trap from its breakpoints: allocated as steps, used as a wide band, theory dashed on top of it
    (they are equal, and both stay visible), measured points (column `source`) over all three.

    curve: columns tokens, series (names["allocated" | "used" | "theory"]), mib.
    """
    order = [names["allocated"], names["used"], names["theory"]]
    sel = alt.selection_point(name=SELECTION, fields=["series"], bind="legend")
    color = alt.Color("series:N", legend=legend(), scale=color_scale(order), sort=order)
    opacity = picked(sel, 0.15)
    x = alt.X("tokens:Q", title=x_title, scale=alt.Scale(zero=False, nice=False, padding=PAD_PX))
    y = alt.Y("mib:Q", title=y_title, scale=alt.Scale(padding=PAD_PX))
    tip = tooltips(curve, ["series", "tokens", "mib"], titles)

    def part(name: str, **mark):
        return (
            alt.Chart(curve[curve["series"] == name])
            .mark_line(**mark)
            .encode(x=x, y=y, color=color, opacity=opacity, tooltip=tip)
        )

    layers = [
        part(names["allocated"], interpolate="step-after", strokeWidth=2.4).add_params(sel),
        part(names["used"], strokeWidth=7, strokeOpacity=0.45),
        part(names["theory"], strokeWidth=1.8, strokeDash=[6, 4]),
    ]
    if points is not None and not points.empty:
        shape = alt.Shape("source:N", legend=legend())
        layers.append(
            alt.Chart(points)
            .mark_point(size=90, filled=True, stroke="black", strokeWidth=0.8)
            .encode(
                x=x,
                y=y,
                color=color,
                opacity=opacity,
                shape=shape,
                tooltip=tooltips(points, ["series", "tokens", "mib", "source"], titles),
            )
        )
    return alt.layer(*layers, height=height)


def bar_chart(
    df: pd.DataFrame,
    category: str,
    value: str,
    color: str,
    cat_title: str | None,
    value_title: str,
    *,
    log: bool = False,
    height: "int | dict | alt.Step | None" = None,
    extra_tooltip: tuple[str, ...] = (),
    sort: list | None = None,
    colors: dict | None = None,
    titles: dict | None = None,
    labels: str | None = None,
    show_legend: bool = True,
    choice: Choice | None = None,
) -> alt.LayerChart:
    """Horizontal bars, one per row, coloured (and legend-selectable) by `color`; `labels`: a text column
    printed at the end of each bar (the number a reader came for, readable without hovering); `choice`: the
    rows hold several values of one field and radio buttons inside the chart show one (no round trip);
    `cat_title` None: bars whose labels name themselves ("MHA", "fp16") get no title beside them, so a phone's
    width goes to the plot (the table and tooltip keep the column's title)."""
    data = positive_rows(df, [value]) if log else df
    sel = alt.selection_point(name=SELECTION, fields=[color], bind="legend")
    domain = list(dict.fromkeys(data[color]))
    y = alt.Y(f"{category}:N", title=cat_title, sort=sort or None, axis=alt.Axis(labelLimit=160))
    x = alt.X(f"{value}:Q", title=value_title, scale=alt.Scale(type="log") if log else alt.Scale())
    if labels and len(data):
        # what depends on the values goes in the data, not the spec, which then stays the same when only the values
        # change (the browser updates the drawing in place instead of building it again): which labels sit inside
        # their bars, and the room right of the short bars for theirs (an unseen rule at 1.15x the longest)
        top = float(data[value].max())
        data = data.assign(**{INSIDE: data[value] >= top * 0.5, ROOM: top * 1.15})
        if not log:
            x = alt.X(f"{value}:Q", title=value_title, scale=alt.Scale(nice=False))
    chosen = choice.param() if choice else None
    base = alt.Chart(data).transform_filter(choice.test(chosen)) if choice else alt.Chart(data)
    bars = (
        base.mark_bar()
        .encode(
            y=y,
            x=x,
            color=alt.Color(
                f"{color}:N",
                legend=legend() if show_legend else None,
                scale=color_scale(domain, colors),
            ),
            opacity=picked(sel, 0.2),
            tooltip=tooltips(
                data, list(dict.fromkeys([category, value, color, *extra_tooltip])), titles
            ),
        )
        .add_params(sel, *([chosen] if choice else []))
    )
    layers = [bars]
    if labels and len(
        data
    ):  # a long bar carries its label inside its end, a short one just after it
        if not log:  # room for the labels inside the plot
            layers.append(base.mark_rule(opacity=0).encode(x=alt.X(f"{ROOM}:Q", title=value_title)))
        text = base.encode(y=y, x=x, text=alt.Text(f"{labels}:N"))
        layers += [
            text.transform_filter(f"datum.{INSIDE}").mark_text(
                align="right", dx=-4, fontSize=11, color="white"
            ),
            text.transform_filter(f"!datum.{INSIDE}").mark_text(align="left", dx=3, fontSize=11),
        ]
    return alt.layer(*layers, height=height or alt.Step(30))


def measured_bars(
    df: pd.DataFrame,
    source: str,
    mode: str,
    value: str,
    value_title: str,
    labels: str,
    colors: dict | None = None,
    titles: dict | None = None,
    tooltip: tuple[str, ...] = (),
    x_title: str | None = None,
) -> alt.LayerChart:
    """Two columns per source (e.g. with / without a cache) on one axis, each labelled with its value; a source's
    name may hold a line break ("NVIDIA T4\n300 new tokens"), drawn as two lines under its columns; x_title names
    what the columns are (the runs), under their names.

    df: one row per source and mode (the run's totals, not its running rows).
    """
    sel = alt.selection_point(name=SELECTION, fields=[mode], bind="legend")
    domain = list(dict.fromkeys(df[mode]))
    x = alt.X(
        f"{source}:N",
        title=x_title,
        sort=None,
        axis=alt.Axis(
            labelAngle=0, labelLimit=0, labelExpr="split(datum.label, '\\n')", labelFontSize=11
        ),
    )
    enc = dict(
        x=x, y=alt.Y(f"{value}:Q", title=value_title), xOffset=alt.XOffset(f"{mode}:N", sort=domain)
    )
    bars = (
        alt.Chart(df)
        .mark_bar()
        .encode(
            **enc,
            color=alt.Color(
                f"{mode}:N", legend=legend(), scale=color_scale(domain, colors), sort=domain
            ),
            opacity=picked(sel, 0.2),
            tooltip=tooltips(df, [source, mode, value, *tooltip], titles),
        )
        .add_params(sel)
    )
    text = (
        alt.Chart(df)
        .mark_text(baseline="bottom", dy=-3, fontSize=11)
        .encode(**enc, text=alt.Text(f"{labels}:N"))
    )
    return alt.layer(bars, text, height=300)


def marked_series_chart(
    df: pd.DataFrame,
    x: str,
    y: str,
    color: str,
    x_title: str,
    y_title: str,
    *,
    marks: pd.DataFrame | None = None,
    **kwargs,
) -> alt.LayerChart:
    """series_chart (same keywords, `rules` included) with with_points' labelled points on top."""
    return with_points(series_chart(df, x, y, color, x_title, y_title, **kwargs), x, y, marks)


def stacked_bars(
    df: pd.DataFrame,
    x: str,
    value: str,
    part: str,
    x_title: str,
    y_title: str,
    *,
    order: list,
    line: str | None = None,
    limit: pd.DataFrame | None = None,
    colors: dict | None = None,
    titles: dict | None = None,
    extra_tooltip: tuple[str, ...] = (),
    height: int = 300,
) -> alt.LayerChart:
    """A bar per `x` stacked by `part` in `order` (bottom first), legend-selectable; `line`: a column drawn as a
    black tick on each bar (a figure the stack is held against, e.g. what a server's own line counts); `limit`:
    a horizontal rule with a label (columns `value` and `label`), e.g. a Mac's GPU limit."""
    sel = alt.selection_point(name=SELECTION, fields=[part], bind="legend")
    rank = {p: i for i, p in enumerate(order)}
    data = df.assign(_order=df[part].map(rank))
    x_enc = alt.X(f"{x}:O", title=x_title, axis=alt.Axis(labelAngle=0, labelOverlap=True))
    y_enc = alt.Y(f"{value}:Q", title=y_title, stack="zero")
    bars = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=x_enc,
            y=y_enc,
            color=alt.Color(
                f"{part}:N", legend=legend(), scale=color_scale(order, colors), sort=order
            ),
            order=alt.Order("_order:Q", sort="ascending"),
            opacity=picked(sel, 0.2),
            tooltip=tooltips(data, [x, part, value, *extra_tooltip], titles),
        )
        .add_params(sel)
    )
    layers: list = [bars]
    if line is not None:
        ticks = data.drop_duplicates(x)
        layers.append(
            alt.Chart(ticks)
            .mark_tick(color="black", thickness=2)
            .encode(
                x=x_enc,
                y=alt.Y(f"{line}:Q"),
                tooltip=tooltips(ticks, [x, line], titles),
            )
        )
    if limit is not None and not limit.empty:
        base = alt.Chart(limit).encode(y=alt.Y("value:Q"))
        layers += [
            base.mark_rule(color="#b00020", strokeDash=[4, 3], strokeWidth=1.5).encode(
                tooltip=[alt.Tooltip("label:N", title=None)]
            ),
            base.mark_text(align="left", baseline="bottom", dy=-3, fontSize=11).encode(
                text=alt.Text("label:N"), x=alt.XValue(4)
            ),
        ]
    return alt.layer(*layers, height=height)
