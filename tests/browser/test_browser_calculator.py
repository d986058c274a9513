"""The calculator in Chromium: paste a config.json, change a format, read the verdict; a shared link, cold."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from harness.server import pick, streamlit_server
from kvcore.inputs.preset_files import load_preset


def _open(page, url, ready):
    page.goto(url)
    ready(page)
    page.wait_for_timeout(300)


def test_paste_a_config_change_a_format_and_read_the_verdict(server, page, ready):
    # Llama-3.1-8B at 131,072 tokens on 20 GiB under the reference runtime (no memory plan: weights + KV only, and
    # the page says so): fp16 KV (16 GiB) + 4-bit weights (4.21 GiB) does not fit; with 4-bit K and V, weights + KV
    # fit, but nothing else is counted, so it is no "Fits".
    url = f"{server}/Calculator?lang=en&msrc=config&chip=custom&gib=20&ctx=131072&rt=reference"
    _open(page, url, ready)
    area = page.get_by_label("…or paste its text")
    area.fill(json.dumps(load_preset("llama-3.1-8b")["config"]))
    area.press("Control+Enter")
    ready(page)
    alert = page.locator("[data-testid='stAlertContentError']")
    expect(alert).to_contain_text("Does not fit")
    expect(page.locator("[data-testid='stMetric']").filter(has_text="KV cache")).to_contain_text(
        "16.00 GiB"
    )
    pick(page, "K format", "mlx-q4")  # the reference runtime: K and V apart
    pick(page, "V format", "mlx-q4")
    expect(page.locator("[data-testid='stAlertContentInfo']")).to_contain_text(
        "Weights + KV fit, and that is all that is counted"
    )
    expect(page.locator("[data-testid='stMetric']").filter(has_text="KV cache")).to_contain_text(
        "4.50 GiB"
    )
    assert page.locator("[data-testid='stAlertContentSuccess']").count() == 0
    assert page.locator("[data-testid='stException']").count() == 0


def test_a_shared_link_reproduces_the_view_from_a_cold_server(page, ready):
    link = (  # fp8 K/V: the reference runtime (no mlx_lm cache holds fp8)
        "Calculator?lang=ja&model=deepseek-v3&rt=reference&ctx=65536&k=fp8&v=fp8&w=fp8&chip=custom&gib=800"
    )
    with streamlit_server() as base:  # the link is the fresh server's first request
        _open(page, f"{base}/{link}", ready)
        assert page.locator("[data-testid='stException']").count() == 0
        expect(page.locator("h1").first).to_contain_text("計算機")
        kv = page.locator("[data-testid='stMetric']").first
        expect(kv).to_contain_text(
            "2.14 GiB"
        )  # 61 layers x 576 latent values x 1 byte x 65,536 tokens
        expect(page.locator("[data-testid='stAlertContentInfo']")).to_contain_text(
            "重み + KV は収まりますが"
        )  # the reference runtime: no memory plan, so weights + KV that fit are no "fits"
