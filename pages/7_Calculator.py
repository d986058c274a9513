"""Calculator — any model's KV cache in any format: the fit verdict, the three levers, a decode what-if."""

import streamlit as st

from kvcore.errors import KvError
from kvcore.inputs.config import MAX_CONFIG_BYTES
from kvcore.inputs.preset_files import preset_names
from kvcore.memory.formulas import DOWNLOAD_WEIGHT_FORMATS, FILE_WEIGHTS
from kvcore.runtimes.registry import RUNTIMES, get_runtime, gguf_runtime
from kvcore.timing.hardware import efficiency_range
from kvcore.units import fmt_bytes
from kvsite import calc as calc_site
from kvsite import calc_sections, gguf_browser, i18n
from kvsite.calc import CUSTOM, available_memory, chip_names, setting_labels
from kvsite.chart import show_chart
from kvsite.choices import bound_choice
from kvsite.frame import setup, url_choice
from kvsite.layout import row, uploader_words

f = setup("calculator")
f.intro()


@st.fragment
def calculator() -> None:
    """Every input and everything it drives: a widget here reruns this, not the frame (navigation,
    language); every output below depends on every input above, so they are one fragment. Opening a lazy
    table or picking the decode what-if's chip reruns only its own fragment inside this one."""

    # ---- the model: a preset (in the URL) or a pasted / uploaded config.json
    names = preset_names()
    top = st.columns([3, 3, 2])  # where the model comes from, the model, the runtime: one row
    src = url_choice(
        top[0].segmented_control,
        f.t("calc.model_source"),
        ["preset", "config", "gguf"],
        "preset",
        "msrc",
        format_func=lambda o: f.t(f"calc.src_{o}"),
        required=True,
        wrap=True,  # the three choices wrap in a phone's column rather than run past its edge
    )
    c = top[1:]
    if src == "gguf":  # any size: its header only, read in the browser (or by its path here)
        try:
            text, label = gguf_browser.source(f, c[0])
        except KvError as e:
            st.error(f.t("calc.bad_input", message=i18n.error_text(f.lang, e)))
            return
    elif src == "config":
        if f.lang != "en":  # Streamlit's own words in the box are English
            uploader_words(
                "upload",
                f.t("common.upload_button"),
                f.t("common.upload_note", mb=MAX_CONFIG_BYTES // 1_000_000, types="JSON"),
                f.t("common.upload_drop"),
            )
        upload = c[0].file_uploader(
            f.t("calc.upload", mb=MAX_CONFIG_BYTES // 1_000_000),
            type=["json"],
            key="upload",
            max_upload_size=-(-MAX_CONFIG_BYTES // 2**20),
        )  # the widget's "…MB per file" says the same
        pasted = c[0].text_area(
            f.t("calc.paste"), key="pasted", height=140
        )  # size checked by the engine
        text = (
            upload.getvalue() if upload is not None else pasted
        )  # bytes: the engine checks size, binary, UTF-8
        label = upload.name if upload is not None else "config.json"
        st.caption(f.t("calc.config_url_note"))
    else:
        model = bound_choice(
            c[0].selectbox,
            f.t("common.model"),
            names,
            "model",
            index=names.index("llama-3.1-8b"),
        )
    if (
        src == "gguf"
    ):  # a GGUF's layers are the reading of the runtime it is the model format of (llama.cpp)
        runtime = gguf_runtime().name  # no choice to offer: shown, not a widget
        c[1].markdown(f"{f.t('calc.runtime')}: `{runtime}`", help=f.t("calc.runtime_gguf_help"))
    else:
        runtime = bound_choice(
            c[1].selectbox,
            f.t("calc.runtime"),
            list(RUNTIMES),
            "rt",
            help=f.t("calc.runtime_help"),
        )
    rt = get_runtime(runtime)

    # ---- inputs
    c = st.columns(
        [2, 2, 1, 2, 1] if rt.one_kv_format else [2, 2, 1, 1, 1, 1]
    )  # K and V: one box or two
    ctx = calc_site.context_inputs(
        f, c[0], c[1]
    )  # exact number and log slider, bound to ?ctx= (1 comes back as 1)
    seqs = c[2].number_input(
        f.t("calc.sequences"), 1, rt.max_sequences, 1, key="seq", bind="query-params"
    )  # llama.cpp runs at most 256 sequences (-np)
    k_fmt, v_fmt = calc_site.kv_format_inputs(f, rt, c[3:-1])
    if (
        src == "gguf"
    ):  # the file's own tensors by default (exact bytes), or any other format for comparison
        w_fmt = c[-1].selectbox(
            f.t("common.weights"),
            [FILE_WEIGHTS, *DOWNLOAD_WEIGHT_FORMATS],
            key="w_gguf",
            format_func=lambda w: f.t("calc.weights_file") if w == FILE_WEIGHTS else w,
        )
    else:
        w_fmt = bound_choice(
            c[-1].selectbox,
            f.t("common.weights"),
            DOWNLOAD_WEIGHT_FORMATS,
            "w",
            index=DOWNLOAD_WEIGHT_FORMATS.index("mlx-q4"),
        )

    # the machine, the numbers and the verdict on the left, the chart that shows them on the right (a phone
    # stacks the two, in that order)
    left, right = st.columns([5, 6], gap="medium")
    c = left.columns([2, 1, 1])
    chip = url_choice(
        c[0].selectbox,
        f.t("calc.machine"),
        chip_names(),
        "M4 Pro",
        "chip",
        format_func=lambda n: f.t("calc.custom") if n == CUSTOM else n,
    )
    mem = available_memory(f, chip, c[1], c[2])

    settings = []  # the runtime's own options that decide its cache (llama.cpp: -kvu, -ub, --swa-full; -np is the sequences)
    lc = left.container(horizontal=True) if rt.settings else None
    try:
        labels = setting_labels(rt, f.lang)
    except KvError as e:
        st.error(i18n.error_text(f.lang, e))
        st.stop()
    for s, (name, tip) in zip(rt.settings, labels):
        if s.choices:
            settings.append(
                int(
                    bound_choice(
                        lc.selectbox,
                        name,
                        s.choices,
                        s.key,
                        index=s.choices.index(s.default),
                        format_func="{:,}".format,  # 2,048 as every count on the page
                        help=tip,
                    )
                )
            )
        elif s.switch:
            settings.append(
                bool(lc.checkbox(name, s.default, key=s.key, bind="query-params", help=tip))
            )
        else:
            settings.append(
                int(
                    lc.number_input(
                        name, s.low, s.high, s.default, key=s.key, bind="query-params", help=tip
                    )
                )
            )
    src_key = (
        (text, label, runtime, tuple(settings))
        if src != "preset"
        else (None, model, runtime, tuple(settings))
    )
    if src != "preset" and not text or src == "config" and not text.strip():
        st.info(f.t("calc.gguf_prompt" if src == "gguf" else "calc.paste_prompt"))
        return
    try:
        out = calc_sections.numbers(src_key, int(ctx), int(seqs), k_fmt, v_fmt, w_fmt, mem.bytes)
    except KvError as e:
        message = i18n.error_text(
            f.lang, e
        )  # about a pasted config, or the engine's sentence on a preset and format
        st.error(f.t("calc.bad_input", message=message) if src != "preset" else message)
        return
    result, need, verdict = out["result"], out["need"], out["verdict"]

    with left:
        # ---- outputs: numbers, verdict, levers
        m = row()
        for label, value in (
            (f.t("calc.kv_total"), result["kv_bytes"]),
            (f.t("calc.weights_m", w=w_fmt), result["weights_bytes"]),
            (f.t("calc.total_plan" if "plan" in result else "calc.total"), need),
            (f.t("calc.available"), mem.bytes),
        ):
            m.metric(
                label,
                fmt_bytes(value, decimal=False),
                help=f.t("calc.metric_help", exact=f"{value:,}", short=fmt_bytes(value)),
            )
        st.caption(
            f.t("calc.per_seq", v=fmt_bytes(result["kv_bytes_per_sequence"]))
            + " · "
            + f.t("calc.available")
            + ": "
            + mem.reason
        )
        plan = calc_sections.plan_table(
            src_key, int(ctx), int(seqs), k_fmt, v_fmt, w_fmt, mem.bytes, f.lang
        )  # everything the runtime allocates, where the engine has its plan (llama.cpp)
        show = {"fits": st.success, "tight": st.warning, "unplanned": st.info, "no": st.error}
        said = f.t(
            f"calc.verdict{'_plan' if plan else ''}_{verdict.status}",
            share=f"{verdict.share:.0%}",
            need=fmt_bytes(need),
            available=fmt_bytes(mem.bytes),
            runtime=runtime,
            why=f.t(f"calc.unplanned_{out['unplanned']}", runtime=runtime) if not plan else "",
        )
        if out["blocking"]:  # the part of the plan that passes the limit
            said = i18n.join(
                f.lang, said, f.t("calc.verdict_part", part=out["blocking"], runtime=runtime)
            )
        show[verdict.status](said)
    with right:
        # ---- chart: memory vs context per format, the available memory as a line
        calc_settings = {
            f.t("common.model"): result["model"],
            f.t("calc.runtime"): runtime,
            f.t("calc.ctx_exact"): f"{int(ctx):,}",
            f.t("calc.sequences"): int(seqs),
            f.t("calc.k_format"): k_fmt,
            f.t("calc.v_format"): v_fmt,
            f.t("common.weights"): w_fmt,
            f.t("calc.machine"): chip if chip != CUSTOM else f.t("calc.custom"),
            f.t("calc.available"): fmt_bytes(mem.bytes, decimal=False),
        }
        st.markdown("##### " + f.t("calc.chart_title"))
        show_chart(
            f,
            calc_sections.memory_chart(
                src_key,
                calc_sections.chart_end(int(ctx)),
                int(seqs),
                k_fmt,
                v_fmt,
                result["weights_bytes"],
                mem.bytes,
                f.lang,
            ),
            "calc_chart",
            f"kv-calculator-{result['model']}",
            settings=calc_settings,
            source=f.t("export.computed"),
        )
    if plan:
        st.caption(f.t("calc.thresholds_plan", tolerance=plan["tolerance"], runtime=runtime))
        with st.expander(f.t("calc.plan_title", runtime=runtime)):
            st.markdown(plan["table"])
            st.caption(f.t("calc.plan_log", runtime=runtime))
            st.code(plan["log"], language=None)
            st.caption(plan["not_planned"])
    else:
        st.caption(f.t("calc.thresholds"))
    if result["beyond_max_position"]:
        st.warning(
            f.t(
                "calc.beyond_limit",
                n=f"{int(ctx):,}",
                model=result["model"],
                limit=f"{result['max_position_embeddings']:,}",
            )
        )
    if result["kv_prefill_peak_bytes"] != result["kv_bytes"]:
        st.caption(f.t("calc.prefill_peak", peak=fmt_bytes(result["kv_prefill_peak_bytes"])))
    for code, window in calc_site.config_geometry(
        *src_key
    ).note_codes:  # result["notes"] is the CLI's English
        st.caption(":material/info: " + f.t(f"calc.note_{code}", window=window))

    if "levers" in out:
        bound = "" if plan else "_unplanned"  # without a plan: weights + KV only, upper bounds
        st.subheader(f.t(f"calc.levers_title{bound}"))
        t_max, s_max, ok_formats, chunk = out["levers"]
        lv = row()
        lv.metric(
            f.t(f"calc.lever_context{bound}"),
            f"{t_max:,}" if t_max else "—",
            help=f.t(f"calc.lever_context_help{bound}"),
        )
        lv.metric(
            f.t(f"calc.lever_sequences{bound}"),
            f"{s_max:,}" if s_max else "—",
            help=f.t(f"calc.lever_sequences_help{bound}"),
        )
        lv.metric(
            f.t(f"calc.lever_formats{bound}"),
            ", ".join(ok_formats) if ok_formats else "—",
            help=f.t(f"calc.lever_formats_help{bound}"),
        )
        if chunk:  # the runtime's own prefill step, in its words (-ub, --prefill-step-size)
            st.caption(
                f.t(
                    f"calc.lever_chunk_{chunk['lever']}",
                    said=chunk["said"],
                    need=fmt_bytes(chunk["need_bytes"]),
                )
            )
        if not (t_max or s_max or ok_formats or chunk):
            st.caption(f.t("calc.no_lever"))

    with st.expander(f.t("calc.formula_title"), icon=":material/functions:"):
        if (
            rt.preallocates
        ):  # the lines llama.cpp prints when it allocates: hold them against your own log
            st.code("\n".join(result["log_lines"]), language=None, wrap_lines=True)
            st.caption(f.t("calc.log_note", ubatch=f"{result['llama_cpp']['ubatch_used']:,}"))
        else:
            st.code(
                calc_sections.formula(src_key, int(ctx), int(seqs), k_fmt, v_fmt, f.lang),
                language=None,
                wrap_lines=True,
            )
        st.markdown(
            calc_sections.numbers_table(
                src_key, int(ctx), int(seqs), k_fmt, v_fmt, w_fmt, mem.bytes, f.lang
            )
        )
    args = (src_key, int(ctx), int(seqs), k_fmt, v_fmt, w_fmt, mem.bytes)
    lazy_tables(*args)
    with st.expander(
        f.t("calc.decode_title"), icon=":material/speed:"
    ):  # another question: on demand
        decode_what_if(*args, chip, need, result, calc_settings)


@st.fragment
def lazy_tables(src_key, ctx, seqs, k_fmt, v_fmt, w_fmt, mem_bytes) -> None:
    """The per-layer table and the runtimes compared, each computed and sent only while its expander is
    open: opening one reruns this fragment alone."""

    layers = st.expander(
        f.t("calc.layers_title"), key="layers_open", on_change="rerun"
    )  # lazy: the table is sent only while open
    if layers.open:
        layers.dataframe(
            calc_sections.layers_table(src_key, ctx, seqs, k_fmt, v_fmt, w_fmt, mem_bytes, f.lang),
            hide_index=True,
            width="stretch",
        )

    cmp = st.expander(
        f.t("calc.cmp_title"), key="cmp_open", on_change="rerun"
    )  # lazy: computed while open
    if cmp.open:
        cmp.markdown(f.t("calc.cmp_lead", n=f"{ctx:,}", seqs=seqs))
        cmp.markdown(calc_sections.runtimes_compared(src_key, ctx, seqs, f.lang))


@st.fragment
def decode_what_if(
    src_key, ctx, seqs, k_fmt, v_fmt, w_fmt, mem_bytes, chip, need, result, calc_settings
):
    """The decode speed on a chip: its own chip picker (when the memory is a custom figure) reruns this
    alone."""
    # ---- decode what-if on a chip (the page puts it in an expander titled calc.decode_title)
    speed_chip = (
        chip
        if chip != CUSTOM
        else url_choice(st.selectbox, f.t("calc.speed_chip"), chip_names()[1:], "M4 Pro", "schip")
    )
    eff = calc_sections.efficiency(f.recs)
    low, high, _ = efficiency_range()  # the published range the assumed share sits in
    st.caption(
        f.t(
            "calc.eff_fitted",
            share=f"{eff.share:.0%}",
            source=calc_sections.efficiency_sources(f.recs, f.lang),
        )
        if eff.source != "assumption"
        else f.t(
            "calc.eff_assumed",
            share=f"{eff.share:.0%}",
            low=round(low * 100),
            high=round(high * 100),
        )
    )
    dec = calc_sections.decode_chart(
        src_key, ctx, seqs, k_fmt, v_fmt, w_fmt, mem_bytes, speed_chip, eff.share, f.lang
    )
    if dec["here"] is not None and seqs == 1:
        st.metric(f.t("calc.decode_at", n=f"{ctx:,}", chip=speed_chip), f"{dec['here']:,.1f} tok/s")
    elif (
        dec["here"] is not None
    ):  # several sequences: each one's speed and all of them together, each named
        each, total = st.columns(2)
        each.metric(
            f.t("calc.decode_at_each", n=f"{ctx:,}", chip=speed_chip, each=dec["each"]),
            f"{dec['here']:,.1f} tok/s",
        )
        total.metric(f.t("calc.decode_at_total", n=seqs), f"{dec['here_total']:,.1f} tok/s")
    else:  # a run that does not fit has no speed to predict
        st.info(
            f.t(
                "calc.no_speed_curve" if dec["chart"] else "calc.no_speed_none",
                n=f"{ctx:,}",
                counted=f.t("calc.counted_plan" if "plan" in result else "calc.counted_kv"),
                need=fmt_bytes(need, decimal=False),
                available=fmt_bytes(mem_bytes, decimal=False),
                fits_to=f"{dec['fits_to']:,}",
            )
        )
    if dec["chart"] is not None:
        show_chart(
            f,
            dec["chart"],
            "calc_decode",
            f"decode-what-if-{result['model']}",
            source=f.t("export.computed"),
            settings={
                **calc_settings,
                f.t("calc.speed_chip"): speed_chip,
                f.t("decode.efficiency"): f"{eff.share:.0%}",
            },
        )
    st.caption(f.t("calc.decode_note"))


calculator()

f.chapter_end()
