"""llama.cpp's Metal plan (kvcore.runtimes.llamacpp_plan, backend "metal") held to the Metal logs of the corpus
(recordings/logs/, each verbatim from its public source) and to the rules read in ggml-metal's source at 0c1e570.

What the corpus can hold: three Metal logs print a compute buffer with the settings beside it. One (a 2026 build,
Qwen2.5-0.5B on an M4) prints its model too (print_info): the reader plans it from the log alone. Two print no
model lines; their sidecars name the model (gpt-oss-20b) or the log's own lines fit one preset's geometry only
(28 layers of 2 x 128 KV values and a 151,936-token vocabulary: Qwen2.5-1.5B), and those lines are used here with
that said. All three run at 512-4,096 tokens of context, where the logits outgrow every attention layer: the
flash-attention extras (the f16 copies of K and V) are held to the source's arithmetic below, not yet to a printed
long-context figure. The other Metal logs print no compute line with its settings (2023 builds, an Intel Mac,
an excerpt that ends before the context): nothing there to hold a compute rule to.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvcore.errors import KvError
from kvcore.inputs.gguf import geometry_from_keys
from kvcore.inputs.log_reading import reading
from kvcore.inputs.presets import preset_geometry
from kvcore.runtimes import llamacpp_cache as llamacpp
from kvcore.runtimes.llamacpp_plan import (
    COMPUTE_TOLERANCE,
    flash_attention,
    log_mib,
    metal_fa_extra_bytes,
    plan,
)

CORPUS = Path(__file__).resolve().parent.parent / "recordings" / "logs"
MIB = 1024**2
METAL = llamacpp.Options(backend="metal")
# The spread of the Metal compute rule over the corpus's Metal logs, measured: 300.25 = 300.25, 404.00 = 404.00,
# 302.75 planned where a January 2025 build printed 299.75 (3.00 MiB, 1.001 %).
MEASURED_METAL_SPREAD = 0.0101


def _geometry(name: str):
    return preset_geometry(name, "llama.cpp")


def _line(path: str, text: str) -> str:
    return next(line for line in (CORPUS / path).read_text().splitlines() if text in line)


def test_a_2026_metal_log_is_re_derived_from_its_own_lines_kv_exact_compute_within_the_spread():
    r = reading((CORPUS / "llamacpp-metal-m4-qwen2.5-0.5b-2026.log").read_text())
    rows = {(row.kind, row.params.get("device")): row for row in r.rows if row.printed}
    assert r.device == "MTL0 (Apple M4)" and r.settings["flash_attn"] == "enabled"
    kv = next(row for row in r.rows if row.kind == "kv_cache")
    assert (
        kv.derived_bytes == kv.printed_bytes == 24 * 512 * 2 * 128 * 2
    )  # 24 layers, 2 x 64 KV, f16
    compute = next(row for row in r.rows if row.code == "compute_metal")
    assert compute.printed == "300.25 MiB" and compute.agrees is True
    assert (
        abs(compute.derived_bytes - compute.printed_bytes)
        <= MEASURED_METAL_SPREAD * compute.printed_bytes
    )
    assert rows[("model_buffer", "MTL0_Mapped")].agrees is True  # the file's 462.96 MiB
    assert (
        rows[("model_buffer", "CPU_Mapped")].code == "model_host"
    )  # the embedding, not more memory


def test_gpt_oss_20b_on_metal_the_swa_cache_exact_and_the_compute_buffer_to_the_printed_mib():
    # the log prints no model lines; its sidecar names gpt-oss-20b and its run -c 4096 (ctx_size = 4096), fa auto
    p = plan(_geometry("gpt-oss-20b"), 4096, options=METAL, weights_bytes=0)
    assert (
        p.flash_attn is True
    )  # "Flash Attention was auto, set to enabled": head size 64, f16 K and V
    swa = next(part for part in p.parts if part.name == "MTL0 KV buffer (swa)")
    assert (
        f"{swa.bytes / MIB:.2f}"
        == f"{log_mib(_line('llamacpp-metal-gpt-oss-20b-swa.log', 'KV buffer')):.2f}"
    )
    printed = log_mib(_line("llamacpp-metal-gpt-oss-20b-swa.log", "Metal compute buffer"))
    assert f"{p.compute_bytes / MIB:.2f}" == f"{printed:.2f}" == "404.00"


def test_a_2025_metal_log_without_model_lines_within_the_spread_for_the_geometry_its_lines_fit():
    # The log's own lines: 28 layers (kv_cache_init), 112.00 MiB of f16 KV at 4,096 cells (2 x 128 values a layer),
    # a 0.58 MiB output buffer (151,936 logits). Qwen2.5-1.5B fits them; its width and heads are its config's
    # (https://huggingface.co/Qwen/Qwen2.5-1.5B/blob/8faed761d45a263340a0528343f099c05c9a4323/config.json).
    keys = {
        "general.architecture": "qwen2",
        "qwen2.block_count": 28,
        "qwen2.embedding_length": 1536,
        "qwen2.attention.head_count": 12,
        "qwen2.attention.head_count_kv": 2,
        "qwen2.vocab_size": 151936,
        "qwen2.context_length": 32768,
    }
    g = geometry_from_keys(keys, "Qwen2.5-1.5B")
    p = plan(g, 4096, options=METAL, flash_attn="off", weights_bytes=0)
    log = "llamacpp-metal-m4-16gb-qwen2.log"
    assert f"{p.kv_bytes / MIB:.2f}" == f"{log_mib(_line(log, 'KV buffer')):.2f}" == "112.00"
    assert f"{p.output_bytes / MIB:.2f}" == f"{log_mib(_line(log, 'output buffer')):.2f}"
    printed = log_mib(_line(log, "Metal compute buffer")) * MIB  # 299.75 MiB
    assert abs(p.compute_bytes - printed) <= MEASURED_METAL_SPREAD * printed  # 302.75 planned


def test_the_metal_build_adds_flash_attentions_f16_k_and_v_beside_the_cpu_builds_graph():
    g = _geometry("llama-3.1-8b")
    cpu = plan(g, 131072, flash_attn="on", weights_bytes=0)
    metal = plan(g, 131072, options=METAL, flash_attn="on", weights_bytes=0)
    layer = g.layers[0]
    extra = metal_fa_extra_bytes(layer, 131072, 1, 512, 32, "f16", "f16")
    kv_f16 = 2 * (2 * 128 * 131072 * 8)  # K and V of 8 heads x 128, f16: 512 MiB
    pad = 64 * (2048 * 8 + 2048 * 8 + 2 * 512)
    blk = (512 // 8) * (131072 // 64)
    tmp = 4 * 32 * 32 * 1 * 32 * (128 + 2)
    assert extra == kv_f16 + pad + blk + tmp
    assert (
        metal.compute_bytes - cpu.compute_bytes > 400 * MIB
    )  # "several hundred MiB more" on Metal
    assert metal.kv_bytes == cpu.kv_bytes and metal.output_bytes == cpu.output_bytes
    names = [part.name for part in metal.parts]
    assert names[0] == "MTL0_Mapped model buffer" and "MTL0 compute buffer" in names
    assert "CPU output buffer" in names  # the logits stay on the host
    assert any(line.startswith("CPU compute buffer") for line in metal.unplanned)


def test_a_quantized_cache_is_dequantized_to_f16_whose_pad_reads_one_heads_rows():
    g = _geometry("llama-3.1-8b")
    f16 = metal_fa_extra_bytes(g.layers[0], 4096, 1, 512, 32, "f16", "f16")
    q8 = metal_fa_extra_bytes(g.layers[0], 4096, 1, 512, 32, "q8_0", "q8_0")
    # 32+ queries: q8_0 is copied to f16 first (the same kv_f16 scratch), and the pad then steps over f16 rows
    # of one head (2 x 128 bytes), where an f16 cache's pad steps over the stored rows of all 8 heads (2,048)
    assert f16 - q8 == 64 * (2048 - 256) * 8 * 2
    few_q8 = metal_fa_extra_bytes(g.layers[0], 4096, 1, 16, 32, "q8_0", "q8_0")
    few_f16 = metal_fa_extra_bytes(g.layers[0], 4096, 1, 16, 32, "f16", "f16")
    assert few_f16 - few_q8 == 64 * (2048 - 8 * 4 * 34) * 8 * 2  # under 32: q8_0's stored rows


@pytest.mark.parametrize(
    "k,v,on",
    [
        ("f16", "f16", True),
        ("q8_0", "q8_0", True),
        (
            "q8_0",
            "f16",
            False,
        ),  # K and V of different types: Metal has no kernel, auto turns it off
        ("q4_0", "q4_0", True),
    ],
)
def test_fa_auto_on_metal_follows_its_supports_op_for_the_types(k, v, on):
    assert flash_attention("auto", v, k, _geometry("llama-3.1-8b"), "metal") is on
    assert flash_attention("auto", v, k, _geometry("llama-3.1-8b"), "cpu") is True


def test_fa_auto_on_metal_is_off_for_a_head_size_it_has_no_kernel_for_and_a_quantized_v_forces_it_on():
    phi3 = _geometry("phi-3-mini-4k")  # head size 96: Metal has it
    assert flash_attention("auto", "f16", "f16", phi3, "metal") is True
    g = _geometry("llama-3.1-8b")
    odd = g.__class__(
        **{
            **g.__dict__,
            "layers": tuple(
                layer.__class__(**{**layer.__dict__, "k_dim": 160, "v_dim": 160})
                for layer in g.layers
            ),
        }
    )
    assert (
        flash_attention("auto", "f16", "f16", odd, "metal") is False
    )  # 160 is not among its head sizes
    # a quantized V turns auto into on before the device is asked (src/llama-context.cpp:3841)
    assert flash_attention("auto", "q8_0", "f16", odd, "metal") is True
    with pytest.raises(KvError) as e:
        flash_attention("off", "q8_0", "q8_0", g, "metal")
    assert e.value.code == "llamacpp_quantized_v_needs_fa"


def test_an_unknown_backend_is_refused_with_its_name():
    with pytest.raises(KvError) as e:
        plan(
            _geometry("llama-3.2-1b"),
            4096,
            options=llamacpp.Options(backend="cuda"),
            weights_bytes=0,
        )
    assert e.value.code == "llamacpp_backend" and "'cuda'" in str(e.value)


def test_the_metal_spread_is_inside_the_plans_tolerance():
    assert MEASURED_METAL_SPREAD <= COMPUTE_TOLERANCE
