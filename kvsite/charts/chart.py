"""Where every page shows a chart: the interactive chart, then its table and CSV / PNG / SVG downloads in one expander.

Chart specs are built by kvcore.views.charts inside a page section's cache and kept as Vega-Lite dicts whose
datasets are already Arrow IPC bytes (what Streamlit would make of them on every rerun otherwise).
CSV, PNG and SVG are made only when a reader clicks the button (PNG/SVG by vl-convert, no browser), and each
stands alone: the chart's title, its settings and its source are written into the image (title and subtitle) and
into the CSV (comment lines first). Japanese glyphs come from a font shipped as a Python package
(noto-cjk-sans-jp-regular, SIL OFL 1.1) registered with vl-convert, so a host without system fonts draws them.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import altair as alt
import pandas as pd
import pyarrow as pa
import streamlit as st
import vl_convert as vlc

from kvcore.views import charts, run_charts
from kvsite.layout import row

from .tables import arrow, csv_bytes

EXPORT_FONT = "Noto Sans CJK JP"  # the family of the font file below
EXPORT_WIDTH = 720  # px: an exported chart's plot width (the page's chart fits its column instead)


def _register_font() -> None:
    """vl-convert draws text with the fonts it knows: the system's, plus this package's Noto Sans CJK JP."""
    import noto_cjk_sans_jp_regular as noto

    vlc.register_font_directory(str(noto.FONT_PATH.parent))


_register_font()

# Altair checks every schema object against Vega-Lite's schema as it is built ("debug mode", on by default), and a
# chart is built from dozens of them: about a fifth of what a new state's chart costs here once its channels are
# objects (benchmarks/bench_charts.py; Altair's maintainers turn it off in production too: vega/altair#2850,
# #3545). The site builds its charts with it off, as it serializes them unchecked (to_spec); the tests check every
# spec the pages send against the schema instead (tests/app/app_helpers.py: vega_lite_problems).
alt.utils.schemapi.disable_debug_mode()


@dataclass(frozen=True)
class Export:
    """What an exported chart or CSV says about itself: title, settings ("label: value" lines) and source."""

    title: str
    lines: tuple[str, ...] = ()

    def csv_notes(self) -> tuple[str, ...]:
        return (self.title, *self.lines)


@dataclass(frozen=True)
class Chart:
    """What show_chart shows: read-only, shared between reruns (built in a cache_resource section)."""

    spec: dict  # Vega-Lite; datasets as Arrow IPC bytes
    data: pd.DataFrame  # behind the CSV download
    table: pa.Table  # the same rows, for st.dataframe


def to_spec(chart: alt.TopLevelMixin) -> dict:
    """Altair chart -> Vega-Lite dict with each dataset as the Arrow IPC bytes st.vega_lite_chart would send."""
    from streamlit import dataframe_util

    # Altair's check against the Vega-Lite schema takes ~0.1 s a chart (a Calculator chart here), most of what a new
    # state's chart costs: without it the Calculator's state sweeps took 0.75-0.80 of their time (two paired
    # rounds). The tests check every spec the pages send instead, the edits below included
    # (tests/app/app_helpers.py: vega_lite_problems, in every state sweep run)
    spec = chart.to_dict(validate=False)
    # Streamlit's default autosize ("fit") fits the height too, so a legend under the plot would squeeze it on a
    # phone; fit-x fits the width and lets the legend add height.
    spec.setdefault("autosize", {"type": "fit-x", "contains": "padding"})
    # two legends under the plot (series by colour, sources by shape) stack, each from the left edge: side by side
    # the second ran past a phone's screen and was cut mid-character
    config = spec.setdefault("config", {})
    config["legend"] = {
        **config.get("legend", {}),
        "layout": {"bottom": {"direction": "vertical", "anchor": "start"}},
    }
    # a quantitative x axis's last label near the plot's right end (a tick inside a padded domain) was drawn half
    # past it and cut: a label within 24 px of either end is aligned to end at its tick, inside the plot
    config["axisXQuantitative"] = {"labelFlush": 24, **config.get("axisXQuantitative", {})}
    # Altair names a dataset by its rows' hash, so a step that changes the rows changed the spec too, and Streamlit's
    # frontend builds a chart whose spec changed again from nothing (its view made anew) where it updates a view's
    # datasets in place: each dataset is named by its place instead (data-0, data-1, ...), the spec the same
    # for every state of the same drawing
    datasets = spec.pop("datasets", {})
    names = {name: f"data-{i}" for i, name in enumerate(datasets)}
    spec = _renamed(spec, names)
    spec["datasets"] = {
        names[name]: dataframe_util.convert_anything_to_arrow_bytes(rows)
        for name, rows in datasets.items()
    }
    return spec


def _renamed(node, names: dict[str, str]):
    """`node` (a spec's part) with every reference to a dataset ({"name": <Altair's name>}) by its new name."""
    if isinstance(node, dict):
        return {
            k: names[v] if k == "name" and isinstance(v, str) and v in names else _renamed(v, names)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_renamed(v, names) for v in node]
    return node


def make_chart(data: pd.DataFrame, builder: str, *args, **kwargs) -> Chart:
    """kvcore.views.charts.<builder> (or kvcore.views.run_charts.<builder>)(*args, **kwargs) with `data` as its table
    and CSV. Call it inside a cached section."""
    build = getattr(charts, builder, None) or getattr(run_charts, builder)
    return Chart(to_spec(build(*args, **kwargs)), data, arrow(data))


def _spec(chart: alt.TopLevelMixin | dict) -> dict:
    """A spec vl-convert can render: Arrow datasets back to rows."""
    if not isinstance(chart, dict):
        return chart.to_dict()
    datasets = {
        name: pa.ipc.open_stream(io.BytesIO(rows)).read_all().to_pylist()
        if isinstance(rows, bytes)
        else rows
        for name, rows in chart.get("datasets", {}).items()
    }
    return {**chart, "datasets": datasets} if datasets else chart


def export_spec(chart: alt.TopLevelMixin | dict, about: Export | None = None) -> dict:
    """The spec as exported: a fixed width, padded so no label is cut at an edge (autosize "pad" grows the image to
    hold every axis label, the x axis's last included), the export font, and `about` as title and subtitle."""
    spec = dict(_spec(chart))
    spec["autosize"] = {"type": "pad", "contains": "padding"}
    spec["padding"] = {"left": 12, "right": 28, "top": 12, "bottom": 12}
    spec.setdefault("width", EXPORT_WIDTH)
    config = dict(spec.get("config", {}))
    config["font"] = EXPORT_FONT
    spec["config"] = config
    if about is not None:
        spec["title"] = {
            "text": about.title,
            "subtitle": list(about.lines),
            "anchor": "start",
            "fontSize": 15,
            "subtitleFontSize": 11,
            "subtitleColor": "#444444",
            "offset": 12,
        }
    return spec


def png_bytes(
    chart: alt.TopLevelMixin | dict, scale: float = 2, about: Export | None = None
) -> bytes:
    return vlc.vegalite_to_png(export_spec(chart, about), scale=scale)


def svg_text(chart: alt.TopLevelMixin | dict, about: Export | None = None) -> str:
    return vlc.vegalite_to_svg(export_spec(chart, about))


def show_chart(
    frame,
    chart: Chart,
    key: str,
    stem: str,
    table: bool = True,
    settings: dict | None = None,
    source: str | None = None,
):
    """Show the chart (legend selection reported back) and, below it, one expander with the chart's data
    (as a table) and its CSV / PNG / SVG downloads. The expander is lazy: what is inside is sent only while
    a reader has it open (a closed one costs a rerun ~0.05 ms where the table and three buttons cost ~1.2 ms).

    The downloads carry the chart's title (`export.<key>`), `settings` ({widget label: value}) and its source
    (`source`, else the page's data source as its badge names it: frame.source_text).
    """
    spec = chart.spec
    about = frame.export(key, settings, source)
    event = st.vega_lite_chart(
        dict(spec), on_select="rerun", key=key, width="stretch"
    )  # Streamlit pops "datasets"
    box = st.expander(
        frame.t("common.data" if table else "common.downloads"),
        key=f"{key}_data",
        on_change="rerun",
        icon=":material/download:",
    )
    if box.open:
        with box:
            with row():
                st.download_button(
                    frame.t("common.csv"),
                    lambda: csv_bytes(chart.data, about.csv_notes()),
                    f"{stem}.csv",
                    "text/csv",
                    key=f"{key}_csv",
                    on_click="ignore",
                    icon=":material/table:",
                )
                st.download_button(
                    "PNG",
                    lambda: png_bytes(spec, about=about),
                    f"{stem}.png",
                    "image/png",
                    key=f"{key}_png",
                    on_click="ignore",
                    icon=":material/image:",
                )
                st.download_button(
                    "SVG",
                    lambda: svg_text(spec, about=about),
                    f"{stem}.svg",
                    "image/svg+xml",
                    key=f"{key}_svg",
                    on_click="ignore",
                    icon=":material/draw:",
                )
            if table:
                st.dataframe(chart.table, hide_index=True, width="stretch")
    return event
