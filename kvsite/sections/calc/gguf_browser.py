"""The Calculator's own-GGUF input: a file of any size, read in the reader's browser only as far as its header.

A small custom component (st.components.v2; its JavaScript is kvsite/sections/calc/gguf_reader.js, inline, no build) slices the
chosen file with File.slice until the tensor table ends and sends those bytes (gzip, base64) as one trigger
value; the weights never leave the reader's machine. Here the bytes are checked and read by the engine's own
GGUF reader with the file's real size (kvcore.inputs.gguf.geometry(..., file_bytes=)), and the geometry is kept
for this session under the digest the cached sections key on (kvsite.sections.calc.source.config_geometry).

HEADER_MB is the real limit: the largest header sent, base64 of gzip at worst (stored blocks), must fit one
websocket message Streamlit accepts from a browser (server.maxWidgetStateSize, 25 MB by default; a test holds it).
A model's header is a few MB (a 128,256-token vocabulary as the converter writes it, without merges: 3.2 MB,
tests/test_gguf_browser.py's file).

Example (the page): source = gguf_browser.file_input(f) -> ("gguf", digest), name; or None before a file is chosen.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from pathlib import Path

import streamlit as st

from kvcore.errors import KvError
from kvcore.inputs import gguf as kgguf
from kvcore.inputs import gguf_header
from kvcore.limits import MAX_BYTES
from kvcore.units import fmt_bytes
from kvsite.sections.calc import source as calc

HEADER_MB = 16  # decimal MB, as the label says it
HEADER_LIMIT = HEADER_MB * 1_000_000
KEY = "gguf_header"  # the component's key
CHOSEN = (
    "kv_gguf_chosen"  # st.session_state: read_sent() of the file read last, or its KvError (bare)
)
MAX_NAME_CHARS = 255  # a file name as the browser gives it (a file system's own limit)

_JS = (Path(__file__).parent / "gguf_reader.js").read_text(encoding="utf-8")
_HTML = (  # the browser's own file input hidden behind a button in the page's language
    '<div class="kv-pick"><span class="kv-label"></span>'
    '<label class="kv-button"><input type="file" accept=".gguf"><span class="kv-choose"></span></label>'
    '<span class="kv-status"></span></div>'
)
_CSS = """
.kv-pick { display: flex; flex-direction: column; align-items: flex-start; gap: .4rem; font-size: .875rem; }
.kv-button { display: inline-block; padding: .35rem .8rem; border: 1px solid rgba(49, 51, 63, .25);
  border-radius: .5rem; cursor: pointer; background: var(--st-background-color, #fff); }
.kv-button:hover { border-color: var(--st-primary-color, #4c78a8); color: var(--st-primary-color, #4c78a8); }
.kv-button:focus-within { outline: 2px solid var(--st-primary-color, #4c78a8); }
.kv-button input { position: absolute; width: 1px; height: 1px; opacity: 0; }
.kv-status { opacity: .7; min-height: 1.2em; }
"""
_reader = st.components.v2.component("kvsite.gguf_header", html=_HTML, css=_CSS, js=_JS)


def limits() -> dict:
    """What the browser's walk of the header checks, from the engine's reader (one home for each bound)."""
    return {
        "limit": HEADER_LIMIT,
        "maxKv": gguf_header.MAX_KV,
        "maxTensors": gguf_header.MAX_TENSORS,
        "maxString": gguf_header.MAX_STRING,
        "maxName": gguf_header.MAX_NAME,
        "maxDims": gguf_header.MAX_DIMS,
        "maxNesting": gguf_header.MAX_NESTING,
    }


def _bad() -> KvError:
    return KvError(
        "The browser sent something that is not a file's header; choose the file again.",
        "gguf_browser_bad",
    )


def read_sent(value) -> tuple[tuple, str, object, int, int]:
    """The component's trigger value -> (("gguf", digest), file name, geometry, header bytes, file bytes); KvError (one sentence) for a
    header past HEADER_MB, a file that is not a GGUF kvcore reads, or a value no browser of this page sends."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise _bad()
    name = value["name"][:MAX_NAME_CHARS] or "the file"
    size = value.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_BYTES:
        raise _bad()
    if value.get("error") == "limit":
        raise KvError(
            f"{name}'s header (its metadata and tensor table) is larger than {HEADER_MB} MB, the most this page "
            f"reads in the browser; run python -m kvcore calc --model {name} --runtime llama.cpp on your "
            "machine instead.",
            "gguf_browser_large",
            label=name,
            mb=HEADER_MB,
        )
    if value.get("error") is not None:  # the browser could not read it (moved, or no permission)
        raise KvError(
            f"The browser could not read {name}; choose the file again.",
            "gguf_browser_unread",
            label=name,
        )
    data, length = value.get("data"), value.get("length")
    if (
        not isinstance(data, str)
        or not isinstance(length, int)
        or not 0 <= length <= min(size, HEADER_LIMIT)
        or len(data) > 4 * (HEADER_LIMIT // 3 + 1) + 1024
        or value.get("encoding") not in ("gzip", "raw")
    ):
        raise _bad()
    try:
        raw = base64.b64decode(data, validate=True)
        if value["encoding"] == "gzip":
            unzip = zlib.decompressobj(16 + zlib.MAX_WBITS)
            raw = unzip.decompress(raw, HEADER_LIMIT + 1)
            if not unzip.eof or unzip.unconsumed_tail:
                raise _bad()
    except (binascii.Error, zlib.error, ValueError):
        raise _bad() from None
    if len(raw) != length:
        raise _bad()
    key = ("gguf", hashlib.sha256(raw + size.to_bytes(8, "little")).hexdigest()[:24])
    return key, name, kgguf.geometry(raw, name, file_bytes=size), len(raw), size


def remember(state, sent) -> None:
    """Keep in `state` (st.session_state) what the browser sent last: read_sent()'s result (a small geometry, never
    the header), or its refusal as a bare KvError, its sentence only (its traceback would keep the reader's frames
    and whatever they built for as long as the session lasts)."""
    try:
        state[CHOSEN] = read_sent(sent)
    except KvError as e:
        state[CHOSEN] = e.bare()


def file_input(f) -> tuple[tuple, str] | None:
    """The file picker, and the GGUF it was last given in this session: (source key, name), None before any; the
    file's KvError (one sentence, the page says it in its language) when it was refused."""
    result = _reader(key=KEY, data={**limits(), **_texts(f)}, on_header_change=lambda: None)
    sent = result.header  # present in the one run right after the reader chose a file
    if sent is not None:
        remember(st.session_state, sent)
    chosen = st.session_state.get(CHOSEN)
    if chosen is None or isinstance(chosen, KvError):
        if chosen is not None:
            raise chosen.bare()  # a copy: the one kept never gets this run's traceback
        return None
    key, name, geometry, header, size = chosen
    # held for the cached sections, again if other sessions' files pushed it out
    calc.keep_gguf(key, geometry)
    st.caption(f.t("calc.gguf_read", name=name, header=fmt_bytes(header), size=fmt_bytes(size)))
    return key, name


def source(f, col) -> tuple:
    """The page's GGUF model source in `col`: the file picker, and (where the site runs on the reader's own machine)
    a path; (source text, label) for the cached sections, ("", "") before either is given; a refused file or path:
    its KvError. The note under them says what leaves the machine."""
    with col:
        try:
            chosen, refused = file_input(f), None
        except KvError as e:
            chosen, refused = None, e
    path = (
        ""
        if f.read_only
        else col.text_input(f.t("calc.gguf_path"), key="gguf_path", help=f.t("calc.gguf_path_help"))
    ).strip()
    st.caption(f.t("calc.gguf_note", mb=HEADER_MB))
    if (
        path and chosen is None
    ):  # a path where no file was chosen (a refused file's sentence gives way to it)
        return calc.gguf_path_source(path), path
    if refused is not None:
        raise refused
    return chosen or ("", "")


def _texts(f) -> dict:
    return {
        "label": f.t("calc.gguf_pick", mb=HEADER_MB),
        "choose": f.t("calc.gguf_choose"),
        "reading": f.t("calc.gguf_reading"),
    }
