"""`python -m kvcore`: the calc contract, presets, selftest, and one clear line for bad input."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.inputs import run_kvcore
from kvcore.inputs.preset_files import load_preset
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formulas import kv_bytes

ROOT = Path(__file__).resolve().parents[1]


kvcore = run_kvcore


def test_calc_json_has_the_contract_fields():
    r = kvcore("calc", "--model", "llama-3.1-8b", "--context", "131072", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["model"] == "llama-3.1-8b" and out["context"] == 131072 and out["sequences"] == 1
    assert out["kv_bytes"] == 16 * 2**30
    assert out["kv_bytes_per_token"] == 131072
    assert len(out["per_layer"]) == 32 and set(out["per_layer"][0]) >= {"layer", "kind", "kv_bytes"}
    assert sum(row["kv_bytes"] for row in out["per_layer"]) == out["kv_bytes"]
    assert isinstance(out["weights_bytes"], int) and out["weights_bytes"] > 0
    assert "131,072" in out["formula"] and "17,179,869,184" in out["formula"]


def test_calc_takes_mlx_lms_prefill_step_into_its_plan_and_refuses_it_elsewhere():
    """`--prefill-step-size` is mlx_lm's (its generate's flag): the plan is walked in steps of it and --json says
    so; out of range, or given to another runtime, it is one sentence naming the flag, exit 2."""
    common = ("calc", "--model", "llama-3.2-1b", "--context", "8192", "--json")
    plans = {}
    for step in (None, "512"):
        r = kvcore(*common, "--runtime", "mlx_lm", *(["--prefill-step-size", step] if step else []))
        assert r.returncode == 0, r.stderr
        plans[step] = json.loads(r.stdout)["plan"]
    assert plans[None]["prefill_step"] == 2048 and plans["512"]["prefill_step"] == 512
    assert plans["512"]["n_tokens"] <= 512 < plans[None]["n_tokens"]
    assert plans["512"]["total_bytes"] < plans[None]["total_bytes"]
    r = kvcore(*common, "--prefill-step-size", "63")
    assert r.returncode == 2 and "from 64 to 1,048,576, not '63'" in r.stderr
    assert "Traceback" not in r.stderr
    r = kvcore(*common, "--runtime", "reference", "--prefill-step-size", "512")
    assert (
        r.returncode == 2
        and "--prefill-step-size is mlx_lm's only; add --runtime mlx_lm" in r.stderr
    )


def test_calc_sequences_and_separate_k_v_formats():
    r = kvcore(
        "calc",
        "--model",
        "qwen3-4b",
        "--context",
        "1000",
        "--sequences",
        "3",
        "--k-format",
        "fp16",
        "--v-format",
        "mlx-q4",
        "--runtime",
        "reference",  # mlx_lm keeps K and V in one format
        "--json",
    )
    out = json.loads(r.stdout)
    assert out["kv_bytes"] == 3 * out["kv_bytes_per_sequence"]
    assert out["kv_bytes_per_token"] == 36 * 8 * (256 + 64 + 8)


@pytest.mark.parametrize(
    "formats, sentence",
    [
        (
            ["--k-format", "fp16", "--v-format", "mlx-q4"],
            "mlx_lm keeps K and V in one format, not K fp16 and V mlx-q4; choose the same for both "
            "(the reference runtime sizes a pair).",
        ),
        (
            ["--kv-format", "q8_0"],
            "mlx_lm does not store K/V as 'q8_0': its caches hold fp32, fp16, bf16, mlx-q8, mlx-q6, "
            "mlx-q5, mlx-q4, mlx-q3, mlx-q2; the reference runtime sizes any format.",
        ),
    ],
)
def test_mlx_lm_refuses_a_cache_it_cannot_hold(formats, sentence):
    """One kv_bits quantizes K and V alike, and its caches are KVCache (a dtype) and QuantizedKVCache."""
    r = kvcore("calc", "--model", "qwen3-4b", "--context", "1000", *formats)
    assert r.returncode == 2 and r.stderr.strip() == f"error: {sentence}", r.stderr


def test_calc_accepts_a_config_json_path(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(load_preset("gemma-3-4b")["config"]))
    out = json.loads(kvcore("calc", "--model", str(config), "--context", "50000", "--json").stdout)
    assert out["kv_bytes"] == kv_bytes(preset_geometry("gemma-3-4b"), 50000)


def test_calc_table_is_readable():
    r = kvcore("calc", "--model", "deepseek-v3", "--context", "4096")
    assert r.returncode == 0 and "KV cache" in r.stdout and "mla" in r.stdout


def test_calc_imports_neither_mlx_streamlit_nor_altair():
    code = (
        "import sys; from kvcore.cli.main import main; main(['calc','--model','llama-3.2-1b','--context','10','--json']);"
        "print([m for m in ('mlx','mlx_lm','streamlit','altair') if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_presets_lists_every_preset_with_geometry():
    out = json.loads(kvcore("presets", "--json").stdout)
    names = {row["name"] for row in out}
    assert {
        "llama-3.2-1b",
        "qwen3-4b",
        "deepseek-v3",
        "smollm2-1.7b",
        "qwen3-next-80b-a3b",
        "gemma-3-4b",
    } <= names
    smol = next(r for r in out if r["name"] == "smollm2-1.7b")
    assert smol["kv_heads"] == smol["heads"] == 32


def test_every_preset_names_its_source():
    for path in (ROOT / "kvcore" / "inputs" / "presets").glob("*.json"):
        data = json.loads(path.read_text())
        assert data["name"] == path.stem and data["source"].startswith("https://") and data["hf_id"]


def test_selftest_passes():
    r = kvcore("selftest")
    assert r.returncode == 0, r.stdout
    assert " 0 failed" in r.stdout


@pytest.mark.parametrize(
    "preset, field, value",
    [
        ("llama-3.2-1b", "num_key_value_heads", 16),
        ("llama-3.1-8b", "num_hidden_layers", 31),
        ("qwen3-4b", "head_dim", 80),
    ],
)
def test_selftest_fails_when_a_preset_is_wrong(tmp_path, preset, field, value):
    shutil.copytree(
        ROOT / "kvcore", tmp_path / "kvcore", ignore=shutil.ignore_patterns("__pycache__")
    )
    path = tmp_path / "kvcore" / "inputs" / "presets" / f"{preset}.json"
    data = json.loads(path.read_text())
    data["config"][field] = value
    path.write_text(json.dumps(data))
    r = kvcore("selftest", cwd=tmp_path)
    assert r.returncode == 1 and "FAIL" in r.stdout


def test_selftest_fails_when_a_formula_is_wrong(tmp_path):
    shutil.copytree(
        ROOT / "kvcore", tmp_path / "kvcore", ignore=shutil.ignore_patterns("__pycache__")
    )
    formats = tmp_path / "kvcore" / "memory" / "formats.py"
    formats.write_text(
        formats.read_text().replace("2 * (dim // group_size)", "1 * (dim // group_size)")
    )
    r = kvcore("selftest", cwd=tmp_path)
    assert r.returncode == 1 and "FAIL" in r.stdout


BAD_INPUT = [
    (["calc", "--model", "llama-3.2-1", "--context", "10"], "Did you mean llama-3.2-1b"),
    (["calc", "--model", "nosuchmodel", "--context", "10"], "Unknown model preset 'nosuchmodel'"),
    (
        ["calc", "--model", "llama-3.2-1b", "--context", "0"],
        "context must be a whole number from 1 to",
    ),
    (
        ["calc", "--model", "llama-3.2-1b", "--context", "-5"],
        "context must be a whole number from 1 to",
    ),
    (
        ["calc", "--model", "llama-3.2-1b", "--context", "1e99"],
        "context must be a whole number from 1 to",
    ),
    (
        ["calc", "--model", "llama-3.2-1b", "--context", "999999999999"],
        "context must be a whole number from 1 to",
    ),
    (
        ["calc", "--model", "llama-3.2-1b", "--context", "10", "--sequences", "0"],
        "sequences must be a whole number from 1 to",
    ),
    (
        ["calc", "--model", "llama-3.2-1b", "--context", "10", "--kv-format", "int3"],
        "valid formats: fp32, fp16",
    ),
    (
        ["calc", "--model", "llama-3.2-1b", "--context", "10", "--weights-format", "q9"],
        "Unknown weights format 'q9'",
    ),
    (
        ["calc", "--model", "/nonexistent/config.json", "--context", "10"],
        "/nonexistent/config.json does not exist",
    ),
    (["calc", "--context", "10"], "--model"),
]


@pytest.mark.parametrize("args, message", BAD_INPUT)
def test_bad_input_gets_one_line_and_exit_2(args, message):
    r = kvcore(*args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert message in r.stderr


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"model_type": "llama", "hidden_size": 2048}', "missing the field 'num_hidden_layers'"),
        (
            '{"model_type": "llama", "hidden_size": "big", "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10, "intermediate_size": 8}',
            "'hidden_size' must be a whole number",
        ),
        ('{"hidden_size": 8}', "missing the field 'model_type'"),
        (
            '{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": -1, "num_attention_heads": 4}',
            "'num_hidden_layers' = -1 is out of range",
        ),
        (
            '{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3}',
            "multiple of num_key_value_heads",
        ),
    ],
)
def test_malformed_config_names_the_field(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    r = kvcore("calc", "--model", str(path), "--context", "10")
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_an_oversized_config_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"x": "' + "a" * 2_000_000 + '"}')
    r = kvcore("calc", "--model", str(path), "--context", "10")
    assert r.returncode == 2 and "larger than" in r.stderr
