"""The prefill-and-decode chapter (pages/5_Prefill_and_decode.py): a roofline per chip with Article A's measured
points, one answer for the reader's prompt, batching (the time model and the chosen run's points), prefill against
prompt length; every number from kvcore.timing.estimate / kvcore.views.speed or a recording."""

from __future__ import annotations

import math

import pytest
from app_helpers import charts, page, texts

from kvcore.fits import shares as timing_fit
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import KvSpec
from kvcore.timing import hardware
from kvcore.units import fmt_num
from kvcore.views import speed as time_views

PAGE = "pages/5_Prefill_and_decode.py"
RUN = "measured-linux-cpu-openblas-prefill-batch"


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_the_answer_is_the_time_models(rec_dir):
    at = page(
        PAGE,
        "en",
        chip="M2 Ultra",
        model="llama-3.1-8b",
        w="mlx-q4",
        prompt=4096,
        answer=256,
        seq=2,
    )
    assert not at.exception
    chip = hardware.get_chip("M2 Ultra")
    a = time_views.your_prompt(
        preset_geometry("llama-3.1-8b", "mlx_lm"),
        "mlx-q4",
        KvSpec(),
        chip,
        timing_fit.efficiency(chip, "mlx_lm"),
        4096,
        256,
        2,
    )
    shown = metrics(at)
    assert shown["Time to first token"] == f"{fmt_num(a['prefill_s'])} s"
    assert shown["First token of all 2"] == f"{fmt_num(2 * a['prefill_s'])} s"
    assert shown["Total time"] == f"{fmt_num(a['total_s'])} s"
    assert (
        shown["Decode, all 2 sequences"] == f"{fmt_num(a['decode_tokens_per_s_total_first'])} tok/s"
    )
    assert a["prefill_bound"] == "compute" and a["decode_bound_first"] == "memory"
    assert "Prefill is compute-bound; decode is memory-bound" in texts(at)


def test_more_sequences_raise_the_total_and_lower_each_ones_speed(rec_dir):
    one = time_views.your_prompt(
        preset_geometry("llama-3.2-1b", "mlx_lm"),
        "mlx-q4",
        KvSpec(),
        hardware.get_chip("M4 Max (40-core GPU)"),
        timing_fit.efficiency("M4 Max (40-core GPU)"),
        2048,
        512,
        1,
    )
    eight = time_views.your_prompt(
        preset_geometry("llama-3.2-1b", "mlx_lm"),
        "mlx-q4",
        KvSpec(),
        hardware.get_chip("M4 Max (40-core GPU)"),
        timing_fit.efficiency("M4 Max (40-core GPU)"),
        2048,
        512,
        8,
    )
    assert eight["decode_tokens_per_s_first"] < one["decode_tokens_per_s_first"]
    assert eight["decode_tokens_per_s_total_first"] > 4 * one["decode_tokens_per_s_first"]
    assert eight["memory_bytes"] - eight["weights_bytes"] == 8 * (
        one["memory_bytes"] - one["weights_bytes"]
    )


def test_a_chip_without_a_compute_figure_says_why_there_is_no_time_to_first_token(rec_dir):
    at = page(PAGE, "en", chip="M5 Pro")
    assert not at.exception
    assert metrics(at)["Time to first token"] == "—"
    assert any("no public FP16 compute figure" in w.value for w in at.warning)


def test_the_roofline_places_prefill_right_of_the_ridge_and_decode_left(rec_dir):
    at = page(PAGE, "en", chip="M2 Ultra", prompt=2048, seq=8)
    roof = next(c for c in charts(at) if "Arithmetic intensity" in str(c["spec"]))
    data = roof["data"].dropna(subset=["series"])
    ridge = hardware.get_chip("M2 Ultra").ridge_flops_per_byte
    by = dict(zip(data["series"], data["intensity"]))
    assert (
        by["prefill of 2,048 tokens"]
        > ridge
        > by["decode, 8 sequences at 2,560 tokens"]
        > by["decode, 1 sequence at 2,560 tokens"]
    )
    assert f"ridge {fmt_num(ridge)} FLOPs/byte" in set(roof["data"]["label"].dropna())
    # no bundled run was measured on an M2 Ultra: no measured point under its roof, and the caption says where
    assert not any(s.startswith("measured: ") for s in data["series"])
    assert "No bundled run was measured on M2 Ultra" in texts(at) and "M5 Pro" in texts(at)


@pytest.mark.parametrize(
    "chip,runs",
    [
        (
            "M3 Ultra",
            {"Llama-3.1-8B · rapid-mlx", "Qwen3-0.6B · rapid-mlx", "Qwen3-8B · rapid-mlx"},
        ),
        ("M5 Pro", {"Llama-3.2-1B · mlx_lm"}),
    ],
)
def test_the_roofline_draws_only_the_runs_measured_on_its_chip(rec_dir, chip, runs):
    """One chip on the chart (issue 36): the roof's, with the decode points measured on it, two per run."""
    at = page(PAGE, "en", chip=chip)
    roof = next(c for c in charts(at) if "Arithmetic intensity" in str(c["spec"]))
    data = roof["data"].dropna(subset=["series"])
    measured = data[data["series"].str.startswith("measured: ")]["series"]
    assert set(measured.str.removeprefix("measured: ")) == runs
    assert len(measured) == 2 * len(runs)
    assert f"Roofline: {chip}" in texts(at)


def test_the_chapter_opens_on_the_chip_of_its_batching_run_and_picks_that_run_beside_its_chart(
    rec_dir,
):
    at = page(PAGE, "en")
    assert at.selectbox(key="chip").value == "M3 Ultra"
    order = [e.key or "" for e in at.get("selectbox")]
    assert order.index("chip") < order.index(
        "src__w"
    )  # the source picker comes with the batching section


def test_the_bundled_cpu_run_shows_batching_and_prefill_with_the_fitted_model(rec_dir):
    at = page(PAGE, "en", src=RUN)
    assert not at.exception
    shown = texts(at)
    assert "Batching as run: " in shown and "the roofline fitted to this run's own points" in shown
    assert "at 2,048 tokens attention is" in shown  # the O(T^2) term named at the longest prompt
    assert (
        "not its memory bandwidth or compute peak" in shown
    )  # a CPU run's fitted numbers are not the machine's peaks
    assert "Article A's Part 2" in shown


def test_a_published_run_without_a_known_model_shows_points_and_says_why_no_curve(rec_dir):
    at = page(PAGE, "ja", src="published-mlx-vlm-2153-m3-ultra-batch")
    assert not at.exception
    shown = texts(at)
    assert "この実行のモデル構造を kvcore は知りません" in shown
    measured = next(c for c in charts(at) if "series_name" in c["data"].columns)["data"]
    # its models by name, not by size alone (issue 36)
    assert set(measured["series_name"].str.split("、").str[0]) == {
        "K2-Horizon 0.9B",
        "K2-Horizon 3.7B",
    }


def test_concurrent_requests_are_called_so_in_japanese(rec_dir):
    shown = texts(page(PAGE, "ja"))
    assert "同時リクエスト" in shown and "大勢" not in shown


def test_the_published_pp_tg_pairs_are_quoted_with_their_source(rec_dir):
    shown = texts(page(PAGE, "en"))
    assert "301.51" in shown and "10.42" in shown and "175.17" in shown
    assert "https://github.com/ggml-org/llama.cpp/pull/25893" in shown


@pytest.mark.parametrize(
    "params",
    [
        {"prompt": 1, "answer": 1, "seq": 1},
        {"prompt": 1048576, "answer": 131072, "seq": 256},
        {"model": "gemma-3-27b", "chip": "NVIDIA T4", "w": "fp32"},
        {"model": "qwen3-next-80b-a3b", "seq": 64},
        {"model": "deepseek-v3", "w": "mlx-q2", "chip": "M3 Ultra"},
    ],
)
def test_no_exception_at_the_ends(rec_dir, params):
    for lang in ("en", "ja"):
        at = page(PAGE, lang, **params)
        assert not at.exception, (params, [e.message for e in at.exception])
        assert "⟨" not in texts(at), params  # no missing text key
        assert all(
            math.isfinite(float(v.replace(",", "").split()[0]))
            for v in metrics(at).values()
            if v[0].isdigit()
        )


def test_a_model_larger_than_the_chips_largest_memory_is_said_and_its_batches_cut(rec_dir):
    at = page(PAGE, "en", chip="M4", model="llama-3.1-70b", w="fp16")
    shown = texts(at)
    assert "more memory than the largest M4 ships with (32 GB)" in shown
    assert "Not even one sequence of this model fits in the largest M4 (32 GB)" in shown
    at = page(PAGE, "en", chip="M4 Max (40-core GPU)", model="llama-3.1-8b", w="mlx-q4")
    assert (
        "Batches whose weights and KV exceed the largest M4 Max (40-core GPU) (128 GB) are not drawn."
        in texts(at)
    )
