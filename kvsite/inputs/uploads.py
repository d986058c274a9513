"""A reader's own recordings, uploaded on the Recordings page: validated by the loader that reads the
bundled files (kvcore.recordings.store.parse_bytes), kept in that reader's session only (st.session_state),
never written to disk, and offered beside the bundled runs in every chapter's source picker.

Example (the page): st.file_uploader(..., key=UPLOADER, on_change=receive); then show(f) says what became of it.
"""

from __future__ import annotations

import re

import streamlit as st

from kvcore.recordings import store as recordings
from kvcore.recordings.store import Recording, RecordingError
from kvsite import i18n
from kvsite.data.sources import load_recordings
from kvsite.layout import plain

UPLOADER = "rec_upload"  # the file_uploader's widget key
STORE = "kv_uploads"  # st.session_state: {id: Recording}, this session's uploads, in upload order
RESULT = "kv_upload_result"  # st.session_state: the last upload's id, or its RecordingError
# The uploader's own limit in MB (Streamlit counts 2**20 bytes), which it prints under the box ("2MB per file"): the
# limit the label states, rounded up, so a file the engine would take is never stopped by the widget; a file between
# MAX_FILE_BYTES and this gets our sentence (recordings.parse_bytes), a larger one Streamlit's own (English) message.
MAX_WIDGET_MB = -(-recordings.MAX_FILE_BYTES // 2**20)
PREFIX = (
    "upload-"  # every uploaded run's id starts so (a shared ?src= link names one that may be gone)
)
MAX_KEPT = (
    5  # a session keeps its last five uploads (each up to MAX_FILE_BYTES, in the server's memory)
)
MAX_SESSION_BYTES = (
    2 * recordings.MAX_FILE_BYTES
)  # and at most this many bytes of files: the oldest go first
SIZES = "kv_upload_bytes"  # st.session_state: {id: the file's size in bytes}, for the bound above


def uploaded() -> list[Recording]:
    """This session's uploaded recordings (empty for a reader who uploaded nothing)."""
    store = st.session_state.get(STORE)
    return list(store.values()) if store else []


def _new_id(filename: str, taken: set[str]) -> str:
    stem = re.sub(r"[^a-z0-9]+", "-", filename.rsplit(".", 1)[0].lower()).strip("-")[:60] or "run"
    base, n = f"{PREFIX}{stem}", 1
    while (rid := base if n == 1 else f"{base}-{n}") in taken:
        n += 1
    return rid


def receive() -> None:
    """The uploader's on_change: validate the file now (before the page runs, so the page's picker has it)."""
    file = st.session_state.get(UPLOADER)
    if (
        file is None
    ):  # the reader removed the file from the uploader: their recording stays for the session
        st.session_state.pop(RESULT, None)
        return
    try:
        rec = recordings.parse_bytes(file.getvalue(), file.name)
    except RecordingError as e:
        st.session_state[RESULT] = e
        return
    store, sizes = st.session_state.setdefault(STORE, {}), st.session_state.setdefault(SIZES, {})
    for rid, old in list(store.items()):  # the same file again replaces itself
        if old.data == rec.data:  # a walk of at most recordings.MAX_NODES values each
            del store[rid]
            sizes.pop(rid, None)
    rec.name = _new_id(file.name, {r.id for r in load_recordings()[0]} | set(store))
    store[rec.name] = rec
    sizes[rec.name] = file.size
    while len(store) > MAX_KEPT or sum(sizes.get(rid, 0) for rid in store) > MAX_SESSION_BYTES:
        sizes.pop(oldest := next(iter(store)), None)
        del store[oldest]
    st.session_state[RESULT] = rec.name


def show(f) -> None:
    """The last upload's outcome: where the recording now appears, or one sentence in the page's language."""
    result = st.session_state.get(RESULT)
    if isinstance(result, RecordingError):
        st.error(i18n.error_markdown(f.lang, result))
    elif result in st.session_state.get(STORE, {}):
        rec = st.session_state[STORE][result]
        st.success(f.t("recordings.uploaded", label=plain(f.label(rec)), title=plain(rec.title)))
