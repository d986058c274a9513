"""The Calculator's outputs, each drawn from the request (kvsite.sections.calc.inputs) and its typed result
(kvcore.capacity.request.Result, from kvsite.sections.calc.compute): the numbers and the verdict, the chart, the plan and
the notes, the levers, the formula, the lazy tables and the decode what-if.

Example: verdict(f, inputs, result, plan) shows "fits" / "tight" / "no" / "unplanned" in the reader's words.
"""

from __future__ import annotations

import streamlit as st

from kvcore.runtimes.registry import get_runtime
from kvcore.timing.hardware import efficiency_range
from kvcore.units import fmt_bytes
from kvsite import i18n
from kvsite.charts.chart import show_chart
from kvsite.frame.page import url_choice
from kvsite.layout import lazy_expander, row

from . import compute as calc_sections
from .inputs import Inputs
from .source import CUSTOM, chip_names


def numbers(f, inputs: Inputs, result) -> None:
    """KV, weights, the total the verdict counts and the memory, each exact on hover."""
    mem = inputs.memory
    m = row(key="calc_numbers")
    for label, value in (
        (f.t("calc.kv_total"), result.kv_bytes),
        (f.t("calc.weights_m", w=result.weights_format), result.weights_bytes),
        (f.t("calc.total_plan" if result.plan else "calc.total"), result.need_bytes),
        (f.t("calc.available"), mem.bytes),
    ):
        m.metric(
            label,
            fmt_bytes(value, decimal=False),
            help=f.t("calc.metric_help", exact=f"{value:,}", short=fmt_bytes(value)),
        )
    per_seq = f.t("calc.per_seq", v=fmt_bytes(result.kv_bytes_per_sequence))
    st.caption(per_seq + " · " + f.t("calc.available") + ": " + mem.reason)


def verdict(f, inputs: Inputs, result, plan) -> None:
    """The verdict in the reader's words, and the part of the plan that passes the memory."""
    fit, runtime = result.fit, result.runtime
    machine = inputs.chip if inputs.chip != CUSTOM else f.t("calc.custom")  # on which Mac
    show = {"fits": st.success, "tight": st.warning, "unplanned": st.info, "no": st.error}
    said = f.t(
        f"calc.verdict{'_plan' if plan else ''}_{fit.status}",
        share=f"{fit.share:.0%}",
        need=fmt_bytes(fit.need_bytes),
        available=fmt_bytes(inputs.memory.bytes) + f" ({machine})",
        runtime=runtime,
        why=f.t(f"calc.unplanned_{fit.unplanned}", runtime=runtime) if not plan else "",
    )
    if plan and fit.blocking:  # the part of the plan that passes the limit, in the runtime's words
        said = i18n.join(f.lang, said, f.t("calc.verdict_part", part=fit.blocking, runtime=runtime))
    show[fit.status](said)


def chart(f, inputs: Inputs, result) -> dict:
    """Memory vs context per format, the available memory as a line; returns the settings its export names."""
    r, t = inputs.request, f.t
    settings = {
        t("common.model"): result.model,
        t("calc.runtime"): r.runtime,
        t("calc.ctx_exact"): f"{r.context:,}",
        t("calc.sequences"): r.sequences,
        t("calc.k_format"): r.k_format,
        t("calc.v_format"): r.v_format,
        t("common.weights"): r.weights_format,
        t("calc.machine"): inputs.chip if inputs.chip != CUSTOM else t("calc.custom"),
        t("calc.available"): fmt_bytes(inputs.memory.bytes, decimal=False),
    }
    st.markdown("##### " + t("calc.chart_title"))
    show_chart(
        f,
        calc_sections.memory_chart(r, f.lang),
        "calc_chart",
        f"kv-calculator-{result.model}",
        settings=settings,
        source=t("export.computed"),
    )
    st.caption(
        calc_sections.turbo3_note(f.lang)
    )  # its line is not Article B's figure: why, one click away
    return settings


def notes(f, inputs: Inputs, result, plan) -> None:
    """The plan (one click below), the model's position limit, the prefill peak and the geometry's notes."""
    runtime, ctx = result.runtime, inputs.request.context
    if plan:
        st.caption(f.t("calc.thresholds_plan", tolerance=plan["tolerance"], runtime=runtime))
        box = lazy_expander(f.t("calc.plan_title", runtime=runtime), "plan_open")
        if box:
            box.markdown(plan["table"])
            box.caption(f.t("calc.plan_log", runtime=runtime))
            box.code(plan["log"], language=None)
            box.caption(plan["not_planned"])
    else:
        st.caption(f.t("calc.thresholds"))
    if result.beyond_max_position:
        limit = f"{result.max_position_embeddings:,}"
        st.warning(f.t("calc.beyond_limit", n=f"{ctx:,}", model=result.model, limit=limit))
    if result.kv_prefill_peak_bytes != result.kv_bytes:
        st.caption(f.t("calc.prefill_peak", peak=fmt_bytes(result.kv_prefill_peak_bytes)))
    for code, window in calc_sections.geometry(inputs.request).note_codes:  # notes: the CLI's
        st.caption(":material/info: " + f.t(f"calc.note_{code}", window=window))


def levers(f, result, plan) -> None:
    """What makes it fit, one change at a time: with a plan each fits; without one, upper bounds."""
    fit = result.fit
    if fit.status == "fits":
        return
    bound = "" if plan else "_unplanned"  # without a plan: weights + KV only, upper bounds
    st.subheader(f.t(f"calc.levers_title{bound}"))
    lv = row()
    for name, key in (("context", "context"), ("sequences", "sequences"), ("kv_format", "formats")):
        lever = fit.lever(name)
        value = lever["value"] if lever else None
        shown = ", ".join(value) if isinstance(value, list) else f"{value:,}" if value else "—"
        lv.metric(f.t(f"calc.lever_{key}{bound}"), shown, help=f.t(f"calc.lever_{key}_help{bound}"))
    chunk = next((x for x in fit.levers if "said" in x), None)  # -ub, --prefill-step-size
    if chunk:  # the runtime's own prefill step, in its words
        need = fmt_bytes(chunk["need_bytes"])
        st.caption(f.t(f"calc.lever_chunk_{chunk['lever']}", said=chunk["said"], need=need))
    if not fit.levers:
        st.caption(f.t("calc.no_lever"))


def formula(f, inputs: Inputs, result) -> None:
    """The lines the runtime logs (llama.cpp), or the formula with this model's numbers; the byte counts."""
    r = inputs.request
    box = lazy_expander(f.t("calc.formula_title"), "formula_open", icon=":material/functions:")
    if not box:
        return
    with box:
        report = result.runtime_report
        if get_runtime(result.runtime).preallocates:  # the lines llama.cpp logs: hold them to yours
            st.code("\n".join(report["log_lines"]), language=None, wrap_lines=True)
            ubatch = report["llama_cpp"]["ubatch_used"]
            st.caption(f.t("calc.log_note", ubatch=f"{ubatch:,}"))
        else:
            st.code(calc_sections.formula(r, f.lang), language=None, wrap_lines=True)
        st.markdown(calc_sections.numbers_table(r, f.lang))


@st.fragment
def lazy_tables(f, inputs: Inputs) -> None:
    """The per-layer table and the runtimes compared, each computed and sent only while its expander is
    open: opening one reruns this fragment alone."""
    r = inputs.request
    layers = lazy_expander(f.t("calc.layers_title"), "layers_open")
    if layers:
        table = calc_sections.layers_table(r, f.lang)
        layers.dataframe(table, hide_index=True, width="stretch")
    cmp = lazy_expander(f.t("calc.cmp_title"), "cmp_open")
    if cmp:
        cmp.markdown(f.t("calc.cmp_lead", n=f"{r.context:,}", seqs=r.sequences))
        cmp.markdown(calc_sections.runtimes_compared(r, f.lang))


@st.fragment
def decode_what_if(f, inputs: Inputs, result, settings: dict) -> None:
    """The decode speed on a chip: its own chip picker (when the memory is a custom figure) reruns this
    alone."""
    r, chip = inputs.request, inputs.chip
    speed_chip = (
        chip
        if chip != CUSTOM
        else url_choice(st.selectbox, f.t("calc.speed_chip"), chip_names()[1:], "M4 Pro", "schip")
    )
    eff = calc_sections.efficiency(f.recs)
    low, high, _ = efficiency_range()  # the published range the assumed share sits in
    if eff.source != "assumption":
        sources = calc_sections.efficiency_sources(f.recs, f.lang)
        st.caption(f.t("calc.eff_fitted", share=f"{eff.share:.0%}", source=sources))
    else:
        st.caption(
            f.t(
                "calc.eff_assumed",
                share=f"{eff.share:.0%}",
                low=round(low * 100),
                high=round(high * 100),
            )
        )
    dec = calc_sections.decode_chart(r, speed_chip, eff.share, f.lang)
    _speed(f, r, result, dec, speed_chip)
    if dec["chart"] is not None:
        show_chart(
            f,
            dec["chart"],
            "calc_decode",
            f"decode-what-if-{result.model}",
            source=f.t("export.computed"),
            settings={
                **settings,
                f.t("calc.speed_chip"): speed_chip,
                f.t("decode.efficiency"): f"{eff.share:.0%}",
            },
        )
    st.caption(f.t("calc.decode_note"))


def _speed(f, r, result, dec: dict, chip: str) -> None:
    """The predicted speed at the reader's context: each sequence's and all together, or why there is none."""
    n = f"{r.context:,}"
    if dec["here"] is not None and r.sequences == 1:
        st.metric(f.t("calc.decode_at", n=n, chip=chip), f"{dec['here']:,.1f} tok/s")
    elif dec["here"] is not None:  # several sequences: each one's speed and all of them together
        each, total = st.columns(2)
        each.metric(
            f.t("calc.decode_at_each", n=n, chip=chip, each=dec["each"]),
            f"{dec['here']:,.1f} tok/s",
        )
        total.metric(f.t("calc.decode_at_total", n=r.sequences), f"{dec['here_total']:,.1f} tok/s")
    else:  # a run that does not fit has no speed to predict
        st.info(
            f.t(
                "calc.no_speed_curve" if dec["chart"] else "calc.no_speed_none",
                n=n,
                counted=f.t("calc.counted_plan" if result.plan else "calc.counted_kv"),
                need=fmt_bytes(result.need_bytes, decimal=False),
                available=fmt_bytes(r.memory_bytes, decimal=False),
                fits_to=f"{dec['fits_to']:,}",
            )
        )
