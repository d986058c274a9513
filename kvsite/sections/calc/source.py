"""The calculator's inputs: the memory the model may use, the context, and the model source the
cached sections key on (a preset, a pasted config.json, a GGUF read in the browser or on this machine) read
into a geometry.

Example: config_geometry(None, "llama-3.2-1b", "mlx_lm") -> the preset's kvcore.model.geometry.Geometry.
"""

from __future__ import annotations

import functools
import os
from collections import OrderedDict
from dataclasses import dataclass

import streamlit as st

from kvcore.capacity.memory_fit import gpu_limit
from kvcore.errors import KvError
from kvcore.inputs import gguf as kgguf
from kvcore.inputs.config import parse_config, parse_json_text
from kvcore.inputs.presets import preset_geometry
from kvcore.limits import MAX_CONTEXT, MAX_RAM_GB, MIN_RAM_GB
from kvcore.memory.formats import KvSpec
from kvcore.model.geometry import Geometry
from kvcore.numbers import whole_number
from kvcore.runtimes.registry import get_runtime, gguf_runtime
from kvcore.timing.hardware import chips, get_chip
from kvcore.timing.working_set import DEFAULT_MACOS, MACOS, working_set
from kvcore.units import GIB
from kvsite import i18n
from kvsite.data.cache import section_cache

CUSTOM = "custom"


LOG_STEPS = [
    1,
    16,
    256,
    1024,
    2048,
    4096,
    8192,
    16384,
    32768,
    65536,
    131072,
    262144,
    524288,
    1_048_576,
    2_097_152,
    4_194_304,
    10_000_000,
    100_000_000,
]


@dataclass(frozen=True)
class Memory:
    bytes: int  # what the GPU may use: every verdict's limit
    reason: str
    ram_bytes: int | None = (
        None  # the machine's RAM where it is known (a Mac's): the server's host side
    )


def chip_names() -> list[str]:
    return [CUSTOM, *(c.chip for c in chips())]


def available_memory(f, chip: str, col_ram, col_os, col_limit) -> Memory:
    """Memory the model may use: a custom GiB figure, or the chip's RAM (macOS's GPU share on a Mac, overridable).

    Vendors' "GB" of RAM and GPU memory are binary: a 16 GB Mac has 16 GiB.
    """
    from kvsite.frame.page import url_choice

    if chip == CUSTOM:
        gib = col_ram.number_input(
            f.t("calc.custom_gib"), 0.5, 1e6, 24.0, step=1.0, key="gib", bind="query-params"
        )
        return Memory(int(gib * GIB), f.t("calc.reason_custom"))
    c = get_chip(chip)
    if c.memory_gb:
        options = list(c.memory_gb)
        ram = url_choice(
            col_ram.selectbox,
            f.t("calc.ram"),
            options,
            options[len(options) // 2],
            "ram",
            format_func=lambda v: f"{v} GB",
            help=f.t("calc.ram_help"),
        )
    else:
        ram = col_ram.number_input(
            f.t("calc.ram"),
            MIN_RAM_GB,
            MAX_RAM_GB,
            48,
            key="ramn",
            bind="query-params",
            help=f.t("calc.ram_help"),
        )
    macos = (  # macOS's working set is a Mac's: a discrete GPU's limit is its own memory
        url_choice(
            col_os.selectbox,
            f.t("calc.macos"),
            list(MACOS),
            DEFAULT_MACOS,
            "macos",
            format_func=lambda m: f.t(f"calc.macos_{m}"),
            help=f.t("calc.macos_help"),
        )
        if c.unified
        else DEFAULT_MACOS
    )
    override = col_limit.number_input(
        f.t("calc.override"),
        0.0,
        1e6,
        0.0,
        step=1.0,
        key="limit",
        bind="query-params",
        help=f.t("calc.override_help"),
    )
    ram_bytes = int(ram * GIB) if c.unified else None  # a discrete GPU's figure is its own memory
    if override > 0:
        return Memory(int(override * GIB), f.t("calc.reason_override"), ram_bytes)
    own = this_mac_working_set() if f.live_ok and c.unified else None
    if own:  # live mode on a Mac: Metal's own figure, not the table's
        return Memory(own, f.t("calc.reason_live", gib=f"{own / GIB:.2f} GiB"), ram_bytes)
    return Memory(*table_limit(float(ram), c.unified, macos, f.lang), ram_bytes)


@section_cache(max_entries=64)
def table_limit(ram_gb: float, unified: bool, macos: str, lang: str) -> tuple[int, str]:
    """The limit every verdict on the page is judged against, plan or not (the CLI's `calc --ram`), and why,
    once per RAM, macOS and language."""
    limit = gpu_limit(ram_gb, unified, macos=macos)
    return limit.bytes, limit_reason(lang, ram_gb, unified, macos)


@functools.lru_cache(maxsize=1)
def this_mac_working_set() -> int | None:
    """Metal's `max_recommended_working_set_size` on this machine (mlx imported here, on first use; the machine
    does not change under a running server), or None without a Metal GPU (Linux: the path the tests can run)."""
    from kvcore.measure.machine import metal_info

    info = metal_info()
    return int(info["max_recommended_working_set_size"]) if info else None


def limit_reason(lang: str, ram_gb: float, unified: bool = True, macos: str = DEFAULT_MACOS) -> str:
    """Why gpu_limit(ram_gb, macos=macos) is what it is, in `lang`: the report it comes from (kvcore.timing.
    working_set), the older macOS's report, or the rule's estimate; or a dedicated GPU's own memory."""
    if not unified:
        return i18n.translate(lang, "calc.reason_gpu")
    ws = working_set(ram_gb, macos)
    common = {
        "gib": f"{ws.bytes / GIB:.2f} GiB",
        "ram": f"{ram_gb:g}",
        "macos": "macOS " + i18n.translate(lang, f"calc.macos_{macos}"),
    }
    if ws.how == "rule":
        return i18n.translate(lang, "calc.reason_ws_rule", share=f"{ws.share:.0%}", **common)
    r = ws.report
    key = "calc.reason_ws_measured" if ws.how == "measured" else "calc.reason_ws_older"
    return i18n.translate(lang, key, machine=r.machine.split(" (")[0], url=r.url, **common)


_GGUF_UPLOADS: OrderedDict = OrderedDict()  # ("gguf", digest) -> geometry of a GGUF whose header a browser sent (kvsite.sections.calc.gguf_browser), the last 64


def keep_gguf(key: tuple, geometry: Geometry) -> None:
    """Hold a browser-read GGUF's geometry under its source key for config_geometry (each session keeps its own
    too, and puts it back here on every run: another session's files can push it out)."""
    _GGUF_UPLOADS[key] = geometry
    _GGUF_UPLOADS.move_to_end(key)
    while len(_GGUF_UPLOADS) > 64:
        _GGUF_UPLOADS.popitem(last=False)


def gguf_path_source(path: str) -> tuple:
    """A GGUF file on this machine -> ("gguf-path", its modification time): the header is read again when it changes."""
    try:
        return ("gguf-path", os.stat(path).st_mtime_ns)
    except OSError:
        kgguf.geometry(path)  # the engine's sentence: missing, unreadable, a folder
        raise


@section_cache(max_entries=32)
def config_geometry(text: str | bytes | tuple | None, name: str, runtime: str) -> Geometry:
    """A preset (text None), a pasted config.json or a GGUF's key -> geometry under `runtime`'s rules; KvError
    names the problem field (the model source of a kvcore.capacity.request.Request: name and text)."""
    if text is None:
        return preset_geometry(name, runtime)
    if (
        isinstance(text, tuple) and not get_runtime(runtime).reads_gguf
    ):  # a GGUF's layers are llama.cpp's reading
        raise KvError(
            f"{name} is a GGUF file: it is sized under {gguf_runtime().name}'s rules; choose {gguf_runtime().name}.",
            "gguf_runtime",
            label=name,
            runtime=runtime,
        )
    if (
        isinstance(text, tuple) and text[0] == "gguf"
    ):  # a header a browser sent (kvsite.sections.calc.gguf_browser)
        if text not in _GGUF_UPLOADS:
            raise KvError(
                f"{name} is no longer held by this server; choose the file again.",
                "gguf_upload_lost",
                label=name,
            )
        return _GGUF_UPLOADS[text]
    if isinstance(text, tuple) and text[0] == "gguf-path":  # a local file: its header only
        return kgguf.geometry(name)
    return parse_config(parse_json_text(text, name), name, get_runtime(runtime))


def kv_format_inputs(f, rt, line) -> tuple[str, str]:
    """The K and V formats, bound to ?k= and ?v=, in `line`: the formats `rt` stores, fp16 first chosen;
    one box for both where the runtime keeps one format (mlx_lm), else K and V. A link the
    runtime refuses (a format it does not store, V apart from K where it keeps one) gets the runtime's own
    sentence and what the page shows instead, read before the boxes are made: a bound select box drops a
    value it does not offer, silently."""
    kv_formats = list(rt.kv_formats)  # llama.cpp stores its own -ctk/-ctv types only
    # a link's formats are read once, on the session's first run of this page: a box the reader set (or a runtime
    # the reader switched) is not a link, and a warning given once does not come back on every rerun
    state = st.session_state
    first = "calc_link_read" not in state
    state["calc_link_read"] = True
    asked = {key: st.query_params.get(key, "") if first else "" for key in ("k", "v")}
    keys = ("k",) if rt.one_kv_format else ("k", "v")
    label = {
        "k": "calc.kv_one_format" if rt.one_kv_format else "calc.k_format",
        "v": "calc.v_format",
    }
    chosen = {
        key: line.selectbox(
            f.t(label[key]),
            kv_formats,
            index=kv_formats.index("fp16"),
            key=key,
            bind="query-params",
        )
        for key in keys
    }
    k, v = chosen["k"], chosen.get("v", chosen["k"])
    # the link's formats (the page's where it names none); a warm rerun's match its boxes
    wanted = (asked["k"] or k, asked["v"] or v)
    try:  # KvSpec refuses a name kvcore does not know, and reads llama.cpp's f16 as fp16
        spec = KvSpec(*wanted) if wanted != (k, v) else None
        if spec is not None and (spec.k_format, spec.v_format) != (k, v):
            rt.check_kv(spec)
    except KvError as e:
        shown = f.t("growth.f_same_format", k=k) if k == v else f.t("growth.f_formats", k=k, v=v)
        st.warning(f.t("calc.link_refused", message=i18n.error_markdown(f.lang, e), shown=shown))
    if asked["v"] and "v" not in keys:
        st.query_params.pop("v", None)  # no box of its own here: said once, then out of the link
    return k, v


DEFAULT_CONTEXT = 32768


def context_inputs(f, log_at, exact_at) -> int:
    """The calculator's context: an exact number and a log slider that set each other, bound to ?ctx= here rather
    than by Streamlit. Its binding leaves out a value equal to the widget's declared default (the minimum, 1, since
    the real default comes from session state), so ?ctx=1 was neither written nor read back: it came back 32,768."""
    state = st.session_state
    if "ctx" not in state:
        try:  # ASCII digits in range, else the default ('²' is str.isdigit() but no number)
            state["ctx"] = whole_number(st.query_params.get("ctx", ""), "ctx", 1, MAX_CONTEXT)
        except KvError:
            state["ctx"] = DEFAULT_CONTEXT

    def to_url() -> None:
        value = int(state["ctx"])
        if value == DEFAULT_CONTEXT:
            st.query_params.pop("ctx", None)
        else:
            st.query_params["ctx"] = str(value)

    def from_log() -> None:
        state["ctx"] = state["ctx_log"]
        to_url()

    # the log slider follows the exact value (the state the exact box will show), drawn at `log_at`
    state["ctx_log"] = max(s for s in LOG_STEPS if s <= int(state["ctx"]))
    log_at.select_slider(
        f.t("calc.ctx_log"),
        LOG_STEPS,
        key="ctx_log",
        format_func=lambda v: f"{v:,}",
        on_change=from_log,
    )
    ctx = exact_at.number_input(
        f.t("calc.ctx_exact"), 1, MAX_CONTEXT, step=1024, key="ctx", on_change=to_url
    )
    return int(ctx)


def setting_labels(runtime, lang: str) -> list[tuple[str, str]]:
    """Each of the runtime's settings as (label, help) in `lang`. A setting with no text in that language is refused
    in one sentence naming the keys (a label never shows ⟨calc.block_size⟩ to a reader)."""
    keys = [(f"calc.{s.name}", f"calc.{s.name}_help") for s in runtime.settings]
    missing = [k for pair in keys for k in pair if not i18n.has(lang, k)]
    if missing:
        raise KvError(
            f"The runtime {runtime.name} has settings without their text in this language: {', '.join(missing)}.",
            "setting_texts",
            runtime=runtime.name,
            keys=", ".join(missing),
        )
    return [(i18n.translate(lang, a), i18n.translate(lang, b)) for a, b in keys]
