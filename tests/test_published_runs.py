"""Published decode-vs-context runs bundled as recordings: each loads, names its source (URL, author, date,
runtime, quoted command or settings), keeps only stated points, and gets the decode fit it supports; the
slowdown-vs-bytes frame is built from the recordings' own numbers."""

from __future__ import annotations

import math

import pytest

from kvcore.fits import decode as decode_runs
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import FORMATS
from kvcore.memory.formulas import ALL_WEIGHT_FORMATS, weights_bytes
from kvcore.recordings import store as recordings
from kvcore.recordings.store import RecordingError
from kvcore.timing import decode_model

BUNDLED, ERRORS = recordings.load_all([recordings.BUNDLED_DIR])
SERIES = [r for r in BUNDLED if r.kind == "published" and len(r.rows("decode")) >= 2]
NEW = [
    r for r in SERIES if "url" in r.data["citation"]
]  # the runs transcribed from public threads and files
APPLE_CHIPS = {"M1", "M2", "M3", "M4", "M5"}


def test_every_bundled_recording_loads():
    assert ERRORS == []
    assert len(NEW) >= 8


def test_the_series_come_from_at_least_four_stated_apple_chips():
    chips = {r.data["hardware"]["chip"] for r in NEW if r.data["hardware"].get("chip_stated")}
    assert len(chips) >= 4, chips
    assert all(c.split()[0] in APPLE_CHIPS for c in chips), chips


@pytest.mark.parametrize("rec", NEW, ids=lambda r: r.id)
def test_each_series_names_its_source(rec):
    c = rec.data["citation"]
    assert c["url"].startswith("https://github.com/"), c["url"]
    for key in ("author", "date", "command", "settings", "context_rule", "grade"):
        assert str(c.get(key, "")).strip(), key
    assert c["grade"] in recordings.GRADES
    assert rec.data["runtime"]["name"] and rec.data["runtime"]["version"]
    assert rec.data["model"]["quantization"]
    if not rec.data["hardware"].get("chip_stated"):
        assert (
            "not stated" in rec.data["hardware"]["chip"]
        )  # an inferred chip is never given as the chip


@pytest.mark.parametrize("rec", NEW, ids=lambda r: r.id)
def test_only_stated_points(rec):
    rows = rec.rows("decode")
    contexts = [r["context"] for r in rows]
    assert contexts == sorted(set(contexts))  # one row per stated context, in order
    for r in rows:
        if "depth" in r:  # llama.cpp: the first timed step attends over depth + 1 cells
            assert r["context"] == r["depth"] + 1
        if "prompt_tokens" in r:
            assert r["context"] == r["prompt_tokens"]
        if "tokens_per_s_min" in r:
            assert r["tokens_per_s_min"] <= r["tokens_per_s"] <= r["tokens_per_s_max"]
        assert (
            round(r["tokens_per_s"], 3) == r["tokens_per_s"]
        )  # as printed in the source (3 decimals at most)


def test_the_quoted_numbers_are_the_sources():
    by_id = {r.id: r for r in BUNDLED}
    llama = by_id["published-llamacpp-13583-llama-3.2-1b-q8_0-master"]
    assert [r["tokens_per_s"] for r in llama.rows("decode")] == [229.50, 223.47, 210.76, 114.52]
    assert "-d 0,512,1024,8192 -n 32" in llama.data["citation"]["command"]
    chigkim = by_id["published-mlx-examples-1029-m3-max-llama-3.3-70b-4bit"]
    assert (
        chigkim.rows("decode")[0]["tokens_per_s"],
        chigkim.rows("decode")[-1]["tokens_per_s"],
    ) == (9.351, 6.784)
    assert len(chigkim.rows("decode")) == 20


@pytest.mark.parametrize(
    "rec", [r for r in NEW if r.data["citation"]["grade"] in ("A", "A-")], ids=lambda r: r.id
)
def test_each_a_grade_series_gets_a_fit_with_residuals_and_a_verdict(rec):
    fit = decode_runs.fit_run(rec)
    assert fit is not None
    assert len(fit.residuals) == len(rec.rows("decode"))
    assert all(abs(r) < 0.5 for r in fit.residuals)
    assert fit.verdict_code in ("memory_bound", "large_residual", "far_below_peak", "above_peak")
    assert fit.verdict


def test_the_fit_tells_a_kernel_bound_run_from_a_memory_bound_one():
    """PR #13583's two columns: the same model and bytes, only the attention kernel differs."""
    by_id = {r.id: r for r in BUNDLED}
    master = decode_runs.fit_run(by_id["published-llamacpp-13583-llama-3.2-1b-q8_0-master"])
    fixed = decode_runs.fit_run(by_id["published-llamacpp-13583-llama-3.2-1b-q8_0-fa-vec-64"])
    assert master.verdict_code == "large_residual"
    assert fixed.verdict_code == "memory_bound"


def test_unusual_models_are_flagged_and_get_no_fit():
    flagged = [r for r in NEW if r.data["model"].get("unusual") or r.data["model"].get("hybrid")]
    assert flagged
    for rec in flagged:
        assert rec.data["model"]["architecture_note"]
        assert decode_runs.fit_run(rec) is None


def test_gguf_q8_0_weights_are_whole_ggml_blocks_and_f32_vectors():
    geometry = preset_geometry("llama-3.2-1b")
    p = geometry.active_params
    block = FORMATS["q8_0"]
    assert (block.block_values, block.block_bytes) == (32, 34)
    assert weights_bytes(geometry, "gguf-q8_0", active=True) == math.ceil(
        p.matrix / 32
    ) * 34 + 4 * (p.vector + p.router)
    assert "gguf-q8_0" in ALL_WEIGHT_FORMATS
    # llama-bench's size column for this model's Q8_0 file reads "llama 1B Q8_0 | 1.22 GiB | 1.24 B" in
    # public llama.cpp benchmark tables: ours rounds to the same 1.22 GiB
    assert round(weights_bytes(geometry, "gguf-q8_0") / 2**30, 2) == 1.22


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"url": "http://example.com"}, "https://"),
        ({"grade": "Z"}, "grade"),
        ({"author": ""}, "author"),
    ],
)
def test_a_bad_citation_is_refused(bad, message):
    data = {
        "schema": 1,
        "kind": "published",
        "title": "t",
        "citation": {"source": "s", **bad},
        "model": {"name": "m"},
        "sections": {"decode": [{"context": 1, "tokens_per_s": 1.0}]},
    }
    with pytest.raises(RecordingError, match=message):
        recordings.validate(data)


def test_a_non_boolean_hybrid_flag_is_refused():
    data = {
        "schema": 1,
        "kind": "published",
        "title": "t",
        "citation": {"source": "s"},
        "model": {"name": "m", "hybrid": "yes"},
        "sections": {"decode": [{"context": 1, "tokens_per_s": 1.0}]},
    }
    with pytest.raises(RecordingError, match="hybrid"):
        recordings.validate(data)


# ---------------------------------------------------------------- the slowdown-vs-bytes frame

FRAME = decode_runs.slowdown_vs_bytes(BUNDLED)


def test_the_first_point_of_every_run_is_one_one():
    first = FRAME.loc[FRAME.groupby("recording")["context"].idxmin()]
    assert set(first["recording"]) == set(FRAME["recording"])
    assert (first["measured_slowdown"] == 1.0).all() and (first["predicted_slowdown"] == 1.0).all()


def test_the_frame_holds_every_run_with_a_model_and_two_points():
    expected = {
        r.id
        for r in BUNDLED
        if len(r.rows("decode")) >= 2 and decode_runs.geometry_for(r) is not None
    }
    assert set(FRAME["recording"]) == expected
    assert (
        "published-ds4-706-m1-ultra-deepseek-v4-flash" not in expected
    )  # an unusual model: no geometry
    assert (
        "published-llamacpp-12952-phi-3-mini-q8_0-master" in expected
    )  # full MHA, via the phi-3-mini-4k preset
    assert len(expected) >= 9


@pytest.mark.parametrize(
    "rec", [r for r in BUNDLED if r.id in set(FRAME["recording"])], ids=lambda r: r.id
)
def test_the_frame_values_match_the_recording(rec):
    rows = sorted(rec.rows("decode"), key=lambda r: r["context"])
    got = FRAME[FRAME["recording"] == rec.id]
    assert list(got["context"]) == [r["context"] for r in rows]
    assert list(got["tokens_per_s"]) == [r["tokens_per_s"] for r in rows]
    for (_, g), r in zip(got.iterrows(), rows):
        assert g["measured_slowdown"] == pytest.approx(rows[0]["tokens_per_s"] / r["tokens_per_s"])
        geometry, weights, spec = decode_runs.geometry_for(rec)
        b = decode_model.bytes_per_generated_token(geometry, r["context"], spec, weights)
        b0 = decode_model.bytes_per_generated_token(geometry, rows[0]["context"], spec, weights)
        assert g["predicted_slowdown"] == pytest.approx(b / b0)


def test_article_a_sits_on_the_identity_line_and_llamacpp_master_far_above():
    summary = decode_runs.slowdown_summary(FRAME).set_index("recording")
    assert summary.loc["published-article-a-m5-pro", "ratio"] == pytest.approx(1.0, abs=0.03)
    assert summary.loc["published-llamacpp-13583-llama-3.2-1b-q8_0-master", "ratio"] > 1.5
    assert summary.loc["published-rapid-mlx-633-m3-ultra-qwen3-0.6b-4bit", "ratio"] < 0.9
    assert (
        summary.loc["published-llamacpp-12952-phi-3-mini-q8_0-master", "ratio"] > 1.2
    )  # master before FA-vec hs96


def test_no_run_no_frame():
    assert decode_runs.slowdown_vs_bytes([]).empty
    assert decode_runs.slowdown_summary(decode_runs.slowdown_vs_bytes([])).empty


def test_the_fit_report_lists_every_published_decode_run():
    import importlib.util

    path = recordings.BUNDLED_DIR.parent / "benchmarks" / "published_fits.py"
    spec = importlib.util.spec_from_file_location("published_fits", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rows = {r["run"]: r for r in module.rows()}
    assert set(rows) == {r.id for r in BUNDLED if r.kind == "published" and r.has("decode")}
    for run, row in rows.items():
        if row["fit"] == "no fit":
            assert row["why"].startswith("no fit:")
        else:
            assert len(row["residuals"].split()) == row["points"] and row["verdict"]
