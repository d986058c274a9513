"""kvcore.measure.probes on the real mlx / mlx_lm code (CPU backend): tiny configs, small contexts, seconds."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvcore.errors import KvError
from kvcore.memory.allocsim import simulate
from kvcore.memory.formulas import prefill_chunks
from kvcore.recordings import store as recordings

ROOT = Path(__file__).resolve().parent.parent

TINY = {  # dims divisible by 64 so 4-bit group-64 quantization applies, as in the article's model
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


def test_import_kvcore_never_imports_mlx():
    code = (
        "import sys, kvcore, kvcore.cli.main, kvcore.measure.probes, kvcore.cli.live_args, kvcore.cli.run,"
        " kvcore.cli.probe, kvcore.cli.decode, kvcore.cli.quality, kvcore.cli.record,"
        " kvcore.measure.models, kvcore.measure.suite;"
        "bad = [m for m in sys.modules if m.split('.')[0] in ('mlx', 'mlx_lm', 'streamlit')]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_memory_guard_names_the_largest_context_that_fits():
    from kvcore.measure.caches import guard

    assert guard(1_000, 100, 1024, available=10**9) > 0
    with pytest.raises(KvError, match=r"largest context that fits is about [\d,]+ tokens") as e:
        guard(10**6, 32_768, 131_072, available=2 * 1024**3, model="m")
    # the context it names passes the same guard, against all the memory the backend may use (none kept back)
    fits = e.value.params["fits"]
    assert guard(10**6, 32_768, fits, available=2 * 1024**3) <= 2 * 1024**3
    assert e.value.params["budget"].startswith("2.00 GiB")
    with pytest.raises(KvError, match="not even 256 tokens fit"):
        guard(4 * 1024**3, 32_768, 1024, available=2 * 1024**3, model="m")


mlx = pytest.mark.mlx


@pytest.fixture(scope="module")
def trap_rows():
    from kvcore.measure.probes import trap_probe

    return trap_probe("llama-3.2-1b", dtype="fp16", tokens=1025)


def _row(rows, cache, pattern, tokens=None):
    return next(
        r
        for r in rows
        if r["cache"] == cache
        and r["pattern"] == pattern
        and (tokens is None or r["tokens"] == tokens)
    )


# mlx_lm 0.32.2's KVCache (https://github.com/ml-explore/mlx-lm/blob/v0.32.2/mlx_lm/models/cache.py), one layer of Llama-3.2-1B (8 KV heads x 64, fp16), token by token
@mlx
@pytest.mark.parametrize(
    "offset, capacity, nbytes, used",
    [
        (255, 256, 524_288, 522_240),
        (256, 256, 524_288, 524_288),
        (257, 512, 1_048_576, 526_336),
        (512, 512, 1_048_576, 1_048_576),
        (513, 768, 1_572_864, 1_050_624),
        (1024, 1024, 2_097_152, 2_097_152),
    ],
)
def test_nbytes_reports_capacity_not_used_bytes(trap_rows, offset, capacity, nbytes, used):
    row = _row(trap_rows, "KVCache", "token by token", offset)
    assert (row["capacity"], row["nbytes"], row["used_bytes"], row["theory_bytes"]) == (
        capacity,
        nbytes,
        used,
        used,
    )


@mlx
def test_allocated_jumps_8_to_16_mib_at_257_while_used_grows_by_one_256th(trap_rows):
    at256, at257 = (
        _row(trap_rows, "KVCache", "token by token", 256),
        _row(trap_rows, "KVCache", "token by token", 257),
    )
    assert (at256["allocated_mib"], at257["allocated_mib"]) == (8.0, 16.0)
    assert (at256["used_mib"], at257["used_mib"]) == (8.0, 8.03125)


@mlx
@pytest.mark.parametrize(
    "pattern, offset, capacity",
    [
        ("257", 257, 512),
        ("256 + 1", 257, 512),
        ("1 + 256", 257, 257),
        ("300 + 300", 600, 812),
        ("1000", 1000, 1024),
        ("2048 + 2047 + 1", 4096, 4096),
        ("2048 + 2047 + 1 + 1", 4097, 4352),
        ("500 x 8", 4000, 4012),
    ],
)
def test_update_patterns_table(trap_rows, pattern, offset, capacity):
    row = _row(trap_rows, "KVCache", pattern)
    assert (row["tokens"], row["capacity"]) == (offset, capacity)
    assert row["used_bytes"] == row["theory_bytes"] == offset * 2048
    updates = [500] * 8 if pattern == "500 x 8" else [int(n) for n in pattern.split(" + ")]
    assert (
        simulate("KVCache", updates).capacity == capacity
    )  # the simulator agrees with the real class


@mlx
def test_quantized_cache_costs_1088_bytes_per_token_and_has_the_same_trap(trap_rows):
    at257 = _row(trap_rows, "QuantizedKVCache", "token by token", 257)
    assert at257["used_bytes"] == 257 * 1088 and at257["nbytes"] == 512 * 1088
    assert _row(trap_rows, "QuantizedKVCache", "1 + 256")["capacity"] == 257


@mlx
def test_rotating_cache_holds_a_whole_prefill_chunk_until_the_next_token(trap_rows):
    assert _row(trap_rows, "RotatingKVCache", "1000")["capacity"] == 1000
    assert _row(trap_rows, "RotatingKVCache", "1000 + 1")["capacity"] == 512
    assert _row(trap_rows, "RotatingKVCache", "token by token", 1025)["capacity"] == 512


@mlx
def test_growth_agrees_on_256_multiples_and_differs_by_the_slack_elsewhere():
    from kvcore.measure.probes import growth_probe

    rows = growth_probe("llama-3.2-1b", [256, 1000, 1024, 1300], kv_format="fp16", dtype="fp16")
    per_token = 32_768  # 16 layers x 2 x 8 heads x 64 x 2 B
    for row in rows:
        t = row["context"]
        assert row["used_bytes"] == row["theory_bytes"] == t * per_token
        slack = simulate("KVCache", prefill_chunks(t)).capacity - t
        assert row["allocated_bytes"] - row["used_bytes"] == slack * per_token
        if t % 256 == 0:
            assert slack == 0
        assert row["active_mib"] == pytest.approx(row["allocated_mib"], rel=0.02)
    assert rows[2]["peak_mib"] > rows[2]["allocated_mib"]  # 1024 -> 1025 copies the whole cache


@pytest.fixture(scope="module")
def tiny_model():
    from kvcore.measure.models import build_random

    return build_random("tiny", dict(TINY), "fp32", dtype="fp32")


@mlx
def test_logits_after_a_synthetic_fill_equal_those_after_a_real_prefill(tiny_model):
    import mlx.core as mx

    from kvcore.measure.caches import fill_caches, make_caches
    from kvcore.measure.decode import prefill

    real = make_caches(tiny_model, "fp32")
    prefill(tiny_model, real, 300, chunk=128)
    kv = [tuple(mx.array(a) for a in c.keys_and_values()) for c in real]
    synthetic = make_caches(tiny_model, "fp32")
    fill_caches(synthetic, tiny_model.geometry, 300, "fp32", kv=kv)
    token = mx.array([[5]])
    a, b = tiny_model.module(token, cache=real), tiny_model.module(token, cache=synthetic)
    assert mx.array_equal(a, b).item()


@mlx
def test_decode_sweep_returns_one_row_per_context_with_median_spread_and_repeats(tiny_model):
    from kvcore.measure.decode import decode_sweep
    from kvcore.measure.timing import SweepOptions

    seen = []
    rows = decode_sweep(
        tiny_model,
        [300, 16, 64],
        options=SweepOptions(warmup=1, steps=3, repeats=2),
        progress=lambda d, t, s: seen.append((d, t)),
    )
    assert [r["context"] for r in rows] == [16, 64, 300]
    for r in rows:
        assert (
            r["repeats"] == 2
            and r["min_ms"] <= r["q1_ms"] <= r["ms_per_token"] <= r["q3_ms"] <= r["max_ms"]
        )
        assert r["spread_ms"] == pytest.approx(r["max_ms"] - r["min_ms"])
        assert r["tokens_per_s"] == pytest.approx(1000 / r["ms_per_token"])
        assert len(r["pass_ms"]) == 2 and r["ms_per_token"] == pytest.approx(sum(r["pass_ms"]) / 2)
        assert (min(r["pass_ms"]), max(r["pass_ms"])) == (r["min_ms"], r["max_ms"])
    assert seen[-1] == (6, 6)


def test_passes_visit_every_context_once_each_in_a_shuffled_order():
    from kvcore.measure.timing import pass_orders

    contexts = [256, 512, 1024, 2048, 4096, 8192]
    orders = pass_orders(contexts, 5, seed=3)
    assert len(orders) == 5 and all(sorted(o) == contexts for o in orders)
    assert len({tuple(o) for o in orders}) > 1  # not one order repeated
    assert (
        any(o != contexts for o in orders) and pass_orders(contexts, 5, seed=3) == orders
    )  # shuffled, repeatable
    assert pass_orders(contexts, 5, seed=4) != orders


def test_quartiles_match_numpys_default_percentiles():
    import numpy as np

    from kvcore.measure.timing import quartiles

    for values in ([5.0], [3.0, 1.0], [1, 2, 3, 4, 5], [9.5, 1.25, 7, 3, 3, 40, 2.5]):
        q1, q2, q3 = quartiles(values)
        assert (q1, q2, q3) == pytest.approx(tuple(np.percentile(values, [25, 50, 75])))


@mlx
def test_decode_sweep_visits_contexts_shuffled_across_passes_and_reports_rows_as_they_come(
    tiny_model,
):
    from kvcore.measure.decode import decode_sweep
    from kvcore.measure.timing import SweepOptions, pass_orders

    texts, partial = [], []
    contexts = [16, 32, 48, 64]
    rows = decode_sweep(
        tiny_model,
        contexts,
        options=SweepOptions(warmup=0, steps=1, repeats=3, seed=1),
        progress=lambda d, t, text: texts.append(text),
        on_rows=lambda r: partial.append(r),
    )
    visited = [int(t.split()[1].replace(",", "")) for t in texts]
    expected = pass_orders(contexts, 3, seed=1)
    assert visited == [
        c for order in expected for c in order
    ]  # the sweep follows the shuffled orders
    assert len({tuple(o) for o in expected}) > 1
    assert all(len(r["pass_ms"]) == 3 for r in rows)  # every context measured in every pass
    assert [len(p) for p in partial[:4]] == [1, 2, 3, 4] and partial[-1] == rows
    assert partial[0][0]["context"] == expected[0][0] and partial[0][0]["repeats"] == 1


@mlx
def test_the_decode_spread_is_saved_and_loads_back(tmp_path, tiny_model):
    from kvcore.measure.decode import decode_sweep
    from kvcore.measure.recording import build_recording
    from kvcore.measure.timing import SweepOptions

    rows = decode_sweep(tiny_model, [16, 40], options=SweepOptions(warmup=0, steps=2, repeats=3))
    data = build_recording(
        {"decode": rows},
        {"name": "tiny", "source": "random weights"},
        {"fill": "synthetic"},
        "test",
    )
    rec = recordings.load(recordings.save(data, tmp_path))
    for saved, measured in zip(rec.rows("decode"), rows):
        assert saved["q1_ms"] == pytest.approx(measured["q1_ms"], abs=1e-6)
        assert saved["q3_ms"] == pytest.approx(measured["q3_ms"], abs=1e-6)
        assert (
            saved["pass_ms"] == pytest.approx(measured["pass_ms"], abs=1e-6)
            and len(saved["pass_ms"]) == 3
        )


@mlx
def test_paired_steps_time_both_caches_step_by_step(tiny_model):
    from kvcore.measure.caches import fill_caches, make_caches
    from kvcore.measure.decode import paired_steps

    a, b = make_caches(tiny_model, "fp32"), make_caches(tiny_model, "fp32")
    fill_caches(a, tiny_model.geometry, 40, "fp32")
    fill_caches(b, tiny_model.geometry, 90, "fp32")
    a_ms, b_ms = paired_steps(tiny_model, a, b, warmup=2, steps=5, b_first=True)
    assert len(a_ms) == len(b_ms) == 5 and min(a_ms + b_ms) > 0
    assert (a[0].offset, b[0].offset) == (47, 97)  # every step decoded one token on each cache


@mlx
def test_quantized_kv_decodes(tiny_model):
    from kvcore.measure.decode import decode_sweep
    from kvcore.measure.timing import SweepOptions

    once = SweepOptions(warmup=0, steps=2, repeats=1)
    assert decode_sweep(tiny_model, [100], "mlx-q4", once)[0]["kv_format"] == "mlx-q4"
    assert {r["cache"] for r in cache_geometry(tiny_model, "mlx-q8")} == {"QuantizedKVCache"}


@mlx
def test_mechanism_without_cache_recomputes_the_prefix(tiny_model):
    from kvcore.measure.decode import mechanism_probe

    rows = mechanism_probe(tiny_model, new_tokens=4, prompt_tokens=8)
    assert [r["new_tokens"] for r in rows] == [1, 2, 3, 4]
    assert rows[-1]["with_cache_s"] == pytest.approx(
        sum(r["with_cache_step_ms"] for r in rows) / 1000
    )


@mlx
def test_a_model_loaded_from_a_directory_has_the_random_models_geometry(tmp_path):
    import mlx.core as mx
    from mlx_lm.utils import save_config, save_model

    from kvcore.measure.models import build_random, get_model

    random_model = build_random("tiny", dict(TINY), "mlx-q4", dtype="fp32")
    save_model(tmp_path, random_model.module)
    save_config({**TINY, "quantization": {"group_size": 64, "bits": 4}}, tmp_path / "config.json")
    loaded = get_model(str(tmp_path), None)
    assert (
        loaded.weights == str(tmp_path)
        and loaded.weights_format == "mlx-q4"
        and loaded.dtype == "fp32"
    )
    assert cache_geometry(loaded) == cache_geometry(random_model)
    assert loaded.geometry.layers == random_model.geometry.layers
    token = mx.array([[3, 4, 5]])
    assert mx.array_equal(loaded.module(token), random_model.module(token)).item()


@mlx
def test_interrupting_a_run_leaves_no_recording(tmp_path, tiny_model, monkeypatch, capsys):
    from kvcore.cli import main as cli
    from kvcore.measure import suite as live_record
    from kvcore.measure.progress import Interrupted
    from kvcore.measure.suite import record_suite

    calls = []

    def stop():
        calls.append(1)
        return len(calls) > 40

    with pytest.raises(Interrupted):
        record_suite(
            tiny_model, "llama-3.2-1b", "test", kv_contexts=[256], contexts=[16], should_stop=stop
        )

    def stopped(*args, **kwargs):  # the stop button pressed during the last phase
        raise Interrupted()

    monkeypatch.setattr(live_record, "mechanism_probe", stopped)
    argv = [
        "record",
        "--model",
        _write_config(tmp_path),
        "--weights-format",
        "fp32",
        "--tokens",
        "260",
        "--kv-contexts",
        "256",
        "--contexts",
        "16",
        "--steps",
        "1",
        "--repeats",
        "1",
        "--out",
        str(tmp_path / "out"),
    ]
    assert cli.main(argv) == 2
    assert "nothing was saved" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@mlx
def test_ctrl_c_in_the_cli_saves_nothing(tmp_path, monkeypatch, capsys):
    from kvcore.cli import main as cli
    from kvcore.measure import probes as live

    def boom(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(live, "trap_probe", boom)
    assert cli.main(["probe", "--out", str(tmp_path)]) == 130
    assert "nothing was saved" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def _write_config(tmp_path) -> str:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return str(path)


@mlx
def test_cli_record_saves_one_valid_recording_with_provenance(tmp_path, capsys, monkeypatch):
    import shlex

    from kvcore.cli import main as cli

    out = tmp_path / "out"
    argv = [
        "record",
        "--model",
        _write_config(tmp_path),
        "--weights-format",
        "fp32",
        "--geometry",
        "llama-3.2-1b",
        "--tokens",
        "300",
        "--kv-contexts",
        "256,300",
        "--contexts",
        "16,64",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--repeats",
        "1",
        "--new-tokens",
        "3",
        "--prompt-tokens",
        "4",
        "--out",
        str(out),
    ]
    monkeypatch.setattr(sys, "argv", [str(ROOT / "kvcore" / "__main__.py"), *argv])
    for name in ("LD_PRELOAD", "OMP_NUM_THREADS", "KVCORE_BLAS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")  # what the suite runs under (tests/conftest.py)
    assert cli.main(argv) == 0
    (path,) = out.glob("*.yaml")
    rec = recordings.load(path)
    assert set(rec.data["sections"]) == {"trap", "growth", "decode", "mechanism"}
    prov = rec.data["provenance"]
    assert prov["backend"] == "mlx cpu" and "not Apple Silicon" in rec.label
    assert rec.data["model"]["weights"] == "random" and rec.data["method"]["decode"]["steps"] == 2
    # the command as typed, with the thread count it ran under
    assert prov["command"] == "OPENBLAS_NUM_THREADS=1 " + shlex.join(
        ["python", "-m", "kvcore", *argv]
    )
    assert cli.main(argv) == 0 and len(list(out.glob("*.yaml"))) == 2  # never overwrites


@mlx
def test_read_only_mode_runs_the_trap_probe_and_writes_nothing(tmp_path, monkeypatch, capsys):
    from kvcore.cli import main as cli

    monkeypatch.setenv("KVCORE_READ_ONLY", "1")
    assert cli.main(["probe", "--tokens", "260", "--out", str(tmp_path / "x")]) == 0
    out = capsys.readouterr().out
    assert "8.031" in out and "not saved" in out
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["decode", "--contexts", "abc"],
        ["decode", "--contexts", "0"],
        ["decode", "--kv-format", "fp8"],
        ["decode", "--steps", "-1"],
        ["kv", "--model", "no-such-model"],
        ["probe", "--model", "/no/such/config.json"],
        ["decode", "--model", "llama-3.1-70b", "--weights-format", "fp32", "--contexts", "131072"],
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(argv, capsys):
    from kvcore.cli import main as cli

    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


@pytest.mark.mlx
def test_cross_checks_report_both_timings_at_one_context(tiny_model):
    from kvcore.measure.decode import generate_step_check, real_prefill_check

    prefill = real_prefill_check(tiny_model, 300, warmup=1, steps=3)
    assert (
        prefill["context"] == 300 and prefill["synthetic_ms"] > 0 and prefill["real_prefill_ms"] > 0
    )
    assert prefill["ratio"] == prefill["real_prefill_ms"] / prefill["synthetic_ms"]
    gen = generate_step_check(tiny_model, 300, warmup=1, steps=3)
    assert gen["context"] == 300 and all(v > 0 for k, v in gen.items() if k.endswith("_ms"))


def cache_geometry(model, kv_format: str | None = None) -> list[dict]:
    """The caches mlx_lm makes for this model, after one real token: class, kv_heads, head_dim, dtype per layer."""
    import mlx.core as mx

    from kvcore.measure.caches import make_caches

    caches = make_caches(model, kv_format or model.dtype)
    logits = model.module(mx.array([[1]]), cache=caches)
    mx.eval(logits)
    rows = []
    for i, cache in enumerate(caches):
        quantized = hasattr(cache, "bits")
        keys = (
            cache.keys[0] if quantized else cache.keys
        )  # quantized: (packed uint32, scales, biases)
        head_dim = keys.shape[3] * 32 // cache.bits if quantized else keys.shape[3]
        dtype = cache.keys[1].dtype if quantized else keys.dtype
        rows.append(
            {
                "layer": i,
                "cache": type(cache).__name__,
                "kv_heads": keys.shape[1],
                "head_dim": head_dim,
                "capacity": keys.shape[2],
                "dtype": str(dtype).replace("mlx.core.", ""),
                "bits": getattr(cache, "bits", None),
                "max_size": getattr(cache, "max_size", None),
            }
        )
    return rows
