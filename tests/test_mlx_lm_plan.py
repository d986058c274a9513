"""mlx_lm's memory plan (kvcore.runtimes.mlx_lm_plan) against mx.get_peak_memory() around mlx_lm's own
generate_step on this machine's CPU backend: random-weight models of real geometry (fp32), prompts across the
prefill step and the 256-token boundaries, with and without a quantized cache: a few cases live, and every run of
the bundled recording (recordings/measured-linux-cpu-mlx-lm-peaks.yaml, written by scripts/mlx_peak_sweep.py
--record, which prints the wider sweep's table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvcore.errors import KvError
from kvcore.inputs.config import parse_config
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import KvSpec
from kvcore.runtimes import mlx_lm_plan, mlx_metal
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.units import MIB
from kvcore.views.peaks import (
    within,  # the tolerance, plus 1 MiB of small arrays mlx holds beside the plan
)


def test_the_plan_walks_generate_steps_chunks():
    g = preset_geometry("llama-3.2-1b")
    spec = KvSpec("fp16", "fp16", 64, "fp16")
    cpu = mlx_lm_plan.plan(g, 4097, spec, 10**9, backend="cpu")
    # chunks of 2048, 2048, then the last token: the second chunk sees 4,096 keys
    assert (cpu["peak_step"], cpu["peak_offset"], cpu["n_tokens"]) == ("prefill", 2048, 2048)
    scores = next(p for p in cpu["parts"] if p["kind"] == "scores")
    assert scores["bytes"] == 32 * 2048 * 4096 * 2
    assert cpu["total_bytes"] == 10**9 + cpu["kv_bytes"] + cpu["compute_bytes"]
    assert cpu["log_lines"] == [f"Peak memory: {cpu['total_bytes'] / 1e9:.3f} GB"]
    # Metal's fused attention (head_dim 64) materialises no scores for a prefill chunk
    metal = mlx_lm_plan.plan(g, 4097, spec, 10**9, backend="metal")
    assert not any(p["kind"] in ("scores", "mask") for p in metal["parts"])
    assert metal["total_bytes"] - metal["in_flight_bytes"] < cpu["total_bytes"]
    assert cpu["in_flight_bytes"] == 0
    # a quantized cache converts once its offset reaches quantized_kv_start
    q = mlx_lm_plan.plan(g, 6000, KvSpec("mlx-q8", "mlx-q8", 64, "fp16"), backend="cpu")
    steps = mlx_lm_plan.moments(g, 6000, KvSpec("mlx-q8", "mlx-q8", 64, "fp16"), backend="cpu")
    assert [any(p.kind == "conversion" for p in m.parts) for m in steps] == [
        False,
        False,
        True,
        False,
    ]
    assert q["kv_bytes"] <= steps[2].kv_bytes


def test_the_plan_refuses_what_it_does_not_know():
    g = preset_geometry("llama-3.2-1b")
    with pytest.raises(KvError, match="cpu backend"):
        mlx_lm_plan.plan(g, 10, backend="cuda")
    with pytest.raises(KvError, match="prefill_step_size"):
        mlx_lm_plan.plan(g, 10, prefill_step=0)


CASES = [  # (model, prompt, generated, prefill step, kv_bits)
    ("cpu-demo", 255, 1, 256, None),  # one chunk, the first token crosses 256
    ("cpu-demo", 600, 0, 256, None),  # chunks 256, 256, 87, 1
    ("cpu-demo", 513, 1, 512, 8),  # converted to an 8-bit cache after the first chunk
    ("smollm2-135m", 300, 0, 256, None),  # 30 layers, 9 heads: a second geometry
    # a 4-bit cache at a context where the scores are most of the transient memory: mlx_lm's quantized attention
    # (models/base.py#L64-L107) holds them once, as the unfused path does (its where and softmax reuse the buffer)
    ("cpu-demo", 2048, 1, 2048, 4),
]


@pytest.mark.mlx
@pytest.mark.parametrize("name,prompt,generated,step,bits", CASES)
def test_the_plan_holds_to_mlx_peak_memory(name, prompt, generated, step, bits):
    from kvcore.measure.models import build_random, resolve_config
    from kvcore.measure.peaks import generate_peak

    model_name, config = resolve_config(name)
    model = build_random(model_name, config, "fp32")
    generate_peak(model, 64, 0, step)  # mlx's first run in a process holds a little more
    run = generate_peak(model, prompt, generated, step, bits, quantized_kv_start=0)
    fmt = f"mlx-q{bits}" if bits else "fp32"
    plan = mlx_lm_plan.plan(
        parse_config(config, model_name, MLX_LM),
        prompt,
        KvSpec(fmt, fmt, 64, "fp32"),
        run["weights_bytes"],
        generated,
        "cpu",
        step,
        0,
    )
    assert within(plan, run["peak_bytes"]), (plan["total_bytes"], run["peak_bytes"], plan["parts"])
    # the caches the plan holds at the end are the caches mlx_lm allocated
    end = mlx_lm_plan.moments(
        parse_config(config, model_name, MLX_LM),
        prompt,
        KvSpec(fmt, fmt, 64, "fp32"),
        generated,
        "cpu",
        step,
        0,
    )[-1]
    assert end.kv_bytes == run["kv_bytes_end"]


@pytest.mark.parametrize("backend", mlx_lm_plan.BACKENDS)
@pytest.mark.parametrize("prompt", [1, 2049, 4096, 9000, 20481])
def test_the_peak_from_the_kept_steps_is_the_peak_of_every_step(backend, prompt):
    g = preset_geometry("gemma-3-4b")  # sliding and full layers
    for spec in (KvSpec(), KvSpec("mlx-q4", "mlx-q4")):
        plan = mlx_lm_plan.plan(g, prompt, spec, 0, 3, backend)
        walk = max(mlx_lm_plan.moments(g, prompt, spec, 3, backend), key=lambda m: m.bytes)
        assert plan["kv_bytes"] + plan["compute_bytes"] == walk.bytes


def test_every_part_kind_has_its_words_in_both_languages():
    from kvsite import i18n

    g = preset_geometry("llama-3.2-1b")
    kinds = set()
    for spec in (KvSpec(), KvSpec("mlx-q8", "mlx-q8")):
        for prompt, backend in ((5001, "cpu"), (300, "metal")):
            plan = mlx_lm_plan.plan(g, prompt, spec, 1, 1, backend, quantized_kv_start=0)
            kinds |= {p["kind"] for p in plan["parts"]}
            assert plan["text_prefix"] == "mlx_"
            steps = mlx_lm_plan.moments(g, prompt, spec, 1, backend, quantized_kv_start=0)
            kinds |= {p.kind for m in steps for p in m.parts}
    assert kinds == {
        "inflight",
        "weights",
        "kv",
        "growth",
        "scores",
        "mask",
        "activations",
        "conversion",
        "logits",
    }
    for lang in ("en", "ja"):
        t = i18n.translator(lang)
        for kind in kinds:
            assert t(f"calc.plan_rule_mlx_{kind}") != f"calc.plan_rule_mlx_{kind}", (lang, kind)


def test_metals_command_buffers_in_flight_are_bounded_by_the_chip_and_by_the_steps_own_arrays():
    """Metal keeps an op's inputs until its command buffer finishes: at most 12 buffers of the chip's commit size
    (mlx's device.cpp decides by the GPU architecture name's last letter: 50 MiB for 's' and 'd', 40 for 'g'; a base
    chip 40, a Max or Ultra 50, a Pro the larger since its letter is not in its name), never more than the step's
    own arrays; a decode step's are small. Without a chip the larger size."""
    g = preset_geometry("qwen3-4b")
    spec = KvSpec("bf16", "bf16", 64, "bf16")

    def in_flight(prompt, chip=None, generated=0, sequences=1):
        plan = mlx_lm_plan.plan(
            g, prompt, spec, 0, generated, "metal", chip=chip, sequences=sequences
        )
        (part,) = [p for p in plan["parts"] if p["kind"] == "inflight"]
        assert part["bytes"] == plan["in_flight_bytes"]
        return part["bytes"]

    assert in_flight(2176, "M4 Max (40-core GPU)") == 12 * 50 * MIB
    assert in_flight(2176, "M2 Ultra") == in_flight(2176) == 12 * 50 * MIB
    assert in_flight(2176, "Apple M1") == 12 * 40 * MIB
    assert in_flight(2176, "M3 Pro") == 12 * 50 * MIB  # a Pro can report an 's' name: the larger
    assert mlx_metal.command_buffer_mib("M4 Pro", "applegpu_g16g")[0] == 40  # the name decides
    assert mlx_metal.command_buffer_mib("M4 Pro", "applegpu_g16s")[0] == 50
    assert in_flight(2176, "M4 Max", sequences=4) == 12 * 50 * MIB  # per buffer, not per sequence
    # two prompt tokens, then one: the step's own arrays (7 hidden, 4 query, 2 MLP widths, bf16, 36 layers)
    assert in_flight(3, "M4 Max") == 2 * (7 * 2560 + 4 * 4096 + 2 * 9728) * 2 * 36
    for bad in (
        "",
        7,
        "Intel Xeon",
        "M4 Maxx",
    ):  # a chip it cannot class is refused by name, never a default
        with pytest.raises(KvError, match="chip"):
            mlx_lm_plan.plan(g, 10, spec, chip=bad)


PEAKS = Path(__file__).resolve().parents[1] / "recordings" / "measured-linux-cpu-mlx-lm-peaks.yaml"


def _peak_rows():
    from kvcore.recordings import store as recordings

    rec = recordings.load(PEAKS)
    return rec, [
        pytest.param(
            r, id=f"{r['prompt_tokens']}-{r['generated']}-{r['prefill_step']}-{r['kv_format']}"
        )
        for r in rec.rows("peak")
    ]


PEAK_REC, PEAK_ROWS = _peak_rows()


def test_the_peak_recording_is_a_sweep_dense_enough_to_draw():
    """Both prefill steps across every 256 boundary to 1,024, and quantized caches."""
    rows = PEAK_REC.rows("peak")
    prompts = {(r["prefill_step"], r["prompt_tokens"]) for r in rows if r["kv_format"] == "fp32"}
    for step in (512, 2048):
        assert {(step, b + d) for b in (256, 512, 768, 1024) for d in (-1, 0, 1)} <= prompts
    assert {r["kv_format"] for r in rows} >= {"fp32", "mlx-q8", "mlx-q4"}
    # the growth step right after a 256-token chunk (a 257-token prompt): the old buffer, the new rows' zeros and the
    # grown buffer at once, the one place the plan once missed (it counted the old buffer only)
    assert {(257, 1, 512, "fp32"), (257, 1, 2048, "fp32")} <= {
        (r["prompt_tokens"], r["generated"], r["prefill_step"], r["kv_format"]) for r in rows
    }


@pytest.mark.parametrize("row", PEAK_ROWS)
def test_the_plan_holds_to_every_run_of_the_bundled_peak_recording(row):
    """A recorded run (each repeat) against the plan for the same prompt, tokens, prefill step, format and
    quantized_kv_start on the CPU backend: the caches it holds at the end equal the caches the run measured
    (allocated: .nbytes; used: the rows held), and the peak is within the plan's tolerance."""
    from kvcore.memory.formulas import kv_bytes

    model = PEAK_REC.data["model"]
    g = parse_config(model["config"], model["name"], MLX_LM)
    r = row
    spec = KvSpec(r["kv_format"], r["kv_format"], 64, model["activation_dtype"])
    start = r.get("quantized_kv_start", mlx_lm_plan.QUANTIZED_KV_START)
    args = (g, r["prompt_tokens"], spec)
    end = mlx_lm_plan.moments(*args, r["generated"], "cpu", r["prefill_step"], start)[-1]
    assert end.kv_bytes == pytest.approx(r["allocated_mib"] * MIB, abs=2)
    if r["kv_format"] == "fp32":
        used = kv_bytes(g, r["prompt_tokens"] + r["generated"], spec)
        assert used == pytest.approx(r["used_mib"] * MIB, abs=2)
    plan = mlx_lm_plan.plan(*args, 0, r["generated"], "cpu", r["prefill_step"], start)
    for peak in r["peak_runs_mib"]:
        assert within(plan, peak * MIB), (plan["total_bytes"] / MIB, peak, plan["parts"])


@pytest.mark.parametrize("window", [None, 128, 512, 4096])
def test_a_chunked_trace_is_the_full_walk_without_walking_it(window):
    """kvcore.memory.allocsim.ChunkedTrace against trace(), state by state: whole prefill chunks of every step a reader
    can pick (and steps that are not aligned to 256, walked), the last prompt token and generated tokens, a KVCache
    and a RotatingKVCache; and a 10^8-token prompt in chunks of 64 is not walked chunk by chunk."""
    from kvcore.memory.allocsim import ChunkedTrace, trace
    from kvcore.memory.formulas import prefill_chunks

    cls = "RotatingKVCache" if window else "KVCache"
    for step in (1, 64, 100, 128, 256, 600, 2048):
        for prompt in (2, 255, 257, 1000, 5000, 9050):
            for generated in (0, 5):
                updates = prefill_chunks(prompt, step) + [1] * generated
                lazy = ChunkedTrace(cls, updates, step, (prompt - 1) // step, window)
                full = trace(cls, updates, max_size=window)
                assert len(lazy) == len(full)
                assert [(s.offset, s.capacity, s.idx) for s in full] == [
                    (lazy[i].offset, lazy[i].capacity, lazy[i].idx) for i in range(len(full))
                ], (step, prompt, generated)
                assert lazy.max_capacity() == max(s.capacity for s in full)
    huge = prefill_chunks(10**8, 64)
    lazy = ChunkedTrace(cls, huge, 64, (10**8 - 1) // 64, window)
    assert len(lazy.rest) + len(lazy.head) < 100 and lazy[-1].offset == 10**8
    with pytest.raises(KvError, match="chunks of 64 tokens"):
        ChunkedTrace(cls, [64, 63, 1], 64, 2, window)


def test_the_plan_keeps_every_step_that_can_hold_the_peak():
    """plan() walks only the steps that can hold the peak (the last chunks of each size, the last one that grows a
    cache, a sliding window filling, the single tokens, the conversion): the same peak as every step, for prefill
    steps that grow the caches only every few chunks too."""
    for name in ("llama-3.1-8b", "gemma-3-4b"):
        g = preset_geometry(name)
        for step in (64, 128, 300, 2048):
            for prompt in (9050, 20000):
                for spec in (KvSpec(), KvSpec("mlx-q4", "mlx-q4")):
                    for backend in ("cpu", "metal"):
                        plan = mlx_lm_plan.plan(g, prompt, spec, 0, 2, backend, step)
                        walk = mlx_lm_plan.moments(g, prompt, spec, 2, backend, step)
                        peak = max(walk, key=lambda m: m.bytes)
                        assert plan["kv_bytes"] + plan["compute_bytes"] == peak.bytes, (
                            name,
                            step,
                            prompt,
                        )
