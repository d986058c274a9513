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
        get_runtime("mlx_lm").options(1, unified=True)
    assert LCPP.options(4, unified=True) == llamacpp.Options(4, unified=True)


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
