"""ggml's allocator replayed (kvcore.runtimes.llamacpp_graph), held to figures the real build printed.

The real build itself is run over the whole grid in tests/test_llamacpp_plan.py; here the replay's own claims:
its best fit reuses the tightest hole, and Phi-3-mini's logits land above the final norm's output (362.55 MiB
printed by llama.cpp 0c1e570 at -c 4096 -ub 2048 -fa on, where the widest moment holds 304 MiB).
"""

from __future__ import annotations

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
