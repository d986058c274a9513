"""Chapter 2 — the .nbytes trap: allocated capacity vs used bytes vs theory, token by token."""

import pandas as pd
import streamlit as st

from kvcore.errors import KvError
from kvcore.views import ARTICLE_MODEL
from kvsite.data import geometry, view
from kvsite.export import chart_block, chart_spec
from kvsite.frame import LIVE, setup
from kvsite import live

f = setup("nbytes_trap")
st.title(f.t("trap.title"))
st.markdown(f.t("trap.lead"))
rec = f.pick_source("trap", live=True)

c = st.columns(2)
tokens = c[0].slider(f.t("trap.tokens"), 260, 2048, 600, step=4, key="tokens", bind="query-params")
fmt = c[1].selectbox(f.t("trap.format"), ["fp16", "mlx-q8", "mlx-q4"], key="fmt", bind="query-params",
                     help=f.t("trap.format_help"))

g = geometry(ARTICLE_MODEL)
sim = view("trap_curve", g, tokens, fmt)
points = None
if rec == LIVE:
    points = live.trap_panel(f, tokens, fmt)
elif rec is not None and fmt == "fp16":
    points = view("trap_measured", f.with_section("trap"))
    points = points[points["tokens"] <= tokens]
series = lambda d: d.assign(series=d["series"].map(lambda s: f.t(f"trap.{s}")))  # noqa: E731
data = series(sim.assign(source=f.t("trap.simulated")))
pts = series(points) if points is not None and not points.empty else None
chart = chart_spec("series_chart", data, "tokens", "mib", "series", f.t("trap.x"), "MiB", points=pts, step=True,
                            dashed=f.t("trap.theory"))
event = chart_block(f, chart, data if pts is None else pd.concat([data, pts], ignore_index=True), "trap_chart", "kv-nbytes-trap")
if picked := f.selected(event, "series"):
    st.caption(f.t("common.selected", items=", ".join(picked)))

at = sim.pivot_table(index="tokens", columns="series", values="mib")
m = st.columns(4)
m[0].metric(f.t("trap.alloc_at", n=256), f"{at.loc[256, 'allocated']:.3f} MiB")
m[1].metric(f.t("trap.alloc_at", n=257), f"{at.loc[257, 'allocated']:.3f} MiB",
            f"{at.loc[257, 'allocated'] - at.loc[256, 'allocated']:+.3f} MiB", delta_color="inverse")
m[2].metric(f.t("trap.used_at", n=256), f"{at.loc[256, 'used']:.3f} MiB")
m[3].metric(f.t("trap.used_at", n=257), f"{at.loc[257, 'used']:.3f} MiB",
            f"{at.loc[257, 'used'] - at.loc[256, 'used']:+.3f} MiB", delta_color="inverse")
st.caption(f.t("trap.metrics_note", model=ARTICLE_MODEL))

st.header(f.t("trap.chunk_title"))
st.markdown(f.t("trap.chunk_lead"))
custom = st.text_input(f.t("trap.custom"), "300, 300", key="updates", bind="query-params", help=f.t("trap.custom_help"))
patterns = ["257", "256, 1", "1, 256", "1000", "2048+2047+1", "500x8"]
try:
    table = view("chunking_table", g, [*patterns, custom] if custom not in patterns else patterns, fmt)
except KvError as e:
    st.error(str(e))
    table = view("chunking_table", g, patterns, fmt)
st.dataframe(table, hide_index=True, width="stretch", column_config={
    "updates": f.t("trap.col_updates"), "tokens": f.t("trap.col_tokens"), "capacity": f.t("trap.col_capacity"),
    "allocated_mib": st.column_config.NumberColumn(f.t("trap.col_alloc"), format="%.3f"),
    "used_mib": st.column_config.NumberColumn(f.t("trap.col_used"), format="%.3f"),
    "slack_pct": st.column_config.NumberColumn(f.t("trap.col_slack"), format="%.1f %%")})

st.header(f.t("trap.right_title"))
st.markdown(f.t("trap.right_lead"))
st.code("""used_bytes = 0
for c in cache:                      # one cache object per layer
    k, v = c.keys_and_values()       # the used slice: offset rows, not the capacity
    used_bytes += k.nbytes + v.nbytes
# or, without touching the arrays: c.offset * kv_heads * (K row + V row bytes)
allocated = sum(c.nbytes for c in cache)   # what .nbytes reports: the capacity""", language="python")
st.markdown(f.t("trap.quantized"))
