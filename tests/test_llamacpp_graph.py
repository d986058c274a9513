"""ggml's allocator replayed (kvcore.runtimes.llamacpp_graph), held to figures the real build printed.

The real build itself is run over the whole grid in tests/test_llamacpp_plan.py; here the replay's own claims:
its best fit reuses the tightest hole, and Phi-3-mini's logits land above the final norm's output (362.55 MiB
printed by llama.cpp 0c1e570 at -c 4096 -ub 2048 -fa on, where the widest moment holds 304 MiB), Qwen-7B-Chat's
MLP is n_ff/2 wide, from a file and from its config.
"""

from __future__ import annotations

import gguf_files

from kvcore.inputs import gguf
from kvcore.inputs.preset_files import load_preset
from kvcore.inputs.presets import preset_geometry
from kvcore.runtimes import llamacpp_cache as llamacpp
from kvcore.runtimes import llamacpp_graph
from kvcore.runtimes.llamacpp_plan import plan


def test_best_fit_takes_the_tightest_hole_and_merges_what_is_freed():
    a = llamacpp_graph._Allocator()
    offsets = [a.alloc(n) for n in (64, 32, 96, 32)]
    assert offsets == [0, 64, 96, 192] and a.top == 224
    a.free(0, 64)
    a.free(96, 96)
    assert a.alloc(64) == 0  # the 64-byte hole, not the 96-byte one
    a.free(0, 64)
    a.free(64, 32)  # merges with the hole below and the one above: 0..192 free
    assert a.alloc(192) == 0 and a.top == 224


def test_phi3s_logits_land_above_the_final_norm_as_llamacpp_prints():
    g = preset_geometry("phi-3-mini-4k", runtime="llama.cpp")
    options = llamacpp.Options(ubatch=2048)
    p = plan(g, 4096, options=options, flash_attn="on", weights_bytes=1)
    assert f"{p.compute_bytes / 2**20:.2f}" == "362.55"


def test_qwen_v1s_mlp_is_half_the_width_its_file_names(tmp_path):
    """The converter writes intermediate_size (22,016); qwen.cpp builds gate, up and down n_ff/2 wide."""
    arch, keys = gguf_files.metadata(load_preset("qwen-7b-chat")["config"], full=True)
    assert keys[".feed_forward_length"] == 22016
    path = gguf_files.write(tmp_path / "q.gguf", arch, keys, gguf_files.basic_tensors(arch, keys))
    assert gguf.geometry(path).ffn_width == 11008
    assert preset_geometry("qwen-7b-chat", runtime="llama.cpp").ffn_width == 11008


def test_qwen_v1s_compute_buffer_as_llamacpp_prints_it():
    """llama.cpp 0c1e570 prints 1251.01 MiB at -c 4096 -ub 2048 -fa on: the logits above two n_embd rows."""
    g = preset_geometry("qwen-7b-chat", runtime="llama.cpp")
    p = plan(g, 4096, options=llamacpp.Options(ubatch=2048), flash_attn="on", weights_bytes=1)
    assert f"{p.compute_bytes / 2**20:.2f}" == "1251.01"


def test_deepseeks_mla_block_as_llamacpp_prints_it():
    """Absorbed MLA: Q's 144 MiB concat lands above the absorbed 128 MiB and its 48 MiB projection (412.01 MiB
    printed at -c 4096 -ub 512 -fa on; the moments' rule planned 463.12)."""
    g = preset_geometry("deepseek-v3", runtime="llama.cpp")
    assert g.mla_widths == (1536, 128, 128)
    p = plan(g, 4096, options=llamacpp.Options(ubatch=512), flash_attn="on", weights_bytes=1)
    assert f"{p.compute_bytes / 2**20:.2f}" == "412.01"


def test_three_sequences_a_rotated_q8_0_k_and_a_copied_v_as_llamacpp_prints_them():
    """Qwen-7B-Chat at -c 8192 -np 3 -kvu -ctk q8_0 -fa off: 2,049 rows, Q and K rotated, V copied before its
    transposed store; llama.cpp prints 2401.27 MiB (planned 2272.04 before: -5.4 %)."""
    g = preset_geometry("qwen-7b-chat", runtime="llama.cpp")
    options = llamacpp.Options(sequences=3, unified=True, ubatch=2048)
    p = plan(g, 8192, "q8_0", "f16", options, flash_attn="off", weights_bytes=1)
    assert abs(p.compute_bytes / 2**20 - 2401.27) < 0.1  # the 2,049-row inputs' padding: 0.01 MiB


def test_gemma3s_logits_land_above_its_two_masks_as_llamacpp_prints():
    """Gemma-3-27B at -c 65536 -np 2 -kvu --swa-full -ub 512: both caches' masks are read, freed, and the logits
    find no hole below them: 626.14 MiB printed (the logits' moment alone, planned before: 533.12)."""
    g = preset_geometry("gemma-3-27b", runtime="llama.cpp")
    options = llamacpp.Options(sequences=2, unified=True, ubatch=512, swa_full=True)
    p = plan(g, 65536, options=options, flash_attn="auto", weights_bytes=1)
    assert f"{p.compute_bytes / 2**20:.2f}" == "626.14"
