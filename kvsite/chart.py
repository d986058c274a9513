"""Where every page shows a chart: the interactive chart, then its table and CSV / PNG / SVG downloads in one expander.

Chart specs are built by kvcore.charts inside a page section's cache and kept as Vega-Lite dicts whose
datasets are already Arrow IPC bytes (what Streamlit would make of them on every rerun otherwise).
CSV, PNG and SVG are made only when a reader clicks the button (PNG/SVG by vl-convert, no browser).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import altair as alt
import pandas as pd
import pyarrow as pa
import streamlit as st
import vl_convert as vlc

from kvcore import charts

from .tables import arrow, csv_bytes
from .frame import row


@dataclass(frozen=True)
class Chart:
    """What chart_block shows: read-only, shared between reruns (built in a cache_resource section)."""

    spec: dict  # Vega-Lite; datasets as Arrow IPC bytes
    data: pd.DataFrame  # behind the CSV download
    table: pa.Table  # the same rows, for st.dataframe


def to_spec(chart: alt.TopLevelMixin) -> dict:
    """Altair chart -> Vega-Lite dict with each dataset as the Arrow IPC bytes st.vega_lite_chart would send."""
    from streamlit import dataframe_util

    spec = chart.to_dict()
    # Streamlit's default autosize ("fit") fits the height too, so a legend under the plot would squeeze it on a
    # phone; fit-x fits the width and lets the legend add height.
    spec.setdefault("autosize", {"type": "fit-x", "contains": "padding"})
    spec["datasets"] = {name: dataframe_util.convert_anything_to_arrow_bytes(rows)
                        for name, rows in spec.get("datasets", {}).items()}
    return spec


def make_chart(data: pd.DataFrame, builder: str, *args, **kwargs) -> Chart:
    """kvcore.charts.<builder>(*args, **kwargs) with `data` as its table and CSV. Call it inside a cached section."""
    return Chart(to_spec(getattr(charts, builder)(*args, **kwargs)), data, arrow(data))


def _spec(chart: alt.TopLevelMixin | dict) -> dict:
    """A spec vl-convert can render: Arrow datasets back to rows."""
    if not isinstance(chart, dict):
        return chart.to_dict()
    datasets = {name: pa.ipc.open_stream(io.BytesIO(rows)).read_all().to_pylist() if isinstance(rows, bytes) else rows
                for name, rows in chart.get("datasets", {}).items()}
    return {**chart, "datasets": datasets} if datasets else chart


def png_bytes(chart: alt.TopLevelMixin | dict, scale: float = 2) -> bytes:
    return vlc.vegalite_to_png(_spec(chart), scale=scale)


def svg_text(chart: alt.TopLevelMixin | dict) -> str:
    return vlc.vegalite_to_svg(_spec(chart))


def show_chart(frame, chart: Chart, key: str, stem: str, table: bool = True):
    """Show the chart (legend selection reported back) and, below it, one expander with the chart's data
    (as a table) and its CSV / PNG / SVG downloads. The expander is lazy: what is inside is sent only while
    a reader has it open (a closed one costs a rerun ~0.05 ms where the table and three buttons cost ~1.2 ms).
    """
    spec = chart.spec
    event = st.vega_lite_chart(dict(spec), on_select="rerun", key=key, width="stretch")  # Streamlit pops "datasets"
    box = st.expander(frame.t("common.data" if table else "common.downloads"), key=f"{key}_data", on_change="rerun",
                      icon=":material/download:")
    if box.open:
        with box:
            with row():
                st.download_button(frame.t("common.csv"), lambda: csv_bytes(chart.data), f"{stem}.csv", "text/csv",
                                   key=f"{key}_csv", on_click="ignore", icon=":material/table:")
                st.download_button("PNG", lambda: png_bytes(spec), f"{stem}.png", "image/png",
                                   key=f"{key}_png", on_click="ignore", icon=":material/image:")
                st.download_button("SVG", lambda: svg_text(spec), f"{stem}.svg", "image/svg+xml",
                                   key=f"{key}_svg", on_click="ignore", icon=":material/draw:")
            if table:
                st.dataframe(chart.table, hide_index=True, width="stretch")
    return event
