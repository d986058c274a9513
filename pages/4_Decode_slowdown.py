"""Chapter 4 — decode slowdown: tok/s vs context explained by bytes read per generated token."""

import streamlit as st

from kvcore import hardware
from kvcore.formulas import WEIGHT_FORMATS, KvSpec
from kvcore.geometry import preset_names
from kvcore.views import ARTICLE_MODEL
from kvsite import live
from kvsite.data import geometry, view
from kvsite.export import chart_block, chart_spec
from kvsite.frame import DEFAULT_SOURCE, LIVE, setup

f = setup("decode_slowdown")
st.title(f.t("decode.title"))
st.markdown(f.t("decode.lead"))
rec = f.pick_source("decode", live=True)
if rec == LIVE:
    job = live.job_panel(f, "decode")
    rec = job.recording() if job is not None else None
    if rec is None:
        st.stop()

runs = [rec] + [r for r in f.with_section("decode") if r is not rec and r.id != getattr(rec, "id", None)]
fits = {r.id: view("decode_fit", r) for r in runs}
pts = [view("decode_points", r) for r in runs if fits[r.id] is not None]
if not pts:
    st.info(f.t("decode.no_model"))
    st.stop()
import pandas as pd  # noqa: E402

points = pd.concat(pts, ignore_index=True)
lines = pd.concat([fits[r.id][1] for r in runs if fits[r.id] is not None], ignore_index=True)
chart = chart_spec("series_chart", lines.assign(series=lines["source"]), "context", "tokens_per_s", "series", f.t("common.context"),
                            "tokens/s", points=points.assign(series=points["source"]), log_x=True, log_y=True)
event = chart_block(f, chart, points, "decode_chart", "kv-decode-vs-context")
if picked := f.selected(event, "series"):
    st.caption(f.t("common.selected", items=", ".join(picked)))

fit = fits[rec.id]
if fit is not None:
    st.subheader(f.t("decode.check_title"))
    w = view("worked_check", rec)
    if w:
        m = st.columns(4)
        m[0].metric(f.t("decode.bytes_token"), f"{w['bytes_a'] / 1e9:.3f} → {w['bytes_b'] / 1e9:.3f} GB")
        m[1].metric(f.t("decode.predicted"), f"{w['predicted_slowdown']:.2f}×")
        m[2].metric(f.t("decode.measured"), f"{w['measured_slowdown']:.2f}×")
        m[3].metric(f.t("decode.implied"), f"{w['gbps_a']:.0f} / {w['gbps_b']:.0f} GB/s")
        st.markdown(f.t("decode.check_text", a=w["context_a"], b=w["context_b"], w=w["weights_bytes"] / 1e9,
                        kva=w["kv_bytes_a"] / 1e6, kvb=w["kv_bytes_b"] / 1e9, ta=w["tokens_per_s_a"], tb=w["tokens_per_s_b"]))
    chip = view("chip_for", rec)
    st.info(f.t("decode.fit", bw=fit[0].bandwidth_gbps, peak=f"{chip.bandwidth_gbps:g} GB/s ({chip.chip}, {chip.source})" if chip else "—")
            + "\n\n" + fit[0].verdict)

st.header(f.t("decode.whatif_title"))
chips = [c.chip for c in hardware.chips()]
c = st.columns(4)
chip_name = c[0].selectbox(f.t("decode.chip"), chips, index=chips.index("M5 Pro"), key="chip", bind="query-params")
model = c[1].selectbox(f.t("common.model"), preset_names(), index=preset_names().index(ARTICLE_MODEL), key="model", bind="query-params")
weights = c[2].selectbox(f.t("common.weights"), WEIGHT_FORMATS, index=WEIGHT_FORMATS.index("mlx-q4"), key="w", bind="query-params")
a = next((r for r in f.recs if r.id == DEFAULT_SOURCE), None)
ref = view("decode_fit", a) if a is not None else None
default_eff = round(ref[0].bandwidth_gbps / hardware.get_chip("M5 Pro").bandwidth_gbps, 2) if ref else 0.7
eff = c[3].slider(f.t("decode.efficiency"), 0.1, 1.0, default_eff, 0.01, key="eff", bind="query-params",
                  help=f.t("decode.efficiency_help", eff=default_eff))
pred = view("what_if", geometry(model), weights, KvSpec(), hardware.get_chip(chip_name), eff, 131072)
pred["series"] = pred["series"].map(lambda s: f.t(f"decode.{s}"))
wchart = chart_spec("series_chart", pred, "context", "tokens_per_s", "series", f.t("common.context"), "tokens/s", log_x=True, log_y=True)
chart_block(f, wchart, pred, "whatif_chart", f"kv-decode-whatif-{model}")
st.caption(f.t("decode.caveat"))
