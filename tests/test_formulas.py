"""The article's figures, exactly, from the presets and the formulas."""

import pytest

from kvcore.inputs.config import parse_config
from kvcore.inputs.preset_files import load_preset
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.allocsim import nbytes, simulate
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import (
    bytes_per_token,
    kv_bytes,
    kv_bytes_per_token,
    kv_prefill_peak_bytes,
    layer_kv_bytes,
    prefill_chunks,
    weights_bytes,
)
from kvcore.model.geometry import Layer
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.units import GIB, KIB, MIB


def preset(name, **kw):
    return preset_geometry(name, **kw)


def test_llama_1b_fp16_costs_32_kib_per_token():
    assert kv_bytes_per_token(preset("llama-3.2-1b")) == 32 * KIB


def test_llama_1b_at_32k_is_exactly_1_gib():
    assert kv_bytes(preset("llama-3.2-1b"), 32768) == GIB


@pytest.mark.parametrize("tokens, allocated_mib, used_mib", [(256, 8.0, 8.000), (257, 16.0, 8.031)])
def test_allocated_jumps_8_to_16_mib_at_257_while_used_grows_by_one_256th(
    tokens, allocated_mib, used_mib
):
    g = preset("llama-3.2-1b")
    layer = g.layers[0]
    capacity = simulate("KVCache", [1] * tokens).capacity
    allocated = g.num_layers * nbytes(capacity, 128, 128, layer.kv_heads)
    assert allocated / MIB == allocated_mib
    assert round(kv_bytes(g, tokens) / MIB, 3) == used_mib


def test_llama_3_1_8b_fp16_at_131072_tokens_is_exactly_16_gib():
    assert kv_bytes(preset("llama-3.1-8b"), 131072) == 16 * GIB


def test_gqa_8_of_32_heads_is_a_quarter_of_mha():
    g = preset("llama-3.2-1b")
    config = dict(load_preset("llama-3.2-1b")["config"])
    del config["num_key_value_heads"]  # absent -> full multi-head attention
    mha = parse_config(config, "config.json", MLX_LM)
    assert mha.layers[0].kv_heads == 32
    assert kv_bytes(g, 4096) * 4 == kv_bytes(mha, 4096)


def test_qwen3_4b_uses_its_explicit_head_dim_128_not_hidden_over_heads():
    g = preset("qwen3-4b")
    assert g.hidden_size // g.num_attention_heads == 80
    assert {layer.k_dim for layer in g.layers} == {128}


@pytest.mark.parametrize(
    "fmt, scale_dtype, expected",
    [
        ("mlx-q8", "fp16", 1088),
        ("mlx-q4", "fp16", 576),
        ("mlx-q8", "fp32", 1152),
        ("mlx-q4", "fp32", 640),
        ("fp16", "fp16", 2048),
        ("fp32", "fp16", 4096),
        ("fp8", "fp16", 1024),
        ("q8_0", "fp16", 8 * 2 * 2 * 34),
        ("q4_0", "fp16", 8 * 2 * 2 * 18),
    ],
)
def test_bytes_per_token_per_layer_for_8_kv_heads_of_64(fmt, scale_dtype, expected):
    layer = Layer(0, "full", 8, 64, 64)
    assert bytes_per_token(layer, KvSpec(fmt, fmt, activation_dtype=scale_dtype)) == expected


@pytest.mark.parametrize(
    "group, ratio8, ratio4",
    [(32, 0.5625, 0.3125), (64, 0.53125, 0.28125), (128, 0.515625, 0.265625)],
)
def test_mlx_quantized_ratio_to_fp16_depends_on_group_size(group, ratio8, ratio4):
    layer = Layer(0, "full", 8, 128, 128)
    fp16 = bytes_per_token(layer, KvSpec())
    assert bytes_per_token(layer, KvSpec("mlx-q8", "mlx-q8", group)) / fp16 == ratio8
    assert bytes_per_token(layer, KvSpec("mlx-q4", "mlx-q4", group)) / fp16 == ratio4


def test_k_and_v_formats_are_chosen_separately():
    layer = Layer(0, "full", 8, 128, 128)
    mixed = bytes_per_token(layer, KvSpec("fp16", "mlx-q4"))
    assert mixed == 8 * (256 + 64 + 8)


@pytest.mark.parametrize(
    "fmt, bits_at_128, bits_at_64",
    [("turbo4", 4.25, 8.5), ("turbo3", 3.125, 6.25), ("turbo2", 2.125, 4.25)],
)
def test_turbo_formats_use_128_value_blocks_and_pad_head_dim_64(fmt, bits_at_128, bits_at_64):
    from kvcore.memory.formats import get_format

    assert get_format(fmt).bits_per_value(128) == bits_at_128
    assert get_format(fmt).bits_per_value(64) == bits_at_64


def test_deepseek_v3_caches_one_576_value_latent_per_token_per_layer_with_no_factor_2():
    g = preset("deepseek-v3")
    assert g.num_layers == 61 and {x.kind for x in g.layers} == {"mla"}
    assert kv_bytes_per_token(g) == 61 * 576 * 2


def test_a_sliding_window_layer_never_counts_more_than_its_window():
    g = preset("gemma-3-4b")
    sliding = [x for x in g.layers if x.kind == "sliding"]
    assert sliding and all(x.window == 1024 for x in sliding)
    for context in (10, 1024, 1025, 131072):
        for layer in sliding:
            assert layer_kv_bytes(layer, context, KvSpec()) == min(context, 1024) * bytes_per_token(
                layer, KvSpec()
            )


def test_gemma3_every_sixth_layer_is_global():
    g = preset("gemma-3-4b")
    assert [x.index for x in g.layers if x.kind == "full"] == [5, 11, 17, 23, 29]


def test_linear_attention_state_is_constant_in_context():
    g = preset("qwen3-next-80b-a3b")
    linear = [x for x in g.layers if x.kind == "linear"]
    assert len(linear) == 36 and g.count("full") == 12
    for layer in linear:
        assert layer_kv_bytes(layer, 1, KvSpec()) == layer_kv_bytes(layer, 10**6, KvSpec()) > 0


def test_hybrid_growth_comes_only_from_full_layers():
    g = preset("qwen3-next-80b-a3b")
    full = [x for x in g.layers if x.kind == "full"]
    assert kv_bytes(g, 2001) - kv_bytes(g, 2000) == sum(bytes_per_token(x, KvSpec()) for x in full)


def test_mistral_v01_window_depends_on_the_runtime():
    mlx = preset("mistral-7b-v0.1")
    ref = preset("mistral-7b-v0.1", runtime="reference")
    assert mlx.count("full") == 32 and ref.count("sliding") == 32
    assert kv_bytes(ref, 32768) == kv_bytes(ref, 4096) < kv_bytes(mlx, 32768)
    assert any("mlx_lm" in n for n in mlx.notes)


def test_qwen2_5_window_is_off_unless_use_sliding_window():
    assert preset("qwen2.5-7b", runtime="reference").count("sliding") == 0


def test_concurrent_sequences_multiply_the_cache():
    g = preset("llama-3.1-8b")
    assert kv_bytes(g, 8000, sequences=4) == 4 * kv_bytes(g, 8000)


def test_doubling_context_doubles_kv_memory():
    g = preset("llama-3.1-8b")
    assert kv_bytes(g, 16000) == 2 * kv_bytes(g, 8000)


def test_prefill_chunks_follow_generate_step():
    assert prefill_chunks(4096) == [2048, 2047, 1]
    assert prefill_chunks(1024) == [1023, 1]
    assert prefill_chunks(1) == [1]


def test_prefill_peak_of_a_sliding_layer_exceeds_its_window():
    g = preset("gemma-3-4b")
    sliding = next(x for x in g.layers if x.kind == "sliding")
    peak = kv_prefill_peak_bytes(g, 8192)
    assert peak > kv_bytes(g, 8192)
    # after a 2048-token chunk the rotating cache holds window + 2048 - 1 tokens
    capacities = {
        s.capacity
        for s in __import__("kvcore.memory.allocsim", fromlist=["trace"]).trace(
            "RotatingKVCache", prefill_chunks(8192), sliding.window
        )
    }
    assert max(capacities) == 1024 + 2048 - 1


def test_full_attention_model_has_no_separate_prefill_peak():
    g = preset("llama-3.2-1b")
    assert kv_prefill_peak_bytes(g, 5000) == kv_bytes(g, 5000)


def test_weights_of_llama_1b_at_4_bit_group_64_are_4_5_bits_per_parameter():
    g = preset("llama-3.2-1b")
    assert g.params.total == 1_235_814_400
    # norms stay fp16, so slightly above 4.5 bits
    assert weights_bytes(g, "mlx-q4") == pytest.approx(g.params.total * 4.5 / 8, rel=1e-3)
    assert round(weights_bytes(g, "mlx-q4") / 1e9, 3) == 0.695


def test_moe_memory_needs_all_experts_but_decode_reads_the_active_ones():
    g = preset("qwen3-30b-a3b")
    assert 30e9 < g.params.total < 31e9
    assert 3.0e9 < g.active_params.total < 3.5e9
    assert weights_bytes(g, "bf16", active=True) < weights_bytes(g, "bf16") / 8
