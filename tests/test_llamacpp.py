"""llama.cpp as a runtime: the caches real llama.cpp builds allocate, to the byte, and the rules behind them.

The acceptance sizes are the lines real llama.cpp builds printed (gpt-oss-20b: Apple M5, build 8164, logs in the
public repository ontouchstart/rabbit-holes, ggml-gpt-oss-20b-GGUF/; Qwen-7B-Chat: build 10121, -c 4096 -np 10,
q8_0; Gemma-2-2B-it: build 7445, llama-server without -np). The configs are the models' own config.json (presets).
"""

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.inputs import run_kvcore
from kvcore.capacity import calculator
from kvcore.capacity.memory_fit import plan_allowance
from kvcore.errors import KvError
from kvcore.inputs.config import parse_config
from kvcore.inputs.preset_files import load_preset
from kvcore.inputs.presets import preset_geometry
from kvcore.limits import MAX_CONTEXT
from kvcore.memory.formats import KvSpec
from kvcore.model.families import FAMILIES
from kvcore.runtimes import llamacpp_cache as llamacpp
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.runtimes.registry import RUNTIMES
from kvsite import i18n

ROOT = Path(__file__).resolve().parents[1]
MIB = 1024 * 1024
# llama-kv-cache.cpp's format string, verbatim (ggml-org/llama.cpp@3514e9f6, llama_kv_cache::llama_kv_cache)
LOG_FORMAT = "%s: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB"


kvcore = run_kvcore


def geometry(name, runtime="llama.cpp"):
    return preset_geometry(name, runtime)


def calc_json(*args):
    r = kvcore("calc", "--runtime", "llama.cpp", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def squeeze(line: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"\(\s+", "(", line))


# ---------------------------------------------------------------- acceptance: real logs, to the byte


def test_gpt_oss_20b_at_131072_tokens_ubatch_512():
    out = calc_json("--model", "gpt-oss-20b", "--context", "131072", "--kv-format", "f16")
    base, swa = out["caches"]
    assert base == {
        "name": "non-swa",
        "cells": 131072,
        "layers": 12,
        "streams": 1,
        "k_bytes": 1536 * MIB,
        "v_bytes": 1536 * MIB,
    }
    assert swa == {
        "name": "swa",
        "cells": 768,
        "layers": 12,
        "streams": 1,
        "k_bytes": 9 * MIB,
        "v_bytes": 9 * MIB,
    }
    assert out["kv_bytes"] == (3072 + 18) * MIB
    assert squeeze(out["log_lines"][0]).endswith(
        "size = 3072.00 MiB (131072 cells, 12 layers, 1/1 seqs), K (f16): 1536.00 MiB, V (f16): 1536.00 MiB"
    )
    assert squeeze(out["log_lines"][1]).endswith(
        "size = 18.00 MiB (768 cells, 12 layers, 1/1 seqs), K (f16): 9.00 MiB, V (f16): 9.00 MiB"
    )


def test_gpt_oss_20b_swa_cache_grows_with_the_micro_batch():
    out = calc_json("--model", "gpt-oss-20b", "--context", "131072", "--ubatch", "2048")
    swa = out["caches"][1]
    assert (swa["cells"], swa["k_bytes"] + swa["v_bytes"]) == (2304, 54 * MIB)


def test_qwen_7b_chat_mha_q8_0_ten_slots():
    out = calc_json(
        "--model", "qwen-7b-chat", "--context", "4096", "--sequences", "10", "--kv-format", "q8_0"
    )
    assert out["caches"] == [
        {
            "name": "kv",
            "cells": 512,
            "layers": 32,
            "streams": 10,
            "k_bytes": 680 * MIB,
            "v_bytes": 680 * MIB,
        }
    ]
    assert out["kv_bytes"] == 1360 * MIB
    assert squeeze(out["log_lines"][0]).endswith(
        "size = 1360.00 MiB (512 cells, 32 layers, 10/10 seqs), K (q8_0): 680.00 MiB, V (q8_0): 680.00 MiB"
    )


def test_gemma_2_2b_server_defaults_four_unified_slots():
    out = calc_json(
        "--model", "gemma-2-2b", "--context", "8192", "--sequences", "4", "--kv-unified"
    )
    assert [
        (c["name"], c["cells"], c["layers"], c["streams"], c["k_bytes"] + c["v_bytes"])
        for c in out["caches"]
    ] == [("non-swa", 8192, 13, 1, 416 * MIB), ("swa", 8192, 13, 1, 416 * MIB)]
    assert all(
        squeeze(line).endswith(
            "size = 416.00 MiB (8192 cells, 13 layers, 4/1 seqs), K (f16): 208.00 MiB, V (f16): 208.00 MiB"
        )
        for line in out["log_lines"]
    )
    # the same as llama-server's defaults with no -np
    engine = llamacpp.caches(geometry("gemma-2-2b"), 8192, options=llamacpp.server_defaults())
    assert [c.as_dict() for c in engine] == out["caches"]


def test_text_output_prints_llama_cpps_own_lines():
    r = kvcore("calc", "--model", "gpt-oss-20b", "--context", "131072", "--runtime", "llama.cpp")
    assert r.returncode == 0, r.stderr
    want = LOG_FORMAT % ("llama_kv_cache", 3072.0, 131072, 12, 1, 1, "f16", 1536.0, "f16", 1536.0)
    assert want in r.stdout.splitlines()[2]
    assert LOG_FORMAT % ("llama_kv_cache", 18.0, 768, 12, 1, 1, "f16", 9.0, "f16", 9.0) in r.stdout


def test_the_prose_example_reproduces_a_larger_than_asked_context():
    # -c 32768 -np 10: 3276 per stream, padded up to 3328 (33,280 cells in all, more than asked)
    caches = llamacpp.caches(
        geometry("qwen-7b-chat"), 32768, "f16", "f16", llamacpp.Options(sequences=10)
    )
    assert (caches[0].cells, caches[0].streams, caches[0].bytes) == (3328, 10, 16640 * MIB)


# ---------------------------------------------------------------- the cell rules, against an independent re-statement


# ggml type traits: (values per block, bytes per block)
GGML_BLOCKS = {
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "q8_0": (32, 34),
    "q4_0": (32, 18),
    "q4_1": (32, 20),
    "q5_0": (32, 22),
    "q5_1": (32, 24),
    "iq4_nl": (32, 18),
}


def ggml_pad(x, n):
    return (x + n - 1) & ~(n - 1)  # ggml.h: #define GGML_PAD(x, n) (((x) + (n) - 1) & ~((n) - 1))


def restated(n_ctx, n_seq, unified, n_swa, n_batch, n_ubatch, swa_full):
    """llama-context.cpp, llama-kv-cache.cpp and llama-kv-cache-iswa.cpp, line by line."""
    n_batch = min(n_ctx, n_batch)
    n_ubatch = min(n_batch, n_ubatch)
    n_ctx = ggml_pad(n_ctx, 256)
    n_ctx_seq = n_ctx if unified else ggml_pad(n_ctx // n_seq, 256)
    n_stream = 1 if unified else n_seq
    size_swa = ggml_pad(min(n_ctx_seq, n_swa * (n_seq if unified else 1) + n_ubatch), 256)
    return n_ctx_seq, n_stream, n_ctx_seq if swa_full else size_swa


@settings(max_examples=400, deadline=None)
@given(
    n_ctx=st.integers(1, 2_000_000),
    n_seq=st.integers(1, llamacpp.LLAMA_MAX_SEQ),
    unified=st.booleans(),
    n_swa=st.integers(1, 20_000),
    n_batch=st.integers(1, 8192),
    n_ubatch=st.integers(1, 8192),
    swa_full=st.booleans(),
)
def test_cells_streams_and_swa_size_follow_llama_cpp(
    n_ctx, n_seq, unified, n_swa, n_batch, n_ubatch, swa_full
):
    options = llamacpp.Options(n_seq, unified, n_batch, n_ubatch, swa_full)
    cells, streams = llamacpp.context_cells(n_ctx, options)
    want_cells, want_streams, want_swa = restated(
        n_ctx, n_seq, unified, n_swa, n_batch, n_ubatch, swa_full
    )
    assert (cells, streams) == (want_cells, want_streams)
    assert llamacpp.swa_cells(cells, n_swa, n_ctx, options) == want_swa
    assert cells % 256 == 0 and want_swa % 256 == 0 and want_swa <= cells


@settings(max_examples=100, deadline=None)
@given(
    n_ctx=st.integers(1, 300_000),
    n_seq=st.integers(1, 16),
    unified=st.booleans(),
    n_ubatch=st.integers(1, 4096),
    k=st.sampled_from(["f16", "q8_0", "q4_0", "q5_1", "iq4_nl"]),
    v=st.sampled_from(["f32", "bf16", "q4_1", "q5_0"]),
)
def test_gpt_oss_bytes_are_rows_times_cells_times_streams(n_ctx, n_seq, unified, n_ubatch, k, v):
    g = geometry("gpt-oss-20b")
    caches = llamacpp.caches(g, n_ctx, k, v, llamacpp.Options(n_seq, unified, ubatch=n_ubatch))
    cells, streams, swa = restated(n_ctx, n_seq, unified, 128, 2048, n_ubatch, False)
    width = 8 * 64  # 8 KV heads x 64
    row_k, row_v = (width // GGML_BLOCKS[t][0] * GGML_BLOCKS[t][1] for t in (k, v))
    assert [(c.cells, c.streams, c.k_bytes, c.v_bytes) for c in caches] == [
        (cells, streams, 12 * row_k * cells * streams, 12 * row_v * cells * streams),
        (swa, streams, 12 * row_k * swa * streams, 12 * row_v * swa * streams),
    ]


@pytest.mark.parametrize(
    "used, cells, read",
    [
        (1, 4096, 256),
        (256, 4096, 256),
        (257, 4096, 512),
        (700, 4096, 768),
        (5000, 4096, 4096),
        (10, 128, 128),
    ],
)
def test_decode_reads_used_cells_padded_to_256(used, cells, read):
    assert llamacpp.read_cells(used, cells) == read


def test_the_micro_batch_is_clamped_by_the_batch_and_the_context():
    assert (
        llamacpp.micro_batch(131072, llamacpp.Options(ubatch=4096)) == 2048
    )  # -b 2048 caps -ub 4096
    assert llamacpp.micro_batch(300, llamacpp.Options()) == 300  # n_batch = min(n_ctx, n_batch)
    g = geometry("gpt-oss-20b")
    small = llamacpp.caches(g, 131072, options=llamacpp.Options(batch=256, ubatch=2048))[1]
    assert small.cells == 512  # PAD256(128 + 256)


def test_swa_full_makes_the_window_cache_full_size():
    caches = llamacpp.caches(
        geometry("gpt-oss-20b"), 131072, options=llamacpp.Options(swa_full=True)
    )
    assert caches[0].cells == caches[1].cells == 131072


def test_llama_server_defaults_are_four_unified_slots():
    o = llamacpp.server_defaults()
    assert (o.sequences, o.unified, o.batch, o.ubatch) == (4, True, 2048, 512)


# ---------------------------------------------------------------- ggml block sizes


def test_ggml_block_sizes_from_their_struct_layouts():
    half, qk = 2, 32  # ggml_half; QK4_0 = QK4_1 = QK5_0 = QK5_1 = QK8_0 = QK4_NL = 32
    layouts = {  # ggml-common.h static_asserts
        "q8_0": half + qk,
        "q4_0": half + qk // 2,
        "q4_1": 2 * half + qk // 2,
        "q5_0": half + 4 + qk // 2,
        "q5_1": 2 * half + 4 + qk // 2,
        "iq4_nl": half + qk // 2,
    }
    assert (
        {name: llamacpp.row_bytes(name, 32) for name in layouts}
        == layouts
        == {"q8_0": 34, "q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24, "iq4_nl": 18}
    )
    assert llamacpp.row_bytes("q8_0", 4096) == 4096 // 32 * 34
    assert [llamacpp.row_bytes(t, 64) for t in ("f32", "fp32", "f16", "fp16", "bf16")] == [
        256,
        256,
        128,
        128,
        128,
    ]


def test_a_row_that_does_not_fill_whole_blocks_is_refused_as_ggml_asserts():
    with pytest.raises(KvError) as e:
        llamacpp.row_bytes("q4_0", 80)
    assert e.value.code == "format_block" and "multiple of 32" in str(e.value)


@pytest.mark.parametrize("name", ["mlx-q4", "fp8", "turbo3"])
def test_formats_llama_cpp_cannot_store_are_refused(name):
    with pytest.raises(KvError) as e:
        llamacpp.row_bytes(name, 128)
    assert e.value.code == "llamacpp_format" and "q5_1" in str(e.value)
    r = kvcore(
        "calc",
        "--model",
        "llama-3.2-1b",
        "--context",
        "100",
        "--runtime",
        "llama.cpp",
        "--kv-format",
        name,
    )
    assert r.returncode == 2 and "not a llama.cpp KV cache type" in r.stderr


def test_llama_cpp_spellings_name_the_same_formats():
    assert KvSpec("f16", "f32") == KvSpec("fp16", "fp32")


# ---------------------------------------------------------------- families under llama.cpp


def test_phi3_window_is_disabled_by_llama_cpp_ignored_by_mlx_lm_and_applied_by_transformers():
    config = {
        "model_type": "phi3",
        "hidden_size": 3072,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "intermediate_size": 8192,
        "vocab_size": 32064,
        "rms_norm_eps": 1e-5,
        "sliding_window": 2047,
    }
    by_runtime = {rt: parse_config(config, "phi3", RUNTIMES[rt]) for rt in RUNTIMES}
    assert by_runtime["llama.cpp"].count("full") == by_runtime["mlx_lm"].count("full") == 32
    assert by_runtime["reference"].count("sliding") == 32
    assert [code for code, _ in by_runtime["llama.cpp"].note_codes] == ["sliding_disabled"]
    assert [c.name for c in llamacpp.caches(by_runtime["llama.cpp"], 4096)] == ["kv"]


def test_gemma2_alternates_from_a_sliding_first_layer_except_in_mlx_lm():
    kinds = [layer.kind for layer in geometry("gemma-2-2b").layers]
    assert kinds[:3] == ["sliding", "full", "sliding"] and kinds.count("sliding") == 13
    assert geometry("gemma-2-2b", "mlx_lm").count("full") == 26


def test_llama_2_without_num_key_value_heads_is_full_multi_head_attention():
    config = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "intermediate_size": 11008,
        "vocab_size": 32000,
        "rms_norm_eps": 1e-5,
    }
    g = parse_config(config, "llama-2-7b", RUNTIMES["llama.cpp"])
    assert {(layer.kv_heads, layer.k_dim) for layer in g.layers} == {(32, 128)}
    # -c 4096 f16: 32 layers x 2 x 4096 values x 2 B x 4096 cells = 2048 MiB, as llama.cpp logs for Llama-2-7B
    assert llamacpp.kv_bytes(g, 4096) == 2048 * MIB


def test_qwen_v1_reads_both_spellings_of_its_config():
    old = load_preset("qwen-7b-chat")["config"]
    renames = {
        "n_embd": "hidden_size",
        "n_head": "num_attention_heads",
        "n_layer": "num_hidden_layers",
        "ffn_hidden_size": "intermediate_size",
    }
    new = {renames.get(k, k): v for k, v in old.items()}
    a, b = parse_config(old, "old", MLX_LM), parse_config(new, "new", MLX_LM)
    assert a.layers == b.layers and a.params == b.params
    assert {(layer.kv_heads, layer.k_dim) for layer in a.layers} == {(32, 128)}


def test_mla_and_recurrent_layers_as_llama_cpp_stores_them():
    deepseek = llamacpp.caches(geometry("deepseek-v3"), 4096)
    assert [(c.name, c.k_bytes // (4096 * 61), c.v_bytes // (4096 * 61)) for c in deepseek] == [
        ("kv", 576 * 2, 0)
    ]  # no V tensor
    hybrid = llamacpp.caches(
        geometry("qwen3-next-80b-a3b"), 4096, options=llamacpp.Options(sequences=2)
    )
    assert [c.name for c in hybrid] == ["kv", "recurrent"]
    assert hybrid[1].cells == 2 and len(hybrid[0].layers) + len(hybrid[1].layers) == 48


# ---------------------------------------------------------------- unknown model families, every runtime


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_an_unknown_model_type_exits_2_naming_it(tmp_path, runtime):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(dict(load_preset("llama-3.2-1b")["config"], model_type="falcon_h9")))
    r = kvcore("calc", "--model", str(path), "--context", "100", "--runtime", runtime)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "'falcon_h9'" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_an_unknown_model_type_has_a_japanese_sentence():
    with pytest.raises(KvError) as e:
        parse_config({"model_type": "falcon_h9"}, "config.json", MLX_LM)
    text = i18n.error_text("ja", e.value)
    assert e.value.code == "model_unknown" and "falcon_h9" in text and "です" in text


def test_every_family_has_a_known_window_rule():
    from kvcore.model.layers import WINDOW_RULES, check_family

    rules = set(WINDOW_RULES)
    for family in FAMILIES.values():
        assert set(family.windows) <= set(RUNTIMES)
        assert all(set(rule.split("|")) <= rules for rule in family.windows.values()), (
            family.model_type
        )
        check_family(family)  # its attention kind and layout codes too


# ---------------------------------------------------------------- the calculator's verdict and levers under llama.cpp


def test_calculate_takes_the_runtime_and_its_options():
    g = geometry("gpt-oss-20b")
    r = calculator.calculate(g, 131072, 1, KvSpec(), "bf16", llamacpp.Options(ubatch=2048))
    assert r.kv_bytes == (3072 + 54) * MIB and r.runtime_report["caches"][1]["cells"] == 2304
    assert sum(row["kv_bytes"] for row in r.per_layer) == r.kv_bytes


def plan_fits(g, context, spec, n, weights, available, options=None) -> str:
    """The verdict of llama.cpp's whole plan (model, KV, output, compute buffers) against `available`."""
    plan = RUNTIMES["llama.cpp"].memory_plan(g, context, spec, n, options, weights, "auto")
    allowance = plan_allowance(plan)
    return calculator.verdict(plan["total_bytes"], available, allowance).status


def test_llama_cpp_verdict_is_its_plan_with_no_flat_margin():
    g = geometry("llama-3.1-8b")
    r = calculator.calculate(g, 32768, 1, KvSpec(), "gguf-q4_k_m")
    need, allowance = r.need_bytes, r.fit_allowance_bytes
    assert need == r.plan["total_bytes"] > r.weights_bytes + r.kv_bytes
    assert calculator.verdict(need, need + allowance, allowance).status == "fits"
    assert calculator.verdict(need, need + allowance - 1, allowance).status == "tight"
    assert calculator.verdict(need, need - allowance - 1, allowance).status == "no"
    # mlx_lm is judged by its own plan (generate_step's peak); the reference runtime, without one, counts weights +
    # KV only and never calls them a fit
    m = calculator.calculate(preset_geometry("llama-3.1-8b", "mlx_lm"), 32768, 1, KvSpec())
    assert m.need_bytes == m.plan["total_bytes"] > m.weights_bytes + m.kv_bytes
    assert m.plan["log_lines"][0].startswith("Peak memory: ")
    ref = calculator.calculate(preset_geometry("llama-3.1-8b", "reference"), 32768, 1, KvSpec())
    assert ref.plan is None and ref.fit_allowance_bytes is None
    assert ref.need_bytes == ref.weights_bytes + ref.kv_bytes
    assert calculator.verdict(ref.need_bytes, ref.need_bytes).status == "unplanned"
    assert calculator.verdict(ref.need_bytes, ref.need_bytes - 1).status == "no"


@pytest.mark.parametrize("name", ["gpt-oss-20b", "qwen-7b-chat", "gemma-2-2b", "deepseek-v3"])
def test_llama_cpp_largest_context_fits_and_one_more_token_does_not(name):
    g, spec = geometry(name), KvSpec("q8_0", "q8_0")
    weights, available = 1 << 30, 12 << 30
    t = calculator.max_context(g, spec, 2, weights, available)
    assert 0 < t < MAX_CONTEXT
    assert plan_fits(g, t, spec, 2, weights, available) == "fits"
    assert plan_fits(g, t + 1, spec, 2, weights, available) != "fits"


def test_llama_cpp_most_slots_each_get_the_context_and_one_more_does_not_fit():
    g, spec, weights, available = geometry("qwen-7b-chat"), KvSpec(), 15 << 30, 24 << 30
    s = calculator.max_sequences(g, spec, 4096, weights, available)

    def fits(n):
        return plan_fits(g, 4096 * n, spec, n, weights, available) == "fits"

    assert s >= 1 and fits(s) and not fits(s + 1)


def test_llama_cpp_suggests_only_types_it_can_store():
    g = geometry("qwen-7b-chat")
    ok = calculator.formats_that_fit(g, 32768, 1, 15 << 30, 24 << 30, KvSpec())
    assert ok and set(ok) <= set(calculator.runtime_formats(g)) and "mlx-q4" not in ok


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_every_preset_has_a_verdict_and_levers_under_every_runtime(runtime):
    from kvcore.inputs.preset_files import preset_names

    fmt = "q8_0" if "q8_0" in calculator.runtime_formats(runtime) else "fp16"  # mlx_lm: no q8_0
    spec = KvSpec(fmt, fmt)
    for name in preset_names():
        g = preset_geometry(name, runtime)
        r = calculator.calculate(g, 8192, 2, spec)
        assert r.kv_bytes > 0 and r.runtime == runtime, name
        weights = r.weights_bytes
        available = (  # room for four times this cache (and, with a plan, its other buffers twice)
            weights
            + 4 * r.kv_bytes
            + 2 * (r.need_bytes - weights - r.kv_bytes + (r.fit_allowance_bytes or 0))
            + 1
        )
        assert calculator.max_context(g, spec, 2, weights, available) >= 8192, name
        assert calculator.max_sequences(g, spec, 8192, weights, available) >= 2, name


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sequences", "300"], "1 to 256 sequences (-np), not 300"),
        (["--ubatch", "0"], "ubatch must be a whole number from 1 to"),
    ],
)
def test_bad_llama_cpp_settings_get_one_line_and_exit_2(args, message):
    r = kvcore(
        "calc", "--model", "gemma-2-2b", "--context", "8192", "--runtime", "llama.cpp", *args
    )
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_llama_cpp_settings_without_the_llama_cpp_runtime_are_refused():
    r = kvcore("calc", "--model", "gemma-2-2b", "--context", "8192", "--kv-unified")
    assert r.returncode == 2 and "add --runtime llama.cpp" in r.stderr
