"""Chapter 1 — why a cache at all: work per step with and without it, and measured decode times."""

import streamlit as st

from kvcore.units import fmt_ratio
from kvsite import i18n
from kvsite.charts.chart import show_chart
from kvsite.frame.page import setup, url_choice
from kvsite.layout import row
from kvsite.sections import mechanism as mechanism_sections

f = setup("mechanism")
f.intro()


@st.fragment
def work_section() -> None:
    """Work per step with and without a cache: its widgets rerun this section only, not the frame."""
    c = row()
    prompt_slot = c.container()  # the prompt's slider, drawn by its own section (work_chart)
    new = c.slider(
        f.t("mechanism.new"), 2, 500, 50, key="new", format="localized", bind="query-params"
    )
    with c:
        per_step = (
            url_choice(
                st.radio,
                f.t("mechanism.view"),
                ["cumulative", "per_step"],
                "cumulative",
                "view",
                format_func=lambda v: f.t(f"mechanism.view_{v}"),
                horizontal=True,
            )
            == "per_step"
        )
    work_chart(prompt_slot, new, per_step)


@st.fragment
def work_chart(prompt_slot, new: int, per_step: bool) -> None:
    """The prompt's slider, the chart and its totals: a step of the slider reruns these alone (the section's
    other inputs come as they were last drawn)."""
    prompt = prompt_slot.slider(
        f.t("mechanism.prompt"), 1, 2048, 16, key="prompt", format="localized", bind="query-params"
    )
    work = mechanism_sections.mechanism_work(prompt, new, per_step, f.lang)
    event = show_chart(
        f,
        work["chart"],
        "mech_chart",
        "kv-mechanism-work",
        source=f.t("export.computed"),
        settings={f.t("mechanism.prompt"): f"{prompt:,}", f.t("mechanism.new"): f"{new:,}"},
    )
    if picked := f.selected(event, "mode"):
        st.caption(f.t("common.selected", items=", ".join(picked)))

    m = row()
    m.metric(f.t("mechanism.total_with"), f"{work['with']:,}")
    m.metric(f.t("mechanism.total_without"), f"{work['without']:,}")
    m.metric(f.t("mechanism.ratio"), f"{work['without'] / work['with']:,.1f}×")


work_section()
st.caption(
    f.t("mechanism.work_note")
)  # the same words in every state: drawn once, below the section

st.header(f.t("mechanism.measured_title"))
rec = f.pick_source("mechanism", default="published-article-b-t4-mechanism")
if rec is not None:
    measured = mechanism_sections.mechanism_measured(f.with_section("mechanism"), rec.id, f.lang)
    st.metric(
        f.t("mechanism.speedup", n=f"{measured['new_tokens']:,}"), fmt_ratio(measured["speedup"])
    )
    show_chart(f, measured["chart"], "mech_measured", "kv-mechanism-measured")
    st.caption(  # the hosted demo measures nothing: there, how to measure it yourself
        i18n.join(
            f.lang,
            measured["note"],
            f.run_yourself("python -m kvcore record") if f.demo else f.t("mechanism.measured_live"),
        )
    )
    published = next((r for r in f.recs if r.id == "published-article-b-t4-mechanism"), None)
    real = mechanism_sections.mechanism_text(rec, published, f.lang)
    if real is not None:
        st.subheader(f.t("mechanism.text_title"))
        st.code(real["prompt"] + " ▸ " + real["generated"], language="text", wrap_lines=True)
        st.caption(real["note"])

f.faq(("what", "speed"))

f.chapter_end()
