"""Chapter 5 — the two levers on bytes per token: fewer KV heads (GQA/MQA/MLA) and fewer bits (quantization)."""

import streamlit as st

from kvcore.memory.formats import COMPARED, FORMATS
from kvcore.recordings.published import source
from kvsite import i18n
from kvsite.charts.chart import show_chart
from kvsite.frame.page import LIVE, setup
from kvsite.i18n import data_text
from kvsite.inputs.choices import QUESTION_PX, bound_choice, model_choice, weights_choice
from kvsite.layout import row, text
from kvsite.sections import quality as quality_sections
from kvsite.sections import savings as savings_sections

QUALITY_RECORDING = "measured-linux-cpu-smollm2-135m"

f = setup("savings")
f.intro()
c = row()
model = model_choice(c, f, "llama-3.1-8b")
ctx = bound_choice(
    c.select_slider,
    f.t("common.context"),
    [4096, 8192, 32768, 65536, 131072, 262144],
    "ctx",
    value=131072,
    format_func="{:,}".format,
)

st.header(f.t("savings.heads_title"))
heads = savings_sections.heads(model, ctx, f.lang)
settings = {f.t("common.model"): model, f.t("common.context"): f"{ctx:,}"}
show_chart(
    f,
    heads["chart"],
    "heads_chart",
    f"kv-heads-{model}",
    settings=settings,
    source=f.t("export.computed"),
)
st.markdown(heads["text"])
with st.expander(f.t("savings.heads_more"), icon=":material/info:"):
    st.markdown(f.t("savings.heads_text"))
st.header(f.t("savings.formats_title"))
default = list(COMPARED)  # kvcore.memory.formats: the formats the site compares
fmts = bound_choice(
    st.multiselect, f.t("savings.formats"), list(FORMATS), "fmts", default=default
) or ["fp16"]
formats = savings_sections.formats(model, tuple(fmts), ctx, f.lang)
if not formats[
    "kept"
]:  # no chosen format can hold this model's cache (mlx's groups of 64 on head_dim 96)
    st.warning(formats["left_out"])
elif formats["left_out"]:
    st.caption(":material/info: " + formats["left_out"])
if formats["chart"] is not None:
    show_chart(
        f,
        formats["chart"],
        "formats_chart",
        f"kv-formats-{model}",
        settings=settings,
        source=f.t("export.computed"),
    )
    with st.expander(f.t("savings.formats_table"), icon=":material/table:"):
        st.markdown(formats["table"])
        st.caption(f.t("savings.formats_note"))
        turbo = savings_sections.turbo(f.lang)  # the table's turbo3 row against what was published
        text("#### " + f.t("savings.turbo_title"), turbo["claims"], turbo["text"], turbo["padding"])


@st.fragment
def fits_section(model: str, kept: tuple[str, ...]) -> None:
    """How long a context weights + KV allow within the GPU's memory on a Mac of this RAM (an upper bound): RAM and
    weights rerun this section only; the model and formats come from above (a change there reruns the page, and
    this section with them)."""
    c = row()
    mem = c.slider(f.t("savings.memory"), 4, 192, 36, key="mem", bind="query-params")
    weights = weights_choice(c, f)
    fits = savings_sections.fits(model, weights, float(mem), kept, f.lang) if kept else None
    words = savings_sections.fits_words(float(mem), f.lang)  # weights + KV within the GPU's limit
    if fits is None and kept:
        st.error(words["no_fit"])
    elif fits is not None:
        show_chart(
            f,
            fits["chart"],
            "fits_chart",
            f"kv-fits-{model}-{mem}gib",
            source=f.t("export.computed"),
            settings={
                f.t("common.model"): model,
                f.t("savings.memory"): mem,
                f.t("common.weights"): weights,
            },
        )
        if fits["note"]:
            st.caption(":material/info: " + fits["note"])
    st.caption(words["note"])


with st.expander(f.t("savings.fits_title"), icon=":material/memory:"):  # the reader's own machine
    fits_section(model, formats["kept"])

nums = savings_sections.published_numbers()
# the second half: what a smaller cache costs (speed, quality), its claim first, the evidence on demand
st.header(f.t("savings.costs_title"))
st.markdown(f.t("savings.costs_lead"))
with st.expander(f.t("savings.tradeoffs_title"), icon=":material/balance:"):
    text(
        f.t(
            "savings.tradeoffs",
            **nums,
            **{
                k: data_text(f.lang, source(s))
                for k, s in (
                    ("b", "article_b"),
                    ("paper", "turboquant_paper"),
                    ("google", "google_research"),
                )
            },
        ),
    )
    bench = next((r for r in f.recs if r.has("benchmark")), None)
    if bench is not None:
        bench_view = savings_sections.benchmark(bench, f.lang)
        st.markdown(f"**{bench_view['title']}**")
        show_chart(
            f,
            bench_view["chart"],
            "bench_chart",
            "mlx-lm-benchmarks",
            source=data_text(f.lang, bench.data["citation"]["source"]),
        )
        st.caption(
            f.t("savings.bench_note", source=data_text(f.lang, bench.data["citation"]["source"]))
        )

st.subheader(f.t("savings.quality_title"))
st.markdown(f.t("savings.quality_lead"))
qrec = f.pick_source("quality", default=QUALITY_RECORDING)
if qrec is None or qrec == LIVE:
    st.info(f.t("savings.quality_none", install=f.t("savings.quality_install")))
else:
    q = quality_sections.quality(qrec, f.lang, tuple(f.with_section("quality")))
    if q["chart"] is not None:  # a run without bytes per token has its table only
        show_chart(f, q["chart"], "quality_chart", "kv-quality-smollm2", source=qrec.label)
    st.caption(f.t("savings.quality_note", tokens=f"{q['tokens']:,}"))
    with st.expander(f.t("savings.quality_more"), icon=":material/table:"):
        st.markdown(q["table"])
        if q["runtimes_note"]:
            st.markdown(q["runtimes_note"])
        if q["install_note"]:
            st.caption(":material/info: " + q["install_note"])
        st.markdown(f.t("savings.quality_small"))
        if q["context_table"]:
            text(
                "### " + f.t("savings.quality_context_title"),
                q["context_table"],
                f.t("savings.quality_context_note", lengths=q["lengths"]),
            )
    if q["answers"]:
        st.markdown("##### " + f.t("savings.quality_answers_title"))
        c = row()
        prompts = list(q["answers"])
        prompt = bound_choice(
            c.selectbox,
            f.t("savings.quality_answers_prompt"),
            prompts,
            "qprompt",
            index=quality_sections.default_question(q["answers"]),
            width=QUESTION_PX,
        )
        rows = q["answers"][prompt]
        labels = [quality_sections.format_label(r, f.lang) for r in rows[1:]]
        pick = bound_choice(
            c.selectbox,
            f.t("savings.quality_answers_pick"),
            labels,
            "qfmt",
            index=min(2, len(labels) - 1),
        )
        chosen = rows[1 + labels.index(pick)]
        left, right = st.columns(2)
        left.markdown("**" + f.t("savings.quality_baseline", fmt=rows[0]["kv_format"]) + "**")
        left.code(rows[0]["answer"], language="text", wrap_lines=True)
        right.markdown(f"**{pick}**")
        right.code(chosen["answer"], language="text", wrap_lines=True)
        st.caption(
            i18n.join(
                f.lang,
                quality_sections.answer_text(chosen, f.lang),
                quality_sections.agreement_line(q["answers"], f.lang),
                quality_sections.answers_scope(qrec, f.lang),
            )
        )
    with st.expander(f.t("savings.quality_published_title"), icon=":material/menu_book:"):
        st.markdown(q["published"])

long = quality_sections.long_context(tuple(f.recs), f.lang)  # the price against context: evidence
# the section's question is the switch's label (a heading above a closed switch took a line more)
if long is not None and st.toggle(f.t("savings.long_show"), key="long"):  # one click below
    st.markdown(
        f.t(
            "savings.long_lead",
            finding=long["finding"],
            tokens=long["tokens"],
            window=long["window"],
        )
    )
    show_chart(f, long["chart"], "long_chart", "kv-quality-by-context", source=long["sources"])
    st.caption(f.t("savings.long_note"))
    with st.expander(f.t("savings.long_more"), icon=":material/table:"):
        st.markdown(long["table"])
    with st.expander(f.t("savings.long_retrieval_title"), icon=":material/quiz:"):
        st.markdown(f.t("savings.long_retrieval_lead", facts=long["facts"]))
        for label, reach, table in long["retrieval"]:
            st.markdown(
                f"**{label}**\n\n{reach}\n\n{table}" if reach else f"**{label}**\n\n{table}"
            )
    with st.expander(f.t("savings.long_published_title"), icon=":material/menu_book:"):
        st.markdown(long["published"])

f.faq(("smaller", "kv_vs_weights", "turboquant", "quality", "faster"), **nums)

f.chapter_end()
