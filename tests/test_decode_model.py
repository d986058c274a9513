"""The bytes-per-token decode model: the article's worked check and the bandwidth fit."""

import random

import pytest

from kvcore.errors import KvError
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formulas import kv_bytes, weights_bytes
from kvcore.timing.decode_model import (
    bytes_per_generated_token,
    fit_bandwidth,
    predict_tokens_per_s,
    slowdown,
)
from kvcore.timing.hardware import chips, get_chip, gpu_memory_limit_gb

LLAMA_1B = preset_geometry("llama-3.2-1b")


def test_worked_check_292_to_119_tok_s_from_the_preset_alone():
    """Article A: bytes per token 0.729 -> 1.769 GB predicts 2.43x against the measured 2.45x."""
    assert round(weights_bytes(LLAMA_1B, "mlx-q4") / 1e9, 3) == 0.695
    assert round(kv_bytes(LLAMA_1B, 1024) / 1e6, 1) == 33.6
    assert round(kv_bytes(LLAMA_1B, 32768) / 1e9, 3) == 1.074
    assert round(bytes_per_generated_token(LLAMA_1B, 1024) / 1e9, 3) == 0.729
    assert round(bytes_per_generated_token(LLAMA_1B, 32768) / 1e9, 3) == 1.769
    assert round(slowdown(LLAMA_1B, 1024, 32768), 2) == 2.43


def test_article_as_measured_slowdown_comes_from_its_recording():
    from pathlib import Path

    from kvcore.fits.decode import worked_check
    from kvcore.recordings.store import load

    check = worked_check(
        load(Path(__file__).resolve().parents[1] / "recordings" / "published-article-a-m5-pro.yaml")
    )
    assert (check["context_a"], check["context_b"]) == (1024, 32768)
    assert (
        round(check["measured_slowdown"], 2) == 2.45
        and round(check["predicted_slowdown"], 2) == 2.43
    )


def test_a_runs_decode_analysis_is_its_points_fit_and_check_computed_once():
    """analyse(rec) gives what the Decode chapter shows about a run; each part is what the separate functions give,
    and the fitted curve passes through the fit at the run's own contexts."""
    from kvcore.fits import decode as decode_runs
    from kvcore.recordings import store as recordings

    recs, _ = recordings.load_all()
    analysed = [(rec, decode_runs.analyse(rec)) for rec in recs if rec.has("decode")]
    assert sum(a is not None for _, a in analysed) >= 5 and any(
        a is None for _, a in analysed
    )  # unusual runs: no model
    for rec, a in analysed:
        if a is None:
            assert decode_runs.fit_run(rec) is None and decode_runs.worked_check(rec) is None
            continue
        assert a.fit == decode_runs.fit_run(rec) and a.check == decode_runs.worked_check(rec)
        assert a.points.equals(decode_runs.decode_points(rec)) and a.chip == decode_runs.chip_for(
            rec
        )
        lo, hi = a.points["context"].min(), a.points["context"].max()
        assert (a.curve["context"].min(), a.curve["context"].max()) == (lo, hi)
        at_lo = a.curve.loc[a.curve["context"] == lo, "tokens_per_s"].iloc[0]
        assert at_lo == pytest.approx(
            a.fit.predict(a.points.loc[a.points["context"] == lo, "bytes_per_token"].iloc[0])
        )


def test_the_articles_two_points_imply_about_212_gb_s():
    b = [bytes_per_generated_token(LLAMA_1B, t) for t in (1024, 32768)]
    implied = [bi * tps / 1e9 for bi, tps in zip(b, (292, 119))]
    assert [round(x) for x in implied] == [213, 211]
    fit = fit_bandwidth(b, [292, 119], peak_gbps=get_chip("M5 Pro").bandwidth_gbps)
    assert 210 <= fit.bandwidth_gbps <= 213 and not fit.fitted_overhead  # two points: one parameter
    assert fit.memory_bound and "Memory-bound" in fit.verdict


@pytest.mark.parametrize("seed", range(5))
def test_fit_recovers_a_known_bandwidth_and_overhead_from_noisy_points(seed):
    rng = random.Random(seed)
    bw, overhead = 150.0, 0.8e-3
    b = [bytes_per_generated_token(LLAMA_1B, t) for t in (256, 1024, 4096, 8192, 16384, 32768)]
    tps = [predict_tokens_per_s(x, bw, overhead) * (1 + rng.gauss(0, 0.01)) for x in b]
    fit = fit_bandwidth(b, tps, peak_gbps=307)
    assert fit.fitted_overhead
    assert fit.bandwidth_gbps == pytest.approx(bw, rel=0.05)
    assert fit.overhead_s == pytest.approx(overhead, rel=0.35)
    assert fit.memory_bound and fit.rms_residual < 0.03


def test_overhead_never_comes_out_negative():
    b = [1e9, 2e9, 3e9, 4e9]
    # times that grow faster than linearly through the origin would give a negative intercept
    tps = [1 / 0.004, 1 / 0.010, 1 / 0.016, 1 / 0.022]
    fit = fit_bandwidth(b, tps)
    assert fit.overhead_s == 0 and not fit.fitted_overhead


def test_flat_speed_is_not_memory_bound():
    b = [bytes_per_generated_token(LLAMA_1B, t) for t in (256, 4096, 32768)]
    fit = fit_bandwidth(b, [50.0, 50.0, 50.0], peak_gbps=307)
    assert not fit.memory_bound and "Not memory-bound" in fit.verdict


def test_bandwidth_far_below_peak_gets_a_plain_verdict():
    b = [bytes_per_generated_token(LLAMA_1B, t) for t in (256, 4096, 32768)]
    tps = [predict_tokens_per_s(x, 5.0) for x in b]
    fit = fit_bandwidth(b, tps, peak_gbps=400)
    assert not fit.memory_bound and "under 10%" in fit.verdict


def test_fit_refuses_bad_points():
    with pytest.raises(KvError):
        fit_bandwidth([1e9], [0])
    with pytest.raises(KvError):
        fit_bandwidth([1e9, 2e9], [10])


def test_hardware_table_has_sources_and_bandwidths():
    table = chips()
    assert len(table) > 20 and all(c.source and c.bandwidth_gbps > 0 for c in table)
    assert get_chip("M4 Max (40-core GPU)").bandwidth_gbps == 546


def test_mac_gpu_limit_depends_on_ram_size():
    small, _ = gpu_memory_limit_gb(16)
    large, reason = gpu_memory_limit_gb(128)
    assert round(small, 2) == 10.67 and large == 96 and "macOS" in reason
    assert round(gpu_memory_limit_gb(128, macos="26")[0], 2) == 107.52
    assert gpu_memory_limit_gb(80, unified=False)[0] == 80


def test_a_fit_slower_than_any_memory_on_an_unknown_chip_is_not_memory_bound():
    # a CPU run (no chip in the table) that follows the bytes line at ~1 GB/s: memory reads cannot set that pace
    from kvcore.timing.decode_model import fit_bandwidth

    b = [1.0e9, 1.5e9, 2.0e9, 3.0e9]
    fit = fit_bandwidth(b, [1.2e9 / x for x in b], peak_gbps=None)
    assert (
        fit.rms_residual < 0.01 and fit.verdict_code == "below_any_memory" and not fit.memory_bound
    )
    assert "12.8 GB/s" in fit.verdict and fit.verdict.startswith("Not memory-bound")
    fast = fit_bandwidth(
        b, [40e9 / x for x in b], peak_gbps=None
    )  # 40 GB/s: a plausible memory, left alone
    assert fast.verdict_code == "memory_bound"


# ---------------------------------------------------------------- the formats a fit reads (issue 15)


def _fit_recording(tmp_path, **model):
    from kvcore.recordings import store as recordings

    data = {
        "schema": 1,
        "kind": "published",
        "title": "A test run",
        "citation": {"source": "this test"},
        "hardware": {"chip": "M4 Pro"},
        "model": {"name": "Llama-3.2-1B", "preset": "llama-3.2-1b", **model},
        "sections": {
            "decode": [
                {"context": 1024, "tokens_per_s": 200.0},
                {"context": 32768, "tokens_per_s": 80.0},
            ]
        },
    }
    path = tmp_path / "run.yaml"
    path.write_text(recordings.dump_text(data), encoding="utf-8")
    return recordings.load(path)


def test_a_fit_reads_the_formats_the_recording_names_and_refuses_one_it_does_not_know(tmp_path):
    from kvcore.fits.decode import fit_run, geometry_for
    from kvcore.recordings.store import Recording

    rec = _fit_recording(tmp_path, kv_format="q8_0", weights_format="mlx-q8")
    _, weights, spec = geometry_for(rec)
    assert (weights, spec.k_format) == ("mlx-q8", "q8_0") and fit_run(rec) is not None
    assert (
        geometry_for(_fit_recording(tmp_path, kv_format="unknown", weights_format="mlx-q4")) is None
    )  # not stated: no fit
    for key, wrong in (
        ("kv_format", "fp61"),
        ("weights_format", "mlx-q44"),
    ):  # a file that skipped validation
        bad = Recording(
            path=rec.path, data={**rec.data, "model": {**rec.data["model"], key: wrong}}
        )
        with pytest.raises(KvError, match=f"'{wrong}' is not a"):
            geometry_for(bad)


@pytest.mark.parametrize(
    "stated",
    [{}, {"kv_format": "fp16"}, {"weights_format": "mlx-q4"}],
    ids=["neither", "kv only", "weights only"],
)
def test_a_recording_that_omits_a_format_is_not_fitted_as_fp16_or_bf16_and_says_so(
    tmp_path, stated
):
    from kvcore.fits.decode import analyse, fit_run, geometry_for, no_fit_reason

    rec = _fit_recording(tmp_path, **stated)  # valid: the source does not state the other format
    assert geometry_for(rec) is None and fit_run(rec) is None and analyse(rec) is None
    assert no_fit_reason(rec) == "no_format"
    both = _fit_recording(tmp_path, kv_format="fp16", weights_format="mlx-q4")
    assert fit_run(both) is not None and no_fit_reason(both) is None


def test_an_mlx_quantized_cache_with_no_activation_dtype_is_not_fitted_and_one_misspelled_is_refused(
    tmp_path,
):
    """mlx-q4 keeps a scale and a bias per 64 values in the activation dtype (fp32 doubles them against fp16): not
    stated, no fit rather than fp16's bytes; a plain fp16 cache holds no scales, so it needs none stated."""
    from kvcore.fits.decode import fit_run, geometry_for, no_fit_reason
    from kvcore.recordings import store as recordings

    unstated = _fit_recording(tmp_path, kv_format="mlx-q4", weights_format="mlx-q4")
    assert geometry_for(unstated) is None and fit_run(unstated) is None
    assert no_fit_reason(unstated) == "no_format"
    for dtype in ("fp16", "fp32"):
        rec = _fit_recording(
            tmp_path, kv_format="mlx-q4", weights_format="mlx-q4", activation_dtype=dtype
        )
        assert geometry_for(rec)[2].activation_dtype == dtype and no_fit_reason(rec) is None
    plain = _fit_recording(tmp_path, kv_format="fp16", weights_format="mlx-q4")
    assert no_fit_reason(plain) is None and fit_run(plain) is not None
    data = {**unstated.data, "model": {**unstated.data["model"], "activation_dtype": "fp61"}}
    with pytest.raises(KvError, match="'fp61' is not an activation dtype kvcore knows"):
        recordings.validate(data)


def test_every_bundled_decode_run_is_fitted_or_says_why():
    from kvcore.fits.decode import analyse, no_fit_reason
    from kvcore.recordings import store as recordings

    recs = recordings.load_all([recordings.BUNDLED_DIR])[0]
    for rec in (r for r in recs if r.rows("decode")):
        assert (analyse(rec) is None) == (no_fit_reason(rec) is not None), rec.id
