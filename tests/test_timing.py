"""The time model (kvcore.timing.estimate): FLOPs, bytes, the roofline's bound, one sequence or many."""

import pytest

from kvcore.errors import KvError
from kvcore.inputs.presets import preset_geometry
from kvcore.inputs.source import resolve_model
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import kv_bytes, weights_bytes
from kvcore.runtimes import llamacpp_cache as llamacpp
from kvcore.timing import estimate as timing
from kvcore.timing.hardware import chips, get_chip

EFF = timing.Efficiency(0.6, 0.6, "test")


def test_every_apple_chip_through_m4_has_a_compute_figure_with_a_source_and_a_ridge_point():
    for chip in chips():
        if chip.fp16_tflops is None:
            assert chip.chip.startswith("M5") and "no public" in chip.compute_source
            continue
        assert chip.compute_source, chip.chip
        assert chip.ridge_flops_per_byte == pytest.approx(
            chip.fp16_tflops * 1e12 / (chip.bandwidth_gbps * 1e9)
        )
    assert get_chip("M2 Ultra").ridge_flops_per_byte == pytest.approx(34.0)


@pytest.mark.parametrize(
    "preset", ["gemma-3-27b", "llama-3.2-1b", "qwen3-next-80b-a3b", "deepseek-v3"]
)
@pytest.mark.parametrize("start,prompt", [(0, 1), (0, 3000), (1000, 1000), (5000, 700)])
def test_prefill_flops_are_the_sum_of_every_tokens_flops(preset, start, prompt):
    g = preset_geometry(preset)
    brute = sum(timing.flops_per_token(g, t) for t in range(start + 1, start + prompt + 1))
    assert timing.prefill_flops(g, prompt, start) == pytest.approx(brute, rel=1e-12)


def test_attention_makes_prefill_grow_faster_than_the_prompt():
    g = preset_geometry("llama-3.1-8b")
    short, long = timing.prefill_flops(g, 4096), timing.prefill_flops(g, 131072)
    assert long / short > 131072 / 4096 * 1.5  # O(T^2): far more than 32x for 32x the tokens
    # a sliding-window model's attention stops growing with position once its windows are full
    gemma = preset_geometry("gemma-3-27b")
    assert timing.attention_flops(gemma, 100_000) < 2 * timing.attention_flops(gemma, 50_000)


def test_decode_at_one_sequence_is_memory_bound_and_prefill_compute_bound():
    g = preset_geometry("llama-3.1-8b")
    chip = get_chip("M2 Ultra")
    dec = timing.decode_step(g, 4096, chip, EFF, weights_format="mlx-q4")
    pre = timing.prefill_step(g, 4096, chip, EFF, weights_format="mlx-q4")
    assert dec.bound == "memory" and dec.intensity < chip.ridge_flops_per_byte
    assert pre.bound == "compute" and pre.intensity > chip.ridge_flops_per_byte
    assert dec.bytes == weights_bytes(g, "mlx-q4", active=True) + kv_bytes(g, 4096, KvSpec())


def test_a_batch_reads_the_weights_once_and_every_sequences_kv():
    g = preset_geometry("llama-3.1-8b")
    one = timing.decode_step(g, 2048, "M4 Pro", EFF, weights_format="mlx-q4")
    eight = timing.decode_step(g, 2048, "M4 Pro", EFF, weights_format="mlx-q4", sequences=8)
    assert eight.bytes - one.bytes == 7 * kv_bytes(g, 2048, KvSpec())
    assert (
        eight.tokens / eight.time_s > 4 * one.tokens / one.time_s
    )  # weights shared: total grows with B
    assert 1 / eight.time_s < 1 / one.time_s  # each sequence a little slower


def test_llama_cpp_unified_slots_each_decode_about_as_fast_as_one_slot_and_the_total_is_the_sum():
    # gpt-oss-20b, -c 131072, 4 slots on one unified cache, M4 Pro: the cache is the same as one slot's
    g, _ = resolve_model("gpt-oss-20b", "llama.cpp")
    spec = KvSpec("fp16", "fp16")
    one = timing.estimate(
        g, 512, "M4 Pro", EFF, spec, "bf16", context=131072, llama=llamacpp.Options(1)
    )
    four = timing.estimate(
        g, 512, "M4 Pro", EFF, spec, "bf16", context=131072, llama=llamacpp.server_defaults()
    )
    assert four["decode_sequences"] == 4
    assert four["decode_tokens_per_s"] == pytest.approx(one["decode_tokens_per_s"], rel=0.02)
    assert four["decode_tokens_per_s_total"] == pytest.approx(4 * four["decode_tokens_per_s"])


def test_a_chip_without_a_compute_figure_has_no_prefill_time_but_a_decode_speed():
    g = preset_geometry("llama-3.2-1b")
    r = timing.estimate(g, 1024, "M5 Pro", EFF)
    assert r["prefill_s"] is None and r["decode_tokens_per_s"] > 0 and r["decode_bound"] == "memory"


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_a_prompt_that_is_not_a_whole_positive_number_is_refused(bad):
    with pytest.raises(KvError):
        timing.prefill_flops(preset_geometry("llama-3.2-1b"), bad)


def _kv_reads_chunk_by_chunk(g, prompt, chunk, spec, start):
    """The prefill's KV reads as the estimate once summed them: kv_bytes after every chunk, one by one."""
    return sum(
        kv_bytes(g, start + min(prompt, (i + 1) * chunk), spec) for i in range(-(-prompt // chunk))
    )


@pytest.mark.parametrize(
    "preset", ["gemma-3-27b", "gpt-oss-20b", "qwen3-next-80b-a3b", "deepseek-v3"]
)
@pytest.mark.parametrize("spec", [KvSpec(), KvSpec("q8_0", "q4_0")])
def test_the_prefills_kv_reads_in_closed_form_are_the_sum_over_every_chunk(preset, spec):
    """Windows of 128 and 1,024 crossed before, inside and after a chunk; chunks of 1 token to more than the prompt."""
    g = preset_geometry(preset)
    for start in (0, 100, 1024, 5000):
        for prompt in (1, 2, 127, 129, 1023, 1025, 2500):
            for chunk in (1, 3, 64, 128, 1000, 4096):
                if prompt // chunk > 400:
                    continue  # the reference walks every chunk
                expected = _kv_reads_chunk_by_chunk(g, prompt, chunk, spec, start)
                got = timing.prefill_kv_reads(g, prompt, chunk, spec, start)
                assert got == expected, (start, prompt, chunk)


def test_a_prefill_of_ten_million_one_token_chunks_is_estimated_without_walking_them():
    """llama.cpp -ub 1 over 10^7 tokens (once 206 s of CPU, one chunk at a time): full layers only, so the
    reads are the series 1 + 2 + ... + 10^7 tokens' KV bytes, and the weights once per token."""
    g = preset_geometry("llama-3.2-1b", "llama.cpp")
    llama = llamacpp.Options(ubatch=1)
    step = timing.prefill_step(g, 10**7, "M2 Ultra", EFF, llama=llama)
    per_token = kv_bytes(g, 1)
    expected = 10**7 * weights_bytes(g, "mlx-q4") + per_token * 10**7 * (10**7 + 1) // 2
    assert step.bytes == expected
