"""A config.json uploaded through Chromium (Streamlit's real upload path): a file that is not UTF-8, or binary,
gets one sentence in the page's language and no traceback; a good upload after it is computed."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from kvcore.inputs.preset_files import load_preset


def _upload(page, ready, name: str, data: bytes):
    page.locator("[data-testid='stFileUploaderDropzoneInput'][accept*='json']").set_input_files(
        files=[{"name": name, "mimeType": "application/json", "buffer": data}]
    )
    ready(page)
    page.wait_for_timeout(300)
    ready(page)


def test_a_bad_upload_gets_one_japanese_sentence_and_a_good_one_is_computed(server, page, ready):
    page.goto(f"{server}/Calculator?lang=ja&msrc=config")
    ready(page)
    error = page.locator("[data-testid='stAlertContentError']")
    _upload(page, ready, "latin1.json", '{"model_type": "llamaé"}'.encode("latin-1"))
    expect(error).to_have_count(1)
    expect(error).to_contain_text("latin1.json は UTF-8 のテキストではありません")
    _upload(page, ready, "blob.json", bytes(range(256)) * 8)
    expect(error).to_contain_text("blob.json はバイナリファイルです")
    assert page.locator("[data-testid='stException']").count() == 0
    _upload(page, ready, "config.json", json.dumps(load_preset("llama-3.2-1b")["config"]).encode())
    expect(page.locator("[data-testid='stMetric']").first).to_be_visible()
    expect(error).to_have_count(0)
    assert page.locator("[data-testid='stException']").count() == 0
