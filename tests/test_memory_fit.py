"""The plan's verdict against the memory a Mac's GPU may use (kvcore.capacity.memory_fit): the limit and its source, the
allowance (the compute buffer's measured tolerance, no flat margin), the part that does not fit, and levers that
each make the plan fit while one step further does not."""

import json
import subprocess
import sys

import pytest

from kvcore.capacity.memory_fit import Limit, fit, gpu_limit, levers, plan_allowance
from kvcore.errors import KvError
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import kv_bytes, weights_bytes
from kvcore.runtimes import llamacpp_cache as llamacpp
from kvcore.runtimes.registry import get_runtime
from kvcore.timing.working_set import working_set
from kvcore.units import GIB, MIB

RT = get_runtime("llama.cpp")
G = preset_geometry("llama-3.1-8b", runtime="llama.cpp")
W = weights_bytes(G, "gguf-q4_k_m")


def plan(context=32768, spec=KvSpec(), sequences=1, options=None, fa="auto"):
    return RT.memory_plan(G, context, spec, sequences, options, W, fa)


def test_the_limit_is_macos_default_working_set_for_that_ram_or_the_wired_limit():
    limit = gpu_limit(16)
    assert limit.bytes == working_set(16).bytes and working_set(16).report.url in limit.source
    assert "iogpu.wired_limit_mb" in limit.source  # the lever a reader can pull
    assert gpu_limit(128).bytes > gpu_limit(64).bytes > gpu_limit(16).bytes
    raised = gpu_limit(16, wired_limit_mb=14000)
    assert raised.bytes == 14000 * MIB and "14,000" in raised.source
    assert gpu_limit(24, unified=False).bytes == 24 * GIB
    for bad in (
        lambda: gpu_limit(0),
        lambda: gpu_limit(16, wired_limit_mb=-1),
        lambda: gpu_limit(16, wired_limit_mb=20000),
        lambda: gpu_limit(16, unified=False, wired_limit_mb=1000),
    ):
        with pytest.raises(KvError) as refused:
            bad()
        assert "\n" not in str(refused.value)


def test_fits_tight_and_no_are_the_plan_and_its_compute_allowance_against_the_limit():
    p = plan()
    allowance = plan_allowance(p)
    assert 0 < allowance < p["compute_bytes"]
    total = p["total_bytes"]
    assert fit(p, Limit(total + allowance, "t")).status == "fits"
    assert fit(p, Limit(total + allowance - 1, "t")).status == "tight"
    assert fit(p, Limit(total - allowance, "t")).status == "tight"
    no = fit(p, Limit(total - allowance - 1, "t"))
    assert no.status == "no" and no.over_bytes > 0
    # the part that does not fit: the first whose running sum (in llama.cpp's order) passes the limit
    assert fit(p, Limit(W - 1, "t")).blocking == "CPU_Mapped model buffer"
    assert fit(p, Limit(W + 1, "t")).blocking == "CPU output buffer"
    kv_end = W + p["output_bytes"] + p["kv_bytes"]
    assert fit(p, Limit(kv_end - 1, "t")).blocking == "CPU KV buffer (kv)"
    assert fit(p, Limit(kv_end + 1, "t")).blocking == "CPU compute buffer"
    assert fit(p, Limit(10**15, "t")).blocking is None


def test_each_lever_fits_and_one_step_further_does_not():
    limit = Limit(16 * GIB, "t")
    options = llamacpp.Options(ubatch=2048)
    p = plan(65536, options=options, fa="off")
    assert fit(p, limit).status == "no"
    found = {
        lever["lever"]: lever["value"]
        for lever in levers(RT, G, 65536, KvSpec(), 1, options, W, "off", limit, 131072)
    }
    assert found["flash_attn"] == "on"
    assert fit(plan(65536, options=options, fa="on"), limit).status == "fits"
    ub = found["ubatch"]
    assert fit(plan(65536, options=llamacpp.Options(ubatch=ub), fa="off"), limit).status == "fits"
    assert (
        fit(plan(65536, options=llamacpp.Options(ubatch=ub * 2), fa="off"), limit).status != "fits"
    )
    c = found["context"]
    assert fit(plan(c, options=options, fa="off"), limit).status == "fits"
    assert fit(plan(c + 1, options=options, fa="off"), limit).status != "fits"
    assert (
        "kv_format" not in found
    )  # without flash attention llama.cpp refuses every quantized V cache
    kv_types = next(
        lever["value"]
        for lever in levers(RT, G, 131072, KvSpec(), 1, None, W, "auto", limit, 131072)
        if lever["lever"] == "kv_format"
    )
    assert kv_types and "f32" not in kv_types
    for name in kv_types:
        assert fit(plan(131072, KvSpec(name, name)), limit).status == "fits"
    # weights larger than the limit: no setting of the context helps
    assert levers(RT, G, 4096, KvSpec(), 1, None, W, "auto", Limit(W - 1, "t"), 131072) == []


def test_a_smaller_mlx_lm_prefill_step_is_a_lever_that_fits_where_the_next_larger_does_not():
    """mlx_lm's analogue of -ub (its --prefill-step-size): Llama-3.1-8B with 4-bit weights and a 4-bit cache at
    131,072 tokens on an 18 GiB GPU limit (a 24 GB Mac). The quantized cache runs attention unfused once it is
    converted, so a 2,048-token step's scores (heads x step x keys) alone are gigabytes: the plan does not fit at
    2,048, is tight at 1,024 and fits at 512, and the lever is 512 with the plan it gives."""
    rt, spec = get_runtime("mlx_lm"), KvSpec("mlx-q4", "mlx-q4")
    g = preset_geometry("llama-3.1-8b")
    w = weights_bytes(g, "mlx-q4")
    limit = gpu_limit(24)

    def mlx_plan(step):
        return rt.memory_plan(g, 131072, spec, 1, rt.options(1, prefill_step=step), w)

    assert fit(mlx_plan(2048), limit).status == "no"
    found = {x["lever"]: x for x in levers(rt, g, 131072, spec, 1, None, w, "auto", limit, 131072)}
    step = found["prefill_step"]
    assert step["value"] == 512 and step["said"] == "--prefill-step-size 512"
    assert mlx_plan(512)["prefill_step"] == 512
    assert step["need_bytes"] == mlx_plan(512)["total_bytes"] < mlx_plan(2048)["total_bytes"]
    assert fit(mlx_plan(512), limit).status == "fits"
    assert fit(mlx_plan(1024), limit).status != "fits"  # the next larger step of the list
    # from the reader's own step: at 1,024 (tight) the same 512; at 64, the smallest the list tries, nothing

    def step_lever(step):
        options = rt.options(1, prefill_step=step)
        out = levers(rt, g, 131072, spec, 1, options, w, "auto", limit, 131072)
        return next((x["value"] for x in out if x["lever"] == "prefill_step"), None)

    assert step_lever(1024) == 512 and step_lever(64) is None
    # the reference runtime has no such setting, and no plan: no step lever
    ref = preset_geometry("llama-3.1-8b", runtime="reference")
    assert get_runtime("reference").memory_plan(ref, 131072, spec, 1, None, w) is None


def _calc(*args):
    done = subprocess.run(
        [sys.executable, "-m", "kvcore", "calc", *args], capture_output=True, text=True
    )
    return done.returncode, done.stdout, done.stderr


def test_calc_ram_gives_the_verdict_with_its_limit_and_levers():
    common = [
        "--model",
        "llama-3.1-8b",
        "--weights-format",
        "gguf-q4_k_m",
        "--runtime",
        "llama.cpp",
    ]
    code, out, _ = _calc(*common, "--context", "131072", "--ram", "16", "--json")
    f = json.loads(out)["fit"]
    assert code == 0 and f["status"] == "no" and f["blocking"] == "CPU KV buffer (kv)"
    assert f["limit"]["bytes"] == gpu_limit(16).bytes and {x["lever"] for x in f["levers"]} >= {
        "context",
        "kv_format",
    }
    code, out, _ = _calc(*common, "--context", "8192", "--ram", "16")
    assert (
        code == 0
        and "fit        fits:" in out
        and "GPU limit  macOS 15 or earlier's default GPU working set" in out
    )
    code, out, _ = _calc(
        "--model", "llama-3.1-8b", "--weights-format", "mlx-q4", "--context", "8192", "--ram", "16"
    )
    assert code == 0 and "fit        fits:" in out  # mlx_lm: its own plan (generate_step's peak)
    assert "Peak memory: " in out and "attention scores" not in out  # Metal's fused attention
    mlx = ["--model", "llama-3.1-8b", "--weights-format", "mlx-q4", "--kv-format", "mlx-q4"]
    code, out, _ = _calc(*mlx, "--context", "131072", "--ram", "24", "--json")
    step = next(x for x in json.loads(out)["fit"]["levers"] if x["lever"] == "prefill_step")
    assert code == 0 and step["value"] == 512 and step["said"] == "--prefill-step-size 512"
    code, out, _ = _calc(*mlx, "--context", "131072", "--ram", "24")
    assert code == 0 and "lever      --prefill-step-size 512 fits (the plan needs " in out
    code, out, _ = _calc(*mlx, "--context", "131072", "--ram", "24", "--prefill-step-size", "512")
    assert code == 0 and "fit        fits:" in out and "prefill step 512;" in out
    code, _, err = _calc(*common, "--context", "8192", "--wired-limit-mb", "9000")
    assert code != 0 and "--ram" in err and "Traceback" not in err


def test_calc_ram_without_a_plan_counts_weights_and_kv_and_says_what_it_leaves_out():
    """The reference runtime and a model mlx_lm's plan does not know (DeepSeek-V3's MLA) have no plan: --ram judges
    weights + KV against the same GPU limit, "unplanned" when they fit (never "fits"), "no" when they do not, and
    names what is not counted; the levers are upper bounds, weights + KV within the limit and one more past it."""
    ref = ["--model", "llama-3.1-8b", "--runtime", "reference", "--weights-format", "mlx-q4"]
    code, out, _ = _calc(*ref, "--context", "8192", "--ram", "16", "--json")
    r = json.loads(out)
    f, limit = r["fit"], gpu_limit(16)
    assert code == 0 and f["status"] == "unplanned" and f["unplanned"] == "runtime"
    assert f["need_bytes"] == r["weights_bytes"] + r["kv_bytes"] <= limit.bytes
    assert f["limit"] == limit.as_dict() and f["counted"] == "weights + KV"
    assert f["not_counted"] == ["activations", "runtime buffers", "the prefill peak"]
    bound = {x["lever"]: x["value"] for x in f["levers"] if x["at_most"]}
    g, weights = preset_geometry("llama-3.1-8b", "reference"), r["weights_bytes"]
    assert weights + kv_bytes(g, bound["context"], KvSpec()) <= limit.bytes
    assert weights + kv_bytes(g, bound["context"] + 1, KvSpec()) > limit.bytes
    code, out, _ = _calc(*ref, "--context", "8192", "--ram", "16")
    assert code == 0 and "fit        unplanned: weights + KV alone fit" in out
    assert "uncounted  activations, runtime buffers, the prefill peak" in out and "fits" not in out
    assert "weights + KV only: kvcore has no memory plan here" in out  # the total says it too
    code, out, _ = _calc(*ref, "--context", "131072", "--ram", "16", "--json")
    f = json.loads(out)["fit"]
    assert f["status"] == "no" and f["blocking"] == "KV cache" and f["over_bytes"] > 0
    code, out, _ = _calc("--model", "deepseek-v3", "--context", "4096", "--ram", "16", "--json")
    f = json.loads(out)["fit"]
    assert f["status"] == "no" and f["unplanned"] == "model" and f["blocking"] == "weights"
    assert f["levers"] == []
