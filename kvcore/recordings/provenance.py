"""A recording in a reader's terms: its provenance badge's fields, its class (published / measured on
Apple Silicon / elsewhere), its engine, its method in groups, one colour per recording on every chart.

Example: badge_fields(rec)["chip"] -> "M5 Pro"; source_colors(recs)[rec.id] -> the same colour on every page.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# pandas only where a table is made: `python -m kvcore` starts ~0.6 s sooner without it.
if TYPE_CHECKING:
    import pandas as pd

    from kvcore.recordings.store import Recording


def is_apple_silicon(provenance: dict) -> bool:
    """Whether a measured run's provenance says Apple Silicon: an Apple chip under macOS (Darwin). A run on any
    other machine is a demonstration of the mechanism and is never labelled as Apple Silicon.

    Example: is_apple_silicon({"machine": {"chip": "Apple M3 Max", "os": "Darwin 24.6.0"}}) -> True.
    """
    machine = provenance.get("machine", {}) if isinstance(provenance, dict) else {}
    return "apple" in str(machine.get("chip", "")).lower() and str(
        machine.get("os", "")
    ).lower().startswith(("mac", "darwin"))


def source_class(rec: Recording) -> str:
    """'published', 'apple' (measured on Apple Silicon) or 'other' (measured anywhere else)."""
    if rec.kind == "published":
        return "published"
    return "apple" if is_apple_silicon(rec.data.get("provenance", {})) else "other"


def badge_fields(rec: Recording) -> dict:
    """The badge's fields: kind, class, label, chip, machine, memory, model, weights and KV format, method (as recorded:
    method_groups reads it), versions, date, command, citation (source, url, note). Empty where the recording is silent."""
    d, prov = rec.data, rec.data.get("provenance", {})
    machine = prov.get("machine", {})
    hw = d.get("hardware", {})
    versions = prov.get("versions", {})
    citation = d.get("citation", {})
    return {
        "kind": rec.kind,
        "class": source_class(rec),
        "label": rec.label,
        "chip": machine.get("chip") or hw.get("chip", ""),
        "vendor": hw.get("vendor", ""),
        "machine": ", ".join(
            str(v)
            for v in (
                machine.get("os"),
                prov.get("backend") or hw.get("backend"),
                prov.get("device"),
            )
            if v
        ),
        "memory_gb": machine.get("memory_gb") or hw.get("memory_gb") or "",
        "model": d["model"]["name"],
        "weights_format": d["model"].get("weights_format", ""),
        "kv_format": d["model"].get("kv_format", ""),
        "method": d.get("method", {}),
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "date": str(prov.get("date", "")),
        "command": str(prov.get("command", "")),
        "citation": citation.get("source", ""),
        "url": citation.get("url", ""),
        "note": citation.get("note", ""),
        # a published run's source details (empty when the recording has none)
        "author": citation.get("author", ""),
        "published": str(citation.get("date", "")),
        "grade": citation.get("grade", ""),
        "runtime": runtime_label(rec) if isinstance(d.get("runtime"), dict) else "",
    }


def method_groups(method) -> list[tuple[str, list[tuple[str, object]]]]:
    """A recording's free-form method as (group, [(field, value), ...]): "" for the top-level fields, then one group
    per nested mapping (a section's method, the backend) and per list of mappings (cross-checks: one item per entry,
    named by its `check` field). Order as recorded.

    Example: {"fill": "synthetic", "decode": {"warmup": 3}} -> [("", [("fill", "synthetic")]), ("decode", [("warmup", 3)])]
    """
    if not isinstance(method, dict):
        return [("", [("note", str(method))])] if method else []
    top, groups = [], []
    for key, value in method.items():
        if isinstance(value, dict):
            groups.append((str(key), list(value.items())))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            groups.append(
                (
                    str(key),
                    [
                        (str(v.get("check", i + 1)), {k: x for k, x in v.items() if k != "check"})
                        for i, v in enumerate(value)
                    ],
                )
            )
        else:
            top.append((str(key), value))
    return ([("", top)] if top else []) + groups


def recordings_table(recs: list[Recording], local_ids: set[str]) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for r in recs:
        p = badge_fields(r)
        rows.append(
            {
                "recording": r.id,
                "kind": r.kind,
                "where": "local" if r.id in local_ids else "bundled",
                "label": r.label,
                "chip": p["chip"],
                "model": p["model"],
                "date": p["date"],
                "sections": ", ".join(r.data["sections"]),
            }
        )
    return pd.DataFrame(rows)


def runtime_label(rec: Recording) -> str:
    """The engine a run used: a published run's runtime (name and version), a measured run's backend."""
    runtime = rec.data.get("runtime")
    if isinstance(runtime, dict):
        name, version = str(runtime.get("name", "")), str(runtime.get("version", ""))
        return (
            version
            if version.lower().startswith(name.lower())
            else " ".join(filter(None, (name, version)))
        )
    prov = rec.data.get("provenance", {})
    return str(prov.get("backend") or rec.data.get("hardware", {}).get("backend") or "—")
