"""The Calculator's widgets, read into one kvcore.capacity.request.Request: where the model comes from, the runtime
and its settings, the context, the sequences, the K, V and weight formats, the machine and its memory.

Example: draft(f) -> (Draft(ModelSource("llama-3.1-8b"), "preset", "mlx_lm", 1, ...), left, right), every input
but the context; request(f, draft) -> Inputs(Request(ModelSource("llama-3.1-8b"), 32768, ...), Memory(...), "M4 Pro"),
None when the page has nothing to size yet (no config pasted, no GGUF chosen) or the reader's input is refused
(said on the page); left and right are the columns the numbers and the chart go in.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from kvcore.capacity.request import ModelSource, Request
from kvcore.errors import KvError
from kvcore.inputs.config import MAX_CONFIG_BYTES
from kvcore.inputs.preset_files import preset_names
from kvcore.memory.formulas import DOWNLOAD_WEIGHT_FORMATS, FILE_WEIGHTS
from kvcore.runtimes.registry import RUNTIMES, get_runtime, gguf_runtime
from kvsite import i18n
from kvsite.frame.page import url_choice
from kvsite.inputs.choices import bound_choice
from kvsite.layout import row, uploader_words

from . import gguf_browser
from .source import (
    CUSTOM,
    Memory,
    available_memory,
    chip_names,
    context_inputs,
    kv_format_inputs,
    setting_labels,
)


@dataclass(frozen=True)
class Inputs:
    """What the reader asked (the request) and what the page shows beside it: the memory's reason, the chip."""

    request: Request
    memory: Memory
    chip: str


@dataclass(frozen=True)
class Draft:
    """Every input but the context, which its own part of the page draws (a context step reruns that part only):
    where the context goes (`context_at`: the slider's place and the exact number's), and whether there is
    anything to size yet (`waiting`: no config pasted, no GGUF chosen)."""

    source: ModelSource
    src_kind: str
    runtime: str
    sequences: int
    k_format: str
    v_format: str
    weights_format: str
    settings: tuple
    memory: Memory
    chip: str
    context_at: tuple
    waiting: bool


def draft(f) -> tuple[Draft | None, object, object]:
    """Every input of the page but the context, and the two columns below them (the machine and the runtime's
    settings on the left, over the numbers; the chart on the right). None, with the engine's sentence shown, when
    a GGUF is refused."""
    src_kind, source, runtime = _model(f)
    if source is None:  # a GGUF refused: said, and nothing else to ask
        return None, None, None
    rt = get_runtime(runtime)
    # each line of inputs one horizontal block (kvsite.layout.row): st.columns sent a block per column more
    c = row(vertical_alignment="bottom")  # a label that wraps (ja) keeps its box on the line
    context_at = (
        c.container(),
        c.container(),
    )  # the log slider and the exact number: request() draws them
    seqs = c.number_input(
        f.t("calc.sequences"), 1, rt.max_sequences, 1, key="seq", bind="query-params"
    )  # llama.cpp runs at most 256 sequences (-np)
    k_fmt, v_fmt = kv_format_inputs(f, rt, c)
    w_fmt = _weights(f, c, src_kind, rt)
    # the machine, the numbers and the verdict on the left, the chart on the right (a phone stacks the two)
    left, right = st.columns([5, 6], gap="medium")
    m = left.columns(
        [3, 2, 2]
    )  # three boxes on one line in the left column (a row would wrap the third)
    box = left.container(horizontal=True)  # the GPU limit's override and the runtime's own settings
    chip = url_choice(
        m[0].selectbox,
        f.t("calc.machine"),
        chip_names(),
        "M4 Pro",
        "chip",
        format_func=lambda n: f.t("calc.custom") if n == CUSTOM else n,
    )
    memory = available_memory(f, chip, m[1], m[2], box)
    settings = _settings(f, rt, box)
    waiting = src_kind != "preset" and not (
        source.text.strip() if src_kind == "config" else source.text
    )
    asked = Draft(
        source, src_kind, runtime, int(seqs), k_fmt, v_fmt, w_fmt, settings, memory, chip, context_at,
        waiting,
    )  # fmt: skip
    return asked, left, right


def request(f, asked: Draft) -> Inputs | None:
    """The context (a log slider and an exact number in their places on the inputs' line) with the rest of the
    draft, read into a Request; None, with the page's prompt or the engine's sentence shown, when there is
    nothing to size."""
    ctx = context_inputs(f, *asked.context_at)  # log slider and exact number, bound to ?ctx=
    if asked.waiting:
        st.info(f.t("calc.gguf_prompt" if asked.src_kind == "gguf" else "calc.paste_prompt"))
        return None
    try:
        made = Request(
            asked.source, int(ctx), asked.sequences, asked.k_format, asked.v_format,
            asked.weights_format, asked.runtime, asked.settings, memory_bytes=asked.memory.bytes,
        )  # fmt: skip
    except KvError as e:
        refused(f, e, asked.src_kind)
        return None
    return Inputs(made, asked.memory, asked.chip)


def refused(f, e: KvError, src_kind: str) -> None:
    """The engine's sentence: about a pasted config or a GGUF, under the page's words for a bad input."""
    message = i18n.error_markdown(f.lang, e)
    st.error(f.t("calc.bad_input", message=message) if src_kind != "preset" else message)


def _model(f) -> tuple[str, ModelSource | None, str]:
    """Where the model comes from, the model and the runtime, in one row: (kind, source, runtime); the source is
    None when a GGUF is refused (said on the page)."""
    top = row()  # the source's three choices on one line at 1400 px
    kind = url_choice(
        top.segmented_control,
        f.t("calc.model_source"),
        ["preset", "config", "gguf"],
        "preset",
        "msrc",
        format_func=lambda o: f.t(f"calc.src_{o}"),
        required=True,
        wrap=True,  # the three choices wrap in a phone's column rather than run past its edge
    )
    # a pasted config (a file and a box) or a GGUF (a picker and a path) stacks in a cell of its own
    source = _source(f, top if kind == "preset" else top.container(), kind)
    if source is None:
        return kind, None, ""
    if kind == "gguf":  # a GGUF's layers are the reading of the runtime it is the model format of
        runtime = gguf_runtime().name  # no choice to offer: shown, not a widget
        top.markdown(f"{f.t('calc.runtime')}: `{runtime}`", help=f.t("calc.runtime_gguf_help"))
    else:
        runtime = bound_choice(
            top.selectbox,
            f.t("calc.runtime"),
            list(RUNTIMES),
            "rt",
            help=f.t("calc.runtime_help"),
        )
    return kind, source, runtime


def _source(f, col, kind: str) -> ModelSource | None:
    """The model: a preset (in the URL), a pasted or uploaded config.json, or a GGUF's header."""
    if kind == "gguf":  # any size: its header only, read in the browser (or by its path here)
        try:
            text, label = gguf_browser.source(f, col)
        except KvError as e:
            st.error(f.t("calc.bad_input", message=i18n.error_markdown(f.lang, e)))
            return None
        return ModelSource(label, text)
    if kind == "config":
        if f.lang != "en":  # Streamlit's own words in the box are English
            uploader_words(
                "upload",
                f.t("common.upload_button"),
                f.t("common.upload_note", mb=MAX_CONFIG_BYTES // 1_000_000, types="JSON"),
                f.t("common.upload_drop"),
            )
        upload = col.file_uploader(
            f.t("calc.upload", mb=MAX_CONFIG_BYTES // 1_000_000),
            type=["json"],
            key="upload",
            max_upload_size=-(-MAX_CONFIG_BYTES // 2**20),
        )  # the widget's "…MB per file" says the same
        pasted = col.text_area(f.t("calc.paste"), key="pasted", height=140)  # sized by the engine
        st.caption(f.t("calc.config_url_note"))
        if upload is not None:  # bytes: the engine checks size, binary, UTF-8
            return ModelSource(upload.name, upload.getvalue())
        return ModelSource("config.json", pasted)
    names = preset_names()
    model = bound_choice(
        col.selectbox, f.t("common.model"), names, "model", index=names.index("llama-3.1-8b")
    )
    return ModelSource(model)


def _weights(f, col, kind: str, rt) -> str:
    """The weights' format: a GGUF's own tensors by default (exact bytes), or the formats the runtime's
    model files come in (llama.cpp's GGUF types, mlx's own), its usual one first chosen."""
    if kind == "gguf":
        return col.selectbox(
            f.t("common.weights"),
            [FILE_WEIGHTS, *DOWNLOAD_WEIGHT_FORMATS],
            key="w_gguf",
            format_func=lambda w: f.t("calc.weights_file") if w == FILE_WEIGHTS else w,
        )
    formats = list(rt.weight_formats)
    return bound_choice(
        col.selectbox,
        f.t("common.weights"),
        formats,
        "w",
        index=formats.index(rt.default_weights),
    )


def _settings(f, rt, box) -> tuple:
    """The runtime's own options that decide its cache (llama.cpp: -kvu, -ub, --swa-full; mlx_lm: the prefill
    step; -np is the sequences), as (options field, value) pairs."""
    if not rt.settings and not rt.backends:
        return ()
    backend = ()
    if rt.backends:  # the build its plan is for: a Mac's first (the runtime's mac_backend) (llama.cpp's --backend)
        # the builds by their names, the same in every language (the option is what the link holds)
        builds = {
            f.t(f"calc.backend_{b}"): b
            for b in sorted(rt.backends, key=lambda b: b != rt.mac_backend)
        }
        chosen = bound_choice(
            box.selectbox,
            f.t("calc.backend"),
            list(builds),
            "build",
            help=f.t("calc.backend_help"),
        )
        backend = (("backend", builds[chosen]),)
    try:
        labels = setting_labels(rt, f.lang)
    except KvError as e:
        st.error(i18n.error_markdown(f.lang, e))
        st.stop()
    values = []
    for s, (name, tip) in zip(rt.settings, labels):
        common = {"key": s.key, "bind": "query-params", "help": tip}
        if s.choices:  # 2,048 as every count on the page
            value = bound_choice(
                box.selectbox,
                name,
                s.choices,
                s.key,
                index=s.choices.index(s.default),
                format_func="{:,}".format,
                help=tip,
            )
        elif s.switch:
            value = bool(box.checkbox(name, s.default, **common))
        else:
            value = box.number_input(name, s.low, s.high, s.default, **common)
        values.append((s.field, value if s.switch else int(value)))
    return tuple(values) + backend
