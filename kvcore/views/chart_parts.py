"""What every chart shares: the palette and colour scales, the legend under the plot, log scales
and their round ticks, axes, tooltips, labelled rule lines and points, error bars, and a choice
drawn inside the chart (Choice). Pure functions, no Streamlit.

Example: log_ticks(119, 292) -> [100.0, 125.0, 150.0, 200.0, 250.0, 300.0].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import altair as alt
import pandas as pd

SELECTION = "pick"  # the legend selection's name, as Streamlit reports it
PALETTE = [
    "#4c78a8",
    "#e45756",
    "#54a24b",
    "#f58518",
    "#b279a2",
    "#72b7b2",
    "#9d755d",
    "#eeca3b",
    "#bab0ac",
    "#ff9da6",
    "#17becf",
    "#1f3a93",
    "#8c564b",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#7f7f7f",
    "#bcbd22",
    "#aec7e8",
    "#ffbb78",
]
LABEL_LIMIT = 250  # px: a legend starts right of the y axis (~70 px in on a phone); run names are made to fit (Recording.short_name)
PAD_PX = 10  # px of room a scale leaves past its data at each end: a point or a line's top is never cut by the frame
MAX_ROWS = 5000  # Altair's default row limit; builders draw from breakpoints and never come near it


def legend(title: str = "", **kwargs) -> alt.Legend:
    """A legend under the plot, one entry per line (labels of any length stay readable on a phone)."""
    return alt.Legend(
        title=title or None, orient="bottom", direction="vertical", labelLimit=LABEL_LIMIT, **kwargs
    )


def picked(sel: alt.Parameter, rest: float) -> alt.OpacityValue:
    """Opacity 1 for what the legend selects (`sel`), `rest` for the others: alt.condition(sel, alt.value(1.0),
    alt.value(rest)), written as the channel object it becomes. Every encoding channel here is given as an object,
    not as a dict or a shorthand string: Altair turns each of those into one on every encode() by reading its whole
    schema again (~10 ms a channel, a fifth to a third of a chart's construction; benchmarks/bench_charts.py)."""
    return alt.OpacityValue(value=rest, condition={"param": sel.name, "value": 1.0})


def source_colors(recs: list) -> dict[str, str]:
    """One colour per recording id, the same on every page and chart: the palette in order of the sorted ids.

    Example: source_colors(all recordings)["published-article-a-m5-pro"] -> '#4c78a8' wherever it is drawn.
    """
    return {rid: PALETTE[i % len(PALETTE)] for i, rid in enumerate(sorted({r.id for r in recs}))}


def color_scale(domain: list, colors: dict | None = None) -> alt.Scale:
    """Colours for `domain`: from `colors` (a source's colour site-wide) where given, else the palette in order; a
    colour another series of this chart already has is replaced by one no series here has (more sources than the
    palette has colours share one site-wide, never within a chart while the palette lasts)."""
    colors = colors or {}
    wanted = [colors.get(v) for v in domain]
    free = iter(c for c in PALETTE if c not in colors.values())
    out: list[str] = []
    for c in wanted:
        if c is None or c in out:
            c = next((p for p in free if p not in out and p not in wanted), None) or next(
                (p for p in PALETTE if p not in out), "#888888"
            )
        out.append(c)
    return alt.Scale(domain=domain, range=out)


def axis_scale(log: bool, values: pd.Series | None = None) -> alt.Scale:
    """A value axis's scale, PAD_PX of room past the data at each end: linear from the data (not from zero), or log
    from the round tick below the values to the one above."""
    if not log:
        return alt.Scale(
            zero=False, nice=False, padding=PAD_PX
        )  # nice: a tick past 0 ("-40 tokens")
    if values is not None and len(values) and (values > 0).any():
        ticks = log_ticks(float(values[values > 0].min()), float(values.max()))
        return alt.Scale(type="log", domain=[ticks[0], ticks[-1]], nice=False, padding=PAD_PX)
    return alt.Scale(type="log", padding=PAD_PX)


LADDERS = (
    (1, 2, 5),
    (1, 2, 3, 5),
    (1, 2, 3, 4, 5, 6, 7, 8, 9),
    (1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 7, 8, 9),
)
MIN_LOG_TICKS = 4  # fewer and a curve can sit between two labels a decade apart (issue 17: only 6-10 labelled, a curve at 17)


def log_ticks(lo: float, hi: float) -> list[float]:
    """Round ticks for a log axis around [lo, hi]: the first at or below lo, the last at or above hi (every point
    lies inside the labelled range), from the coarsest ladder (1-2-5 per decade, then 1-2-3-5, every integer,
    quarter steps) that gives at least MIN_LOG_TICKS.

    Example: log_ticks(119, 292) -> [100.0, 125.0, 150.0, 200.0, 250.0, 300.0] (Article A's 292 tok/s below the top
    label); log_ticks(6.2, 17) -> [6.0, 7.0, 8.0, 9.0, 10.0, 20.0]; log_ticks(0.03, 1.2) -> [0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0].
    """
    if lo <= 0 or hi <= 0:
        return []
    lo, hi = min(lo, hi), max(lo, hi)
    for mantissas in LADDERS:
        k = math.floor(math.log10(lo)) - 1
        ladder = []
        while not ladder or ladder[-1] < hi * 1.000001:
            ladder += [m * 10**k for m in mantissas]
            k += 1
        below = max(t for t in ladder if t <= lo * 1.000001)
        above = min(t for t in ladder if t >= hi * 0.999999)
        ticks = [t for t in ladder if below <= t <= above]
        if len(ticks) >= MIN_LOG_TICKS:
            break
    while (
        len(ticks) < MIN_LOG_TICKS
    ):  # one value (or a sliver): its finest neighbours on both sides
        i, j = ladder.index(ticks[0]), ladder.index(ticks[-1])
        wider = ladder[max(i - 1, 0) : j + 2]
        if len(wider) == len(ticks):
            break
        ticks = wider
    return [float(f"{t:.6g}") for t in ticks]


def axis_for(log: bool, values: pd.Series, title: str) -> alt.Axis:
    if log and len(values) and (values > 0).any():
        return alt.Axis(
            title=title,
            values=log_ticks(float(values[values > 0].min()), float(values.max())),
            format="~g",
        )
    return alt.Axis(title=title)


def positive_rows(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Log axes: drop zeros and negatives (one zero collapses a log axis)."""
    keep = pd.Series(True, index=df.index)
    for c in cols:
        keep &= df[c] > 0
    return df[keep]


def tooltips(df: pd.DataFrame, fields: list[str], titles: dict | None = None) -> list[alt.Tooltip]:
    """Tooltips for `fields` present in df: integers with separators, other numbers to 3 significant figures."""
    out = []
    for f in fields:
        if f not in df:
            continue
        title = (titles or {}).get(f)
        if not pd.api.types.is_numeric_dtype(df[f]):
            out.append(alt.Tooltip(f, type="nominal", title=title))
            continue
        integer = bool((df[f].dropna() % 1 == 0).all())
        out.append(
            alt.Tooltip(f, type="quantitative", format=",d" if integer else ",.3~r", title=title)
        )
    return out


def rule_marks(rules: pd.DataFrame | None, x: str, scale: alt.Scale) -> list:
    """Vertical marks with a label (a model's context limit, the reader's context): columns `x` and `label`."""
    if rules is None or rules.empty:
        return []
    base = alt.Chart(rules).encode(x=alt.X(f"{x}:Q", scale=scale))
    return [
        base.mark_rule(color="#555555", strokeDash=[2, 3], strokeWidth=1.5).encode(
            tooltip=[alt.Tooltip("label:N", title=None)]
        ),
        base.mark_text(
            align="right", baseline="top", dx=-4, dy=4, fontSize=11, color="#333333"
        ).encode(text=alt.Text("label:N"), y=alt.YValue(0)),
    ]


def error_bars(
    df: pd.DataFrame,
    x: str,
    error: tuple[str, str],
    color: str,
    x_enc,
    y_scale,
    enc_color,
    opacity,
    log_y: bool,
    y_axis: alt.Axis,
) -> alt.Chart:
    """Vertical bars from error[0] to error[1] at each x (rows lacking either are left out)."""
    low, high = error
    bars = (
        df.dropna(subset=[low, high])
        if {low, high} <= set(df)
        else df.iloc[0:0].assign(**{low: 0.0, high: 0.0})
    )
    if log_y:
        bars = positive_rows(bars, [low, high])
    tip = tooltips(bars, [color, x, low, high])
    return (
        alt.Chart(bars)
        .mark_rule(strokeWidth=1.6)
        .encode(
            x=x_enc,
            y=alt.Y(f"{low}:Q", scale=y_scale, axis=y_axis),
            y2=alt.Y2(f"{high}:Q"),
            color=enc_color,
            opacity=opacity,
            tooltip=tip,
        )
    )


def with_points(
    chart: alt.TopLevelMixin, x: str, y: str, marks: pd.DataFrame | None = None
) -> alt.LayerChart:
    """`chart` with labelled points on its own scales (marks: columns `x`, `y` and `label`, e.g. the value at the
    reader's context), drawn over the lines and kept out of the legend.

    Example: with_points(series_chart(df, "context", "tokens_per_s", ...), "context", "tokens_per_s",
    pd.DataFrame([{"context": 32768, "tokens_per_s": 18.6, "label": "32,768: 18.6 tok/s"}])).
    """
    if marks is None or marks.empty:
        return chart
    base = alt.Chart(marks).encode(x=alt.X(f"{x}:Q"), y=alt.Y(f"{y}:Q"))
    points = [
        base.mark_point(
            size=120, filled=True, color="#333333", stroke="white", strokeWidth=1.5
        ).encode(tooltip=[alt.Tooltip("label:N", title=None)]),
        base.mark_text(
            align="left",
            baseline="bottom",
            dx=7,
            dy=-7,
            fontSize=11,
            fontWeight="bold",
            color="#333333",
        ).encode(text=alt.Text("label:N")),
    ]
    if isinstance(chart, alt.LayerChart):
        # the points beside the chart's own layers, not the chart as a layer of a new one: the same drawing, and
        # Altair does not copy and re-check the whole chart twice (a third of the Calculator's decode chart)
        flat = chart.copy(deep=False)
        flat.layer = [*chart.layer, *points]
        return flat
    return alt.layer(chart, *points)


@dataclass(frozen=True)
class Choice:
    """Rows that hold several values of `field` (e.g. a per-layer table at five contexts), of which the chart shows
    one: the reader picks it with radio buttons drawn inside the chart, bound to a Vega-Lite parameter, so the
    chart repaints in the browser with no round trip to the server. `value` is shown first.

    Example: Choice("context", (1024, 4096), 4096, "Context: ", ("1,024", "4,096"))
    """

    field: str
    options: tuple
    value: object
    label: str
    option_labels: tuple[str, ...] = ()
    name: str = "choice"  # the parameter's name in the spec

    def param(self) -> alt.Parameter:
        return alt.param(
            name=self.name,
            value=self.value,
            bind=alt.binding_radio(
                options=list(self.options),
                labels=list(self.option_labels or map(str, self.options)),
                name=self.label,
            ),
        )

    def test(self, param: alt.Parameter):
        return alt.datum[self.field] == param


NARROW_PX = 600  # a chart narrower than this (a phone) places its point labels by label_places
# where label_places may put a point's label: (name, dx, dy, align), tried in this order
LABEL_PLACES = (
    ("above", 0, -14, "center"),
    ("right", 10, 0, "left"),
    ("below", 0, 16, "center"),
    ("left", -10, 0, "right"),
)


def label_places(
    xs: list[float],
    ys: list[float],
    texts: list[str],
    width_px: float = 260,
    height_px: float = 340,
    char_px: float = 5.5,
) -> list[str | None]:
    """Where each point's label goes on a log-log plot `width_px` × `height_px` (a 390 px phone's plot, by default),
    so that no label covers another label or a point's marker: the first of LABEL_PLACES that is free, else None
    (the label is left to the tooltip). The axes span log_ticks of the values, as axis_scale draws them; a label is
    ~`char_px` per character and 12 px high, a marker 14 px across.
    Example: label_places([1, 1.01], [1, 1.01], ["a", "b"]) -> ["below", "above"] (two points 1 % apart)."""

    def scaled(values, length, flip):
        ticks = log_ticks(min(values), max(values))
        lo, hi = math.log(ticks[0]), math.log(ticks[-1])
        out = [(math.log(v) - lo) / ((hi - lo) or 1) * length for v in values]
        return [length - v for v in out] if flip else out

    px, py = scaled(xs, width_px, False), scaled(ys, height_px, True)
    taken = [(x - 7, y - 7, x + 7, y + 7) for x, y in zip(px, py)]  # every marker
    out: list[str | None] = []
    for x, y, text in zip(px, py, texts):
        w, h = len(text) * char_px, 12
        for name, dx, dy, align in LABEL_PLACES:
            left = x + dx - {"center": w / 2, "left": 0, "right": w}[align]
            box = (left, y + dy - h / 2, left + w, y + dy + h / 2)
            inside = box[0] >= -8 and box[2] <= width_px + 8 and box[1] >= -16
            if inside and not any(
                box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in taken
            ):
                taken.append(box)
                out.append(name)
                break
        else:
            out.append(None)
    return out


def shown_when(test: str) -> alt.OpacityValue:
    """A text layer's opacity: hidden unless `test` (a Vega expression, e.g. on the chart's width) holds, then as
    the legend selection has it (the points' opacity)."""
    return alt.OpacityValue(
        value=0.15,
        condition=[{"test": f"!({test})", "value": 0}, {"param": SELECTION, "value": 1.0}],
    )
