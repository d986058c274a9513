"""Altair charts from the long-form DataFrames of kvcore.views: pure functions, no Streamlit.

Every chart has tooltips and a legend that selects (a named point selection bound to the
legend, so Streamlit can report it). Titles come in as arguments: the pages translate them.
Example: series_chart(df, "tokens", "mib", "series", "tokens", "MiB") -> alt.LayerChart.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

SELECTION = "pick"  # the legend selection's name, as Streamlit reports it
PALETTE = ["#4c78a8", "#e45756", "#54a24b", "#f58518", "#b279a2", "#72b7b2", "#9d755d", "#eeca3b", "#bab0ac", "#ff9da6", "#17becf"]


def _scale(log: bool, values: pd.Series | None = None) -> alt.Scale:
    if not log:
        return alt.Scale(zero=False)
    if values is not None and len(values):
        lo, hi = float(values[values > 0].min()), float(values.max())
        return alt.Scale(type="log", domain=[lo, hi], nice=False)
    return alt.Scale(type="log")


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks per decade within [lo, hi], for log axes that read as round numbers.

    Example: log_ticks(0.03, 1.2) -> [0.05, 0.1, 0.2, 0.5, 1.0].
    """
    ticks, k = [], math.floor(math.log10(lo)) if lo > 0 else 0
    while 10**k <= hi * 1.000001:
        ticks += [m * 10**k for m in (1, 2, 5) if lo * 0.999999 <= m * 10**k <= hi * 1.000001]
        k += 1
    return [float(f"{t:.6g}") for t in ticks]


def _axis(log: bool, values: pd.Series, title: str) -> alt.Axis:
    if log and len(values) and (values > 0).any():
        return alt.Axis(title=title, values=log_ticks(float(values[values > 0].min()), float(values.max())))
    return alt.Axis(title=title)


def _positive(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Log axes: drop zeros and negatives (one zero collapses a log axis)."""
    keep = pd.Series(True, index=df.index)
    for c in cols:
        keep &= df[c] > 0
    return df[keep]


def _tooltip(df: pd.DataFrame, fields: list[str]) -> list[alt.Tooltip]:
    out = []
    for f in fields:
        if f not in df:
            continue
        if not pd.api.types.is_numeric_dtype(df[f]):
            out.append(alt.Tooltip(f, type="nominal"))
            continue
        integer = bool((df[f].dropna() % 1 == 0).all())
        out.append(alt.Tooltip(f, type="quantitative", format=",d" if integer else ",.4~f"))
    return out


def series_chart(
    df: pd.DataFrame, x: str, y: str, color: str, x_title: str, y_title: str, *,
    points: pd.DataFrame | None = None, log_x: bool = False, log_y: bool = False,
    dashed: str | None = None, height: int = 340, legend_title: str = "", step: bool = False,
    error: tuple[str, str] | None = None,
) -> alt.LayerChart:
    """Lines per `color` value, optional measured points (same columns) on top, one legend that selects.

    dashed: a `color` value drawn dashed (e.g. 'theory' over 'used', which it equals).
    error: (low, high) columns of the points (of the lines when there are no points) drawn as a
    vertical bar at each x, e.g. a decode point's spread over passes in tokens/s; rows without
    them (older recordings) get no bar. Example: error=("tokens_per_s_low", "tokens_per_s_high").
    """
    frames = [d for d in (df, points) if d is not None and not d.empty]
    if log_x or log_y:
        frames = [_positive(d, [c for c, on in ((x, log_x), (y, log_y)) if on]) for d in frames]
    both = pd.concat(frames, ignore_index=True)
    domain = list(dict.fromkeys(both[color]))
    sel = alt.selection_point(name=SELECTION, fields=[color], bind="legend")
    enc_color = alt.Color(f"{color}:N", title=legend_title or None, legend=alt.Legend(labelLimit=320),
                          scale=alt.Scale(domain=domain, range=PALETTE[: len(domain)] or PALETTE))
    x_enc = alt.X(f"{x}:Q", axis=_axis(log_x, both[x], x_title), scale=_scale(log_x, both[x]))
    y_values = pd.concat([both[y], *[both[c].dropna() for c in (error or ()) if c in both]], ignore_index=True)
    y_scale = _scale(log_y, y_values)
    y_enc = alt.Y(f"{y}:Q", axis=_axis(log_y, y_values, y_title), scale=y_scale)
    opacity = alt.condition(sel, alt.value(1.0), alt.value(0.15))
    layers = []
    line_df = frames[0] if df is not None and not df.empty else None
    if line_df is not None:
        tip = _tooltip(line_df, [color, x, y, "source"])
        line = alt.Chart(line_df).mark_line(interpolate="step-after" if step else "linear", strokeWidth=2.2)
        enc = dict(x=x_enc, y=y_enc, color=enc_color, opacity=opacity, tooltip=tip)
        if dashed:
            enc["strokeDash"] = alt.condition(alt.datum[color] == dashed, alt.value([6, 4]), alt.value([1, 0]))
        layers.append(line.encode(**enc).add_params(sel))
    if points is not None and not points.empty:
        pts = frames[-1]
        tip = _tooltip(pts, [color, x, y, "source"])
        mark = alt.Chart(pts).mark_point(size=90, filled=True, stroke="black", strokeWidth=0.8)
        same = "source" not in pts or set(pts["source"]) <= set(pts[color])  # the colour already names the source
        shape = alt.Shape("source:N", title=None, legend=None if same else alt.Legend(labelLimit=320))
        layer = mark.encode(x=x_enc, y=y_enc, color=enc_color, opacity=opacity, shape=shape, tooltip=tip)
        layers.append(layer if layers else layer.add_params(sel))
    if error:
        layers.append(_error_bars(frames[-1], x, error, color, x_enc, y_scale, enc_color, opacity, log_y))
    return alt.layer(*layers).properties(height=height)


def _error_bars(df: pd.DataFrame, x: str, error: tuple[str, str], color: str, x_enc, y_scale, enc_color, opacity,
                log_y: bool) -> alt.Chart:
    """Vertical bars from error[0] to error[1] at each x (rows lacking either are left out)."""
    low, high = error
    bars = df.dropna(subset=[low, high]) if {low, high} <= set(df) else df.iloc[0:0].assign(**{low: 0.0, high: 0.0})
    if log_y:
        bars = _positive(bars, [low, high])
    tip = _tooltip(bars, [color, x, low, high])
    return (alt.Chart(bars).mark_rule(strokeWidth=1.6)
            .encode(x=x_enc, y=alt.Y(f"{low}:Q", scale=y_scale, axis=None), y2=alt.Y2(f"{high}:Q"), color=enc_color,
                    opacity=opacity, tooltip=tip))


def bar_chart(
    df: pd.DataFrame, category: str, value: str, color: str, cat_title: str, value_title: str, *,
    log: bool = False, height: "int | dict | alt.Step | None" = None, extra_tooltip: tuple[str, ...] = (), sort: list | None = None,
) -> alt.Chart:
    """Horizontal bars, one per row, coloured (and legend-selectable) by `color`."""
    data = _positive(df, [value]) if log else df
    sel = alt.selection_point(name=SELECTION, fields=[color], bind="legend")
    domain = list(dict.fromkeys(data[color]))
    return (
        alt.Chart(data)
        .mark_bar()
        .encode(
            y=alt.Y(f"{category}:N", title=cat_title, sort=sort or None),
            x=alt.X(f"{value}:Q", title=value_title, scale=alt.Scale(type="log") if log else alt.Scale()),
            color=alt.Color(f"{color}:N", title=None, legend=alt.Legend(labelLimit=320),
                            scale=alt.Scale(domain=domain, range=PALETTE[: len(domain)])),
            opacity=alt.condition(sel, alt.value(1.0), alt.value(0.2)),
            tooltip=_tooltip(data, list(dict.fromkeys([category, value, color, *extra_tooltip]))),
        )
        .add_params(sel)
        .properties(height=height or alt.Step(30))
    )


def grouped_bars(df: pd.DataFrame, category: str, group: str, value: str, cat_title: str, value_title: str) -> alt.Chart:
    """Bars for each `category`, side by side per `group` (e.g. with / without cache per source)."""
    sel = alt.selection_point(name=SELECTION, fields=[group], bind="legend")
    return (
        alt.Chart(df)
        .mark_bar()
        .encode(
            y=alt.Y(f"{group}:N", title=None),
            x=alt.X(f"{value}:Q", title=value_title),
            row=alt.Row(f"{category}:N", title=cat_title, header=alt.Header(labelAngle=0, labelAlign="left", labelLimit=420)),
            color=alt.Color(f"{group}:N", title=None),
            opacity=alt.condition(sel, alt.value(1.0), alt.value(0.2)),
            tooltip=_tooltip(df, [category, group, value]),
        )
        .add_params(sel)
        .properties(height=70)
    )
