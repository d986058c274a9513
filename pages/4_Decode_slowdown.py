"""Chapter 4 — decode slowdown: tok/s vs context explained by bytes read per generated token."""

import streamlit as st

from kvcore import hardware
from kvcore.formulas import WEIGHT_FORMATS
from kvcore.geometry import preset_names
from kvcore import views
from kvcore.views import ARTICLE_MODEL
from kvsite import live, sections
from kvsite.export import show_chart
from kvsite.frame import DEFAULT_SOURCE, LIVE, row, setup

f = setup("decode_slowdown")
f.intro("decode")
rec = f.pick_source("decode", live=True)
if rec == LIVE:
    job = live.job_panel(f, "decode")
    rec = job.recording() if job is not None else None
    if rec is None:
        st.stop()

runs = [rec] + [r for r in f.with_section("decode") if r is not rec and r.id != getattr(rec, "id", None)]
dec = sections.decode(runs, f.lang)
if dec is None:
    st.info(f.t("decode.no_model"))
    st.stop()
event = show_chart(f, dec["chart"], "decode_chart", "kv-decode-vs-context")
if picked := f.selected(event, "series"):
    st.caption(f.t("common.selected", items=", ".join(picked)))

if (fit := dec["fit"]) is not None:
    st.subheader(f.t("decode.check_title"))
    if w := dec["check"]:
        m = row()
        m.metric(f.t("decode.bytes_token"), f"{w['bytes_a'] / 1e9:.3f} → {w['bytes_b'] / 1e9:.3f} GB")
        m.metric(f.t("decode.predicted"), f"{w['predicted_slowdown']:.2f}×")
        m.metric(f.t("decode.measured"), f"{w['measured_slowdown']:.2f}×")
        m.metric(f.t("decode.implied"), f"{w['gbps_a']:.0f} / {w['gbps_b']:.0f} GB/s")
        st.markdown(f.t("decode.check_text", a=w["context_a"], b=w["context_b"], w=w["weights_bytes"] / 1e9,
                        kva=w["kv_bytes_a"] / 1e6, kvb=w["kv_bytes_b"] / 1e9, ta=w["tokens_per_s_a"], tb=w["tokens_per_s_b"]))
    chip = dec["chip"]
    st.info(f.t("decode.fit", bw=fit.bandwidth_gbps, peak=f"{chip.bandwidth_gbps:g} GB/s ({chip.chip}, {chip.source})" if chip else "—")
            + "\n\n" + sections.verdict_text(fit, f.lang))

st.header(f.t("decode.whatif_title"))
chips = [c.chip for c in hardware.chips()]
c = row()
chip_name = c.selectbox(f.t("decode.chip"), chips, index=chips.index("M5 Pro"), key="chip", bind="query-params")
model = c.selectbox(f.t("common.model"), preset_names(), index=preset_names().index(ARTICLE_MODEL), key="model", bind="query-params")
weights = c.selectbox(f.t("common.weights"), WEIGHT_FORMATS, index=WEIGHT_FORMATS.index("mlx-q4"), key="w", bind="query-params")
article = next((r for r in f.recs if r.id == DEFAULT_SOURCE), None)
default_eff = sections.default_efficiency(article)
eff = c.slider(f.t("decode.efficiency"), 0.1, 1.0, default_eff, 0.01, key="eff", bind="query-params",
                  help=f.t("decode.efficiency_help", eff=default_eff, chip=views.provenance(article)["chip"] if article else "—"))
show_chart(f, sections.what_if(chip_name, model, weights, eff, f.lang)["chart"], "whatif_chart", f"kv-decode-whatif-{model}")
st.caption(f.t("decode.caveat"))

st.header(f.t("decode.sb_title"))
st.markdown(f.t("decode.sb_lead"))
if (sb := sections.slowdown_vs_bytes(f.recs, f.lang)) is not None:
    show_chart(f, sb["chart"], "slowdown_bytes_chart", "kv-slowdown-vs-bytes")
    st.markdown(sb["table"])
    st.caption(f.t("decode.sb_table_note"))
st.markdown(f.t("decode.sb_where"))
