"""The chapters' chart frames (kvcore.views.memory) held to their sources: the recordings and the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvcore.inputs.preset_files import load_preset, preset_names
from kvcore.inputs.presets import preset_geometry
from kvcore.memory import allocsim
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import formula_terms, kv_bytes
from kvcore.recordings.store import load
from kvcore.timing import hardware
from kvcore.views import chart_parts, what_if
from kvcore.views import memory as views
from kvcore.views import savings as savings_views
from kvcore.views.chart_parts import MAX_ROWS

ROOT = Path(__file__).resolve().parents[1]
CPU = load(ROOT / "recordings" / "measured-linux-cpu-demo-mlx-cpu.yaml")
ARTICLE_A = load(ROOT / "recordings" / "published-article-a-m5-pro.yaml")
ARTICLE_B = load(ROOT / "recordings" / "published-article-b-t4-mechanism.yaml")
LLAMA_1B = preset_geometry("llama-3.2-1b")


@pytest.mark.parametrize("tokens", [260, 600, 1667, 1668, 2048, 100_000])
def test_the_trap_is_drawn_from_its_breakpoints_whatever_the_token_count(tokens):
    curve = views.trap_curve(LLAMA_1B, tokens)
    alloc = curve[curve["series"] == "allocated"].set_index("tokens")["mib"]
    steps = -(-tokens // allocsim.STEP)  # one row per 256-block, plus the end
    assert len(curve) <= steps + 1 + 4 < MAX_ROWS
    assert (
        alloc[1] == 8.0 and alloc[257] == 16.0 and alloc.index.max() == tokens
    )  # 8.0 -> 16.0 MiB at 257
    for t in (1, tokens):  # used and theory are straight lines: their ends are exact
        assert (
            curve[(curve["series"] == "used") & (curve["tokens"] == t)]["mib"].item()
            == t * 32768 / 2**20
        )


def test_trap_points_are_only_kvcache_token_by_token_in_the_chosen_format():
    pts = views.trap_measured([CPU], "fp16")
    rows = [
        r for r in CPU.rows("trap") if r["cache"] == "KVCache" and r["pattern"] == "token by token"
    ]
    assert len(pts) == 3 * len(rows) and len(rows) < len(CPU.rows("trap"))
    allocated = pts[pts["series"] == "allocated"].set_index("tokens")["mib"].to_dict()
    assert allocated == {r["tokens"]: r["allocated_mib"] for r in rows}
    assert views.trap_measured([CPU], "mlx-q4").empty  # it measured the fp16 KVCache only
    assert set(views.trap_measured([ARTICLE_A], "fp16")["tokens"]) == {256, 257}
    unstated = {k: v for k, v in ARTICLE_A.data["model"].items() if k != "kv_format"}
    assert "kv_dtype" not in ARTICLE_A.data.get("method", {}).get("trap", {})
    silent = type(ARTICLE_A)(path=ARTICLE_A.path, data={**ARTICLE_A.data, "model": unstated})
    assert views.trap_format(silent) is None and views.trap_measured([silent], "fp16").empty


def test_mechanism_totals_are_a_runs_last_cumulative_row_and_its_speedup_comes_from_the_largest_n():
    last = max(CPU.rows("mechanism"), key=lambda r: r["new_tokens"])
    totals = views.mechanism_totals(CPU)
    assert (totals["new_tokens"], totals["with_cache_s"], totals["without_cache_s"]) == (
        64,
        last["with_cache_s"],
        last["without_cache_s"],
    )
    assert totals["speedup"] > 10  # 48.9 s vs 2.9 s; the first (warm-up) row alone says 0.78x
    df = views.mechanism_measured([ARTICLE_B, CPU])
    assert len(df) == 4 and df["seconds"].sum() == pytest.approx(
        11.7 + 61 + last["with_cache_s"] + last["without_cache_s"]
    )
    assert views.mechanism_totals(ARTICLE_B)["speedup"] == pytest.approx(61 / 11.7)


def test_what_if_predicts_nothing_where_the_weights_do_not_fit_the_chip():
    h100 = hardware.get_chip("NVIDIA H100 SXM")
    big = preset_geometry("llama-3.1-70b")
    assert what_if.what_if(
        big, "bf16", KvSpec(), h100, 0.7, 131072
    ).empty  # 141 GB of weights, 80 GB of memory
    q8 = what_if.what_if(big, "mlx-q8", KvSpec(), h100, 0.7, 131072)
    top = int(q8["context"].max())
    assert 0 < top < 131072  # 8-bit weights fit; the KV of the longest contexts does not
    from kvcore.memory.formulas import weights_bytes

    assert (
        weights_bytes(big, "mlx-q8") + kv_bytes(big, top)
        <= what_if.chip_memory_bytes(h100)
        < weights_bytes(big, "mlx-q8") + kv_bytes(big, 2 * top)
    )


def test_what_if_stops_at_the_models_own_limit():
    qwen = preset_geometry("qwen3-4b")
    df = what_if.what_if(qwen, "mlx-q4", KvSpec(), hardware.get_chip("M5 Pro"), 0.7, 131072)
    assert df["context"].max() == qwen.max_position_embeddings == 40960


def test_formats_of_equal_cost_share_one_line_and_one_name():
    names = savings_views.format_groups(
        preset_geometry("llama-3.1-8b"),
        ["fp16", "fp8", "mlx-q8", "q8_0", "mlx-q4", "q4_0", "turbo3"],
    )
    assert (
        names["mlx-q8"] == names["q8_0"] == "mlx-q8 = q8_0"
        and names["mlx-q4"] == names["q4_0"] == "mlx-q4 = q4_0"
    )
    curve = savings_views.formats_curve(preset_geometry("llama-3.1-8b"), list(names), 131072)
    assert sorted(curve["format"].unique()) == sorted(set(names.values()))  # 5 lines, each visible


def test_what_fits_stops_at_the_models_limit_and_says_what_memory_alone_allows():
    g = preset_geometry("llama-3.1-8b")
    df = savings_views.fits_table(g, "mlx-q4", 36, ["fp16", "turbo3"]).set_index("format")
    assert (df["max_context"] == 131072).all() and df["capped"].all()
    # what the chart once drew, unmarked: 956,000 tokens in the 27 GiB the GPU may use on a 36 GB Mac
    assert df.loc["turbo3", "memory_max_context"] > 900_000
    small = savings_views.fits_table(g, "mlx-q4", 8, ["fp16"]).set_index("format")
    assert not small.loc["fp16", "capped"] and small.loc["fp16", "max_context"] < 131072


def test_an_mla_model_is_compared_with_the_multi_head_attention_it_replaces():
    g = preset_geometry("deepseek-v3")
    dims = savings_views.mla_mha_dims(load_preset("deepseek-v3")["config"])
    assert dims == (128 + 64, 128)
    df = savings_views.heads_compare(g, 32768, mha_dims=dims).set_index("variant")
    assert list(df.index) == ["mha", "mla"]
    assert df.loc["mla", "vs_mha"] == pytest.approx(
        (512 + 64) / (128 * (192 + 128))
    )  # one latent vs 128 heads' K and V
    assert savings_views.mla_mha_dims(load_preset("llama-3.1-8b")["config"]) is None


@pytest.mark.parametrize("model", preset_names())
@pytest.mark.parametrize("kv", [("fp16", "fp16"), ("mlx-q8", "mlx-q4"), ("q4_0", "turbo3")])
def test_the_written_out_formula_multiplies_out_to_the_engines_total(model, kv):
    g, spec = preset_geometry(model), KvSpec(*kv)
    try:
        terms = formula_terms(g, 40000, spec)
    except Exception as e:  # a format that cannot store this model's rows (mlx group size) is refused by the engine too
        with pytest.raises(type(e)):
            kv_bytes(g, 40000, spec)
        return
    total = 0
    for t in terms["terms"]:
        if t["kind"] == "linear":
            total += t["layers"] * t["state_bytes"]
            continue
        per = t["kv_heads"] * (t["k_dim"] * t["k_bytes"] + t["v_dim"] * t["v_bytes"])
        total += t["layers"] * per * t["tokens"]
    assert total == terms["total"] == kv_bytes(g, 40000, spec)


def test_article_as_formula_for_llama_3_2_1b():
    terms = formula_terms(LLAMA_1B, 32768)
    (t,) = terms["terms"]
    assert (t["layers"], t["kv_heads"], t["k_dim"], t["k_bytes"], t["tokens"], t["same"]) == (
        16,
        8,
        64,
        2.0,
        32768,
        True,
    )
    assert (
        terms["total"] == 2**30 and terms["per_token"] == 32768
    )  # 1 GiB at 32K; 32 KiB per token, as the home page says


def test_each_source_keeps_one_colour_whatever_else_is_drawn():
    colours = chart_parts.source_colors([CPU, ARTICLE_A, ARTICLE_B])
    assert len(set(colours.values())) == 3
    assert chart_parts.source_colors([ARTICLE_B, ARTICLE_A, CPU]) == colours


def test_the_traps_slack_is_the_share_of_allocated_rows_not_in_use():
    """As the page's note defines it, (capacity - tokens) / capacity: 257 tokens in a 512-row cache leave 49.8 %
    of the rows unused (not 99.2 %, which is the unused rows over the tokens held)."""
    rows = views.chunking_table(preset_geometry("llama-3.2-1b"), ["257", "256", "300+300"])
    slack = dict(zip(rows["updates"], rows["slack_pct"]))
    assert rows["capacity"].tolist() == [512, 256, 812]
    assert round(slack["257"], 1) == 49.8 and slack["256"] == 0
    assert slack["300+300"] == pytest.approx(100 * 212 / 812)


# ---------------------------------------------------------------- mlx_lm's peak: the third line of the trap


def _peaks_recording(tmp_path, change=None):
    """The bundled peak recording, or a copy of it with `change` applied to its rows (a different measurement)."""
    import yaml

    from kvcore.recordings import store

    path = ROOT / "recordings" / "measured-linux-cpu-mlx-lm-peaks.yaml"
    if change is None:
        return load(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    for row in data["sections"]["peak"]:
        change(row)
    out = tmp_path / "peaks.yaml"
    out.write_text(store.dump_text(data), encoding="utf-8")
    return load(out)


@pytest.mark.parametrize("step", [512, 2048])
def test_the_peak_chart_draws_the_recordings_runs_and_the_plan_for_them(tmp_path, step):
    from kvcore.inputs.config import parse_config
    from kvcore.runtimes import mlx_lm_plan
    from kvcore.runtimes.mlx_lm import MLX_LM
    from kvcore.units import MIB
    from kvcore.views import peaks

    rec = _peaks_recording(tmp_path)
    assert step in peaks.prefill_steps(rec)
    data = peaks.peak_lines(rec, step)
    rows = [r for r in rec.rows("peak") if r["prefill_step"] == step and r["kv_format"] == "fp32"]
    rows = sorted(
        (r for r in rows if r["generated"] == data["generated"]), key=lambda r: r["prompt_tokens"]
    )
    # the points are the recording's runs, every one of them
    assert data["points"].set_index("tokens")["mib"].to_dict() == {
        r["prompt_tokens"]: r["peak_mib"] for r in rows
    }
    # the plan line is kvcore's plan for the same runs, at every prompt between the first and the last
    model = rec.data["model"]
    g = parse_config(model["config"], model["name"], MLX_LM)
    plan = data["lines"][data["lines"]["series"] == "plan"].set_index("tokens")["mib"]
    assert list(plan.index) == list(range(rows[0]["prompt_tokens"], rows[-1]["prompt_tokens"] + 1))
    spec = KvSpec("fp32", "fp32", 64, "fp32")
    for r in rows:
        want = mlx_lm_plan.plan(g, r["prompt_tokens"], spec, 0, r["generated"], "cpu", step)
        assert plan[r["prompt_tokens"]] == want["total_bytes"] / MIB
    # allocated and used are kvcore's, and equal to what the run measured at its end
    lines = data["lines"].pivot(index="tokens", columns="series", values="mib")
    for r in rows:
        assert lines.loc[r["prompt_tokens"], "allocated"] == pytest.approx(r["allocated_mib"])
        assert lines.loc[r["prompt_tokens"], "used"] == pytest.approx(r["used_mib"])
    # another measurement moves the points, never the plan
    moved = peaks.peak_lines(_peaks_recording(tmp_path, lambda r: r.update(peak_mib=1.0)), step)
    assert set(moved["points"]["mib"]) == {1.0}
    assert moved["lines"].equals(data["lines"])


def test_the_peak_boundary_numbers_are_the_runs_either_side_of_256(tmp_path):
    from kvcore.views import peaks

    rec = _peaks_recording(tmp_path)
    near = peaks.boundary(rec, 2048)
    a, b = near["a"], near["b"]
    assert (a["tokens"], b["tokens"]) == (256, 257)
    assert b["allocated"] > a["allocated"] and b["peak"] > b["allocated"]
    row = next(
        r
        for r in rec.rows("peak")
        if r["prefill_step"] == 2048
        and r["prompt_tokens"] == b["prompt"]
        and r["kv_format"] == "fp32"
    )
    assert (b["peak"], b["allocated"], b["used"]) == (
        row["peak_mib"],
        row["allocated_mib"],
        row["used_mib"],
    )
    checks = peaks.checks(rec)  # every run, quantized caches included, against the plan for it
    assert len(checks) == len(rec.rows("peak"))
    at = checks[(checks["prompt_tokens"] == b["prompt"]) & (checks["prefill_step"] == 2048)]
    assert at["plan_mib"].tolist() == [b["plan"]] and at["peak_mib"].tolist() == [b["peak"]]


def test_the_third_line_is_drawn_from_the_bundled_run_and_never_from_a_run_without_a_config(
    tmp_path,
):
    from kvcore.views import peaks

    bundled = _peaks_recording(tmp_path)
    other = _peaks_recording(tmp_path, lambda r: r.update(prefill_step=1))  # a copy elsewhere
    assert bundled.bundled and not other.bundled
    assert peaks.peak_recordings([other, bundled]) == [bundled, other]
    import yaml

    from kvcore.recordings import store

    raw = yaml.safe_load(other.path.read_text(encoding="utf-8"))
    del raw["model"]["config"]
    path = tmp_path / "no-config.yaml"
    path.write_text(store.dump_text(raw), encoding="utf-8")
    assert peaks.peak_recordings([load(path)]) == []
