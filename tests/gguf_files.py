"""Tiny GGUF files for the tests: a preset's real cache geometry, written as llama.cpp's converter writes it.

`metadata(config)` turns a Hugging Face config.json into the keys `convert_hf_to_gguf.py` writes for that
family (llama.cpp 0c1e570, `conversion/base.py` `set_gguf_parameters` and each family's file: block count,
heads, KV heads, key/value length, sliding window, MLA and recurrent keys), with everything that does not
shape the KV cache 64 wide (embedding, feed-forward, vocabulary). `write(path, arch, keys, tensors)` writes
the header with gguf-py's GGUFWriter and leaves the tensor data as a hole (a sparse file): a 405B-shaped
file costs a few kB of disk and milliseconds, and nothing reads the data (kvcore reads the header; llama.cpp
loads with no_alloc).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.constants import GGML_QUANT_SIZES

from kvcore.model.config import Cfg, flatten
from kvcore.model.families import family_for

WIDTH = 64  # embedding, feed-forward and vocabulary of every tiny file
ARCH = {
    "llama": "llama",
    "qwen": "qwen",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen3_moe": "qwen3moe",
    "qwen3_next": "qwen3next",
    "phi3": "phi3",
    "gemma2": "gemma2",
    "gemma3_text": "gemma3",
    "gpt_oss": "gpt-oss",
    "deepseek_v3": "deepseek2",
}
WIDE = (
    "qwen",
    "qwen2",
    "phi3",
)  # families whose llama.cpp graph assumes embedding = heads x head_dim
TOKENS = ["<unk>", "<s>", "</s>"] + [f"t{i}" for i in range(WIDTH - 3)]


def metadata(config: dict, full: bool = False) -> tuple[str, dict]:
    """(GGUF architecture, {key: value}) for a config.json, in the converter's terms (keys without the arch prefix
    start with '.': '.block_count' -> 'llama.block_count'). `full`: the real embedding, feed-forward and vocabulary
    widths too (the converter's values), for files whose every buffer llama.cpp sizes as the real model's."""
    flat = flatten(config)
    family = family_for(flat["model_type"])
    c = Cfg(flat, family)
    arch = ARCH[family.model_type]
    n_layer, n_head = c.int("num_hidden_layers"), c.int("num_attention_heads")
    kv = c.int("num_key_value_heads", n_head)
    head_dim = (
        c.int(family.head_dim_field)
        if c.has(family.head_dim_field)
        else c.int("hidden_size") // n_head
    )
    # Qwen v1/2 and Phi-3 build attention from n_embd-wide projections: their embedding keeps its real width
    n_embd = n_head * head_dim if family.model_type in WIDE else WIDTH
    keys = {
        ".block_count": n_layer,
        ".context_length": c.int("max_position_embeddings", 4096),
        ".embedding_length": n_embd,
        ".feed_forward_length": WIDTH,
        ".attention.head_count": n_head,
        ".attention.head_count_kv": kv,
        ".attention.key_length": head_dim,
        ".attention.value_length": head_dim,
        ".rope.dimension_count": head_dim,
        ".attention.layer_norm_rms_epsilon": 1e-6,
        ".vocab_size": WIDTH,
    }
    if (
        family.model_type in ("gemma2", "gemma3_text", "gpt_oss", "phi3")
        and c.get("sliding_window") is not None
    ):
        keys[".attention.sliding_window"] = c.int("sliding_window")  # gemma.py, gpt_oss.py, phi.py
    if family.model_type in ("gpt_oss", "qwen3_moe", "qwen3_next"):
        keys |= {
            ".expert_count": c.int(
                "num_local_experts" if family.model_type == "gpt_oss" else "num_experts"
            ),
            ".expert_used_count": c.int("num_experts_per_tok"),
            ".expert_feed_forward_length": WIDTH,
        }
    if family.model_type == "qwen3_next":  # qwen.py Qwen3NextModel
        nv, dv = c.int("linear_num_value_heads"), c.int("linear_value_head_dim")
        keys |= {
            ".ssm.conv_kernel": c.int("linear_conv_kernel_dim"),
            ".ssm.state_size": c.int("linear_key_head_dim"),
            ".ssm.group_count": c.int("linear_num_key_heads"),
            ".ssm.time_step_rank": nv,
            ".ssm.inner_size": nv * dv,
            ".full_attention_interval": c.int("full_attention_interval", 4),
            ".rope.dimension_count": head_dim // 4,
            ".expert_shared_feed_forward_length": WIDTH,
        }
    if (
        family.model_type == "deepseek_v3"
    ):  # deepseek.py DeepseekV2Model: MLA as one KV head of latent + rope
        latent, rope = c.int("kv_lora_rank"), c.int("qk_rope_head_dim")
        keys |= {
            ".attention.head_count_kv": 1,
            ".attention.key_length": latent + rope,
            ".attention.value_length": latent,
            ".attention.key_length_mla": c.int("qk_nope_head_dim") + rope,
            ".attention.value_length_mla": c.int("v_head_dim"),
            ".attention.kv_lora_rank": latent,
            ".attention.q_lora_rank": c.int("q_lora_rank"),
            ".rope.dimension_count": rope,
            ".leading_dense_block_count": c.int("first_k_dense_replace", 0, 0),
            ".expert_count": c.int("n_routed_experts"),
            ".expert_used_count": c.int("num_experts_per_tok"),
            ".expert_shared_count": c.int("n_shared_experts"),
            ".expert_feed_forward_length": WIDTH,
            ".expert_gating_func": 2,
        }
    if full:
        keys |= full_widths(c, family.model_type)
    return arch, keys


def full_widths(c: Cfg, model_type: str) -> dict:
    """The converter's embedding, feed-forward, expert and vocabulary widths (conversion/*.py set_gguf_parameters)."""
    ffn = c.int("intermediate_size")
    keys = {
        ".embedding_length": c.int("hidden_size"),
        ".feed_forward_length": ffn,  # all of it, Qwen v1's too (conversion/base.py:1445)
        ".vocab_size": c.int("vocab_size"),
    }
    if model_type in ("qwen3_moe", "qwen3_next", "deepseek_v3"):
        keys[".expert_feed_forward_length"] = c.int("moe_intermediate_size")
    if model_type == "gpt_oss":
        keys[".expert_feed_forward_length"] = ffn
    if model_type == "qwen3_next":
        keys[".expert_shared_feed_forward_length"] = c.int("shared_expert_intermediate_size")
    return keys


def basic_tensors(
    arch: str, keys: dict, weight_type=GGMLQuantizationType.Q8_0
) -> dict[str, tuple[list[int], int]]:
    """A plausible tensor table {name: (ggml shape, ggml type)}: embeddings, norms and attention/FFN matrices per layer.
    Enough for kvcore (which reads only the header); llama.cpp wants each family's exact set (see complete_for)."""
    k = {name[1:]: v for name, v in keys.items()}
    n_head, kv, kd, vd = (
        k["attention.head_count"],
        k["attention.head_count_kv"],
        k["attention.key_length"],
        k["attention.value_length"],
    )
    f32 = GGMLQuantizationType.F32
    e = k["embedding_length"]
    t = {"token_embd.weight": ([e, WIDTH], weight_type), "output_norm.weight": ([e], f32)}
    for il in range(k["block_count"]):
        t |= {
            f"blk.{il}.attn_norm.weight": ([e], f32),
            f"blk.{il}.ffn_norm.weight": ([e], f32),
            f"blk.{il}.attn_q.weight": ([e, n_head * kd], weight_type),
            f"blk.{il}.attn_k.weight": ([e, kv * kd], weight_type),
            f"blk.{il}.attn_v.weight": ([e, kv * vd], weight_type),
            f"blk.{il}.attn_output.weight": ([n_head * vd, e], weight_type),
            f"blk.{il}.ffn_up.weight": ([e, WIDTH], weight_type),
            f"blk.{il}.ffn_down.weight": ([WIDTH, e], weight_type),
        }
    return t


def nbytes(shape: list[int], ggml_type) -> int:
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    return int(np.prod(shape)) // block * size


def write(
    path: Path, arch: str, keys: dict, tensors: dict[str, tuple[list[int], int]], vocab: bool = True
) -> Path:
    """Write a GGUF: the keys (prefixed with the arch where they start with '.'), a 64-token vocabulary, and the
    tensor table; the data is a hole of the right size (tensor offsets aligned as GGUFWriter aligns them)."""
    w = GGUFWriter(str(path), arch)
    for name, value in keys.items():
        name = arch + name if name.startswith(".") else name
        if isinstance(value, bool):
            w.add_bool(name, value)
        elif isinstance(value, int):
            w.add_uint32(name, value)
        elif isinstance(value, float):
            w.add_float32(name, value)
        elif isinstance(value, str):
            w.add_string(name, value)
        else:
            w.add_array(name, value)
    if (
        vocab and keys.get(".vocab_size") != WIDTH
    ):  # llama-vocab.cpp: model "none" makes vocab_size dummy tokens
        w.add_tokenizer_model("none")
    elif vocab:
        w.add_tokenizer_model("llama")
        w.add_token_list(TOKENS)
        w.add_token_scores([0.0] * len(TOKENS))
        w.add_token_types([2, 3, 3] + [1] * (len(TOKENS) - 3))
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
    for name, (shape, ggml_type) in tensors.items():
        w.add_tensor_info(
            name,
            list(reversed(shape)),
            np.dtype(np.float32),
            nbytes(shape, ggml_type),
            raw_dtype=ggml_type,
        )
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    fout = w.fout[0]
    start = -(-fout.tell() // w.data_alignment) * w.data_alignment
    size = sum(-(-nbytes(s, t) // w.data_alignment) * w.data_alignment for s, t in tensors.values())
    fout.truncate(start + size)
    w.close()
    return Path(path)


def preset_file(tmp_path: Path, preset: str, tensors=None) -> Path:
    """The tiny GGUF of a bundled preset, in tmp_path."""
    from kvcore.inputs.preset_files import load_preset

    arch, keys = metadata(load_preset(preset)["config"])
    return write(tmp_path / f"{preset}.gguf", arch, keys, tensors or basic_tensors(arch, keys))


def _tensor_type(shape: list[int]):
    if len(shape) == 1:
        return GGMLQuantizationType.F32
    return GGMLQuantizationType.Q8_0 if shape[0] % 32 == 0 else GGMLQuantizationType.F16


# Tensors llama.cpp loads as optional (one of two spellings) but whose graph needs one: seeded in every layer with
# a guessed shape, which llama.cpp then corrects (layers that never ask for them drop them again). Qwen3-Next's
# delta-net layers as older converters wrote them: q, k, v and z in one ssm_in (qwen3next_now: as it writes them now).
SEEDS = {"phi3": ["attn_qkv.weight"], "qwen3next": ["ssm_in.weight"]}


def qwen3next_now(keys: dict) -> dict[int, list[str]]:
    """complete_for's seeds for Qwen3-Next as conversion/qwen.py writes it now: q, k and v in attn_qkv and z in
    attn_gate, in the delta-net layers only (every full_attention_interval-th layer attends: attn_q, attn_k, attn_v)."""
    interval = keys.get(".full_attention_interval", 4)
    return {
        il: ["attn_qkv.weight", "attn_gate.weight"]
        for il in range(keys[".block_count"])
        if (il + 1) % interval
    }


def complete_for(
    path: Path, arch: str, keys: dict, limit: int = 400, seeds: dict[int, list[str]] | None = None
) -> dict:
    """The tensor table llama.cpp asks of this architecture and geometry, found by asking it: load the file
    (no_alloc), add the tensor it says is missing, take the shape it says it expected, and again, until it loads.
    A layer's tensor is guessed for every later layer at once (so a family costs tens of loads, not thousands);
    guesses llama.cpp never asks for (its "create_tensor: loading tensor" lines) are dropped again.
    SEEDS: tensors llama.cpp treats as optional but its graph needs (Phi-3's fused attn_qkv); `seeds`: {layer:
    names} instead of SEEDS in every layer."""
    import re

    from kvcore.measure import llamacpp_probe

    n_layer = keys[".block_count"]
    if seeds is None:
        seeds = {il: SEEDS.get(arch, []) for il in range(n_layer)}
    tensors = {
        f"blk.{il}.{name}": ([WIDTH], GGMLQuantizationType.F32)
        for il, names in seeds.items()
        for name in names
    }
    for _ in range(limit):
        write(path, arch, keys, tensors)
        error, lines = llamacpp_probe.load_only(str(path))
        if error is None:
            return tensors
        asked = {
            m[1] for line in lines if (m := re.match(r"create_tensor: loading tensor (\S+)", line))
        }
        missing = re.search(r"tensor '([^']+)' not found", error)
        wrong = re.search(r"tensor '([^']+)' has wrong shape; expected ([\d, ]+), got", error)
        if "wrong number of tensors" in error:
            unasked = [name for name in tensors if name not in asked]
            if not unasked:
                raise RuntimeError(f"llama.cpp refused {path.name}: {error}")
            for name in unasked:
                del tensors[name]
            continue
        if not (missing or wrong):
            raise RuntimeError(f"llama.cpp refused {path.name}: {error}")
        name = (missing or wrong)[1]
        shape = [int(n) for n in wrong[2].split(",")] if wrong else [WIDTH]
        while len(shape) > 1 and shape[-1] == 1:
            shape.pop()
        layer = re.match(r"blk\.(\d+)\.(.*)", name)
        names = (
            [f"blk.{il}.{layer[2]}" for il in range(int(layer[1]), n_layer)] if layer else [name]
        )
        before = tensors.get(name)
        for (
            each
        ) in names:  # later layers take the correction too while they still hold the same guess
            if each == name or tensors.get(each) == before and (wrong or each not in asked):
                tensors[each] = (shape, _tensor_type(shape))
    raise RuntimeError(f"no loadable tensor table for {path.name} after {limit} loads")


# One preset per family llama.cpp loads, as the tests that hold kvcore to a real build use them
# (tests/test_llamacpp_build.py, tests/test_llamacpp_plan.py).
LLAMACPP_FAMILY_PRESETS = (
    "llama-3.2-1b",
    "qwen-7b-chat",
    "qwen2.5-7b",
    "qwen3-8b",
    "qwen3-30b-a3b",
    "qwen3-next-80b-a3b",
    "phi-3-mini-4k",
    "gemma-2-2b",
    "gemma-3-27b",
    "gpt-oss-20b",
    "deepseek-v3",
    # small vocabularies, where the MLP's tensors outgrow the logits (checked, not fitted: see COMPUTE_TOLERANCE)
    "mistral-7b-v0.3",
    "smollm2-135m",
    "smollm2-1.7b",
    "llama-3.1-8b",
)


def full_llama(
    path: Path, preset: str = "llama-3.1-8b", weight_type=GGMLQuantizationType.Q4_K
) -> Path:
    """A Llama-family GGUF of the preset's full geometry as a reader downloads it: the real widths (full_widths),
    every matrix a Llama layer has in `weight_type` (Llama-3.1-8B in Q4_K: ~4.9 GB), and a vocabulary of the real
    size as the converter writes it (tokens, scores, token types: a header of a few MB). The data is a hole."""
    from kvcore.inputs.preset_files import load_preset

    arch, keys = metadata(load_preset(preset)["config"], full=True)
    k = {name[1:]: v for name, v in keys.items()}
    e, ffn, n_vocab = k["embedding_length"], k["feed_forward_length"], k["vocab_size"]
    q, kv = (
        k["attention.head_count"] * k["attention.key_length"],
        k["attention.head_count_kv"] * k["attention.key_length"],
    )
    f32 = GGMLQuantizationType.F32
    t = {
        "token_embd.weight": ([e, n_vocab], weight_type),
        "output_norm.weight": ([e], f32),
        "output.weight": ([e, n_vocab], weight_type),
    }
    for il in range(k["block_count"]):
        t |= {
            f"blk.{il}.attn_norm.weight": ([e], f32),
            f"blk.{il}.attn_q.weight": ([e, q], weight_type),
            f"blk.{il}.attn_k.weight": ([e, kv], weight_type),
            f"blk.{il}.attn_v.weight": ([e, kv], weight_type),
            f"blk.{il}.attn_output.weight": ([q, e], weight_type),
            f"blk.{il}.ffn_norm.weight": ([e], f32),
            f"blk.{il}.ffn_gate.weight": ([e, ffn], weight_type),
            f"blk.{il}.ffn_up.weight": ([e, ffn], weight_type),
            f"blk.{il}.ffn_down.weight": ([ffn, e], weight_type),
        }
    tokens = [f"tok{i:06d}" for i in range(n_vocab)]
    vocab = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": [0.0] * n_vocab,
        "tokenizer.ggml.token_type": [1] * n_vocab,
    }
    return write(path, arch, {**keys, **vocab}, t, vocab=False)
