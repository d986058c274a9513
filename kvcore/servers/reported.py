"""What users of local servers reported in public (kvcore/servers/reported.yaml), each row checked for its shape,
and, where kvcore's ledger can compute the same quantity for the stated model and settings, the ledger's figure
beside the reported one.

Example: compared("llama-23652")["cases"][1] -> {"argv": "-c 1024 -np 4", "reported": 256, "ledger": 256,
    "agrees": True}
"""

from __future__ import annotations

import datetime
from functools import lru_cache
from pathlib import Path

import yaml

from kvcore.errors import KvError
from kvcore.servers import llama_server
from kvcore.servers.ledger import load_model
from kvcore.servers.options import parse_options

TABLE = Path(__file__).parent / "reported.yaml"
FIELDS = ("id", "server", "mac", "what", "figure", "machine", "model", "runtime", "url", "note")
URL = "https://github.com/"
KIB = 1024
# RSS is the kernel's count of the pages the process holds: the allocator's rounding and bookkeeping sit on top
# of the bytes the server saves, so a reported RSS growth agrees with the ledger's state when within this share.
# A chosen margin, not a measured one: this site's own recording bounds llama-server's RSS far more loosely
# (llama_server.rss_within, where slots load and evict entries), too loosely to tell a 2x error from agreement
# in a thread where every request only adds a state.
RSS_TOLERANCE = 0.01
LEDGER_KINDS = ("llama_state", "llama_slots")


def _check(row: dict) -> dict:
    """`row` as the table needs it, or a KvError naming the row and what is wrong."""
    name = row.get("id", "?")
    missing = [k for k in FIELDS if k not in row]
    if missing:
        raise KvError(f"Reported row {name} lacks {', '.join(missing)}.")
    if not isinstance(row["url"], str) or not row["url"].startswith(URL):
        raise KvError(f"Reported row {name} has no public GitHub address.")
    if row["mac"] not in (True, False, None):
        raise KvError(f"Reported row {name}: mac must be true, false or null.")
    dated = isinstance(row.get("date"), datetime.date)
    commit = str(row.get("commit", ""))
    if not dated and not (len(commit) == 40 and commit in row["url"]):
        raise KvError(f"Reported row {name} needs the post's date or the commit its address names.")
    for key in ("what", "figure", "server", "url"):
        if not isinstance(row[key], str) or not row[key].strip():
            raise KvError(f"Reported row {name}: {key} must be a text.")
    ledger = row.get("ledger")
    if ledger is not None and ledger.get("kind") not in LEDGER_KINDS:
        raise KvError(f"Reported row {name}: unknown ledger kind {ledger.get('kind')}.")
    return row


@lru_cache(maxsize=1)
def reports() -> tuple[dict, ...]:
    """Every row of kvcore/servers/reported.yaml, checked, in the file's order."""
    rows = yaml.safe_load(TABLE.read_text(encoding="utf-8"))["reports"]
    ids = [r.get("id") for r in rows]
    if len(set(ids)) != len(ids):
        raise KvError("kvcore/servers/reported.yaml repeats an id.")
    return tuple(_check(r) for r in rows)


def _row(report_id: str) -> dict:
    for row in reports():
        if row["id"] == report_id:
            return row
    raise KvError(f"No reported row {report_id}.")


def _ledger(model: str, argv: list[str]) -> llama_server.Ledger:
    geometry, _, _ = load_model(model)
    options = parse_options(llama_server.OPTIONS, argv, llama_server.NAME)
    return llama_server.Ledger(options, geometry, "fp16")


def _state(spec: dict) -> dict:
    """The bytes llama-server saves for `cells` tokens of the preset (its prompt_save size), beside the thread's."""
    kv = spec["kv"]
    led = _ledger(spec["model"], ["-ctk", kv, "-ctv", kv])
    ledger = llama_server.state_bytes(spec["cells"], 1, led.layers, led.row_bytes)
    reported = spec["reported_kib"] * KIB
    share = reported / ledger - 1
    return {
        "kind": "llama_state",
        "model": spec["model"],
        "cells": spec["cells"],
        "per_token": led.row_bytes,
        "reported_bytes": reported,
        "ledger_bytes": ledger,
        "share": share,
        "agrees": abs(share) <= RSS_TOLERANCE,
    }


def _slots(spec: dict) -> dict:
    """Each slot's context the ledger gives for each case's options, beside the one the thread's log prints."""
    cases = []
    for case in spec["cases"]:
        led = _ledger(spec["model"], list(case["argv"]))
        sizes = {s.n_ctx for s in led.slots}
        if len(sizes) != 1:
            raise KvError("The ledger gave slots of different sizes.")
        (n_ctx,) = sizes
        cases.append(
            {
                "argv": " ".join(case["argv"]),
                "slots": len(led.slots),
                "unified": led.unified,
                "reported": case["reported"],
                "ledger": n_ctx,
                "agrees": n_ctx == case["reported"],
            }
        )
    return {"kind": "llama_slots", "cases": cases, "agrees": all(c["agrees"] for c in cases)}


def compared(report_id: str) -> dict | None:
    """The ledger's figure beside row `report_id`'s, and whether they agree; None when the row has none."""
    spec = _row(report_id).get("ledger")
    if spec is None:
        return None
    return _state(spec) if spec["kind"] == "llama_state" else _slots(spec)
