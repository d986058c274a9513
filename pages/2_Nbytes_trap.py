"""Chapter 2 — the .nbytes trap: allocated capacity vs used bytes vs theory, token by token."""

import streamlit as st

from kvcore.errors import KvError
from kvcore.memory.formats import mlx_cache_formats
from kvcore.views.memory import ARTICLE_MODEL
from kvsite import i18n
from kvsite.charts.chart import show_chart
from kvsite.frame.page import DEFAULT_SOURCE, LIVE, setup, url_choice
from kvsite.inputs import live
from kvsite.inputs.choices import bound_choice
from kvsite.layout import row, text
from kvsite.sections import shared as sections
from kvsite.sections import trap as trap_sections

CHUNK_EXAMPLES = (
    (1, 256),
    (256, 1),
    (300, 300),
)  # the three update patterns the prose walks through

f = setup("nbytes_trap")
geo = sections.article_geometry()
f.intro(**geo)
rec = f.pick_source("trap", live=True)


@st.fragment
def trap_section(rec) -> None:
    """The trap chart, its numbers and the chunking table: the format reruns this section only (the chunking table
    shows the chosen format too), not the frame; the tokens slider reruns its own part (trap_chart)."""
    c = row()
    tokens_slot = c.container()  # the tokens slider, drawn by its own part
    fmts = mlx_cache_formats()  # the formats an mlx_lm cache class holds
    fmt = bound_choice(
        c.selectbox,
        f.t("trap.format"),
        fmts,
        "fmt",
        index=fmts.index("fp16"),
        help=f.t("trap.format_help"),
    )
    trap_chart(rec, tokens_slot, fmt)

    text(
        "## " + f.t("trap.chunk_title"),
        f.t("trap.chunk_lead", **trap_sections.chunk_examples(CHUNK_EXAMPLES)),
    )
    custom = st.text_input(
        f.t("trap.custom"),
        "300, 300",
        key="updates",
        bind="query-params",
        help=f.t("trap.custom_help"),
    )
    table, error = trap_sections.chunking(
        fmt, ("257", "256, 1", "1, 256", "1000", "2048+2047+1", "500x8"), custom, f.lang
    )
    if error:
        st.error(error)
    st.caption(f.t("trap.slack_note"))
    st.markdown(table)


@st.fragment
def trap_chart(rec, tokens_slot, fmt: str) -> None:
    """The tokens slider, the chart and its numbers: a step of the slider reruns these alone."""
    tokens = tokens_slot.slider(
        f.t("trap.tokens"),
        260,
        2048,
        600,
        step=4,
        key="tokens",
        format="localized",
        bind="query-params",
    )

    if rec == LIVE:
        trap = trap_sections.trap_chart(
            tokens, fmt, f.lang, live.trap_panel(f, tokens, fmt), sections.source_names([], f.lang)
        )
    else:  # the chosen recording's points, where it measured this cache class and format
        trap = trap_sections.trap_recorded(tokens, fmt, f.lang, [rec] if rec is not None else [])
    event = show_chart(
        f,
        trap["chart"],
        "trap_chart",
        "kv-nbytes-trap",
        settings={f.t("trap.tokens"): f"{tokens:,}", f.t("trap.format"): fmt},
    )
    if picked := f.selected(event, "series"):
        st.caption(f.t("common.selected", items=", ".join(picked)))

    at = trap["at"]
    m = row()
    a, b = geo["step"], geo["step_next"]  # the block edge: 256 -> 257 (allocsim.STEP)
    for kind, key in (("allocated", "trap.alloc_at"), ("used", "trap.used_at")):
        m.metric(f.t(key, n=a), f"{at[a, kind]:.3f} MiB")
        m.metric(
            f.t(key, n=b),
            f"{at[b, kind]:.3f} MiB",
            f"{at[b, kind] - at[a, kind]:+.3f} MiB",
            delta_color="inverse",
        )
    if (
        trap["at_source"] == "live"
    ):  # the real mlx_lm cache's numbers, and whether the simulation agrees
        same = all(abs(trap["sim"][k] - at[k]) < 1e-9 for k in at)
        note = [
            f.t("trap.metrics_note_live", model=ARTICLE_MODEL, **geo),
            f.t("trap.sim_agrees" if same else "trap.sim_differs"),
        ]
    else:
        note = [f.t("trap.metrics_note", model=ARTICLE_MODEL, **geo)]
    article = trap_sections.article_trap(next((r for r in f.recs if r.id == DEFAULT_SOURCE), None))
    if fmt == "fp16" and article:  # Article A measured the fp16 cache only
        note.append(f.t("trap.article_note", **article))
    st.caption(i18n.join(f.lang, *note))


trap_section(rec)


@st.fragment
def peak_section() -> None:
    """The third line: mlx_lm's measured peak beside kvcore's plan, allocated and used, against the prompt; the
    prefill step reruns this section only."""
    text("## " + f.t("trap.peak_title"), f.t("trap.peak_lead", step=geo["step"]))
    peak_rec = trap_sections.peak_source(f.recs)
    steps = trap_sections.peak_steps(peak_rec) if peak_rec is not None else []
    if not steps:
        st.info(f.t("trap.peak_none"))
        return
    step = url_choice(
        st.radio,
        f.t("trap.peak_step"),
        steps,
        max(steps),  # mlx_lm's default, 2,048, where the run has it
        "pstep",
        format_func=lambda s: f"{s:,}",
        horizontal=True,
        help=f.t("trap.peak_step_help"),
    )
    try:
        peak = trap_sections.peak_chart(peak_rec, step, f.lang)
    except KvError as e:  # a run whose config or rows kvcore cannot plan: said, not drawn
        st.error(i18n.error_markdown(f.lang, e))
        return
    cited = f.source_text  # the trap chart's downloads cite the trap's source: kept past this badge
    f.badge(peak_rec, "peak")
    show_chart(
        f,
        peak["chart"],
        "peak_chart",
        "kv-mlx-lm-peak",
        settings={f.t("trap.peak_step"): f"{step:,}"},
        source=f.source_text,
    )
    f.source_text = cited
    near = peak["boundary"]
    numbers = f.t("trap.peak_boundary", **near, gen=peak["generated"]) if near else ""
    with st.expander(
        f.t("trap.peak_more"), icon=":material/table:"
    ):  # the evidence, one click below
        st.caption(i18n.join(f.lang, numbers, f.t("trap.peak_fit", **peak["fit"])))
        how = f.run_yourself(peak_rec.data["provenance"]["command"])
        st.caption(i18n.join(f.lang, f.t("trap.peak_backend"), how))


peak_section()

RIGHT_WAY = """```python
used_bytes = 0
for c in cache:                      # {code_per_layer}
    k, v = c.keys_and_values()       # {code_used}
    used_bytes += k.nbytes + v.nbytes
# {code_offset} c.offset * kv_heads * (K row + V row bytes)
allocated = sum(c.nbytes for c in cache)   # {code_capacity}
```""".format(
    **{k: f.t(f"trap.{k}") for k in ("code_per_layer", "code_used", "code_offset", "code_capacity")}
)
text(
    "## " + f.t("trap.right_title"), f.t("trap.right_lead"), RIGHT_WAY, f.t("trap.quantized", **geo)
)

f.chapter_end()
