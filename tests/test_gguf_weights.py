"""GGUF weight formats (kvcore.memory.weight_formats): ggml's block layouts and llama-quant.cpp's mixes."""

import pytest

from kvcore.errors import KvError
from kvcore.inputs.presets import preset_geometry
from kvcore.memory import weight_formats as gw
from kvcore.memory.formulas import ALL_WEIGHT_FORMATS, weights_bytes


def test_block_layouts_are_ggmls_own():
    gguf = pytest.importorskip("gguf")
    for name, layout in gw.GGML_BLOCKS.items():
        assert tuple(gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]]) == layout, name


def test_the_formats_users_download_are_in_the_one_weight_format_list():
    for name in ("gguf-q8_0", "gguf-q4_0", "gguf-q4_k_m", "gguf-q5_k_m", "gguf-q6_k", "gguf-mxfp4"):
        assert name in ALL_WEIGHT_FORMATS
    assert "a mix" in gw.GGUF_FORMATS["gguf-q4_k_m"].description
    assert gw.GGUF_FORMATS["gguf-q6_k"].bits_per_weight == 6.5625
    assert gw.GGUF_FORMATS["gguf-mxfp4"].bits_per_weight == 4.25


def test_use_more_bits_picks_the_first_and_last_eighth_and_every_third_layer_between():
    picked = [i for i in range(32) if gw.use_more_bits(i, 32)]
    assert picked == [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]


def test_a_row_that_does_not_fill_k_blocks_falls_back_as_llama_quant_does():
    assert (
        gw.tensor_bytes("Q4_K", 1, 2880) == 2880 // 32 * 22
    )  # Q4_K -> Q5_0 (gpt-oss's hidden size 2880)
    assert gw.tensor_bytes("Q6_K", 1, 2880) == 2880 // 32 * 34  # Q6_K -> Q8_0
    assert gw.tensor_bytes("Q4_K", 2, 4096) == 2 * 16 * 144


def test_the_mixes_sit_between_their_base_type_and_q6_k():
    g = preset_geometry("llama-3.1-8b")
    q4km, q6k, q4_0 = (weights_bytes(g, f) for f in ("gguf-q4_k_m", "gguf-q6_k", "gguf-q4_0"))
    assert q4_0 < q4km < q6k
    assert weights_bytes(g, "gguf-q5_k_m") < q6k
    assert weights_bytes(g, "gguf-q8_0") > q6k


def test_mxfp4_packs_only_routed_experts():
    dense = preset_geometry("llama-3.1-8b")
    assert weights_bytes(dense, "gguf-mxfp4") == weights_bytes(
        dense, "gguf-q8_0"
    )  # no experts: all Q8_0
    moe = preset_geometry("gpt-oss-20b")
    assert weights_bytes(moe, "gguf-mxfp4") < 0.6 * weights_bytes(moe, "gguf-q8_0")
    assert weights_bytes(moe, "gguf-mxfp4", active=True) < weights_bytes(moe, "gguf-mxfp4") / 3


def test_an_unknown_gguf_format_is_refused_with_the_list():
    with pytest.raises(KvError, match="gguf-q4_k_m"):
        gw.weights_bytes(preset_geometry("llama-3.2-1b"), "gguf-q3_k_s")
