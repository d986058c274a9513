"""The Calculator's "as a server" expander: computed only while open, in both languages, its figures the engine's
(kvcore.views.as_server) for the page's request, changing with its inputs, and what a server does not do said."""

from __future__ import annotations

import pytest
from app_helpers import page, texts

from kvcore.capacity.request import ModelSource, Request
from kvcore.inputs.source import resolve_model
from kvcore.units import GIB, fmt_bytes
from kvcore.views.as_server import ServerAsk, as_server
from kvsite import i18n

CALC = "pages/8_Calculator.py"


def opened(lang: str, **params):
    at = page(CALC, lang, **params)
    assert not any(m.label == i18n.translate(lang, "calc.srv_gpu_peak") for m in at.metric)
    at.session_state["srv_open"] = True  # what a click on the expander does
    at.run()
    assert not at.exception
    return at


def metric(at, lang: str, key: str, **values) -> str:
    label = i18n.translate(lang, f"calc.{key}", **values)
    return next(m.value for m in at.metric if m.label == label)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_server_expander_shows_the_engines_figures_in_the_pages_language(rec_dir, lang):
    at = opened(lang, model="llama-3.2-1b", ctx=16384, rt="llama.cpp", seq=2)
    page_text = texts(at)
    assert i18n.translate(lang, "calc.srv_lead_llama") in page_text
    command = next(c.value for c in at.code if c.value.startswith("llama-server "))
    assert command.startswith("llama-server -c 16384 -np 2 ") and "--cache-ram 8192" in command
    # the engine's answer for the same request: the page's default machine (M4 Pro, its middle RAM size)
    geometry, _ = resolve_model("llama-3.2-1b", "llama.cpp")
    request = Request(
        ModelSource("llama-3.2-1b"), 16384, 2, "fp16", "fp16", "gguf-q4_k_m", "llama.cpp",
        (("backend", "metal"),), memory_bytes=1 * GIB,
    )  # fmt: skip
    got = as_server(request, ServerAsk(users=2, turns=8), geometry)
    assert metric(at, lang, "srv_host_peak") == fmt_bytes(got.host_peak_bytes, decimal=False)
    assert metric(at, lang, "srv_host_after", n="8") == fmt_bytes(
        got.host_resident_bytes, decimal=False
    )
    assert any(
        i18n.translate(lang, "calc.srv_col_turn") in m.value and "| 8 |" in m.value
        for m in at.markdown
    )
    if lang == "ja":  # the page's words, not the engine's English
        assert "GPU side" not in page_text and "after the last turn" not in page_text
        assert "ホスト側" in page_text


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_server_figures_change_with_users_and_turns(rec_dir, lang):
    at = opened(lang, model="llama-3.2-1b", ctx=16384)  # mlx_lm: mlx_lm.server
    assert any(c.value.startswith("mlx_lm.server ") for c in at.code)
    before = metric(at, lang, "srv_gpu_peak")
    assert metric(at, lang, "srv_host_peak") == fmt_bytes(0, decimal=False)  # no host side
    assert i18n.translate(lang, "calc.srv_host_none") in texts(at)
    at.number_input(key="srv_users").set_value(6)
    at.number_input(key="srv_turns").set_value(12)
    at.run()
    assert not at.exception
    assert metric(at, lang, "srv_gpu_peak") != before
    assert metric(at, lang, "srv_gpu_after", n="12")


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_an_mlx_quantized_cache_runs_the_server_with_kv_bits_said_in_the_pages_language(
    rec_dir, lang
):
    at = opened(lang, model="llama-3.2-1b", ctx=16384, k="mlx-q4")
    command = next(c.value for c in at.code if c.value.startswith("mlx_lm.server "))
    assert "--kv-bits 4 --kv-group-size 64" in command and not at.error
    assert i18n.translate(lang, "calc.srv_note_mlx_kv_bits") in texts(at)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_what_the_server_does_not_do_is_said_in_the_pages_language(rec_dir, lang):
    slot = opened(lang, model="llama-3.2-1b", ctx=1024, rt="llama.cpp")
    assert "1,024" in slot.error[0].value  # a slot holds -c 1,024: eight turns of 512 do not fit
    ref = opened(lang, model="llama-3.2-1b", ctx=16384, rt="reference")
    assert i18n.translate(lang, "calc.srv_no_server", runtime="reference") in texts(ref)


def _warm_calls(at) -> set:
    """The engine's functions a warm rerun of `at` calls, by (module file, name)."""
    import os
    import threading
    from pathlib import Path

    at.run()  # warm
    calls = set()

    def watch(frame, event, arg):
        if event == "call" and f"{os.sep}kvcore{os.sep}" in frame.f_code.co_filename:
            calls.add((Path(frame.f_code.co_filename).stem, frame.f_code.co_name))

    threading.setprofile(watch)
    try:
        at.run()
    finally:
        threading.setprofile(None)
    assert not at.exception
    return calls


@pytest.mark.parametrize("rt", ["mlx_lm", "llama.cpp"])
def test_a_warm_rerun_with_the_expander_open_does_no_engine_work(rec_dir, rt):
    """The conversation's fields are bounded inside the cached section, not on each run: the open expander adds
    no call to the engine beyond those the page makes with it closed, and none of those is work for mlx_lm
    (tests/app/test_app_pages.py holds the closed page to RERUN_MAY_CALL)."""
    from test_app_pages import RERUN_MAY_CALL

    params = {"model": "llama-3.2-1b", "ctx": 16384, "rt": rt}
    closed = _warm_calls(page(CALC, "en", **params))
    at = opened("en", **params)
    calls = _warm_calls(at)
    assert any(c.value.startswith(("mlx_lm.server ", "llama-server ")) for c in at.code)
    assert calls - closed == set(), sorted(calls - closed)
    if rt == "mlx_lm":
        work = sorted(f"{m}.{n}" for m, n in calls if n not in RERUN_MAY_CALL.get(m, ()))
        assert not work, ", ".join(work)


def test_a_model_with_sliding_windows_is_refused_in_the_pages_language(rec_dir):
    """The servers' ledgers model full-attention models only: said, in Japanese on the Japanese page."""
    at = opened("ja", model="gemma-3-4b", ctx=8192)
    assert "full attention" in at.error[0].value and "台帳" in at.error[0].value
    assert "the ledger models" not in at.error[0].value


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_with_a_custom_memory_the_host_side_is_shown_but_not_judged(rec_dir, lang):
    at = opened(lang, model="llama-3.2-1b", ctx=16384, rt="llama.cpp", chip="custom", gib=24)
    assert any(i.value.startswith(i18n.translate(lang, "calc.srv_host_unjudged")) for i in at.info)
    assert metric(at, lang, "srv_host_peak") != fmt_bytes(0, decimal=False)
