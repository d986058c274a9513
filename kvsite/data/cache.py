"""The site's one cache (section_cache) and its keys: recordings key by content, geometries by value.

section_cache keeps st.cache_resource's contract (one shared result per set of arguments, read-only, exceptions
not cached, st.cache_resource.clear() empties it, safe from several sessions' threads) at a fraction of its cost
per call: st.cache_resource inspects the signature and hashes every argument on each call, here the key is a plain
tuple of the arguments. What a reader waits for, measured: benchmarks/bench_caches.py (README, Benchmarks).
Example: @section_cache(max_entries=64) def growth(model, ctx, ...): ...
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections import OrderedDict

import streamlit as st

from kvcore.model.geometry import Geometry
from kvcore.recordings.store import Recording


def rec_key(rec: Recording) -> str:
    return rec.key


# Cheap, exact cache keys for the engine's objects (Streamlit's generic hasher walks them field by field).
HASH_FUNCS = {Geometry: repr, Recording: rec_key}


_memo_lock = threading.Lock()  # guards the entries of every section_cache
_store: dict | None = None  # those entries, by function; None until the first call after a clear


def _released(store: dict) -> None:
    """st.cache_resource.clear() releases the store: empty it, and fetch a new one on the next call. No lock here
    (clear() may run while a session's thread waits in _memo_store()): dict.clear and the assignment are atomic."""
    global _store
    store.clear()
    _store = None


@st.cache_resource(show_spinner=False, on_release=_released)
def _memo_store() -> dict:
    """Every section_cache's entries. Itself a cache_resource, so st.cache_resource.clear() empties it too."""
    return {}


def _entries(name: str) -> OrderedDict:
    """The entries of the section_cache `name`: a cache_resource call only once per clear, not once per call."""
    global _store
    store = _store
    if store is None:
        store = _store = _memo_store()
    with _memo_lock:
        return store.setdefault(name, OrderedDict())


_SCALARS = (
    str,
    bytes,
    int,
    float,
    bool,
    type(None),
)  # bytes: an uploaded file, checked by the engine


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
    if dataclasses.is_dataclass(value) and type(value).__dataclass_params__.frozen:
        # a frozen request (kvcore.capacity.request): its fields, each keyed as above
        return type(value), tuple(_key(getattr(value, f.name)) for f in dataclasses.fields(value))
    raise TypeError(f"section_cache cannot key a {type(value).__name__}")


def section_cache(max_entries: int = 64):
    """st.cache_resource for page sections, for a fraction of its cost per call.

    Streamlit's cache inspects the function's signature and hashes every argument on each call; here the
    key is a tuple of the arguments (recordings by content, once per object, as HASH_FUNCS). Same contract
    as st.cache_resource: one shared result, to be treated as read-only; exceptions are not cached;
    st.cache_resource.clear() empties it; at most `max_entries` results, the least recently used dropped.
    Arguments must be scalars, recordings, geometries, frozen dataclasses of them or lists / tuples of them (else
    a TypeError).
    """

    def decorate(fn):
        name = f"{fn.__module__}.{fn.__qualname__}"

        @functools.wraps(fn)
        def cached(*args, **kwargs):
            key = (tuple(map(_key, args)), tuple((k, _key(v)) for k, v in sorted(kwargs.items())))
            entries = _entries(name)
            with _memo_lock:
                if key in entries:
                    entries.move_to_end(key)
                    return entries[key]
            value = fn(*args, **kwargs)
            entries = _entries(name)  # a clear while fn ran: the value goes to the new store
            with _memo_lock:
                entries[key] = value
                while len(entries) > max_entries:
                    entries.popitem(last=False)
            return value

        return cached

    return decorate
