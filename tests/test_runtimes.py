"""A runtime is one object (kvcore.runtimes.registry): what decode reads per step, its options' limits, its refusals."""

from __future__ import annotations

import pathlib
import re

import pytest

from kvcore.errors import KvError
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import kv_bytes
from kvcore.runtimes import llamacpp_cache as llamacpp
from kvcore.runtimes.registry import RUNTIMES, get_runtime, runtime_of

LCPP = get_runtime("llama.cpp")
ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_an_unknown_runtime_is_refused_with_its_name():
    with pytest.raises(KvError, match="'no_such_rt'") as e:
        get_runtime("no_such_rt")
    assert e.value.code == "runtime_unknown" and "mlx_lm" in str(e.value)
    with pytest.raises(KvError, match="'no_such_rt'"):
        preset_geometry("llama-3.2-1b", "no_such_rt")  # never another runtime's window rules


def test_a_geometry_read_under_one_runtime_is_refused_by_another():
    with pytest.raises(KvError, match="mlx_lm's rules, not llama.cpp's"):
        LCPP.kv_bytes(preset_geometry("gpt-oss-20b"), 4096, KvSpec())


def test_four_unified_slots_read_the_shared_cache_once_per_step_not_once_per_slot():
    """gpt-oss-20b at -c 131072: one slot and 4 slots on one unified cache read the same cells per step
    (the slots share n_ctx cells), and each step makes one token per slot (issue 17)."""
    g = preset_geometry("gpt-oss-20b", "llama.cpp")
    one = LCPP.decode_read(g, 131072, KvSpec())
    four = LCPP.decode_read(g, 131072, KvSpec(), 4, llamacpp.Options(unified=True))
    assert one.cells == four.cells == 131072  # not 4 x 131,072
    # only the SWA cache grows: PAD256(4 x 128 + 512) = 1,024 cells against 768, x 12 layers x (K + V) x 8 heads x 64 x f16
    assert four.kv_bytes == one.kv_bytes + (1024 - 768) * 12 * 2 * 8 * 64 * 2
    assert four.sequences == 4 and four.per_sequence == four.kv_bytes / 4
    assert four.kv_bytes < 1.01 * LCPP.kv_bytes(
        g, 131072, KvSpec(), 4, llamacpp.Options(unified=True)
    )


def test_split_slots_each_read_their_own_stream():
    g = preset_geometry("qwen-7b-chat", "llama.cpp")
    split = LCPP.decode_read(g, 32768, KvSpec(), 4)  # 4 streams of 8,192 cells
    assert split.cells == 32768 and split.kv_bytes == LCPP.kv_bytes(g, 32768, KvSpec(), 4)
    early = LCPP.decode_read(
        g, 32768, KvSpec(), 4, tokens=700
    )  # 700 tokens each: 768 cells per stream
    assert early.cells == 4 * 768
    assert (
        early.kv_bytes == 4 * 768 * 32 * 2 * 4096 * 2
    )  # streams x cells x layers x (K + V) x row x f16
    unified = LCPP.decode_read(g, 32768, KvSpec(), 4, llamacpp.Options(unified=True), tokens=700)
    assert (
        unified.cells == llamacpp.read_cells(4 * 700, 32768) == 2816
    )  # the furthest cell of the shared array


def test_token_runtimes_read_every_sequence_to_its_offset():
    g = preset_geometry("llama-3.2-1b")
    read = get_runtime("mlx_lm").decode_read(g, 4096, KvSpec(), 3, tokens=1000)
    assert read.kv_bytes == kv_bytes(g, 1000, KvSpec(), 3) and read.cells == 3000


@pytest.mark.parametrize("name", list(RUNTIMES))
def test_every_runtime_answers_for_every_preset(name):
    runtime = get_runtime(name)
    g = preset_geometry("gemma-3-4b", name)
    assert runtime_of(g) is runtime
    report = runtime.report(g, 8192, KvSpec(), 2, None)
    read = runtime.decode_read(g, 8192, KvSpec(), 2)
    assert 0 < read.kv_bytes <= report["kv_bytes"] and report["formula"]
    assert "fp16" in runtime.kv_formats and runtime.max_sequences >= 1
    # what it caches in when told nothing: one of its own formats, or the activation dtype (None)
    assert runtime.default_kv_format in (None, *runtime.kv_formats)


def test_llama_cpp_options_keep_their_limits():
    with pytest.raises(KvError, match="1 to 256 sequences"):
        LCPP.options(257)
    with pytest.raises(KvError, match="--ubatch must be a whole number from 1 to"):
        LCPP.options(1, ubatch=0)
    with pytest.raises(KvError, match="no option 'flash'"):
        LCPP.options(1, flash=True)
    with pytest.raises(KvError, match="no options of its own"):
        get_runtime("reference").options(1, unified=True)
    with pytest.raises(KvError, match="mlx_lm has no option 'unified'; its options: prefill_step"):
        get_runtime("mlx_lm").options(1, unified=True)
    with pytest.raises(KvError, match="mlx_lm's options are a kvcore.runtimes.mlx_lm.Options"):
        get_runtime("mlx_lm").options(1, llamacpp.Options())
    assert LCPP.options(4, unified=True) == llamacpp.Options(4, unified=True)


def _mlx_lm_generate_defaults() -> tuple[int, int]:
    """mlx_lm's own defaults, read from the installed generate.py (never imported: it needs mlx): the value of
    DEFAULT_PREFILL_STEP_SIZE and generate_step's prefill_step_size default."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("mlx_lm")
    if spec is None:
        pytest.skip("mlx_lm is not installed here")
    tree = ast.parse((pathlib.Path(spec.origin).parent / "generate.py").read_text())
    constant = next(
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(getattr(t, "id", "") == "DEFAULT_PREFILL_STEP_SIZE" for t in node.targets)
    )
    step = next(
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "generate_step"
    )
    args = step.args.args + step.args.kwonlyargs
    defaults = dict(
        zip([a.arg for a in step.args.args][-len(step.args.defaults) :], step.args.defaults)
    ) | {a.arg: d for a, d in zip(step.args.kwonlyargs, step.args.kw_defaults) if d is not None}
    assert "prefill_step_size" in [a.arg for a in args]
    return constant, defaults["prefill_step_size"].value


def test_mlx_lm_prefill_step_is_its_setting_and_follows_into_its_plan_peak_and_chunk():
    """mlx_lm's --prefill-step-size: its default is mlx_lm's own (generate.py), its range is refused in one
    sentence, and the step reaches the memory plan, the prefill peak of a sliding-window cache and the prefill
    chunk; the reference runtime, which has no such setting, keeps generate_step's default."""
    mlx = get_runtime("mlx_lm")
    (setting,) = mlx.settings
    assert (setting.flag, setting.name, setting.key) == (
        "--prefill-step-size",
        "prefill_step_size",
        "mstep",
    )
    assert setting.default == mlx.options().prefill_step == 2048
    assert _mlx_lm_generate_defaults() == (2048, 2048)
    with pytest.raises(KvError, match=r"--prefill-step-size must be a whole number from 64 to"):
        mlx.options(1, prefill_step=63)
    with pytest.raises(KvError, match=r"--prefill-step-size must be a whole number"):
        mlx.options(1, prefill_step=True)
    small = mlx.options(2, prefill_step=512)
    assert (small.sequences, small.prefill_step) == (2, 512)
    assert mlx.options(1, small).prefill_step == 512  # kept when only the sequences change
    g = preset_geometry("llama-3.2-1b")
    plan = mlx.memory_plan(g, 8192, KvSpec(), 1, small, 10**9)
    assert plan["prefill_step"] == 512 and plan["n_tokens"] <= 512
    default = mlx.memory_plan(g, 8192, KvSpec(), 1, None, 10**9)
    assert default["prefill_step"] == 2048 and plan["total_bytes"] < default["total_bytes"]
    assert mlx.prefill_chunk(8192, small) == 512 and mlx.prefill_chunk(8192) == 2048
    # a sliding-window cache holds window + step - 1 right after a prefill step: a smaller step, a smaller peak
    gemma = preset_geometry("gemma-3-27b")
    peak = {
        step: mlx.sizes(gemma, 32768, KvSpec(), 1, mlx.options(1, prefill_step=step))[
            "kv_prefill_peak_bytes"
        ]
        for step in (2048, 512)
    }
    assert peak[512] < peak[2048]
    ref = get_runtime("reference")
    assert ref.prefill_chunk(8192) == 2048 and not ref.settings
    with pytest.raises(KvError, match="no options of its own"):
        ref.options(1, prefill_step=512)


def test_no_code_outside_the_runtime_objects_compares_a_runtime_name():
    """The rule of issue 15: pages, CLI and calculator ask the runtime; only the runtime objects' modules
    (kvcore/runtimes/registry.py and a runtime's own, e.g. runtime_llamacpp.py) know names."""
    names = "|".join(re.escape(n) for n in RUNTIMES)
    compare = re.compile(
        rf"""(==|!=|\bin\b|\bis\b)\s*\(?["']({names})["']|["']({names})["']\s*(==|!=)|\bLCPP\b"""
    )
    about = re.compile(r"runtime|\.name\b|\brt\b|LCPP")
    offenders = []
    for folder in ("kvcore", "kvsite", "pages"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name == "runtimes.py" or path.name.startswith("runtime_"):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                code = line.split("#")[0]
                # a runtime's name compared where a runtime is meant (BLAS's "reference" library is another thing)
                if compare.search(code) and (about.search(code) or "LCPP" in code):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
