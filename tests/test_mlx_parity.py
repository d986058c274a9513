"""The engine against the real mlx_lm code (mlx-lm 0.32.2, CPU backend, no mocks).

1. kvcore.memory.allocsim reproduces the capacity, offset and `.nbytes` of mlx_lm's cache classes.
2. Per layer, kvcore.memory.formulas.layer_kv_bytes equals what a random-weight mlx_lm model of each
   preset's family (scaled down, same layer pattern and cache dimensions) actually caches.
3. The parameter counts and the mlx-q4 weight bytes equal those of the same mlx_lm models.
Everything runs in float32 on the CPU (fp16 matmuls are pathologically slow there).
"""

from __future__ import annotations

import copy

import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from mlx.utils import tree_flatten  # noqa: E402
from mlx_lm.models.cache import (  # noqa: E402
    ArraysCache,
    KVCache,
    QuantizedKVCache,
    RotatingKVCache,
    make_prompt_cache,
)
from mlx_lm.utils import _get_classes, quantize_model  # noqa: E402

from kvcore.inputs.config import parse_config  # noqa: E402
from kvcore.inputs.preset_files import load_preset, preset_names  # noqa: E402
from kvcore.inputs.presets import preset_geometry  # noqa: E402
from kvcore.memory import allocsim  # noqa: E402
from kvcore.memory.formats import KvSpec, get_format  # noqa: E402
from kvcore.memory.formulas import layer_kv_bytes, state_bytes, weights_bytes  # noqa: E402
from kvcore.model.families import FAMILIES, family_for  # noqa: E402
from kvcore.runtimes.mlx_lm import MLX_LM  # noqa: E402

pytestmark = pytest.mark.mlx

HEADS, DIM = 2, 64  # allocation tests: random K/V shaped (1, HEADS, S, DIM), float32


# ---------------------------------------------------------------- 1. allocation simulator


def _real_cache(cls: str, bits: int | None = None, max_size: int | None = None, keep: int = 0):
    if cls == "KVCache":
        return KVCache()
    if cls == "QuantizedKVCache":
        return QuantizedKVCache(group_size=64, bits=bits)
    return RotatingKVCache(max_size=max_size, keep=keep)


def _feed(cache, updates: list[int]) -> None:
    for n in updates:
        k, v = mx.random.normal((1, HEADS, n, DIM)), mx.random.normal((1, HEADS, n, DIM))
        mx.eval(cache.update_and_fetch(k, v))


def _capacity(cache) -> int:
    return cache.keys[0].shape[-2] if isinstance(cache, QuantizedKVCache) else cache.keys.shape[2]


CACHE_CASES = [
    ("KVCache", None, None, 0),
    ("QuantizedKVCache", 4, None, 0),
    ("QuantizedKVCache", 8, None, 0),
] + [("RotatingKVCache", None, m, keep) for m in (64, 256, 512) for keep in (0, 4)]
UPDATES = st.lists(
    st.one_of(st.integers(1, 600), st.just(1), st.integers(2, 40)), min_size=1, max_size=12
)


@pytest.mark.parametrize("cls,bits,max_size,keep", CACHE_CASES)
@settings(max_examples=40, deadline=None)
@given(updates=UPDATES)
def test_allocsim_matches_real_cache(cls, bits, max_size, keep, updates):
    cache = _real_cache(cls, bits, max_size, keep)
    _feed(cache, updates)
    sim = allocsim.simulate(cls, updates, max_size=max_size, keep=keep)
    assert (sim.capacity, sim.offset) == (_capacity(cache), cache.offset)
    fmt = get_format(f"mlx-q{bits}" if bits else "fp32")
    row = fmt.row_bytes(DIM, 64, scale_dtype="fp32")
    assert allocsim.nbytes(sim.capacity, row, row, HEADS) == cache.nbytes


@pytest.mark.parametrize(
    "cls,max_size,updates,capacity",
    [
        ("KVCache", None, [1, 256], 257),
        ("KVCache", None, [300, 300], 812),
        ("KVCache", None, [256, 1], 512),
        ("RotatingKVCache", 512, [1000], 1000),
        ("RotatingKVCache", 512, [1000, 1], 512),
    ],
)
def test_allocsim_documented_cases(cls, max_size, updates, capacity):
    cache = _real_cache(cls, max_size=max_size, keep=4)
    _feed(cache, updates)
    assert _capacity(cache) == capacity
    assert allocsim.simulate(cls, updates, max_size=max_size, keep=4).capacity == capacity


# ---------------------------------------------------------------- scaled-down presets

# Per preset: what to shrink. Kept: the layer pattern (one period), num_key_value_heads, head_dim,
# kv_lora_rank / qk_rope_head_dim and the linear-attention heads. Windows shrink to 64 so that
# a few hundred tokens cross them. Quantized dimensions are multiples of 64.
SMALL = dict(hidden_size=256, intermediate_size=256, vocab_size=512)
SCALE: dict[str, dict] = {
    "llama-3.2-1b": dict(SMALL, num_attention_heads=8, num_hidden_layers=2),
    # mlx_lm's qwen2 derives head_dim from hidden_size / heads: 4 heads x 128 keeps head_dim 128
    "qwen2.5-7b": dict(SMALL, hidden_size=512, num_attention_heads=4, num_hidden_layers=2),
    "qwen3-4b": dict(SMALL, num_attention_heads=8, num_hidden_layers=2),
    "qwen3-30b-a3b": dict(
        SMALL,
        num_attention_heads=4,
        num_hidden_layers=2,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=128,
    ),
    # attention heads, KV heads and head_dim stay at the (absent -> default) values of the real config
    "gemma-3-4b": dict(SMALL, num_hidden_layers=6, sliding_window=64),
    "gpt-oss-20b": dict(
        SMALL,
        num_attention_heads=8,
        num_hidden_layers=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        experts_per_token=2,
        sliding_window=64,
    ),
    "deepseek-v3": dict(
        SMALL,
        num_attention_heads=4,
        num_key_value_heads=4,
        num_hidden_layers=2,
        first_k_dense_replace=1,
        q_lora_rank=128,
        n_routed_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=128,
        n_group=2,
        topk_group=1,
    ),
    "mistral-7b-v0.1": dict(
        SMALL, num_attention_heads=8, head_dim=128, num_hidden_layers=2, sliding_window=64
    ),
    # mlx_lm's gemma2.py caches every layer in full (its window is ignored); heads, KV heads and head_dim stay real
    "gemma-2-2b": dict(SMALL, num_hidden_layers=2, sliding_window=64),
    # Phi-3: mlx_lm's phi3.py caches every layer in full (sliding_window ignored); fused qkv_proj and gate_up_proj
    "phi-3-mini-4k": dict(
        SMALL, num_attention_heads=4, num_key_value_heads=4, num_hidden_layers=2, sliding_window=64
    ),
    # Qwen v1: 2 heads x kv_channels 128 = hidden_size 256 (mlx_lm's c_proj maps hidden_size -> heads x kv_channels)
    "qwen-7b-chat": dict(SMALL, num_attention_heads=2, num_hidden_layers=2),
    "qwen3-next-80b-a3b": dict(
        SMALL,
        num_attention_heads=2,
        num_hidden_layers=4,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=128,
        shared_expert_intermediate_size=128,
    ),
}
DROP = object()  # a config field to delete
# Extra cases: (preset, more changes) for defaults the presets do not exercise.
VARIANTS: dict[str, tuple[str, dict]] = {
    "gpt-oss-20b-no-layer_types": ("gpt-oss-20b", dict(layer_types=DROP, num_hidden_layers=4)),
    "llama-3.2-1b-no-tie_word_embeddings": ("llama-3.2-1b", dict(tie_word_embeddings=DROP)),
    "qwen2.5-7b-no-tie_word_embeddings": ("qwen2.5-7b", dict(tie_word_embeddings=DROP)),
}
CASES = list(SCALE) + list(VARIANTS)


def _family(preset: str) -> str:
    return family_for(
        parse_config(load_preset(preset)["config"], "config.json", MLX_LM).model_type
    ).model_type


def test_the_parity_cases_cover_every_family_of_the_presets_and_only_presets():
    """The cases are checked against the presets: every model family a preset (or FAMILIES) has is held to mlx_lm by
    at least one case, and every case is a bundled preset, so a new family or preset cannot miss its parity test."""
    assert set(SCALE) <= set(preset_names()) and {p for p, _ in VARIANTS.values()} <= set(SCALE)
    covered = {_family(case) for case in SCALE}
    assert {_family(name) for name in preset_names()} <= covered, (
        "a preset's family has no parity case"
    )
    assert set(FAMILIES) <= covered, (
        "a family of kvcore.model.families.FAMILIES has no parity case (nor a preset)"
    )


FP32 = KvSpec("fp32", "fp32", activation_dtype="fp32")


def scaled_config(case: str) -> dict:
    """The preset's config.json with its SCALE (and VARIANTS) changes, applied to text_config where there is one."""
    preset, extra = VARIANTS.get(case, (case, {}))
    config = copy.deepcopy(load_preset(preset)["config"])
    target = config.get("text_config", config)
    for key, value in {**SCALE[preset], **extra}.items():
        # mlx_lm's gemma3 wrapper takes vocab_size from the top level, never from text_config
        where = config if key == "vocab_size" else target
        if value is DROP:
            where.pop(key, None)
        else:
            where[key] = value
    if "layer_types" in target:
        target["layer_types"] = target["layer_types"][: target["num_hidden_layers"]]
    return config


def build_model(config: dict):
    """A random-weight mlx_lm model, built with the same class dispatch `mlx_lm.load` uses."""
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(copy.deepcopy(config)))
    if config["model_type"] == "gemma3":
        # Gemma 3 checkpoints ship no lm_head.weight: mlx_lm's sanitize then ties the embeddings.
        weights = {
            k: v for k, v in tree_flatten(model.parameters()) if not k.endswith("lm_head.weight")
        }
        model.sanitize(weights)
    model.set_dtype(mx.float32)
    mx.eval(model.parameters())
    return model


# ---------------------------------------------------------------- 2. per-layer KV bytes

PREFILL, DECODE = (
    [96, 130, 70],
    6,
)  # chunks, then single-token steps: 302 tokens, past 256 and every window


def _used_bytes(cache) -> int:
    if isinstance(cache, ArraysCache):
        return cache.nbytes
    keys, values = cache.keys_and_values()
    return keys.nbytes + values.nbytes


@pytest.mark.parametrize("case", CASES)
def test_layer_kv_bytes_match_mlx_lm(case):
    config = scaled_config(case)
    geometry = parse_config(config, case, MLX_LM)
    model = build_model(config)
    cache = make_prompt_cache(model)
    assert len(cache) == geometry.num_layers

    updates, linear_bytes = PREFILL + [1] * DECODE, []
    tokens = mx.random.randint(0, 512, (1, sum(updates)))
    start = 0
    for n in updates:
        mx.eval(model(tokens[:, start : start + n], cache=cache), [c.state for c in cache])
        start += n
        linear_bytes.append([c.nbytes for c in cache if isinstance(c, ArraysCache)])
    T = start

    for layer, c in zip(geometry.layers, cache):
        where = f"{case} layer {layer.index} ({layer.kind}, {type(c).__name__})"
        if layer.kind in ("full", "mla"):
            assert type(c) is KVCache, where
        elif layer.kind == "sliding":
            assert type(c) is RotatingKVCache and c.max_size == layer.window, where
            assert c.keys.shape[2] == min(T, layer.window), where  # single-token steps trimmed it
        else:
            assert type(c) is ArraysCache, where
        if layer.kind != "linear":
            assert c.offset == T, where
            sim = allocsim.simulate(type(c).__name__, updates, max_size=layer.window)
            assert sim.capacity == c.keys.shape[2], where
        assert _used_bytes(c) == layer_kv_bytes(layer, T, FP32), where

    if geometry.count("linear"):
        # The linear state is constant in context and does not depend on hidden_size: the scaled
        # model's state equals the state kvcore computes for the real, unscaled preset.
        assert all(row == linear_bytes[0] for row in linear_bytes)
        real_layers = preset_geometry(case).layers
        real = next(layer for layer in real_layers if layer.kind == "linear")
        assert linear_bytes[0] == [state_bytes(real, FP32)] * geometry.count("linear")


# ---------------------------------------------------------------- 3. weights


def _moe_blocks(model):
    """(routed experts' SwitchGLU, experts per token) for each MoE layer of an mlx_lm model."""
    for layer in model.layers:
        mlp = layer.mlp  # mlx modules are dicts of their children
        glu = mlp.get("switch_mlp", mlp.get("experts"))
        if glu is not None:
            yield glu, getattr(mlp, "top_k", None) or mlp.num_experts_per_tok


@pytest.mark.parametrize("case", CASES)
def test_param_counts_match_mlx_lm(case):
    config = scaled_config(case)
    geometry = parse_config(config, case, MLX_LM)
    model = build_model(config)
    total = sum(p.size for _, p in tree_flatten(model.parameters()))
    assert geometry.params.total == total

    # active: every routed expert beyond the top-k that one token reads is skipped
    skipped = 0
    for glu, top_k in _moe_blocks(model):
        experts = glu.gate_proj.weight.shape[0]
        per_expert = sum(p.size for _, p in tree_flatten(glu.parameters())) // experts
        skipped += (experts - top_k) * per_expert
    assert geometry.active_params.total == total - skipped
    assert (skipped > 0) == any(
        k in config for k in ("num_experts", "num_local_experts", "n_routed_experts")
    )


@pytest.mark.parametrize("case", CASES)
def test_q4_weight_bytes_match_mlx_lm(case):
    config = scaled_config(case)
    geometry = parse_config(config, case, MLX_LM)
    model = build_model(config)
    model.set_dtype(mx.float16)
    model, _ = quantize_model(model, config, group_size=64, bits=4)
    mx.eval(model.parameters())
    real = sum(p.nbytes for _, p in tree_flatten(model.parameters()))
    assert weights_bytes(geometry, "mlx-q4") == real
