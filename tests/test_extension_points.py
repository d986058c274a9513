"""Where a new cache format, model family or runtime goes: one entry, and it reaches the engine, the calculator,
the CLI and the chapters' format choices (Linear growth, the .nbytes trap, the live runs' weights); a wrong one is
refused with a sentence (docs/contributing.md, "Where things go"; the Calculator page's choices are held by
tests/app/test_app_calculator.py, a chapter's and a language's registry by tests/app/test_chapters.py).

Every entry here is monkeypatched into its registry for one test: nothing is written into the repository."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvcore import cli, families, formats, geometry, live_models, runtimes
from kvcore.calculator import calculate, formats_that_fit, runtime_formats
from kvcore.errors import KvError
from kvcore.formats import CacheFormat
from kvcore.formulas import KvSpec, kv_bytes

ROOT = Path(__file__).resolve().parent.parent


def calc_json(capsys, *args) -> dict:
    assert cli.main(["calc", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- formats


@pytest.fixture
def throwaway_format(monkeypatch):
    """A 6-bit block format (32 values in 26 bytes) that llama.cpp would store, in the one table of formats."""
    fmt = CacheFormat(
        "q6_test", "block", 6, 32, 26, source="a throw-away format for this test", llamacpp=True
    )
    monkeypatch.setitem(formats.FORMATS, fmt.name, fmt)
    return fmt


def test_a_format_added_to_the_table_reaches_the_formula_the_calculator_and_the_cli(
    throwaway_format, capsys
):
    g = geometry.preset_geometry("llama-3.2-1b", "reference")  # the runtime that sizes any format
    spec = KvSpec("q6_test", "q6_test")
    assert (
        kv_bytes(g, 1024, spec) == 1024 * 16 * 8 * 2 * (64 // 32) * 26
    )  # tokens x layers x heads x K+V x blocks x bytes
    assert calculate(g, 1024, 1, spec, "mlx-q4")["kv_bytes"] == kv_bytes(g, 1024, spec)
    assert "q6_test" in formats_that_fit(g, 131072, 1, 0, 10**12, KvSpec())  # offered as a lever
    assert calc_json(
        capsys,
        *("--model", "llama-3.2-1b", "--context", "1024", "--kv-format", "q6_test"),
        *("--runtime", "reference"),
    )["kv_bytes"] == kv_bytes(g, 1024, spec)
    mlx = geometry.preset_geometry("llama-3.2-1b")  # mlx_lm: no cache class of its holds it
    assert "q6_test" not in formats_that_fit(mlx, 131072, 1, 0, 10**12, KvSpec())
    with pytest.raises(KvError, match="mlx_lm does not store K/V as 'q6_test'") as e:
        calculate(mlx, 1024, 1, spec, "mlx-q4")
    assert e.value.code == "runtime_format"


def test_a_format_llama_cpp_stores_reaches_the_llama_cpp_runtime(throwaway_format, capsys):
    assert (
        "q6_test" in runtime_formats("llama.cpp") and "q6_test" not in formats.mlx_cache_formats()
    )
    r = calc_json(
        capsys,
        "--model",
        "llama-3.2-1b",
        "--context",
        "4096",
        "--runtime",
        "llama.cpp",
        "--kv-format",
        "q6_test",
    )
    assert r["kv_bytes"] == 4096 * 16 * 2 * 8 * 64 // 32 * 26 and "K (q6_test)" in r["log_lines"][0]


def test_a_block_format_whose_block_does_not_divide_the_row_is_refused_not_padded(
    monkeypatch, capsys
):
    """The q6_k experiment of issue 15: 256-value blocks (210 bytes) on Llama-3.2-1B's 64-value rows once showed 26.25
    bits per value (one padded block per row) and were offered as a lever; ggml asserts whole blocks."""
    monkeypatch.setitem(
        formats.FORMATS, "q6_k", CacheFormat("q6_k", "block", 6, 256, 210, llamacpp=True)
    )
    g = geometry.preset_geometry("llama-3.2-1b", "reference")  # the runtime that sizes any format
    with pytest.raises(
        KvError, match="whole blocks of 256 values and does not pad them: a 64-value row"
    ) as e:
        kv_bytes(g, 1024, KvSpec("q6_k", "q6_k"))
    assert e.value.code == "format_block"
    assert "q6_k" not in formats_that_fit(g, 1024, 1, 0, 10**12, KvSpec())  # never a lever
    argv = ["calc", "--model", "llama-3.2-1b", "--context", "1024", "--kv-format", "q6_k"]
    assert cli.main([*argv, "--runtime", "reference"]) == 2
    err = capsys.readouterr().err
    assert (
        "a 64-value row is not a multiple of 256" in err
        and "26.25" not in err
        and len(err.strip().splitlines()) == 1
    )
    with pytest.raises(KvError, match="128-value row"):
        formats.FORMATS["q6_k"].row_bytes(128)
    assert (
        formats.FORMATS["turbo3"].row_bytes(64) == 50
    )  # the TurboQuant fork pads: one 128-value block


def test_a_format_of_an_unknown_layout_is_refused_with_its_kind():
    with pytest.raises(KvError, match="'ggml'.*known kinds: plain, mlx, block"):
        CacheFormat("q6_old", "ggml", 6, 32, 26)


# ---------------------------------------------------------------- the chapters' format choices


def chapter(path: str, **params) -> AppTest:
    """A chapter's page as a reader opens it, in English, with `params` in its URL."""
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    for key, value in {"lang": "en", **params}.items():
        at.query_params[key] = value
    at.switch_page(path)
    return at.run()


@pytest.fixture
def throwaway_mlx_format(monkeypatch):
    """A 6-bit format an mlx_lm cache class holds (QuantizedKVCache(bits=6)), in the one table of formats."""
    fmt = CacheFormat(
        "mlx-q6", "mlx", 6, source="a throw-away format", mlx_cache="QuantizedKVCache"
    )
    monkeypatch.setitem(formats.FORMATS, fmt.name, fmt)
    return fmt


def test_a_format_reaches_the_chapters_that_offer_formats_of_its_purpose(
    throwaway_format, throwaway_mlx_format
):
    """Linear growth and the .nbytes trap offer what an mlx_lm cache class holds (both chapters grow mlx_lm's
    cache): the block format is offered on neither, the mlx one on both, and it is drawn when chosen."""
    growth = chapter("pages/3_Linear_growth.py", kv="mlx-q6")
    options = growth.selectbox(key="kv").options
    assert "mlx-q6" in options and "q6_test" not in options
    assert not growth.exception and growth.selectbox(key="kv").value == "mlx-q6"
    assert "mlx-q6" in growth.code[0].value  # the formula names it
    trap = chapter("pages/2_Nbytes_trap.py", fmt="mlx-q6")
    options = trap.selectbox(key="fmt").options
    assert "mlx-q6" in options and "q6_test" not in options
    assert not trap.exception and trap.selectbox(key="fmt").value == "mlx-q6"


def test_a_format_an_mlx_lm_cache_holds_reaches_the_live_probes_and_their_option(
    throwaway_mlx_format,
):
    """The live probes read the formats an mlx_lm cache class holds when asked (a copy taken at import
    time never saw a format added later): the spec a live cache is sized by, `--kv-format`; an
    unknown one is refused in one sentence naming the valid ones, the new one among them."""
    import argparse

    from kvcore import live_args, live_memory

    assert live_memory.kv_spec("mlx-q6", "fp16") == KvSpec("mlx-q6", "mlx-q6", 64, "fp16")
    assert live_args.kv_format("mlx-q6") == "mlx-q6"
    with pytest.raises(KvError, match=r"Unknown KV format 'mlx-q7'; valid here: .*mlx-q6"):
        live_memory.kv_spec("mlx-q7", "fp16")
    with pytest.raises(argparse.ArgumentTypeError, match=r"one of .*mlx-q6.*, not 'q6_test'"):
        live_args.kv_format("q6_test")  # a block format no mlx_lm cache class holds


def test_a_live_weight_format_reaches_the_live_runs_choice(monkeypatch):
    """The live runs offer the weight formats a live model is built in (kvcore.live_models), the CLI's default
    chosen."""
    monkeypatch.setattr(
        live_models, "LIVE_WEIGHT_FORMATS", (*live_models.LIVE_WEIGHT_FORMATS, "mlx-q6")
    )
    at = chapter("pages/4_Decode_slowdown.py", src="live")
    weights = at.selectbox(key="live_w_decode")
    assert not at.exception and "mlx-q6" in weights.options and weights.value == "mlx-q4"


# ---------------------------------------------------------------- families


def test_a_family_added_to_the_table_is_parsed_by_its_row_and_an_unknown_one_is_refused(
    monkeypatch,
):
    config = dict(geometry.load_preset("llama-3.2-1b")["config"], model_type="throwaway_llama")
    with pytest.raises(KvError, match="throwaway_llama"):
        geometry.parse_config(config)
    monkeypatch.setitem(
        families.FAMILIES,
        "throwaway_llama",
        families.Family("throwaway_llama", defaults={"head_dim": 32}),
    )
    g = geometry.parse_config({k: v for k, v in config.items() if k != "head_dim"})
    assert g.model_type == "throwaway_llama" and {layer.k_dim for layer in g.layers} == {
        32
    }  # the row's default applies


@pytest.mark.parametrize(
    "change, named",
    [
        (dict(windows={"mlx_lm": "layer_types|sometimes"}), "'sometimes'"),
        (dict(ffn="moe_mixtral"), "'moe_mixtral'"),
        (dict(attention_extras="all_bias"), "'all_bias'"),
        (dict(attention="linear_only"), "'linear_only'"),
    ],
)
def test_a_family_with_an_unknown_rule_or_layout_is_refused_naming_it(monkeypatch, change, named):
    config = dict(geometry.load_preset("llama-3.2-1b")["config"], model_type="throwaway_llama")
    monkeypatch.setitem(
        families.FAMILIES, "throwaway_llama", families.Family("throwaway_llama", **change)
    )
    with pytest.raises(KvError, match=named):
        geometry.parse_config(config)


def test_a_shared_expert_is_its_own_field_not_the_gated_query():
    """Qwen3-Next has both; a family with a gated query alone gets no shared expert (issue 15)."""
    config = geometry.load_preset("qwen3-next-80b-a3b")["config"]
    real = geometry.parse_config(config)
    h, inter = config["hidden_size"], config["shared_expert_intermediate_size"]
    moe_layers = config["num_hidden_layers"]
    with pytest.MonkeyPatch.context() as m:
        m.setitem(
            families.FAMILIES,
            "qwen3_next",
            dataclasses.replace(families.FAMILIES["qwen3_next"], shared_expert=False),
        )
        without = geometry.parse_config(config)
    assert real.params.total - without.params.total == moe_layers * (
        3 * h * inter + h
    )  # the expert and its gate


# ---------------------------------------------------------------- runtimes


@pytest.fixture
def throwaway_runtime(monkeypatch):
    """A runtime that counts tokens under the config's own window rules (as vLLM would), registered for one test."""
    rt = runtimes.TokenRuntime(
        "throwaway_rt", "throwaway_rt (a test's runtime)", "sliding_ignored", windows="reference"
    )
    monkeypatch.setitem(runtimes.RUNTIMES, rt.name, rt)
    return rt


def test_a_runtime_added_to_the_registry_reaches_the_engine_the_calculator_and_the_cli(
    throwaway_runtime, capsys
):
    g = geometry.preset_geometry("mistral-7b-v0.1", "throwaway_rt")
    assert (
        g.runtime == "throwaway_rt" and g.count("sliding") == 32
    )  # the reference rules it applies
    assert runtimes.runtime_of(g) is throwaway_runtime
    r = calculate(g, 10000, 1, KvSpec(), "bf16")
    assert r["kv_bytes"] == kv_bytes(g, 10000, KvSpec()) and r["runtime"] == "throwaway_rt"
    assert (
        calc_json(
            capsys, "--model", "mistral-7b-v0.1", "--context", "10000", "--runtime", "throwaway_rt"
        )["kv_bytes"]
        == r["kv_bytes"]
    )


def test_an_unknown_runtime_and_a_runtime_of_unknown_window_rules_are_refused(monkeypatch, capsys):
    assert (
        cli.main(["calc", "--model", "llama-3.2-1b", "--context", "100", "--runtime", "no_such_rt"])
        == 2
    )
    assert "'no_such_rt'" in capsys.readouterr().err
    rt = runtimes.TokenRuntime("odd_rt", "odd_rt", "sliding_ignored", windows="odd_rules")
    monkeypatch.setitem(runtimes.RUNTIMES, rt.name, rt)
    with pytest.raises(KvError, match="'odd_rules'"):
        geometry.preset_geometry("gemma-3-4b", "odd_rt")
