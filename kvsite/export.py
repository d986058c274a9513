"""A chart with its data: the interactive chart, the table, CSV / PNG / SVG downloads.

Chart specs are built by kvcore.charts and cached as Vega-Lite dicts (Altair's validation is the
slowest part of a page run). PNG and SVG are rendered by vl-convert, without a browser, only when
a reader clicks the button.
"""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st
import vl_convert as vlc

from kvcore import charts

from .data import HASH_FUNCS, csv_bytes


@st.cache_data(max_entries=256, show_spinner=False, hash_funcs=HASH_FUNCS)
def chart_spec(builder: str, *args, **kwargs) -> dict:
    """kvcore.charts.<builder>(*args, **kwargs) as a Vega-Lite dict, cached on its arguments."""
    return getattr(charts, builder)(*args, **kwargs).to_dict()


def _spec(chart: alt.TopLevelMixin | dict) -> dict:
    return chart if isinstance(chart, dict) else chart.to_dict()


def png_bytes(chart: alt.TopLevelMixin | dict, scale: float = 2) -> bytes:
    return vlc.vegalite_to_png(_spec(chart), scale=scale)


def svg_text(chart: alt.TopLevelMixin | dict) -> str:
    return vlc.vegalite_to_svg(_spec(chart))


def chart_block(frame, spec: dict, data: pd.DataFrame, key: str, stem: str, table: bool = True):
    """Show the chart (legend selection reported back) and offer its data as CSV and the chart as PNG/SVG."""
    event = st.vega_lite_chart(dict(spec), on_select="rerun", key=key, width="stretch")  # Streamlit pops "datasets"
    cols = st.columns([1, 1, 1, 3])
    cols[0].download_button(frame.t("common.csv"), csv_bytes(data), f"{stem}.csv", "text/csv",
                            key=f"{key}_csv", on_click="ignore", icon=":material/table:")
    cols[1].download_button("PNG", lambda: png_bytes(spec), f"{stem}.png", "image/png",
                            key=f"{key}_png", on_click="ignore", icon=":material/image:")
    cols[2].download_button("SVG", lambda: svg_text(spec), f"{stem}.svg", "image/svg+xml",
                            key=f"{key}_svg", on_click="ignore", icon=":material/draw:")
    if table:
        with st.expander(frame.t("common.table")):
            st.dataframe(data, hide_index=True, width="stretch")
    return event
