"""Chapter 5 — the two levers on bytes per token: fewer KV heads (GQA/MQA/MLA) and fewer bits (quantization)."""

import streamlit as st

from kvcore.formats import FORMATS
from kvcore.formulas import WEIGHT_FORMATS
from kvcore.geometry import preset_names
from kvcore.published import figures, source
from kvsite.data import geometry, view
from kvsite.export import chart_block, chart_spec
from kvsite.frame import setup

f = setup("savings")
st.title(f.t("savings.title"))
st.markdown(f.t("savings.lead"))
c = st.columns(3)
names = preset_names()
model = c[0].selectbox(f.t("common.model"), names, index=names.index("llama-3.1-8b"), key="model", bind="query-params")
ctx = c[1].select_slider(f.t("common.context"), [4096, 8192, 32768, 65536, 131072, 262144], 131072, key="ctx", bind="query-params")
g = geometry(model)

st.header(f.t("savings.heads_title"))
heads = view("heads_compare", g, ctx)
heads["variant"] = heads["variant"].map(lambda v: f.t(f"savings.variant_{v}"))
chart_block(f, chart_spec("bar_chart", heads, "variant", "gib", "variant", f.t("savings.variant"), "GiB", extra_tooltip=("kv_heads", "vs_mha")),
            heads, "heads_chart", f"kv-heads-{model}")
st.markdown(f.t("savings.heads_text"))

st.header(f.t("savings.formats_title"))
default = ["fp16", "fp8", "mlx-q8", "mlx-q4", "q8_0", "q4_0", "turbo3"]
fmts = st.multiselect(f.t("savings.formats"), list(FORMATS), default, key="fmts", bind="query-params") or ["fp16"]
table = view("format_table", g, fmts)
curve = view("formats_curve", g, fmts, max(ctx, 8192))
chart_block(f, chart_spec("series_chart", curve, "context", "gib", "format", f.t("common.context"), "GiB", log_x=True, log_y=True),
            curve, "formats_chart", f"kv-formats-{model}")
st.dataframe(table, hide_index=True, width="stretch", column_config={
    "bits_per_value": st.column_config.NumberColumn(f.t("savings.bits"), format="%.3f"),
    "bytes_per_token": st.column_config.NumberColumn(f.t("savings.bytes_token"), format="%d"),
    "vs_fp16": st.column_config.NumberColumn("× fp16", format="%.3f")})
st.caption(f.t("savings.formats_note"))

st.subheader(f.t("savings.fits_title"))
c = st.columns(2)
mem = c[0].slider(f.t("savings.memory"), 4, 192, 36, key="mem", bind="query-params")
weights = c[1].selectbox(f.t("common.weights"), WEIGHT_FORMATS, index=WEIGHT_FORMATS.index("mlx-q4"), key="w", bind="query-params")
fits = view("fits_table", g, weights, float(mem), fmts)
if fits["max_context"].max() == 0:
    st.error(f.t("savings.no_fit", mem=mem))
else:
    chart_block(f, chart_spec("bar_chart", fits, "format", "max_context", "format", f.t("savings.format"), f.t("savings.max_context")),
                fits, "fits_chart", f"kv-fits-{model}-{mem}gb", table=False)
st.caption(f.t("savings.fits_note", mem=mem))

st.header(f.t("savings.turbo_title"))
claims = view("turbo3_claims")
claims["claim"] = claims["claim"].map(lambda k: f.t(f"savings.claim_{k}"))
st.dataframe(claims, hide_index=True, width="stretch", column_config={
    "claim": f.t("savings.claim"), "bits_per_value": st.column_config.NumberColumn(f.t("savings.bits"), format="%.3f"),
    "gib": st.column_config.NumberColumn("GiB", format="%.3f"), "vs_fp16": st.column_config.NumberColumn("fp16 ÷", format="%.2f")})
st.markdown(f.t("savings.turbo_text"))
st.dataframe(view("turbo_padding"), hide_index=True, column_config={
    "head_dim_128": st.column_config.NumberColumn(f.t("savings.hd128"), format="%.3f"),
    "head_dim_64": st.column_config.NumberColumn(f.t("savings.hd64"), format="%.3f")})

st.header(f.t("savings.tradeoffs_title"))
p = figures()
st.markdown(f.t("savings.tradeoffs", lo=p["turbo3_speed"]["drop_pct_low"], hi=p["turbo3_speed"]["drop_pct_high"],
                speedup=p["turboquant_kernel"]["speedup_max"], b=source("article_b"), paper=source("turboquant_paper"),
                google=source("google_research")))
bench = next((r for r in f.recs if r.has("benchmark")), None)
if bench is not None:
    rows = view("section_frame", [bench], "benchmark")
    chart_block(f, chart_spec("bar_chart", rows, "name", "tokens_per_s", "name", f.t("savings.weights_precision"), "tokens/s",
                                    extra_tooltip=("peak_memory_gb",), sort=list(rows["name"])), rows, "bench_chart", "mlx-lm-benchmarks", table=False)
    st.caption(f.t("savings.bench_note", source=bench.data["citation"]["source"]))

st.header(f.t("faq.title"))
nums = {"lo": p["turbo3_speed"]["drop_pct_low"], "hi": p["turbo3_speed"]["drop_pct_high"], "speedup": p["turboquant_kernel"]["speedup_max"]}
for q in ("smaller", "kv_vs_weights", "turboquant", "quality", "faster"):
    with st.expander(f.t(f"savings.faq_{q}_q")):
        st.markdown(f.t(f"savings.faq_{q}_a", **(nums if q == "faster" else {})))
