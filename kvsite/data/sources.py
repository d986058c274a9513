"""The site's data sources: the recordings (re-read when a file changes), their provenance and names, and whether
live mode can run here. Example: recs, errors, local_ids = load_recordings()
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

from kvcore.recordings import store as recordings
from kvcore.recordings.provenance import badge_fields as engine_badge_fields
from kvcore.recordings.store import Recording

from .cache import section_cache


def _signature(folders: tuple[str, ...]) -> tuple:
    """(path, mtime, size) of every recording file (recordings.is_recording_name: a save's temporary file, written
    and removed while it saves, is not one): an edit or a new file changes it."""
    sig = []
    for folder in folders:
        root = Path(folder)
        if root.is_dir():
            with os.scandir(root) as entries:  # scandir: no Path objects, no glob, per rerun
                for e in sorted(entries, key=lambda e: e.name):
                    if recordings.is_recording_name(e.name):
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


@section_cache(max_entries=256)
def badge_fields(rec: Recording) -> dict:
    """kvcore.recordings.provenance.badge_fields(rec), once per recording content (read-only: shared)."""
    return engine_badge_fields(rec)


@section_cache(max_entries=256)
def short_name(rec: Recording) -> str:
    """rec.short_name (kvcore makes it), once per recording content: a picker asks on every rerun."""
    return rec.short_name


def source_label(rec: Recording, lang: str, where: str = "", short: bool = False) -> str:
    """How the site names a source in pickers and legends: its kind (published / measured on Apple Silicon / CPU
    demonstration), then chip and model. Example: 'Published: M5 Pro — Llama-3.2-1B-Instruct-4bit'.
    short: the name kvcore makes short enough for a legend or the sidebar (Recording.short_name), kind first."""
    from kvsite import i18n

    p = badge_fields(rec)
    if short:
        mark = (
            i18n.translate(lang, f"source.short_{where}") if where else ""
        )  # "local" or "uploaded"
        return f"{i18n.translate(lang, 'source.short_' + p['class'])}{short_name(rec)}{mark}"
    kind = i18n.translate(lang, "source." + p["class"])
    colon = i18n.translate(lang, "recordings.colon")  # 「公表値：」 in Japanese
    if where == "uploaded":  # a reader's own file: the name it gives itself
        return f"{kind}{i18n.translate(lang, 'source.uploaded')}{colon}{rec.label}"
    where = i18n.translate(lang, f"source.{where}") if where else ""  # "local" or "uploaded"
    if (
        "short_label" in rec.data
    ):  # the file's own short name: two runs of one model and chip stay apart
        return f"{kind}{where}{colon}{rec.data['short_label']}"
    return f"{kind}{where}{colon}{p['chip'] or '?'} — {p['model'].split('/')[-1]}"


def live_status() -> tuple[bool, str]:
    """(available, reason key): mlx importable and kvcore.measure.probes present. Imports neither; asked once per
    process (a package installed later needs a server restart, as its import would)."""
    return _live_status()


@functools.lru_cache(maxsize=1)
def _live_status() -> tuple[bool, str]:
    if importlib.util.find_spec("mlx") is None or importlib.util.find_spec("mlx_lm") is None:
        return False, "live.no_mlx"
    if importlib.util.find_spec("kvcore.measure.probes") is None:
        return False, "live.no_engine"
    return True, "live.available"


def yaml_bytes(rec) -> bytes:
    return recordings.dump_text(rec.data).encode("utf-8")
