"""kvcore.measure.sweeps on the real mlx / mlx_lm code (CPU backend): a real prefill per prompt length, and B sequences
decoding together in mlx_lm's batch caches (merged as BatchGenerator merges them); tiny configs, seconds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvcore.errors import KvError
from kvcore.recordings import store as recordings

ROOT = Path(__file__).resolve().parent.parent
TINY = {
    "model_type": "llama",
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 256,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
}
pytestmark = pytest.mark.mlx


@pytest.fixture(scope="module")
def tiny():
    from kvcore.measure.models import build_random

    return build_random("tiny", dict(TINY), "fp32", dtype="fp32")


def test_prefill_sweep_one_row_per_prompt_with_median_and_spread(tiny):
    from kvcore.measure.sweeps import prefill_sweep
    from kvcore.measure.timing import SweepOptions

    seen, shown = [], []
    rows = prefill_sweep(
        tiny,
        [300, 16, 64],
        options=SweepOptions(repeats=2),
        progress=lambda d, t, s: seen.append((d, t)),
        on_rows=shown.append,
    )
    assert [r["prompt_tokens"] for r in rows] == [16, 64, 300]
    for r in rows:
        assert (
            r["repeats"] == 2
            and r["min_s"] <= r["q1_s"] <= r["prefill_s"] <= r["q3_s"] <= r["max_s"]
        )
        assert r["tokens_per_s"] == pytest.approx(r["prompt_tokens"] / r["prefill_s"])
        assert r["prefill_s"] == pytest.approx(sum(r["pass_s"]) / 2)
    assert seen[-1] == (7, 7)  # a warm-up, then 2 passes of 3 prompts
    assert len(shown) == 6 and [len(s) for s in shown][:3] == [1, 2, 3]


def test_prefill_fills_the_cache_to_the_prompt(tiny):
    """What the sweep times is a real prefill: afterwards every layer's cache holds the prompt's rows."""
    from kvcore.measure.caches import make_caches
    from kvcore.measure.decode import prefill

    caches = make_caches(tiny, "fp32")
    prefill(tiny, caches, 300, chunk=128)
    assert [c.offset for c in caches] == [300, 300]


def test_merged_batch_cache_is_mlx_lms_batch_cache_holding_each_sequence(tiny):
    from mlx_lm.models.cache import BatchKVCache

    from kvcore.measure.sweeps import batch_caches

    caches = batch_caches(tiny, 3, 40, "fp32")
    assert all(type(c) is BatchKVCache for c in caches)
    k, v = caches[0].keys_and_values()
    assert k.shape == (3, 2, 41, 64) and v.shape == (
        3,
        2,
        41,
        64,
    )  # B sequences x KV heads x (context + 1) x head_dim
    assert not bool((k[0] == k[1]).all().item())  # each sequence its own K/V


def test_a_batched_step_gives_each_sequence_the_logits_it_gets_alone(tiny):
    """Batching changes how the work is shared, not the answer: sequence b's logits in the batch of three equal those
    of the same cache decoded on its own."""
    import mlx.core as mx

    from kvcore.measure.caches import fill_caches, make_caches
    from kvcore.measure.sweeps import _seeded_kv, batch_caches

    merged = batch_caches(tiny, 3, 40, "fp32")
    batched = tiny.module(mx.array([[5], [6], [7]]), cache=merged)
    for b, token in enumerate((5, 6, 7)):
        alone = make_caches(tiny, "fp32")
        fill_caches(alone, tiny.geometry, 41, "fp32", kv=_seeded_kv(tiny, 41, "fp32", b))
        single = tiny.module(mx.array([[token]]), cache=alone)
        assert mx.allclose(batched[b], single[0], atol=1e-4).item(), b


def test_batch_sweep_rows_total_is_batch_times_per_sequence(tiny):
    from kvcore.measure.sweeps import batch_sweep
    from kvcore.measure.timing import SweepOptions

    rows = batch_sweep(tiny, [4, 1, 2], [64, 16], options=SweepOptions(1, 3, 2))
    assert [(r["context"], r["batch"]) for r in rows] == [
        (16, 1),
        (16, 2),
        (16, 4),
        (64, 1),
        (64, 2),
        (64, 4),
    ]
    for r in rows:
        assert r["tokens_per_s_total"] == pytest.approx(r["batch"] * r["tokens_per_s"])
        assert r["tokens_per_s"] == pytest.approx(1000 / r["ms_per_step"])
        assert r["min_ms"] <= r["ms_per_step"] <= r["max_ms"] and len(r["pass_ms"]) == 2


def test_a_quantized_kv_cache_is_refused_for_batching_with_its_reason(tiny):
    from kvcore.measure.sweeps import batch_caches

    with pytest.raises(KvError, match="cannot be batched") as e:
        batch_caches(tiny, 2, 16, "mlx-q8")
    assert e.value.code == "live_batch_format"


def test_cli_record_prefill_and_batch_sections_only(tmp_path, monkeypatch, capsys):
    from kvcore.cli import main as cli

    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY))
    out = tmp_path / "out"
    argv = [
        "record",
        "--model",
        str(config),
        "--weights-format",
        "fp32",
        "--sections",
        "prefill,batch",
        "--prompts",
        "16,64",
        "--batch-sizes",
        "1,2",
        "--batch-contexts",
        "16",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--repeats",
        "1",
        "--out",
        str(out),
    ]
    monkeypatch.setattr(sys, "argv", [str(ROOT / "kvcore" / "__main__.py"), *argv])
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "prompt tok/s" in printed and "total tok/s" in printed
    (path,) = out.glob("*.yaml")
    rec = recordings.load(path)
    assert set(rec.data["sections"]) == {"prefill", "batch"}
    assert (
        {"prefill", "batch", "backend", "machine_load"}
        <= set(rec.data["method"])
        <= {"prefill", "batch", "backend", "machine_load", "blas"}
    )
    assert "python -m kvcore record" in rec.data["provenance"]["command"]
    assert [r["batch"] for r in rec.rows("batch")] == [1, 2]
    assert (
        "geometry_kv_format" not in rec.data["model"]
    )  # no trap or growth: no geometry of their own


@pytest.mark.parametrize(
    "argv, message",
    [
        (["record", "--sections", "prefill,speed"], "--sections must be some of"),
        (["record", "--batch-sizes", "1,1000"], "batch size must be a whole number from 1 to 256"),
        (["record", "--prompts", "0"], "from 1 to"),
    ],
)
def test_bad_sweep_options_are_one_line_and_exit_2(argv, message, capsys):
    from kvcore.cli import main as cli

    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and message in err


OPENBLAS = Path("/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0")


@pytest.mark.skipif(
    not OPENBLAS.exists(),
    reason="Debian's OpenBLAS is not installed (apt-get install libopenblas0-pthread)",
)
def test_the_recording_names_the_blas_mlx_ran_on_and_the_command_the_environment():
    """Which library's cblas_sgemm the process finds first: OpenBLAS when preloaded, else the wheel's bundled one; and
    the run's command carries the variables that chose it."""
    import os
    import subprocess

    code = (
        "import mlx.core, sys; sys.argv = ['kvcore', 'record']; from kvcore.measure.recording import blas_libraries;"
        "from kvcore.cli.run import command_line; print(blas_libraries()['sgemm_from']); print(command_line())"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "OPENBLAS_NUM_THREADS")}
    plain = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert (
        "mlx_cpu.libs/libblas" in plain.stdout.splitlines()[0]
        and plain.stdout.splitlines()[1] == "python -m kvcore record"
    )
    env.update(LD_PRELOAD=str(OPENBLAS), OPENBLAS_NUM_THREADS="1")
    pre = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert "openblas" in pre.stdout.splitlines()[0]
    assert (
        pre.stdout.splitlines()[1]
        == f"LD_PRELOAD={OPENBLAS} OPENBLAS_NUM_THREADS=1 python -m kvcore record"
    )
