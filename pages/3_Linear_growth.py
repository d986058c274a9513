"""Chapter 3 — linear growth: the formula with the reader's numbers, allocated / used / theory, weights vs KV."""

import streamlit as st

from kvcore.memory.formats import mlx_cache_formats
from kvcore.units import fmt_num, gib
from kvsite import i18n
from kvsite.charts.chart import show_chart
from kvsite.frame.page import setup
from kvsite.inputs.choices import bound_choice, model_choice, weights_choice
from kvsite.layout import lazy_expander, row
from kvsite.sections import growth as growth_sections
from kvsite.sections import shared as sections

LAYER_CONTEXTS = (1024, 4096, 8192, 32768, 131072)  # the per-layer chart holds each

f = setup("linear_growth")
f.intro()
rec = f.pick_source("growth")


@st.fragment
def body(rec) -> None:
    """The page's widgets and what they drive: a change reruns this, not the frame (every section here depends on
    the model, format and sequences chosen at its top); the context slider reruns its own part (growth_chart)."""
    c = row()
    model = model_choice(c, f)
    ctx_slot = c.container()  # the context slider, drawn by its own part
    weights = weights_choice(c, f)
    kvs = (
        mlx_cache_formats()
    )  # the chapter's cache is mlx_lm's: what its KVCache / QuantizedKVCache hold
    kv = bound_choice(
        c.selectbox,
        f.t("common.kv_format"),
        kvs,
        "kv",
        index=kvs.index("fp16"),
    )
    seqs = c.number_input(f.t("growth.sequences"), 1, 256, 1, key="seqs", bind="query-params")
    log = c.toggle(f.t("growth.log"), False, key="log", bind="query-params")
    growth_chart(rec, ctx_slot, model, weights, kv, seqs, log)


@st.fragment
def growth_chart(rec, ctx_slot, model: str, weights: str, kv: str, seqs: int, log: bool) -> None:
    """The context slider and everything it drives (chart, numbers, formula): a step reruns these alone."""
    ctx = bound_choice(
        ctx_slot.select_slider,
        f.t("growth.max_context"),
        [8192, 16384, 32768, 65536, 131072, 262144, 1048576],
        "ctx",
        value=32768,
        format_func="{:,}".format,
    )
    grow = growth_sections.growth(model, ctx, weights, kv, seqs, f.lang, rec, log)
    if (
        "error" in grow
    ):  # this model's cache cannot be stored in that format (mlx's groups of 64 on head_dim 96)
        st.error(grow["error"])
        return
    if grow["model_max"] and ctx > grow["model_max"]:
        st.caption(
            ":material/info: " + f.t("common.beyond_limit", model=model, n=f"{grow['model_max']:,}")
        )
    settings = {
        f.t("common.model"): model,
        f.t("common.weights"): weights,
        f.t("common.kv_format"): kv,
        f.t("growth.sequences"): seqs,
    }
    event = show_chart(
        f,
        grow["chart"],
        "growth_chart",
        f"kv-growth-{model}",
        settings={**settings, f.t("growth.max_context"): f"{ctx:,}"},
    )
    if picked := f.selected(event, "series"):
        st.caption(f.t("common.selected", items=", ".join(picked)))
    if rec is not None and not grow["points"]:
        st.caption(f.t("growth.no_points"))

    cross = grow["crossover"]
    m = row()
    m.metric(f.t("growth.kv_at", n=f"{grow['max_context']:,}"), f"{fmt_num(gib(grow['used']))} GiB")
    m.metric(
        f.t("growth.weights_m", w=weights),
        f"{fmt_num(gib(grow['weights']))} GiB",
        help=f.t("growth.weights_gb", gb=fmt_num(grow["weights"] / 1e9)),
    )
    m.metric(
        f.t("growth.crossover"), f"{cross:,}" if cross else "—", help=f.t("growth.crossover_help")
    )
    st.code(grow["formula"], language=None, wrap_lines=True)
    st.caption(
        i18n.join(f.lang, f.t("growth.exact_note", **sections.article_geometry()), grow["axes"])
    )

    layers = lazy_expander(
        f.t("growth.layers_title"), "growth_layers_open", icon=":material/layers:"
    )
    if not layers:  # closed: a step above sends its title only, not a chart it leaves as it was
        return
    with layers:
        contexts = LAYER_CONTEXTS  # picked inside the chart (no round trip); a link's ?lctx= opens at its value
        asked = st.query_params.get("lctx", "")
        layer_ctx = next(
            (c for c in contexts if str(c) == asked), 32768
        )  # compared as text: no int() of 5,000 digits
        show_chart(
            f,
            growth_sections.growth_layers(model, contexts, layer_ctx, kv, seqs, f.lang)["chart"],
            "layers_chart",
            f"kv-per-layer-{model}",
            table=False,
            settings={**settings, f.t("common.context"): f"{layer_ctx:,}"},
            source=f.t("export.computed"),
        )
        st.caption(f.t("growth.layers_pick_note", n=f"{layer_ctx:,}"))
        st.caption(f.t("growth.layers_note"))


body(rec)
f.faq(("why", "how_much"))

f.chapter_end()
