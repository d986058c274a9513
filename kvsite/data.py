"""Streamlit cache wrappers around kvcore: recordings (re-read when a file changes) and views."""

from __future__ import annotations

import functools
import importlib.util
import os
import threading
from collections import OrderedDict
from pathlib import Path

import pandas as pd
import pyarrow as pa
import streamlit as st

from kvcore import recordings, views
from kvcore.geometry import Geometry
from kvcore.recordings import Recording


def rec_key(rec: Recording) -> str:
    return rec.key


# Cheap, exact cache keys for the engine's objects (Streamlit's generic hasher walks them field by field).
HASH_FUNCS = {Geometry: repr, Recording: rec_key}


@st.cache_resource(show_spinner=False)
def _memo_store() -> dict:
    """Every section_cache's entries. Itself a cache_resource, so st.cache_resource.clear() empties it too."""
    return {}


_memo_lock = threading.Lock()
_SCALARS = (str, bytes, int, float, bool, type(None))  # bytes: an uploaded file, checked by the engine


def _key(value):
    """An exact, hashable key: the type with the value (1, 1.0 and True differ), recordings by content."""
    if isinstance(value, _SCALARS):
        return type(value), value
    if isinstance(value, Recording):
        return Recording, rec_key(value)
    if isinstance(value, Geometry):
        return Geometry, repr(value)
    if isinstance(value, (list, tuple)):
        return type(value), tuple(map(_key, value))
    raise TypeError(f"section_cache cannot key a {type(value).__name__}")


def section_cache(max_entries: int = 64):
    """st.cache_resource for page sections, for a fraction of its cost per call.

    Streamlit's cache inspects the function's signature and hashes every argument on each call (about
    0.2 ms for four strings); here the key is a tuple of the arguments (recordings by content, once per
    object, as HASH_FUNCS). Same contract as st.cache_resource: one shared result, to be treated as
    read-only; exceptions are not cached; st.cache_resource.clear() clears it. Arguments must be
    scalars, recordings, geometries or lists / tuples of them.
    """

    def decorate(fn):
        name = f"{fn.__module__}.{fn.__qualname__}"

        @functools.wraps(fn)
        def cached(*args, **kwargs):
            key = (tuple(map(_key, args)), tuple((k, _key(v)) for k, v in sorted(kwargs.items())))
            store = _memo_store()
            with _memo_lock:
                entries = store.get(name)
                if entries is None:
                    entries = store[name] = OrderedDict()
                if key in entries:
                    entries.move_to_end(key)
                    return entries[key]
            value = fn(*args, **kwargs)
            with _memo_lock:
                entries[key] = value
                while len(entries) > max_entries:
                    entries.popitem(last=False)
            return value

        cached.clear = lambda: _memo_store().pop(name, None)
        return cached

    return decorate


def _signature(folders: tuple[str, ...]) -> tuple:
    """(path, mtime, size) of every recording file: an edit or a new file changes it."""
    sig = []
    for folder in folders:
        root = Path(folder)
        if root.is_dir():
            with os.scandir(root) as entries:  # scandir: no Path objects, no glob, per rerun
                for e in sorted(entries, key=lambda e: e.name):
                    if e.name.endswith(".yaml"):
                        try:
                            s = e.stat()
                            sig.append((e.path, s.st_mtime_ns, s.st_size))
                        except OSError:
                            sig.append((e.path, 0, 0))
    return tuple(sig)


@section_cache(max_entries=4)
def _load(signature: tuple, folders: tuple[str, ...]):
    recs, errors = recordings.load_all([Path(f) for f in folders])
    local = str(recordings.local_dir())
    local_ids = {r.id for r in recs if r.path and str(r.path.parent) == local}
    return recs, errors, local_ids


def load_recordings():
    """(recordings, error lines, ids of local runs): bundled first, then local/."""
    folders = (str(recordings.recordings_dir()), str(recordings.local_dir()))
    return _load(_signature(folders), folders)


@st.cache_data(max_entries=256, show_spinner=False, hash_funcs=HASH_FUNCS)
def view(name: str, *args, **kwargs):
    """kvcore.views.<name>(*args, **kwargs), cached on its arguments (recordings hash by content)."""
    return getattr(views, name)(*args, **kwargs)


_provenances: OrderedDict[str, dict] = OrderedDict()


def provenance(rec: Recording) -> dict:
    """views.provenance(rec), once per recording content (read-only: shared)."""
    value = _provenances.get(rec.key)
    if value is None:
        value = _provenances[rec.key] = views.provenance(rec)
        while len(_provenances) > 256:
            _provenances.popitem(last=False)
    return value


def source_label(rec: Recording, lang: str, where: str = "") -> str:
    """How the site names a source in pickers and legends: its kind (published / measured on Apple Silicon / CPU
    demonstration), then chip and model. Example: 'Published: M5 Pro — Llama-3.2-1B-Instruct-4bit'."""
    from . import i18n

    p = provenance(rec)
    where = i18n.translate(lang, f"source.{where}") if where else ""  # "local" or "uploaded"
    if "short_label" in rec.data:  # the file's own short name: two runs of one model and chip stay apart
        return f"{i18n.translate(lang, 'source.' + p['class'])}{where}: {rec.data['short_label']}"
    return f"{i18n.translate(lang, 'source.' + p['class'])}{where}: {p['chip'] or '?'} — {p['model'].split('/')[-1]}"


def csv_bytes(df: pd.DataFrame) -> bytes:
    return df.to_csv(index=False).encode("utf-8")


def md_table(df: pd.DataFrame, columns: dict[str, tuple[str, str | None]]) -> str:
    """A small table as a markdown table: columns maps a field to (header, format spec such as "{:.3f}", or
    None for text). Number columns align right. For a handful of rows shown among prose, where st.dataframe's grid
    costs three markdown elements a rerun and scrolls; build it inside a cached section."""
    def cell(value, fmt):
        if value is None or (isinstance(value, float) and value != value):
            return "—"
        return (fmt.format(value) if fmt else str(value)).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(head.replace("|", "\\|") for head, _ in columns.values()) + " |",
             "|" + "|".join("---:" if pd.api.types.is_numeric_dtype(df[name]) else ":---" for name in columns) + "|"]
    lines += ["| " + " | ".join(cell(row[name], fmt) for name, (_, fmt) in columns.items()) + " |"
              for row in df[list(columns)].to_dict("records")]
    return "\n".join(lines)


def arrow(df: pd.DataFrame) -> pa.Table:
    """A DataFrame as the Arrow table st.dataframe would build from it, built once inside a cached section
    (st.dataframe sends an Arrow table as it is, instead of converting the DataFrame on every rerun)."""
    from streamlit import dataframe_util

    return pa.ipc.open_stream(dataframe_util.convert_pandas_df_to_arrow_bytes(df)).read_all()


def live_status() -> tuple[bool, str]:
    """(available, reason key): mlx importable and kvcore.live present. Imports neither; asked once per
    process (a package installed later needs a server restart, as its import would)."""
    return _live_status()


@functools.lru_cache(maxsize=1)
def _live_status() -> tuple[bool, str]:
    if importlib.util.find_spec("mlx") is None or importlib.util.find_spec("mlx_lm") is None:
        return False, "live.no_mlx"
    if importlib.util.find_spec("kvcore.live") is None:
        return False, "live.no_engine"
    return True, "live.available"


def yaml_bytes(rec) -> bytes:
    return recordings.dump_text(rec.data).encode("utf-8")
