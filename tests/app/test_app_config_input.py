"""Careless input to the calculator: a pasted or uploaded config.json that is huge, binary, deeply nested or not
UTF-8 gets one sentence in the page's language, the page keeps working, and nothing is written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from app_helpers import ROOT, page

from kvcore.inputs.preset_files import load_preset

CALC = "pages/8_Calculator.py"
GOOD = json.dumps(load_preset("llama-3.2-1b")["config"])

# (what, bytes uploaded, English words, Japanese words)
UPLOADS = [
    (
        "huge",
        b'{"a": "' + b"x" * 1_100_000 + b'"}',
        "larger than 1,000 kB",
        "1,000 kB を超えています",
    ),
    ("binary", bytes(range(256)) * 4, "is a binary file", "バイナリファイルです"),
    ("nested", b"[" * 50_000 + b"]" * 50_000, "nested too deeply", "入れ子が深すぎて"),
    (
        "latin-1",
        '{"model_type": "llamaé"}'.encode("latin-1"),
        "is not UTF-8 text",
        "UTF-8 のテキストではありません",
    ),
]
PASTES = [
    ("huge", '{"a": "' + "x" * 1_100_000 + '"}', "larger than", "kB を超えています"),
    ("binary", "{\x00\x01\x02}", "is a binary file", "バイナリファイルです"),
    ("nested", '{"a": ' * 5_000 + "1" + "}" * 5_000, "nested too deeply", "入れ子が深すぎて"),
]


def files_under(*folders: Path) -> dict[str, float]:
    return {
        str(p): p.stat().st_mtime
        for folder in folders
        if folder.exists()
        for p in folder.rglob("*")
    }


def one_error(at, words: str) -> None:
    assert not at.exception, at.exception
    assert len(at.error) == 1, [e.value for e in at.error]
    message = at.error[0].value
    assert words in message, message
    assert "Traceback" not in message and len(message.splitlines()) == 1


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("what, data, en, ja", UPLOADS, ids=[u[0] for u in UPLOADS])
def test_a_bad_upload_gets_one_sentence_in_the_pages_language(rec_dir, lang, what, data, en, ja):
    before = files_under(rec_dir, ROOT / "recordings")
    at = page(CALC, lang, msrc="config")
    at.file_uploader(key="upload").set_value((f"{what}.json", data, "application/json")).run()
    one_error(at, en if lang == "en" else ja)
    assert f"{what}.json" in at.error[0].value  # names the file
    at.file_uploader(key="upload").set_value(
        ("config.json", GOOD.encode(), "application/json")
    ).run()
    assert not at.exception and not at.error  # and the page keeps working
    assert files_under(rec_dir, ROOT / "recordings") == before


@pytest.mark.parametrize("what, text, en, ja", PASTES, ids=[p[0] for p in PASTES])
def test_a_bad_paste_gets_one_sentence_in_japanese(rec_dir, what, text, en, ja):
    before = files_under(rec_dir, ROOT / "recordings")
    at = page(CALC, "ja", msrc="config")
    at.text_area(key="pasted").input(text).run()
    one_error(at, ja)
    assert files_under(rec_dir, ROOT / "recordings") == before


def kv_total(at) -> str | None:
    return next((m.value for m in at.metric if m.label.startswith("KV cache")), None)


def test_an_upload_with_a_byte_order_mark_is_read(rec_dir):
    """Llama 3.2 1B's config.json behind a byte order mark gives the KV cache its preset gives (an
    upload the page ignored would show no numbers at all)."""
    at = page(CALC, msrc="config")
    assert kv_total(at) is None  # nothing pasted or uploaded yet: no numbers
    at.file_uploader(key="upload").set_value(
        ("config.json", b"\xef\xbb\xbf" + GOOD.encode(), "application/json")
    ).run()
    assert not at.exception and not at.error
    preset = kv_total(page(CALC, model="llama-3.2-1b"))
    assert preset is not None and kv_total(at) == preset


def test_nothing_is_written_in_read_only_mode_either(rec_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("KVCORE_READ_ONLY", "1")
    monkeypatch.chdir(tmp_path)
    at = page(CALC, msrc="config")
    at.file_uploader(key="upload").set_value(
        ("x.json", bytes(range(256)), "application/json")
    ).run()
    one_error(at, "is a binary file")
    assert os.listdir(tmp_path) == ["recordings"]  # rec_dir only: nothing new beside it
