"""The choices several chapters offer in the same words, made once: a bundled model and a weights format,
each bound to the URL under the same key on every page (?model=, ?w=); and how every choice bound to the URL says a
link's value it does not offer (bound_choice, unknown_choice; kvsite.frame.page.url_choice calls the latter)."""

from __future__ import annotations

import streamlit as st

from kvcore.errors import quote
from kvcore.inputs.preset_files import preset_names
from kvcore.memory.formulas import WEIGHT_FORMATS
from kvcore.views.memory import ARTICLE_MODEL
from kvsite import i18n
from kvsite.layout import plain

# px: a select whose names run long keeps this width, so each name shows whole (its value is an input element, which
# cannot wrap, and a row's share of a phone's 358 px column cut "M4 Max (40-core GPU)" mid-word); wider than the
# column, it is the whole row there
CHIP_PX = 200  # the longest chip name, "NVIDIA A100 80 GB SXM"
QUESTION_PX = 480  # a question put to the model


def chip_choice(where, f, chips: list[str], default: str) -> str:
    """A chip of the hardware table, `default` first shown, bound to ?chip=, each name whole (CHIP_PX)."""
    return bound_choice(
        where.selectbox,
        f.t("decode.chip"),
        chips,
        "chip",
        index=chips.index(default),
        width=CHIP_PX,
    )


def model_choice(where, f, default: str = ARTICLE_MODEL) -> str:
    """A bundled preset, `default` first shown (Article A's Llama-3.2-1B unless the chapter says)."""
    names = preset_names()
    return bound_choice(
        where.selectbox, f.t("common.model"), names, "model", index=names.index(default)
    )


def weights_choice(where, f) -> str:
    """A weights format, mlx-q4 first shown (what Article A's model ships as)."""
    return bound_choice(
        where.selectbox,
        f.t("common.weights"),
        WEIGHT_FORMATS,
        "w",
        index=WEIGHT_FORMATS.index("mlx-q4"),
    )


def bound_choice(widget, label: str, options: list, key: str, format_func=str, **kwargs):
    """A choice widget bound to ?key= by Streamlit (the option's formatted label in the URL) that says so when the
    link names a value that is none of the options: Streamlit drops such a value without a word and shows the
    default. Example: ?model=llama-3.1-9b -> "The link's 'model' value 'llama-3.1-9b' ... shows llama-3.1-8b"."""
    asked = st.query_params.get_all(
        key
    )  # before the widget: it takes an unknown value out of the link
    value = widget(label, options, key=key, bind="query-params", format_func=format_func, **kwargs)
    labels = {format_func(o) for o in options}
    unknown = [
        v for v in asked if v and v not in labels
    ]  # an empty value: the default, as Streamlit reads it
    if unknown:
        shown = value if isinstance(value, (list, tuple)) else [value]
        unknown_choice(key, label, unknown, ", ".join(format_func(v) for v in shown))
    return value


def unknown_choice(key: str, label: str, asked: list[str], shown: str) -> None:
    """One sentence for a link's value that a choice does not offer: which value, for which control, and what the
    page shows instead (in the page's language, the one the language control holds)."""
    lang = st.session_state.get("lang__w")
    t = i18n.translator(lang if lang in i18n.LANGUAGES else "en")
    st.warning(
        t(
            "site.url_choice",
            param=plain(quote(key)),
            value=plain(quote(asked[0])),
            label=label,
            shown=plain(shown) if shown else t("site.url_nothing"),
        )
    )
