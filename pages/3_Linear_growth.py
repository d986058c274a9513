"""Chapter 3 — linear growth: the formula with the reader's numbers, allocated / used / theory, weights vs KV."""

import streamlit as st

from kvcore.formulas import WEIGHT_FORMATS, KvSpec, formula_text
from kvcore.geometry import preset_names
from kvcore.views import ARTICLE_MODEL
from kvsite.data import geometry, view
from kvsite.export import chart_block, chart_spec
from kvsite.frame import setup

f = setup("linear_growth")
st.title(f.t("growth.title"))
st.markdown(f.t("growth.lead"))
rec = f.pick_source("growth")

c = st.columns(5)
model = c[0].selectbox(f.t("common.model"), preset_names(), index=preset_names().index(ARTICLE_MODEL), key="model", bind="query-params")
ctx = c[1].select_slider(f.t("growth.max_context"), [8192, 16384, 32768, 65536, 131072, 262144, 1048576], 32768, key="ctx", bind="query-params")
weights = c[2].selectbox(f.t("common.weights"), WEIGHT_FORMATS, index=WEIGHT_FORMATS.index("mlx-q4"), key="w", bind="query-params")
kv = c[3].selectbox(f.t("common.kv_format"), ["fp16", "bf16", "fp8", "mlx-q8", "mlx-q4"], key="kv", bind="query-params")
seqs = c[4].number_input(f.t("growth.sequences"), 1, 256, 1, key="seqs", bind="query-params")

g, spec = geometry(model), KvSpec(kv, kv)
st.code(formula_text(g, ctx, spec, seqs), language=None, wrap_lines=True)
curve = view("growth_curve", g, ctx, spec, weights, seqs)
points = None
if rec is not None and rec.data["model"].get("preset") == model and kv == rec.data["model"].get("kv_format") and seqs == 1:
    points = view("growth_measured", [rec])
name = lambda d: d.assign(series=d["series"].map(lambda s: f.t(f"growth.{s}")))  # noqa: E731
data = name(curve)[["context", "series", "gib", "bytes"]]
pts = name(points)[["context", "series", "gib", "source"]] if points is not None and not points.empty else None
chart = chart_spec("series_chart", data, "context", "gib", "series", f.t("common.context"), "GiB", points=pts, log_x=True,
                            log_y=True, dashed=f.t("growth.theory"))
event = chart_block(f, chart, data, "growth_chart", f"kv-growth-{model}")
if picked := f.selected(event, "series"):
    st.caption(f.t("common.selected", items=", ".join(picked)))
if rec is not None and points is None:
    st.caption(f.t("growth.no_points"))

top = curve[curve["context"] == curve["context"].max()].set_index("series")["bytes"]
cross = view("crossover_context", g, weights, spec, seqs)
m = st.columns(3)
m[0].metric(f.t("growth.kv_at", n=f"{int(curve['context'].max()):,}"), f"{top['used'] / 2**30:,.3f} GiB")
m[1].metric(f.t("growth.weights_m", w=weights), f"{top['weights'] / 2**30:,.3f} GiB", f"{top['weights'] / 1e9:,.3f} GB", delta_color="off")
m[2].metric(f.t("growth.crossover"), f"{cross:,}" if cross else "—", help=f.t("growth.crossover_help"))
st.caption(f.t("growth.exact_note"))

st.header(f.t("growth.layers_title"))
layer_ctx = st.select_slider(f.t("common.context"), [1024, 4096, 8192, 32768, 131072], 32768, key="lctx", bind="query-params")
layers = view("per_layer", g, layer_ctx, spec, seqs)
layers["kind"] = layers["kind"].map(lambda k: f.t(f"growth.kind_{k}"))
bars = chart_spec("bar_chart", layers.assign(layer=layers["layer"].astype(str)), "layer", "mib", "kind", f.t("growth.layer"), "MiB",
                        extra_tooltip=("tokens_held",), sort=[str(i) for i in layers["layer"]], height={"step": 11})
chart_block(f, bars, layers, "layers_chart", f"kv-per-layer-{model}", table=False)
st.caption(f.t("growth.layers_note"))

st.header(f.t("faq.title"))
for q in ("why", "how_much"):
    with st.expander(f.t(f"growth.faq_{q}_q")):
        st.markdown(f.t(f"growth.faq_{q}_a"))
