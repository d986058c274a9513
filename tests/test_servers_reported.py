"""What users of local servers reported (kvcore/servers/reported.yaml): every row well-formed, with a public
address and a date or the commit its address names, its texts in Japanese too, and every ledger figure set
beside a reported one computed by the ledger, not typed."""

from __future__ import annotations

import copy
import datetime

import pytest
import yaml

from kvcore.errors import KvError
from kvcore.servers import llama_server, reported
from kvcore.servers.ledger import load_model
from kvsite import i18n

RAW = yaml.safe_load(reported.TABLE.read_text(encoding="utf-8"))["reports"]


def test_every_row_is_well_formed_with_a_public_address_and_a_date_or_a_commit():
    rows = reported.reports()
    assert len(rows) == len(RAW) >= 10
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["url"].startswith("https://github.com/") and " " not in r["url"], r["id"]
        assert isinstance(r.get("date"), datetime.date) or r["commit"] in r["url"], r["id"]
        assert r["figure"].strip() and r["what"].strip() and r["note"].strip(), r["id"]
        assert r["mac"] in (True, False, None), r["id"]
    assert sum(r["mac"] is True for r in rows) >= 5  # Mac reports where the threads state a Mac


@pytest.mark.parametrize(
    "change, words",
    [
        (lambda r: r.pop("url"), "lacks url"),
        (lambda r: r.update(url="http://example.com/x"), "public GitHub address"),
        (lambda r: r.pop("date"), "date or the commit"),
        (lambda r: r.update(mac="yes"), "mac must be"),
        (lambda r: r.update(ledger={"kind": "guess"}), "unknown ledger kind"),
    ],
)
def test_a_malformed_row_is_refused_in_one_sentence(change, words):
    row = copy.deepcopy(RAW[0])
    change(row)
    with pytest.raises(KvError, match=words):
        reported._check(row)


def test_the_state_bytes_beside_the_reported_rss_are_the_ledgers_own():
    c = reported.compared("llama-25740")
    geometry, _, _ = load_model("qwen3-8b")
    layers = len(geometry.layers)
    per_token = sum(x.kv_heads * (x.k_dim + x.v_dim) for x in geometry.layers) * 2  # f16 K and V
    assert c["per_token"] == per_token == 144 * 1024  # the thread's "144.0 KiB/token"
    assert c["ledger_bytes"] == llama_server.state_bytes(118, 1, layers, per_token)
    assert c["reported_bytes"] == 17_068 * 1024
    assert c["agrees"] and 0 < c["share"] < reported.RSS_TOLERANCE  # RSS a little above the state


def test_the_slot_contexts_beside_the_reported_ones_are_the_ledgers_own():
    c = reported.compared("llama-23652")
    assert [(x["argv"], x["slots"], x["unified"], x["ledger"]) for x in c["cases"]] == [
        ("-c 1024", 4, True, 1024),
        ("-c 1024 -np 4", 4, False, 256),
    ]
    assert c["agrees"]


def test_a_ledger_figure_that_differs_is_said_to_differ():
    spec = {
        "kind": "llama_state",
        "model": "qwen3-8b",
        "kv": "q8_0",
        "cells": 118,
        "reported_kib": 17068,
    }
    c = reported._state(spec)  # q8_0 K and V: about half the bytes, so the f16 RSS does not agree
    assert not c["agrees"] and c["share"] > 0.5


def test_reports_without_a_ledger_figure_say_why():
    """A thread's row the ledger has no figure for says why in its note (a document's row states a rule)."""
    for r in reported.reports():
        if "ledger" not in r:
            assert reported.compared(r["id"]) is None
            if "date" in r:
                note = r["note"].lower()
                assert "ledger" in note or "no memory figure" in note, r["id"]


def test_every_text_this_site_writes_in_the_table_has_its_japanese():
    """The site's own words, and each quote's translation (the Japanese page says it is one)."""
    ja = i18n.data_texts("ja")
    wanted = {
        r[k]
        for r in reported.reports()
        for k in ("what", "machine", "note", "figure")
        if " " in (r[k] or "")
    }
    wanted |= {r[k] for r in reported.reports() for k in ("model", "runtime") if _words(r[k])}
    assert not sorted(w for w in wanted if w not in ja)


def _words(text: str) -> bool:
    """Whether `text` holds this site's words (three English words in a row), not only names and versions."""
    import re

    return bool(re.search(r"[A-Za-z]{2,}[,]? [a-z]{2,}[,]? [a-z]{2,}", text))
