"""Sections that rerun alone (st.fragment) in Chromium: a widget inside one still writes its URL state (a reload
restores it), what lies outside it is left as it was, and a change above a section (its model) still reaches it."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlparse

from playwright.sync_api import expect

from harness.server import pick

CHARTS_JS = (
    "() => Array.from(document.querySelectorAll(\"[data-testid='stVegaLiteChart'] svg\")).map(s => {"
    "let h = 0; for (const c of s.innerHTML) h = (h * 31 + c.charCodeAt(0)) | 0; return h; })"
)


def _query(page) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlparse(page.url).query).items()}


def _step(page, ready, label: str) -> None:
    thumb = page.get_by_role("slider", name=label)
    thumb.focus()
    page.keyboard.press("ArrowRight")
    ready(page)


def test_a_slider_in_a_section_writes_the_url_and_a_reload_restores_it(server, page, ready):
    page.goto(f"{server}/Mechanism?lang=en")
    ready(page)
    before = page.evaluate(CHARTS_JS)
    _step(page, ready, "Prompt tokens")
    expect(page).to_have_url(re.compile(r"[?&]prompt=17(&|$)"))
    after = page.evaluate(CHARTS_JS)
    assert after[0] != before[0]  # the section's chart was redrawn
    assert after[1:] == before[1:]  # the measured section below it was not touched
    page.get_by_text(
        "work per step"
    ).click()  # a url_choice radio inside the section: its callback writes the URL
    ready(page)
    expect(page).to_have_url(re.compile(r"[?&]view=per_step(&|$)"))
    assert _query(page) == {"lang": "en", "prompt": "17", "view": "per_step"}
    page.reload()
    ready(page)
    expect(page.get_by_role("slider", name="Prompt tokens")).to_have_value("17")
    expect(page.get_by_role("radio", name="work per step")).to_be_checked()
    assert page.locator("[data-testid='stException']").count() == 0


def test_a_change_above_a_section_reaches_it_and_the_sections_own_state_stays(server, page, ready):
    page.goto(f"{server}/Savings?lang=en")
    ready(page)
    page.get_by_text(
        "How long a context your Mac's memory allows"
    ).click()  # the section sits in an expander
    _step(page, ready, "Mac's RAM (GB)")  # the fits section's own slider: only it reruns
    expect(page).to_have_url(re.compile(r"[?&]mem=37(&|$)"))
    fits_chart = page.locator("[data-testid='stVegaLiteChart']").nth(2)
    before = fits_chart.inner_html()
    pick(page, "Model", "qwen3-4b")  # above every section: the page reruns
    expect(page).to_have_url(re.compile(r"[?&]model=qwen3-4b(&|$)"))
    assert _query(page)["mem"] == "37"
    assert fits_chart.inner_html() != before  # the fits section drew the new model
    expect(page.get_by_role("slider", name="Mac's RAM (GB)")).to_have_value("37")
    assert page.locator("[data-testid='stException']").count() == 0


def _reruns(page) -> list[str]:
    """The fragment id of every rerun the page asks for from now on ('' for a rerun of the whole page), read
    from the BackMsg protobufs the browser sends on its websocket."""
    from streamlit.proto.BackMsg_pb2 import BackMsg

    asked: list[str] = []

    def on_socket(ws):
        def sent(payload):
            if isinstance(payload, (bytes, bytearray)):
                msg = BackMsg()
                msg.ParseFromString(bytes(payload))
                if msg.WhichOneof("type") == "rerun_script":
                    asked.append(msg.rerun_script.fragment_id)

        ws.on("framesent", sent)

    page.on("websocket", on_socket)
    return asked


def test_the_calculators_inputs_rerun_its_fragment_and_keep_the_url(server, page, ready):
    """The calculator's widgets rerun its fragment, not the frame; the context reruns its own part inside it (every
    output, not the other inputs); its lazy tables and the decode what-if's chip rerun their own fragments inside
    that; every input still writes the URL and a reload restores it."""
    asked = _reruns(page)  # before the page opens its websocket
    page.goto(f"{server}/Calculator?lang=en&chip=custom&gib=24")
    ready(page)
    kv = page.locator("[data-testid='stMetric']").filter(has_text="KV cache").first
    expect(kv).to_contain_text("4.00 GiB")  # Llama-3.1-8B at 32,768 tokens, fp16
    asked.clear()
    _step(page, ready, "Context (log scale)")
    expect(page).to_have_url(re.compile(r"[?&]ctx=65536(&|$)"))
    expect(kv).to_contain_text("8.00 GiB")  # the outputs below the slider followed it
    assert len(asked) == 1 and asked[0], asked  # a fragment's rerun, not the page's
    body = asked[0]  # the context's part
    pick(page, "K and V format", "mlx-q4")  # mlx_lm: one format for both
    expect(page).to_have_url(re.compile(r"[?&]k=mlx-q4(&|$)"))
    expect(kv).to_contain_text("2.25 GiB")  # K and V in mlx-q4 (4.5 bits a value) at 65,536
    assert asked[1] and asked[1] != body, asked  # the calculator's fragment, around the context's
    page.get_by_text(
        "Per layer: kind, tokens held, bytes"
    ).click()  # a lazy table: its own fragment inside the calculator's
    ready(page)
    expect(page.locator("[data-testid='stDataFrame']")).to_have_count(1)
    assert asked[2] and asked[2] not in (body, asked[1]), asked
    # a lazy expander: opening it reruns the calculator
    page.get_by_text("Decode what-if", exact=True).click()
    ready(page)
    expect(page.get_by_text("Chip for the speed estimate")).to_be_visible()
    assert asked[3] == body, asked
    pick(page, "Chip for the speed estimate", "M3 Max")  # the what-if's own chip (custom memory)
    expect(page).to_have_url(re.compile(r"[?&]schip=M3(\+|%20)Max"))
    assert asked[4] and asked[4] not in (body, asked[2]), asked
    schip = _query(page)["schip"]
    assert schip.startswith("M3 Max") and _query(page) == {  # gib=24 is the default, left out
        "lang": "en",
        "chip": "custom",
        "ctx": "65536",
        "k": "mlx-q4",
        "schip": schip,
    }
    page.reload()
    ready(page)
    expect(page.get_by_role("spinbutton", name="Context, exact (tokens)")).to_have_value("65536")
    expect(kv).to_contain_text("2.25 GiB")
    expect(page.locator("[data-testid='stMetric']").filter(has_text=schip)).to_have_count(1)
    assert page.locator("[data-testid='stException']").count() == 0


def test_a_choice_inside_a_chart_repaints_it_with_no_round_trip(server, page, ready):
    """Linear growth's per-layer chart holds every context; its radio buttons (a Vega-Lite parameter bound inside
    the chart) repaint it in the browser: the bars change and the browser asks the server for nothing."""
    asked = _reruns(page)
    page.goto(
        f"{server}/Linear_growth?lang=en&lctx=4096"
    )  # a link's context is where the chart opens
    ready(page)
    page.get_by_text("Per layer", exact=True).click()  # the per-layer chart sits in an expander
    chart = page.locator("[data-testid='stVegaLiteChart']").nth(1)
    axis = chart.locator("g.role-axis[aria-label^='X-axis'] g.role-axis-label text")
    expect(chart.locator("input[type='radio'][value='4096']")).to_be_checked()
    before, top = chart.locator("svg").inner_html(), axis.last.text_content()
    asked.clear()
    radio = chart.locator("input[type='radio'][value='131072']")
    for _ in range(
        3
    ):  # a loaded machine may draw the chart again as the expander opens, losing a click
        radio.click()
        try:
            expect(radio).to_be_checked(timeout=3000)
            break
        except AssertionError:
            continue
    expect(radio).to_be_checked()
    page.wait_for_function(
        "([el, old]) => el.innerHTML !== old", arg=[chart.locator("svg").element_handle(), before]
    )
    assert float(axis.last.text_content().replace(",", "")) > 16 * float(top.replace(",", ""))
    page.wait_for_timeout(500)  # a rerun, had one been asked for, would have been sent by now
    assert asked == [], asked  # no rerun of anything: the chart repainted itself
    assert "lctx=4096" in page.url  # the link is left as it was
    assert page.locator("[data-testid='stException']").count() == 0
