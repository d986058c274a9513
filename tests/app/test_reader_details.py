"""Smaller things a reader noticed (issue 9): each held by a test."""

from __future__ import annotations

from app_helpers import charts, page, texts


def test_the_trap_defines_slack_and_shows_used_beside_theory(rec_dir):
    at = page("pages/2_Nbytes_trap.py", "en")
    assert any(
        c.value.startswith("Slack = (capacity − tokens held) ÷ capacity") for c in at.caption
    )
    layers = charts(at)[0]["spec"]["layer"]
    widths = {
        layer["mark"].get("strokeWidth"): layer["mark"].get("strokeDash")
        for layer in layers
        if layer["mark"]["type"] == "line"
    }
    used, theory = max(widths), min(widths)
    assert (
        used > theory and widths[theory] and not widths[used]
    )  # a wide band under a dashed line: both visible


def test_a_unit_conversion_is_not_shown_as_a_change(rec_dir):
    growth = page("pages/3_Linear_growth.py", "en")
    weights = next(m for m in growth.metric if m.label.startswith("Weights"))
    assert (
        not weights.proto.delta and "GB" in weights.proto.help
    )  # 0.647 GiB is 0.695 GB, not "↑ 0.695 GB"
    home = next(m for m in page(None, "en").metric if "slowdown" in m.label.lower())
    direction = (
        home.proto.DESCRIPTOR.fields_by_name["direction"]
        .enum_type.values_by_number[home.proto.direction]
        .name
    )
    assert direction == "NONE" and home.proto.delta.startswith(
        "measured"
    )  # no arrow: a comparison, not a change


def test_the_weight_precision_chart_names_its_model_and_chip(rec_dir):
    shown = texts(page("pages/6_Savings.py", "en"))
    assert "Qwen/Qwen3-4B-Instruct-2507 on M4 Max (40-core GPU)" in shown


def test_the_growth_formula_reads_like_article_a_with_bytes_per_token(rec_dir):
    formula = page("pages/3_Linear_growth.py", "en").code[0].value
    assert formula.startswith(
        "(16 full-attention layers × 2 × 8 KV heads × 64 dims × 2 bytes × 32,768 tokens) = 1,073,741,824 bytes"
    )
    assert "32,768 bytes (32 KiB)" in formula  # per token, as the home page says
    ja = page("pages/3_Linear_growth.py", "ja").code[0].value
    assert ja.startswith(
        "(フル attention 16 層 × 2 × KV ヘッド 8 × 64 次元 × 2 バイト × 32,768 トークン)"
    )
