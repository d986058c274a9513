"""Chapter 4 — decode slowdown: tok/s vs context explained by bytes read per generated token."""

import streamlit as st

from kvcore.recordings.provenance import badge_fields
from kvcore.timing import hardware
from kvcore.units import fmt_num, fmt_pct, fmt_ratio, fmt_size
from kvsite.charts.chart import show_chart
from kvsite.frame.page import DEFAULT_SOURCE, LIVE, setup
from kvsite.i18n import data_text
from kvsite.inputs import live
from kvsite.inputs.choices import chip_choice, model_choice, weights_choice
from kvsite.layout import row
from kvsite.sections import decode as decode_sections

f = setup("decode_slowdown")
f.intro()
rec = f.pick_source("decode", live=True, live_model=True)  # builds a model: not on the hosted demo
if rec == LIVE:
    job = live.job_panel(f, "decode")
    rec = job.recording() if job is not None else None
    if rec is None:
        f.chapter_end()
        st.stop()

# the chosen run, with Article A's two points beside it as the reference (every run is on the chart at the end)
runs = [rec] + [r for r in f.recs if r.id == DEFAULT_SOURCE and r.id != getattr(rec, "id", None)]
dec = decode_sections.decode(runs, f.lang, f.recs)
if dec is None:
    st.info(f.t("decode.no_model"))
    f.chapter_end()
    st.stop()
event = show_chart(f, dec["chart"], "decode_chart", "kv-decode-vs-context")
if picked := f.selected(event, "series"):
    st.caption(f.t("common.selected", items=", ".join(picked)))
for run in dec["no_fit"]:  # drawn as measured points only: say why there is no bytes line
    st.info(f.t(f"decode.no_fit_{run['why']}", run=run["run"]))
if dec["unfit"]:
    st.caption(f.t("decode.unfit_note"))
if dec["spread"]:
    st.caption(f.t("decode.spread_note"))

if (fit := dec["fit"]) is not None:
    st.subheader(f.t("decode.check_title"))
    if w := dec["check"]:
        m = row()
        m.metric(f.t("decode.bytes_token"), f"{fmt_size(w['bytes_a'])} → {fmt_size(w['bytes_b'])}")
        m.metric(f.t("decode.predicted"), fmt_ratio(w["predicted_slowdown"]))
        m.metric(f.t("decode.measured"), fmt_ratio(w["measured_slowdown"]))
        m.metric(f.t("decode.implied"), f"{fmt_num(w['gbps_a'])} → {fmt_num(w['gbps_b'])} GB/s")
        st.markdown(decode_sections.check_text(w, fit, f.lang))
    chip = dec["chip"]
    fitted = (
        f.t(
            "decode.fit",
            bw=fmt_num(fit.bandwidth_gbps),
            peak=fmt_num(chip.bandwidth_gbps),
            chip=chip.chip,
            source=data_text(f.lang, chip.source),
        )
        if chip
        else f.t("decode.fit_no_chip", bw=fmt_num(fit.bandwidth_gbps))
    )
    show = st.info if fit.memory_bound else st.warning
    show(fitted + "\n\n" + decode_sections.verdict_text(fit, f.lang))

chips = [c.chip for c in hardware.chips()]


@st.fragment
def what_if_section() -> None:
    """The decode what-if on a chip: its widgets rerun this section only (nothing else on the page reads them); the
    share-of-peak slider reruns its own part (what_if_chart)."""
    c = row()
    chip_name = chip_choice(c, f, chips, "M5 Pro")
    model = model_choice(c, f)
    weights = weights_choice(c, f)
    what_if_chart(c.container(), chip_name, model, weights)


@st.fragment
def what_if_chart(eff_slot, chip_name: str, model: str, weights: str) -> None:
    """The share-of-peak slider and the chart it drives: a step reruns these alone."""
    article = next((r for r in f.recs if r.id == DEFAULT_SOURCE), None)
    default_eff = decode_sections.default_efficiency(article)
    eff = eff_slot.slider(
        f.t("decode.efficiency"),
        0.1,
        1.0,
        default_eff,
        0.01,
        key="eff",
        format="percent",
        bind="query-params",
        help=f.t(
            "decode.efficiency_help",
            eff=fmt_pct(default_eff),
            chip=badge_fields(article)["chip"] if article else "—",
        ),
    )
    what = decode_sections.what_if(chip_name, model, weights, eff, f.lang)
    if what["chart"] is None:
        st.warning(what["text"])
    else:
        show_chart(
            f,
            what["chart"],
            "whatif_chart",
            f"kv-decode-whatif-{model}",
            source=f.t("export.computed"),
            settings={
                f.t("decode.chip"): chip_name,
                f.t("common.model"): model,
                f.t("common.weights"): weights,
                f.t("decode.efficiency"): fmt_pct(eff),
            },
        )
        if what["text"]:
            st.caption(what["text"])
    st.caption(what["caveat"])


with st.expander(f.t("decode.whatif_title"), icon=":material/tune:"):  # another chip: on demand
    what_if_section()

st.header(f.t("decode.sb_title"))
st.markdown(f.t("decode.sb_lead"))
every, coloured = decode_sections.slowdown_runs(f.recs, f.lang)
picked_runs = st.multiselect(
    f.t("decode.sb_pick"),
    every,
    coloured,
    key="sb_runs",
    max_selections=decode_sections.MOST_COLOURED,
    help=f.t("decode.sb_pick_help", n=decode_sections.MOST_COLOURED),
)
if (sb := decode_sections.slowdown_vs_bytes(f.recs, f.lang, tuple(picked_runs))) is not None:
    show_chart(
        f, sb["chart"], "slowdown_bytes_chart", "kv-slowdown-vs-bytes", source=", ".join(sb["runs"])
    )
with st.expander(f.t("decode.sb_details"), icon=":material/table:"):
    if sb is not None:
        st.markdown(sb["table"])
        st.caption(f.t("decode.sb_table_note"))
    st.markdown(f.t("decode.sb_where"))

f.chapter_end()
