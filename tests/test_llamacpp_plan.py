"""The whole llama.cpp memory plan (kvcore.runtimes.llamacpp_plan) against the real build.

For one preset per family, a full-geometry GGUF (tests/gguf_files.py with `full=True`: the real embedding,
feed-forward, expert and vocabulary widths and the tensor table llama.cpp asks for; the data a hole, so a
671B-shaped file takes tens of kB of disk) is loaded by llama-cpp-python 0.3.36 (llama.cpp 0c1e570) with
no_alloc, and one context per case of GRID is created (kvcore.measure.llamacpp_probe). What llama.cpp prints is held to
the plan: the weights (llama_model_size), every KV cache line and the output buffer line equal to the byte and
to the character; the compute buffer within max(COMPUTE_FLOOR, COMPUTE_TOLERANCE x the MiB it prints)
(compute_allowance). A quantized V cache without flash attention: llama.cpp refuses it, and so does the plan.
"""

from __future__ import annotations

import os

import pytest

if not os.environ.get("KVSITE_REQUIRE_LLAMACPP"):
    pytest.importorskip("llama_cpp")

import gguf_files  # noqa: E402

from kvcore.errors import KvError  # noqa: E402
from kvcore.inputs import gguf
from kvcore.inputs.preset_files import load_preset  # noqa: E402
from kvcore.inputs.presets import preset_geometry  # noqa: E402
from kvcore.measure.llamacpp_probe import Request, run_isolated  # noqa: E402
from kvcore.runtimes import llamacpp_cache as llamacpp  # noqa: E402
from kvcore.runtimes.llamacpp_plan import compute_allowance, log_mib, plan  # noqa: E402

PRESETS = list(gguf_files.LLAMACPP_FAMILY_PRESETS)  # one per family llama.cpp loads

# Each axis covered without the full product (10 contexts a family, 150 in all): context 4,096-131,072,
# -ub 512/2048, flash attention on/off/auto, 1-4 sequences split and unified, f16/q8_0 caches, --swa-full.
GRID = [
    Request(n_ctx=131072, n_ubatch=2048, flash_attn="off"),
    Request(n_ctx=131072, n_ubatch=512, flash_attn="on"),
    Request(n_ctx=32768, n_ubatch=512, flash_attn="off", n_seq_max=4),
    Request(n_ctx=32768, n_ubatch=2048, flash_attn="on", n_seq_max=4, kv_unified=True),
    Request(n_ctx=4096, flash_attn="on", n_seq_max=2, type_k="q8_0", type_v="q8_0"),
    Request(
        n_ctx=8192, n_ubatch=2048, flash_attn="off", n_seq_max=3, kv_unified=True, type_k="q8_0"
    ),
    Request(n_ctx=16384, flash_attn="on", swa_full=True),
    Request(n_ctx=65536, flash_attn="auto", n_seq_max=2, swa_full=True, kv_unified=True),
    Request(n_ctx=4096, flash_attn="off", type_v="q8_0"),  # refused by both
    Request(
        n_ctx=4096, n_ubatch=2048, flash_attn="on"
    ),  # a short cache: the MLP or the logits on top
]


def planned_options(r: Request) -> llamacpp.Options:
    return llamacpp.Options(r.n_seq_max, r.kv_unified, r.n_batch, r.n_ubatch, r.swa_full)


def planned(g, r: Request):
    return plan(g, r.n_ctx, r.type_k, r.type_v, planned_options(r), r.flash_attn)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return tmp_path_factory.mktemp("gguf-full")


@pytest.mark.parametrize("preset", PRESETS)
def test_the_plan_is_what_the_real_llamacpp_allocates(files, preset):
    arch, keys = gguf_files.metadata(load_preset(preset)["config"], full=True)
    path = files / f"{preset}.gguf"
    gguf_files.complete_for(path, arch, keys)
    assert (
        path.stat().st_blocks * 512 < 2**20 < path.stat().st_size
    )  # sparse: the data is never written
    g = gguf.geometry(path)
    results = run_isolated(str(path), GRID)
    compared = 0
    for r, built in zip(GRID, results):
        assert not built.get("crashed"), (r, built)
        if built[
            "error"
        ]:  # llama.cpp refuses: quantized V without flash attention, MLA with K != V
            with pytest.raises(KvError):
                planned(g, r)
            continue
        p = planned(g, r)
        assert built["model_bytes"] == p.weights_bytes  # llama_model_size: the tensor table
        kv_lines = [part.log_line for part in p.parts if part.kind == "kv"]
        assert built["caches"] == kv_lines, r
        printed = {
            kind: [line for line in built["buffers"] if f"{kind} buffer size" in line]
            for kind in ("output", "compute")
        }
        output_line = next(part.log_line for part in p.parts if part.kind == "output")
        assert [line.split(": ", 1)[1] for line in printed["output"]] == [
            output_line.split(": ", 1)[1]
        ], r
        (compute_line,) = printed["compute"]
        real = log_mib(compute_line)
        assert abs(p.compute_bytes - real * llamacpp.MIB) <= compute_allowance(
            real * llamacpp.MIB
        ), (
            r,
            compute_line,
            p.compute_bytes / llamacpp.MIB,
        )
        compared += 1
    assert compared >= len(GRID) - 2  # at most the refused cases


def test_qwen3_next_as_the_converter_writes_it_now_is_replayed_too(files):
    """Older Qwen3-Next files project a delta-net layer's q, k, v and z in one ssm_in (the grid's file); files
    converted now hold q, k and v in attn_qkv and z in attn_gate (conversion/qwen.py), and llama.cpp builds another
    graph for them (qwen3next.cpp build_qkvz): the geometry says which, the replay follows, the real build agrees."""
    arch, keys = gguf_files.metadata(load_preset("qwen3-next-80b-a3b")["config"], full=True)
    path = files / "qwen3-next-now.gguf"
    gguf_files.complete_for(path, arch, keys, seeds=gguf_files.qwen3next_now(keys))
    g = gguf.geometry(path)
    key, value, _, projected = g.linear_widths
    assert projected == 2 * key + value  # attn_qkv (the grid's ssm_in file: 2 key + 2 value)
    assert (
        preset_geometry("qwen3-next-80b-a3b", runtime="llama.cpp").linear_widths == g.linear_widths
    )
    requests = [
        GRID[2],
        GRID[3],
        GRID[5],
        GRID[9],
    ]  # -fa off and on, -ub 512 and 2048, split and unified
    for r, built in zip(requests, run_isolated(str(path), requests)):
        assert not built.get("crashed") and not built["error"], built
        real = log_mib(next(line for line in built["buffers"] if "compute buffer" in line))
        p = planned(g, r)
        assert abs(p.compute_bytes - real * llamacpp.MIB) <= compute_allowance(
            real * llamacpp.MIB
        ), (
            r,
            real,
            p.compute_bytes / llamacpp.MIB,
        )


def test_a_quantized_v_cache_without_flash_attention_is_refused_in_one_sentence():
    g = preset_geometry("llama-3.2-1b", runtime="llama.cpp")
    with pytest.raises(KvError) as refused:
        plan(g, 4096, "f16", "q8_0", flash_attn="off", weights_bytes=1)
    text = str(refused.value)
    assert "flash attention" in text and text.count(". ") == 0 and "\n" not in text
    assert plan(g, 4096, "f16", "q8_0", flash_attn="on", weights_bytes=1).flash_attn


def test_calc_prints_the_plan_and_the_lines_llamacpp_prints_for_a_gguf(files):
    """`calc FILE.gguf --runtime llama.cpp --flash-attn off --json`: the plan's parts and its log lines, against the
    real build's for that file and settings."""
    import json
    import subprocess
    import sys

    arch, keys = gguf_files.metadata(load_preset("llama-3.2-1b")["config"], full=True)
    path = files / "cli-llama-3.2-1b.gguf"
    gguf_files.complete_for(path, arch, keys)
    request = Request(n_ctx=32768, n_seq_max=2, n_ubatch=1024, flash_attn="off")
    (built,) = run_isolated(str(path), [request])
    args = [sys.executable, "-m", "kvcore", "calc", "--model", str(path), "--runtime", "llama.cpp"]
    args += ["--context", "32768", "--sequences", "2", "--ubatch", "1024", "--flash-attn", "off"]
    plan_json = json.loads(
        subprocess.run(args + ["--json"], capture_output=True, text=True).stdout
    )["plan"]
    assert {p["name"] for p in plan_json["parts"]} == {
        "CPU_Mapped model buffer",
        "CPU KV buffer (kv)",
        "CPU output buffer",
        "CPU compute buffer",
    }
    assert all(
        p["source"].startswith("https://github.com/ggml-org/llama.cpp/") for p in plan_json["parts"]
    )
    assert plan_json["total_bytes"] == sum(
        plan_json[k] for k in ("weights_bytes", "kv_bytes", "output_bytes", "compute_bytes")
    )
    assert plan_json["weights_bytes"] == built["model_bytes"]
    lines = plan_json["log_lines"]
    assert built["caches"][0] in lines
    output = next(line for line in built["buffers"] if "output buffer" in line)
    assert any(line.endswith(output.split(": ", 1)[1]) for line in lines)
    real = log_mib(next(line for line in built["buffers"] if "compute" in line))
    assert abs(plan_json["compute_bytes"] - real * llamacpp.MIB) <= compute_allowance(
        real * llamacpp.MIB
    )
    text = subprocess.run(args, capture_output=True, text=True).stdout
    assert "what llama.cpp will print:" in text and "CPU compute buffer" in text
    assert "sched_reserve:        CPU compute buffer size =" in text


def buffer_line(function: str, part) -> str:
    """The buffer line llama.cpp prints for a part (llama-memory-recurrent.cpp, llama-kv-cache.cpp:
    "%s: %10s RS buffer size = %8.2f MiB"): the device and kind from the part's name, its bytes in MiB."""
    device, kind = part.name.split(" (")[0].split(" ")[:2]
    return f"{function}: {device:>10s} {kind} buffer size = {part.bytes / 1024.0 / 1024.0:8.2f} MiB"


def test_a_hybrid_models_recurrent_state_is_named_and_counted_as_llamacpp_prints_it(files):
    """Qwen3-Next (3 of 4 layers recurrent): llama_memory_recurrent prints "CPU RS buffer size" and a size line
    counting the model's n_layer (48), while only the 36 recurrent layers hold R and S rows; the plan names the
    buffer as llama.cpp does, prints its two lines to the character, and says both layer counts."""
    arch, keys = gguf_files.metadata(load_preset("qwen3-next-80b-a3b")["config"])
    path = files / "hybrid-qwen3-next.gguf"
    gguf_files.complete_for(path, arch, keys)
    g = gguf.geometry(path)
    requests = [Request(n_ctx=4096), Request(n_ctx=8192, n_seq_max=3, kv_unified=True)]
    for r, built in zip(requests, run_isolated(str(path), requests)):
        assert not built.get("crashed") and not built["error"], built
        p = planned(g, r)
        (state,) = [part for part in p.parts if part.name == "CPU RS buffer"]
        printed = [line for line in built["buffers"] if "RS buffer size" in line]
        assert printed == [buffer_line("llama_memory_recurrent", state)], (printed, state)
        assert state.log_line in built["caches"]
        (recurrent,) = [
            c
            for c in llamacpp.caches(g, r.n_ctx, options=planned_options(r))
            if c.name == "recurrent"
        ]
        n_layer, held = g.num_layers, len(recurrent.layers)
        assert f"{n_layer:3d} layers" in state.log_line and held < n_layer
        assert f"{held} recurrent layers" in state.rule and f"{n_layer} layers" in state.rule
        formula = llamacpp.cells_text(llamacpp.caches(g, r.n_ctx, options=planned_options(r)))
        assert f"{held} recurrent layers (of the {n_layer} llama.cpp's line counts)" in formula
