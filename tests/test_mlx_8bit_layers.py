"""A family whose mlx_lm quantization keeps some matrices at 8 bits (kvcore.model.families.Family.mlx_8bit) is
sized as mlx_lm stores it: granite's o_proj, down_proj and lm_head at 8 bits in a 4-bit model (mlx-lm v0.32.2,
mlx_lm/models/granite.py `quant_predicate`), held to the bytes of mlx_lm's own model quantized by its own
mlx_lm.utils.quantize_model (random weights, CPU).

Granite is a family of this test only (as tests/test_extension_points.py adds throw-away ones): the family table
takes a model family with a preset (its config.json at a pinned revision) and a GGUF architecture, which granite
does not have here yet."""

from __future__ import annotations

import pytest

from kvcore.errors import KvError
from kvcore.inputs.config import parse_config
from kvcore.memory.formulas import weights_bytes
from kvcore.model.families import FAMILIES, Family
from kvcore.runtimes.mlx_lm import MLX_LM


@pytest.fixture(autouse=True)
def granite(monkeypatch):
    """IBM Granite 3 as one row of the family table: Llama's layers (head width hidden / heads), its three 8-bit
    matrices under mlx_lm."""
    row = Family(
        "granite",
        tie_default=True,  # mlx_lm's granite.ModelArgs default
        attention_extras="llama_bias",
        ffn="llama",
        mlx_8bit=("o_proj", "down_proj", "lm_head"),
    )
    monkeypatch.setitem(FAMILIES, "granite", row)
    return row


# a scaled-down Granite 3 config (the fields mlx_lm's granite.ModelArgs reads)
GRANITE = {
    "model_type": "granite",
    "hidden_size": 128,
    "num_hidden_layers": 3,
    "intermediate_size": 256,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5,
    "vocab_size": 512,
    "logits_scaling": 8.0,
    "attention_multiplier": 0.015625,
    "embedding_multiplier": 12.0,
    "residual_multiplier": 0.22,
    "max_position_embeddings": 4096,
    "attention_bias": False,
    "mlp_bias": False,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
}


def test_granites_8bit_matrices_cost_more_than_a_plain_4bit_count():
    """o_proj (4 heads x 32 x 128), down_proj (256 x 128) per layer and the untied lm_head (512 x 128) at 8 bits:
    each of their values costs 1 + 4/64 bytes instead of 0.5 + 4/64."""
    g = parse_config(GRANITE, "granite", MLX_LM)
    eight = 3 * (128 * 128 + 256 * 128) + 512 * 128
    assert g.params.matrix_8bit == eight
    plain = parse_config({**GRANITE, "model_type": "llama"}, "llama", MLX_LM)
    assert plain.params.total == g.params.total and plain.params.matrix_8bit == 0
    assert weights_bytes(g, "mlx-q4") - weights_bytes(plain, "mlx-q4") == eight // 2
    assert weights_bytes(g, "bf16") == weights_bytes(plain, "bf16")  # unquantized: no difference
    tied = parse_config({**GRANITE, "tie_word_embeddings": True}, "granite", MLX_LM)
    assert tied.params.matrix_8bit == eight - 512 * 128  # the embedding stays at the asked bits


def test_a_family_keeping_an_unknown_matrix_at_8_bits_is_refused_by_name():
    with pytest.raises(KvError, match="'q_proj'"):
        Family("throwaway", mlx_8bit=("q_proj",))
    assert all(not f.mlx_8bit for name, f in FAMILIES.items() if name != "granite")


@pytest.mark.mlx
@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("bits", [4, 8, 2])
def test_granite_weight_bytes_equal_mlx_lms_own_quantized_model(tied, bits):
    mx = pytest.importorskip("mlx.core")
    pytest.importorskip("mlx_lm")
    from mlx.utils import tree_flatten
    from mlx_lm.utils import _get_classes, quantize_model

    config = {**GRANITE, "tie_word_embeddings": tied}
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(dict(config)))
    model.set_dtype(mx.float16)
    model, _ = quantize_model(model, dict(config), group_size=64, bits=bits)
    mx.eval(model.parameters())
    real = sum(p.nbytes for _, p in tree_flatten(model.parameters()))
    g = parse_config(config, "granite", MLX_LM)
    assert weights_bytes(g, f"mlx-q{bits}") == real
    assert g.params.total == sum(
        p.size
        for _, p in tree_flatten(model_class(args_class.from_dict(dict(config))).parameters())
    )
