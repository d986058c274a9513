"""Chapter 1 — why a cache at all: work per step with and without it, and measured decode times."""

import streamlit as st

from kvsite.data import view
from kvsite.export import chart_block, chart_spec
from kvsite.frame import setup, url_choice

f = setup("mechanism")
st.title(f.t("mechanism.title"))
st.markdown(f.t("mechanism.lead"))

c = st.columns(3)
prompt = c[0].slider(f.t("mechanism.prompt"), 1, 2048, 16, key="prompt", bind="query-params")
new = c[1].slider(f.t("mechanism.new"), 2, 500, 50, key="new", bind="query-params")
with c[2]:
    per_step = url_choice(st.radio, f.t("mechanism.view"), ["cumulative", "per_step"], "cumulative", "view",
                          format_func=lambda v: f.t(f"mechanism.view_{v}"), horizontal=True) == "per_step"

work = view("mechanism_work", prompt, new)
y = "rows_per_step" if per_step else "cumulative_rows"
data = work.assign(mode=work["mode"].map(lambda m: f.t(f"mechanism.{m}")))[["step", "mode", y]]
chart = chart_spec("series_chart", data, "step", y, "mode", f.t("mechanism.x_step"), f.t(f"mechanism.y_{y}"))
event = chart_block(f, chart, data, "mech_chart", "kv-mechanism-work")
if picked := f.selected(event, "mode"):
    st.caption(f.t("common.selected", items=", ".join(picked)))

last = work[work["step"] == new].set_index("mode")["cumulative_rows"]
m = st.columns(3)
m[0].metric(f.t("mechanism.total_with"), f"{last['with_cache']:,}")
m[1].metric(f.t("mechanism.total_without"), f"{last['without_cache']:,}")
m[2].metric(f.t("mechanism.ratio"), f"{last['without_cache'] / last['with_cache']:,.1f}×")
st.caption(f.t("mechanism.work_note"))

st.header(f.t("mechanism.measured_title"))
rec = f.pick_source("mechanism", default="published-article-b-t4-mechanism")
if rec is not None:
    measured = view("mechanism_measured", f.with_section("mechanism"))
    measured["mode"] = measured["mode"].map(lambda m: f.t(f"mechanism.{m.removesuffix('_s')}"))
    chosen = measured[measured["recording"] == rec.id]
    row = chosen.iloc[0]
    st.metric(f.t("mechanism.speedup", n=int(row["new_tokens"])), f"{row['speedup']:.2f}×")
    bars = chart_spec("grouped_bars", measured, "source", "mode", "seconds", f.t("mechanism.run"), f.t("mechanism.seconds"))
    chart_block(f, bars, measured, "mech_measured", "kv-mechanism-measured")
    st.caption(f.t("mechanism.measured_note"))

st.header(f.t("faq.title"))
for q in ("what", "speed"):
    with st.expander(f.t(f"mechanism.faq_{q}_q")):
        st.markdown(f.t(f"mechanism.faq_{q}_a"))
