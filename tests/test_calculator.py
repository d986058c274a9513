"""The calculator's verdict and levers, each checked against the forward calculation."""

import pytest

from kvcore.capacity.calculator import (
    NOT_COUNTED,
    formats_that_fit,
    max_context,
    max_sequences,
    verdict,
)
from kvcore.capacity.memory_fit import plan_allowance
from kvcore.inputs.config import parse_config
from kvcore.inputs.preset_files import load_preset
from kvcore.inputs.presets import preset_geometry
from kvcore.limits import MAX_CONTEXT
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import kv_bytes, weights_bytes
from kvcore.recordings.store import load_all
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.runtimes.registry import runtime_of
from kvcore.timing.decode_model import bytes_per_generated_token, predict_tokens_per_s
from kvcore.timing.hardware import get_chip
from kvcore.views.what_if import ASSUMED_EFFICIENCY, efficiency, predict_decode

GB = 10**9


def geometry(name):
    return preset_geometry(name)


def fits(g, context, spec, sequences, weights, available):
    """The line the calculator's levers are solved against: the runtime's whole plan fits where it has one for this
    model (mlx_lm: generate_step's peak); else weights + KV within the memory, nothing else counted (the reference
    runtime, a model mlx_lm's plan does not cover: MLA or linear-attention layers), where the levers are upper
    bounds."""
    plan = runtime_of(g).memory_plan(g, context, spec, sequences, None, weights)
    if plan is None:
        return verdict(weights + kv_bytes(g, context, spec, sequences), available).status != "no"
    allowance = plan_allowance(plan)
    return verdict(plan["total_bytes"], available, allowance).status == "fits"


def test_without_a_plan_weights_and_kv_within_the_memory_are_never_called_a_fit():
    """No flat margin: weights + KV at 95 % of the memory is not "fits" (what the runtime holds beside them is not
    counted, and the verdict says so); at 100 % still "unplanned"; one byte over is "no"."""
    available = 100 * GB
    for need in (1, 95 * GB, available):
        v = verdict(need, available)
        assert v.status == "unplanned" and v.not_counted == NOT_COUNTED, need
    assert verdict(101 * GB, available).status == "no"
    assert verdict(available + 1, available).status == "no"
    assert "the prefill peak" in NOT_COUNTED and "activations" in NOT_COUNTED
    # with a plan nothing is left out, and its measured tolerance is the only allowance
    with_plan = verdict(95 * GB, available, 0)
    assert with_plan.status == "fits" and with_plan.not_counted == ()
    assert verdict(95 * GB, available, 5 * GB + 1).status == "tight"


def test_a_model_without_a_plan_is_judged_against_the_same_gpu_limit_and_says_so():
    """DeepSeek-V3 (MLA) under mlx_lm and Llama under the reference runtime have no plan: calculate() counts weights +
    KV, and the verdict against a Mac's GPU limit (memory_fit.gpu_limit, which llama.cpp's plan is held to too) is
    "unplanned" at 95 % of the memory, "no" at 101 %."""
    from kvcore.capacity.calculator import calculate, unplanned_because
    from kvcore.capacity.memory_fit import gpu_limit

    limit = gpu_limit(64).bytes
    for g, why in (
        (geometry("deepseek-v3"), "model"),
        (preset_geometry("llama-3.1-8b", "reference"), "runtime"),
    ):
        r = calculate(g, 4096, 1, KvSpec(), "mlx-q4")
        assert r.plan is None and r.need_bytes == r.weights_bytes + r.kv_bytes
        assert unplanned_because(g) == why
        assert verdict(r.need_bytes, int(r.need_bytes / 0.95)).status == "unplanned"
        assert verdict(r.need_bytes, int(r.need_bytes / 1.01)).status == "no"
        status = verdict(r.need_bytes, limit).status
        assert status == ("no" if r.need_bytes > limit else "unplanned")
    assert unplanned_because(geometry("llama-3.1-8b")) is None  # mlx_lm's plan covers it


def test_no_flat_share_of_the_memory_is_left_in_the_engine():
    """The old rule (weights + KV within 90 % of the memory, FIT_SHARE) is gone: no constant named for a share,
    fraction, margin or headroom of the memory, and no memory figure multiplied by a fraction, anywhere in kvcore
    (the live measurement's guard too: its estimate is an upper one, held against what the backend may use)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "kvcore"
    share = re.compile(
        r"FIT_SHARE|\b[A-Z_]*(MARGIN|HEADROOM|SAFETY|FRACTION)[A-Z_]*\s*=|"
        r"(available|memory|limit|budget|ram)\w*\s*\*\s*0?\.\d|"
        r"\b0?\.\d+\s*\*\s*\w*(available|memory|limit|budget)",
        re.I,
    )
    found = {
        f"{p.relative_to(root)}: {line.split('#')[0].strip()}"
        for p in sorted(root.rglob("*.py"))
        for line in p.read_text(encoding="utf-8").splitlines()
        if share.search(line.split("#")[0])
    }
    assert found == set()
    # the pattern finds the rule it replaced
    assert share.search("FIT_SHARE = 0.90") and share.search("int(available_bytes * 0.9) - weights")
    assert share.search("need <= 0.9 * available_bytes") and share.search("MEMORY_MARGIN = 0.1")


@pytest.mark.parametrize(
    "name",
    [
        "llama-3.1-8b",
        "smollm2-1.7b",
        "deepseek-v3",
        "gemma-3-27b",
        "qwen3-next-80b-a3b",
        "qwen3-30b-a3b",
    ],
)
@pytest.mark.parametrize("available_gb", [24, 48, 192])
def test_largest_context_fits_and_one_more_token_does_not(name, available_gb):
    g = geometry(name)
    spec, available = KvSpec(), available_gb * GB
    weights = weights_bytes(g, "mlx-q4")
    t = max_context(g, spec, 1, weights, available)
    if t == 0:
        assert not fits(g, 1, spec, 1, weights, available)
    elif t == MAX_CONTEXT:
        assert fits(g, MAX_CONTEXT, spec, 1, weights, available)
    else:
        assert fits(g, t, spec, 1, weights, available) and not fits(
            g, t + 1, spec, 1, weights, available
        )


def test_sliding_window_model_needs_more_context_than_linear_growth_would_allow():
    g = geometry("gemma-3-27b")
    spec, weights, available = KvSpec(), weights_bytes(geometry("gemma-3-27b"), "mlx-q4"), 36 * GB
    t = max_context(g, spec, 1, weights, available)
    assert fits(g, t, spec, 1, weights, available) and not fits(
        g, t + 1, spec, 1, weights, available
    )
    # every token past the windows adds only the global layers' bytes: far more context than if all grew
    naive = (available - weights) // (kv_bytes(g, 2, spec) - kv_bytes(g, 1, spec))
    assert t > naive


@pytest.mark.parametrize(
    "name, context",
    [("llama-3.1-8b", 32768), ("gemma-3-4b", 131072), ("qwen3-next-80b-a3b", 65536)],
)
def test_most_sequences_fit_and_one_more_does_not(name, context):
    g = geometry(name)
    spec, available = KvSpec(), 64 * GB
    weights = weights_bytes(g, "mlx-q4")
    s = max_sequences(g, spec, context, weights, available)
    assert s >= 1
    assert fits(g, context, spec, s, weights, available) and not fits(
        g, context, spec, s + 1, weights, available
    )


def test_suggested_formats_fit_and_the_others_do_not():
    g = geometry("llama-3.1-8b")
    spec, available, context = KvSpec(), 8 * GB, 4096
    weights = weights_bytes(g, "bf16")  # 16 GB: nothing fits
    assert formats_that_fit(g, context, 1, weights, available, spec) == []
    # 32,768 tokens in 11 GB: fp16's plan fits; a quantized cache's does not (its prefill scores, next test)
    weights, context, available = weights_bytes(g, "mlx-q4"), 32768, 11 * GB
    suggested = formats_that_fit(g, context, 1, weights, available, KvSpec("fp32", "fp32"))
    assert "fp16" in suggested and "mlx-q4" not in suggested
    for name in runtime_of(g).kv_formats:
        assert (name in suggested) == fits(g, context, KvSpec(name, name), 1, weights, available)


def test_a_quantized_cache_is_no_lever_where_its_attention_scores_pass_the_memory():
    """mlx_lm's quantized cache attends through quantized_scaled_dot_product_attention, which materialises every
    head's scores on any backend, while Metal's fused kernel does not for a plain cache: at 131,072 tokens a 2,048-
    token prefill chunk's scores (32 heads x 2,048 x 131,072 x 2 bytes, 16 GiB) outweigh what 4 bits save."""
    g = geometry("llama-3.1-8b")
    weights = weights_bytes(g, "mlx-q4")
    q4 = runtime_of(g).memory_plan(g, 131072, KvSpec("mlx-q4", "mlx-q4"), 1, None, weights)
    fp16 = runtime_of(g).memory_plan(g, 131072, KvSpec(), 1, None, weights)
    scores = next(p for p in q4["parts"] if p["kind"] == "scores")
    assert scores["bytes"] == 32 * 2047 * 131071 * 2  # the last full chunk, before the last token
    assert not any(p["kind"] == "scores" for p in fp16["parts"])
    assert q4["kv_bytes"] < fp16["kv_bytes"] / 3 and q4["total_bytes"] > fp16["total_bytes"]


def test_efficiency_comes_from_the_article_recording():
    recordings, _ = load_all()
    article = [r for r in recordings if r.id == "published-article-a-m5-pro"]
    eff = efficiency(article)
    assert "Article A" in eff.source
    assert eff.share == pytest.approx(210.84 / get_chip("M5 Pro").bandwidth_gbps, rel=0.01)


def test_efficiency_is_the_mean_share_of_the_memory_bound_runs_on_known_chips():
    """With the bundled published series: every memory-bound fit on a chip with a known peak counts once."""
    from kvcore.fits.decode import chip_for, fit_run

    recordings, _ = load_all()
    counted = [(r, fit_run(r), chip_for(r)) for r in recordings]
    counted = [
        (r, f, c) for r, f, c in counted if f is not None and c is not None and f.memory_bound
    ]
    assert len(counted) >= 3  # Article A, the M3 Max 70B run, the M3 Ultra runs
    eff = efficiency(recordings)
    assert eff.share == pytest.approx(
        sum(f.bandwidth_gbps / c.bandwidth_gbps for _, f, c in counted) / len(counted)
    )
    assert all(r.title in eff.source for r, _, _ in counted)


def test_without_recordings_the_efficiency_is_a_stated_assumption():
    eff = efficiency([])
    assert eff.source == "assumption" and eff.share == ASSUMED_EFFICIENCY
    from kvcore.timing.hardware import efficiency_range

    low, high, source = (
        efficiency_range()
    )  # the assumption sits inside the published range it cites
    assert low <= ASSUMED_EFFICIENCY <= high and "https://" in source


def test_decode_what_if_equals_the_engine_prediction():
    g = geometry("llama-3.1-8b")
    rows = predict_decode(g, [1024, 65536], KvSpec(), "mlx-q4", "M4 Max (40-core GPU)", 0.7)
    for row in rows:
        b = bytes_per_generated_token(g, row["context"], KvSpec(), "mlx-q4")
        assert row["tokens_per_s"] == predict_tokens_per_s(b, 546 * 0.7)
    assert rows[0]["tokens_per_s"] > rows[1]["tokens_per_s"]


def test_memory_curves_are_the_forward_calculation_per_format():
    from kvcore.views.what_if import log_contexts, memory_curves

    g = geometry("qwen3-8b")
    contexts = log_contexts(1024, 1_048_576)
    assert 1024 in contexts and 1_048_576 in contexts and contexts == sorted(set(contexts))
    rows = memory_curves(g, contexts, 5 * GB, 2, KvSpec())
    assert {r["format"] for r in rows} >= {"fp16", "mlx-q4", "turbo3"}
    for r in rows[:: len(contexts) // 2]:
        assert r["total_bytes"] == 5 * GB + kv_bytes(
            g, r["context"], KvSpec(r["format"], r["format"]), 2
        )


@pytest.mark.parametrize("ram", [16, 36, 128])
def test_the_savings_chapter_puts_weights_and_kv_within_the_gpu_limit_and_one_more_token_past_it(
    ram,
):
    """The longest context per KV format: weights + KV within the memory the GPU may use on a Mac with that RAM
    (memory_fit.gpu_limit: two thirds at 16 GB, three quarters at 36 and 128 on macOS 15 or earlier), nothing else counted; one more
    token passes it."""
    from kvcore.capacity.memory_fit import gpu_limit
    from kvcore.views.savings import fits_table

    g = geometry("llama-3.1-8b")
    weights, limit = weights_bytes(g, "mlx-q4"), gpu_limit(ram).bytes
    assert limit < ram * 2**30

    def within(t, spec):
        return weights + kv_bytes(g, t, spec) <= limit

    rows = fits_table(g, "mlx-q4", ram, ["fp16", "mlx-q4", "turbo3"])
    assert len(rows) == 3
    for row in rows.itertuples():
        spec = KvSpec(
            row.format, row.format
        )  # memory's own answer, before the model's 131,072-token limit caps it
        assert row.memory_max_context > 0
        assert within(row.memory_max_context, spec)
        assert not within(row.memory_max_context + 1, spec)
        assert row.max_context == min(row.memory_max_context, g.max_position_embeddings)


@pytest.mark.parametrize(
    "name, limit",
    [
        ("llama-3.1-8b", 131072),
        ("mistral-7b-v0.1", 32768),
        ("qwen3-8b", 40960),
        ("smollm2-1.7b", 8192),
    ],
)
def test_a_context_past_max_position_embeddings_is_flagged_and_one_within_is_not(name, limit):
    from kvcore.capacity.calculator import calculate

    g = geometry(name)
    assert (
        g.max_position_embeddings == limit == load_preset(name)["config"]["max_position_embeddings"]
    )
    at, past = calculate(g, limit), calculate(g, limit + 1)
    assert (at.beyond_max_position, past.beyond_max_position) == (False, True)
    assert past.max_position_embeddings == limit


def test_a_config_without_max_position_embeddings_has_no_limit_to_pass():
    from kvcore.capacity.calculator import calculate

    config = {
        k: v
        for k, v in load_preset("llama-3.2-1b")["config"].items()
        if k != "max_position_embeddings"
    }
    g = parse_config(config, "no-limit", MLX_LM)
    assert g.max_position_embeddings is None
    assert calculate(g, MAX_CONTEXT).beyond_max_position is False


def test_labelled_points_are_drawn_on_the_charts_own_scales_and_stay_out_of_the_legend():
    import pandas as pd

    from kvcore.views import charts

    df = pd.DataFrame(
        predict_decode(
            geometry("llama-3.1-8b"), [1024, 32768, 1048576], KvSpec(), "mlx-q4", "M4 Pro", 0.6
        )
    )
    rules = pd.DataFrame([{"context": 131072, "label": "model limit 131,072"}])
    marks = pd.DataFrame(
        [{"context": 32768, "tokens_per_s": df["tokens_per_s"][1], "label": "32,768: 1.0 tok/s"}]
    )
    spec = charts.marked_series_chart(
        df.assign(series="predicted"),
        "context",
        "tokens_per_s",
        "series",
        "context",
        "tok/s",
        log_x=True,
        rules=rules,
        marks=marks,
    ).to_dict()
    *own, point, text = spec["layer"]  # beside the chart's own layers, not the chart nested as one
    assert [layer["mark"]["type"] for layer in own] == ["line", "rule", "text"]  # its rules too
    assert (point["mark"]["type"], text["mark"]["type"]) == ("point", "text")
    for layer in (point, text):
        assert "color" not in layer["encoding"]  # not a series: no legend entry
        assert (layer["encoding"]["x"]["field"], layer["encoding"]["y"]["field"]) == (
            "context",
            "tokens_per_s",
        )
    assert marks.to_dict("records") in spec["datasets"].values()
    assert (
        charts.marked_series_chart(
            df.assign(series="predicted"), "context", "tokens_per_s", "series", "context", "tok/s"
        )
        .to_dict()
        .get("mark")
        is None
    )  # no marks: series_chart as it is


def test_unified_llama_cpp_slots_each_decode_as_one_slot_and_the_total_is_four_times():
    # the Calculator's what-if (issue 17): gpt-oss-20b, -c 131072, 4 slots on one unified cache, M4 Pro
    from kvcore.inputs.source import resolve_model
    from kvcore.runtimes import llamacpp_cache as llamacpp

    g, _ = resolve_model("gpt-oss-20b", "llama.cpp")
    spec = KvSpec("fp16", "fp16")
    one = predict_decode(g, [131072], spec, "gguf-mxfp4", "M4 Pro", 0.6, 1, llamacpp.Options(1))[0]
    four = predict_decode(
        g, [131072], spec, "gguf-mxfp4", "M4 Pro", 0.6, 4, llamacpp.server_defaults()
    )[0]
    assert four["tokens_per_s"] == pytest.approx(one["tokens_per_s"], rel=0.02)
    assert four["tokens_per_s_total"] == pytest.approx(4 * four["tokens_per_s"])
