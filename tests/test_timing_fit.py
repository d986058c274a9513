"""The time model's calibration and its held-out check (kvcore.fits.shares, kvcore/fits/timing_runs.yaml)."""

import json

import pytest
import yaml

from kvcore.cli.main import main
from kvcore.fits import shares as timing_fit


def test_held_out_chips_are_chips_the_fit_never_saw_and_every_point_cites_a_url():
    cal = timing_fit.calibration()
    fit_chips = {p.chip.chip for p in cal.fit_points}
    assert cal.held_out and not fit_chips & {p.chip.chip for p in cal.held_out}
    assert {p.runtime for p in cal.held_out} >= {"llama.cpp", "mlx_lm"}
    table = yaml.safe_load(timing_fit.TABLE.read_text(encoding="utf-8"))
    for run in table[
        "runs"
    ]:  # bundled recordings carry their own citation (tests/test_recordings.py)
        assert "recording" in run or run["citation"]["url"].startswith("https://"), run["id"]


def test_the_held_out_comparison_meets_the_acceptance_figures():
    s = timing_fit.summary(list(timing_fit.calibration().held_out))
    assert s["tg"]["median_abs_error"] <= 0.25 and s["pp"]["median_abs_error"] <= 0.35
    assert s["tg"]["worst_ratio"] <= 2 and s["pp"]["worst_ratio"] <= 2


def test_each_share_is_fitted_on_more_than_one_point_and_is_a_share():
    cal = timing_fit.calibration()
    assert 0 < cal.compute <= 1 and all(0 < s <= 1 for s in cal.bandwidth.values())
    for key in cal.bandwidth:
        assert (
            sum(
                1
                for p in cal.fit_points
                if p.kind == "tg" and timing_fit.decode_class(p.chip, p.runtime) == key
            )
            >= 2
        )
    assert sum(1 for p in cal.fit_points if p.kind == "pp") >= 3


def test_mlx_on_an_ultra_has_no_fitted_run_and_says_it_takes_the_one_die_share():
    eff = timing_fit.efficiency("M3 Ultra", "mlx_lm")
    assert (
        "one-die share" in eff.source
        and eff.bandwidth == timing_fit.calibration().bandwidth[("mlx", 1)]
    )


def test_calc_json_gives_the_time_figures_for_the_unified_slots_case(capsys):
    argv = [
        "calc",
        "--model",
        "gpt-oss-20b",
        "--context",
        "131072",
        "--runtime",
        "llama.cpp",
        "--weights-format",
        "gguf-mxfp4",
        "--chip",
        "M4 Pro",
        "--prompt",
        "4096",
        "--json",
    ]
    assert main(argv) == 0
    one = json.loads(capsys.readouterr().out)
    assert main(argv + ["--sequences", "4", "--kv-unified"]) == 0
    four = json.loads(capsys.readouterr().out)
    for key in (
        "prefill_s",
        "decode_tokens_per_s",
        "decode_tokens_per_s_total",
        "decode_bound",
        "prefill_bound",
        "compute_efficiency",
        "bandwidth_efficiency",
    ):
        assert key in four
    assert abs(four["decode_tokens_per_s"] / one["decode_tokens_per_s"] - 1) < 0.02
    assert four["decode_tokens_per_s_total"] == 4 * four["decode_tokens_per_s"]
    assert four["decode_bound"] == "memory" and four["prefill_bound"] == "compute"


def test_calc_text_says_which_figure_is_per_slot_and_which_is_for_all(capsys):
    assert (
        main(
            [
                "calc",
                "--model",
                "gpt-oss-20b",
                "--context",
                "131072",
                "--runtime",
                "llama.cpp",
                "--sequences",
                "4",
                "--kv-unified",
                "--chip",
                "M4 Pro",
            ]
        )
        == 0
    )
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("decode"))
    assert "per slot" in line and "for all 4" in line and "shared by 4 slots" in line


def test_chips_lists_compute_with_its_source(capsys):
    assert main(["chips", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    m2 = next(r for r in rows if r["chip"] == "M2 Ultra")
    assert (
        m2["fp16_tflops"] == 27.2
        and "metal-benchmarks" in m2["compute_source"]
        and m2["ridge_flops_per_byte"] == 34
    )
    assert main(["chips"]) == 0 and "ridge" in capsys.readouterr().out


@pytest.mark.parametrize("runtime", ["mlx_lm", "llama.cpp", "reference"])
@pytest.mark.parametrize("chip", ["M4 Pro", "M3 Ultra", "M5 Max (40-core GPU)", "NVIDIA H100 SXM"])
def test_calc_json_gives_the_time_figures_for_every_runtime_and_chip(capsys, runtime, chip):
    argv = [
        "calc",
        "--model",
        "mistral-7b-v0.1",
        "--context",
        "8192",
        "--sequences",
        "2",
        "--runtime",
        runtime,
        "--weights-format",
        "gguf-q4_k_m",
        "--chip",
        chip,
        "--prompt",
        "1024",
        "--json",
    ]
    assert main(argv) == 0
    r = json.loads(capsys.readouterr().out)
    assert (
        r["decode_tokens_per_s"] > 0 and r["decode_tokens_per_s_total"] >= r["decode_tokens_per_s"]
    )
    assert (r["prefill_s"] is None) == chip.startswith(
        "M5"
    )  # no public FP16 figure for the M5 GPUs
    if runtime == "reference":  # no published run used its rules: it says whose share it takes
        assert "no published run of reference" in r["time"]["efficiency_source"]


def test_the_docs_held_out_table_is_what_the_benchmark_writes_now():
    """docs/methods.md's table is written by `benchmarks/timing_heldout.py --markdown docs/methods.md`:
    a change to the runs or the fit without that rerun fails here."""
    from pathlib import Path

    doc = Path(__file__).resolve().parent.parent / "docs" / "methods.md"
    text = doc.read_text(encoding="utf-8")
    cal = timing_fit.calibration()  # benchmarks/timing_heldout.py prints these same functions
    assert timing_fit.shares_text(cal) in text
    for r in timing_fit.table_rows(cal, timing_fit.HELD_OUT):
        assert timing_fit.markdown_row(r) in text, r["run"]
