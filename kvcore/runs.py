"""Turn live probe results into a recording (schema 1), ready for kvcore.recordings.save.

Pure: the caller passes the provenance (kvcore.live_models.provenance) and the model summary.
Example: recording_from({"decode": rows}, model, prov, {"fill": "synthetic"})["kind"] -> "measured"
"""

from __future__ import annotations

from .recordings import known_fields


def _clean(section: str, row: dict) -> dict:
    """Keep only the fields the schema knows for this section."""
    keep = known_fields(section)
    return {k: (float(v) if isinstance(v, float) else [float(x) for x in v] if isinstance(v, list) else v)
            for k, v in row.items() if k in keep and v is not None}


def label_for(provenance: dict) -> str:
    """What a measured run is: Apple Silicon when measured on a Mac's Apple chip, else a CPU/other demonstration."""
    machine = provenance["machine"]
    if "apple" in machine["chip"].lower() and machine["os"].lower().startswith("darwin"):
        return f"Measured — {machine['chip']} ({provenance['backend']})"
    return f"CPU demonstration ({machine['os'].split()[0]}, {provenance['backend']}) — not Apple Silicon"


def recording_from(sections: dict[str, list[dict]], model: dict, provenance: dict, method: dict, title: str = "") -> dict:
    """A measured recording from probe rows per section (trap rows: the token-by-token ones only)."""
    clean = {}
    for name, rows in sections.items():
        if name == "trap":
            rows = [r for r in rows if r.get("pattern", "token by token") == "token by token"]
        if rows:
            clean[name] = [_clean(name, r) for r in rows]
    return {
        "schema": 1,
        "kind": "measured",
        "title": title or f"{model['name']} on {provenance['machine']['chip']} ({', '.join(clean)})",
        "label": label_for(provenance),
        "provenance": provenance,
        "model": model,
        "method": method,
        "sections": clean,
    }
