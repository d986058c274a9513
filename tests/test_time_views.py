"""kvcore.views.speed: the prefill-and-decode chapter's numbers, held to kvcore.timing.estimate (the one home of the formulas)."""

from __future__ import annotations

import pytest

from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import weights_bytes
from kvcore.recordings import store as recordings
from kvcore.timing import estimate as timing
from kvcore.timing.hardware import get_chip
from kvcore.views import speed as time_views

G = preset_geometry("llama-3.2-1b")
CHIP = get_chip("M2 Ultra")
EFF = timing.Efficiency(0.6, 0.8, "test shares", 0.001)


def test_the_roof_bends_at_the_ridge_point():
    roof = time_views.roof(CHIP)
    ridge = CHIP.ridge_flops_per_byte
    at = roof[roof["intensity"].round(6) == round(ridge, 6)]
    assert len(at) == 1 and at["tflops"].iloc[0] == pytest.approx(CHIP.fp16_tflops)
    left = roof[roof["intensity"] < ridge]
    assert list(left["tflops"]) == pytest.approx(
        list(left["intensity"] * CHIP.bandwidth_gbps / 1e3)
    )
    assert set(roof[roof["intensity"] > ridge]["tflops"]) == {CHIP.fp16_tflops}


def test_a_chip_without_compute_has_only_the_bandwidth_slope():
    roof = time_views.roof(get_chip("M5 Pro"))
    assert roof["tflops"].iloc[-1] == pytest.approx(roof["intensity"].iloc[-1] * 307 / 1e3)


def test_prefill_is_right_of_the_ridge_decode_left_and_batching_moves_decode_right():
    pts = time_views.roofline_points(G, "mlx-q4", KvSpec(), CHIP, EFF, 2048, 2048, 16).set_index(
        "kind"
    )
    ridge = CHIP.ridge_flops_per_byte
    assert (
        pts.loc["prefill", "intensity"]
        > ridge
        > pts.loc["decode_b", "intensity"]
        > pts.loc["decode_1", "intensity"]
    )
    assert pts.loc["prefill", "bound"] == "compute" and pts.loc["decode_1", "bound"] == "memory"


def test_article_as_measured_points_use_its_own_model_and_tok_s():
    rec = recordings.load(recordings.BUNDLED_DIR / "published-article-a-m5-pro.yaml")
    pts = time_views.measured_points(rec)
    assert list(pts["context"]) == [1024, 32768] and list(pts["tokens_per_s"]) == [292, 119]
    step = timing.decode_step(G, 1024, CHIP, EFF, KvSpec(), "mlx-q4", 1)
    assert pts["intensity"].iloc[0] == pytest.approx(step.intensity)
    assert pts["tflops"].iloc[0] == pytest.approx(step.flops * 292 / 1e12)


def test_a_short_answer_sums_every_decode_step_exactly():
    a = time_views.your_prompt(G, "mlx-q4", KvSpec(), CHIP, EFF, 1000, 20, 3)
    steps = [
        timing.decode_step(G, c, CHIP, EFF, KvSpec(), "mlx-q4", 3).time_s for c in range(1001, 1021)
    ]
    assert a["decode_s"] == pytest.approx(sum(steps))
    pre = timing.prefill_step(G, 1000, CHIP, EFF, KvSpec(), "mlx-q4")
    assert a["prefill_s"] == pytest.approx(pre.time_s) and a["total_s"] == pytest.approx(
        3 * pre.time_s + sum(steps)
    )


def test_a_long_answer_interpolates_within_a_fraction_of_a_percent():
    a = time_views.your_prompt(G, "mlx-q4", KvSpec(), CHIP, EFF, 4096, 3000, 1)
    exact = sum(
        timing.decode_step(G, c, CHIP, EFF, KvSpec(), "mlx-q4", 1).time_s for c in range(4097, 7097)
    )
    assert a["decode_s"] == pytest.approx(exact, rel=2e-3)


def test_at_the_crossing_batch_the_kv_read_equals_the_weights():
    b = time_views.kv_overtakes_weights(G, "mlx-q4", KvSpec(), 8192)
    assert b * timing.kv_read_bytes(G, 8192, KvSpec(), 1) == pytest.approx(
        weights_bytes(G, "mlx-q4", active=True)
    )
    curve = time_views.batch_curve(G, "mlx-q4", KvSpec(), CHIP, EFF, [8192], [1, 64])
    assert list(curve["kv_share"] > 0.5) == [b < 1, b < 64]


def test_the_fit_recovers_the_compute_and_bandwidth_that_made_the_points():
    flops = [1e9 * k for k in (1, 2, 4, 8, 16, 32, 64)]
    n_bytes = [4e8 + 1e7 * k for k in (1, 2, 4, 8, 16, 32, 64)]
    compute, bandwidth = 2e11, 5e10
    seconds = [max(f / compute, b / bandwidth) for f, b in zip(flops, n_bytes)]
    fit = time_views.fit_roofline(flops, n_bytes, seconds)
    assert fit["compute_flops"] == pytest.approx(compute, rel=0.02)
    assert fit["bandwidth_bytes"] == pytest.approx(bandwidth, rel=0.02)
    assert max(abs(r) for r in fit["residuals"]) < 0.03
    assert fit["bounds"][0] == "memory" and fit["bounds"][-1] == "compute"


def test_a_run_bound_by_memory_alone_does_not_determine_its_compute():
    fit = time_views.fit_roofline([1e6, 1e6, 1e6], [1e9, 2e9, 4e9], [0.1, 0.2, 0.4])
    assert fit["compute_flops"] is None and fit["bandwidth_bytes"] == pytest.approx(1e10, rel=0.02)


def test_a_published_run_with_no_known_model_gets_points_but_no_fit():
    rec = recordings.load(recordings.BUNDLED_DIR / "published-mlx-vlm-2153-m3-ultra-batch.yaml")
    pts = time_views.batch_points(rec)
    assert len(pts) == 23 and time_views.batch_fit(rec) is None
    row = pts[
        (pts["series"] == "K2-Horizon 0.9B") & (pts["batch"] == 4) & (pts["context"] == 512)
    ].iloc[0]
    assert row["tokens_per_s"] == pytest.approx(671.6 / 4)  # per sequence: total / batch
