"""Will it fit (kvcore.capacity): one frozen request, one typed result, read alike by the CLI and the page; equal
questions are equal requests; the levers' solving holds to trying every value; a long prompt's chunks are runs."""

from __future__ import annotations

import ast
import bisect
import itertools
import json
import random
from pathlib import Path

import pytest

from harness.inputs import run_kvcore
from kvcore.capacity import memory_fit
from kvcore.capacity.calculator import answer
from kvcore.capacity.memory_fit import Limit
from kvcore.capacity.request import ModelSource, Request
from kvcore.errors import KvError
from kvcore.inputs.presets import preset_geometry
from kvcore.limits import MAX_CONTEXT
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import prefill_chunks, prefill_runs, weights_bytes
from kvcore.memory.runs import Runs
from kvcore.runtimes.registry import get_runtime

ROOT = Path(__file__).resolve().parent.parent


def test_equal_questions_are_equal_requests():
    """A setting at its default, llama.cpp's spelling of a format and the settings' order do not make another
    request: a cache keyed by the request answers each link that asks the same."""
    plain = Request(ModelSource("llama-3.1-8b"), 32768, runtime="llama.cpp", memory_bytes=2**34)
    spelled = Request(
        ModelSource("llama-3.1-8b"),
        32768,
        k_format="f16",
        runtime="llama.cpp",
        settings=(("swa_full", False), ("ubatch", 512), ("unified", False)),
        memory_bytes=2**34,
    )
    assert plain == spelled and hash(plain) == hash(spelled) and plain.settings == ()
    other = Request(
        ModelSource("llama-3.1-8b"), 32768, runtime="llama.cpp", settings=(("ubatch", 256),)
    )
    assert other != plain.sized() and other.settings == (("ubatch", 256),)
    assert plain.sized().memory_bytes is None and plain.sized() == spelled.sized()
    with pytest.raises(KvError, match="prefill_step"):  # another runtime's setting, by name
        Request(
            ModelSource("llama-3.1-8b"), 1024, runtime="llama.cpp", settings=(("prefill_step", 64),)
        )
    with pytest.raises(KvError, match="int3"):
        Request(ModelSource("llama-3.1-8b"), 1024, k_format="int3")


def test_the_cli_prints_the_result_the_engine_answers():
    """calc --json is Result.as_dict(): the same fields in the same order, the verdict's limit as --ram says."""
    args = ("--model", "llama-3.1-8b", "--context", "131072", "--ram", "16", "--json")
    args += ("--weights-format", "mlx-q4")
    printed = json.loads(run_kvcore("calc", *args).stdout)
    limit = memory_fit.gpu_limit(16)
    request = Request(
        ModelSource("llama-3.1-8b"), 131072, weights_format="mlx-q4", memory_bytes=limit.bytes
    )
    r = answer(request, preset_geometry("llama-3.1-8b", "mlx_lm"))
    expected = r.as_dict(source=printed["source"], limit=limit)
    assert list(printed) == list(expected) and printed == json.loads(json.dumps(expected))
    assert r.fit.status == printed["fit"]["status"] == "no" and r.fit.lever("context")


@pytest.mark.parametrize(
    "name, runtime, context",
    [
        ("llama-3.2-1b", "mlx_lm", 1_048_576),
        ("gemma-3-4b", "mlx_lm", 524_288),
        ("llama-3.1-8b", "llama.cpp", 32768),
        ("gpt-oss-20b", "llama.cpp", 65536),
    ],
)
def test_the_most_sequences_found_by_halving_are_what_trying_every_count_finds(
    name, runtime, context
):
    rt, g = get_runtime(runtime), preset_geometry(name, runtime)
    weights = weights_bytes(g, "mlx-q4" if runtime == "mlx_lm" else "gguf-q4_k_m")
    spec, options = KvSpec(), rt.options(1)
    top = min(rt.max_sequences, MAX_CONTEXT // context)
    one = rt.memory_plan(g, rt.plan_context(context, 1), spec, 1, options, weights, "auto")
    for share in (0.5, 1, 3, 9, 40):  # room for none, one, a few, many sequences
        limit = Limit(int(weights + share * (one["total_bytes"] - weights)), "t")
        args = (g, spec, context, options, weights, "auto", limit, MAX_CONTEXT)
        every = max(
            (
                n
                for n in range(1, min(top, 64) + 1)
                if memory_fit._fits(
                    rt, g, rt.plan_context(context, n), spec, n, options, weights, "auto", limit
                )
            ),
            default=0,
        )
        assert memory_fit.most_sequences(rt, *args) == every, (name, share)


def test_a_long_prompts_chunks_are_runs_that_read_as_the_list():
    assert list(prefill_runs(4096)) == prefill_chunks(4096) == [2048, 2047, 1]
    huge = prefill_runs(10**8, 64)
    assert len(huge) == (10**8 - 1) // 64 + 2 and huge.runs == ((64, 1_562_499), (63, 1), (1, 1))
    assert huge.offset(len(huge)) == 10**8 and huge[-2] == 63
    rng = random.Random(7)
    for _ in range(400):
        runs = [(rng.randint(1, 300), rng.randint(0, 4)) for _ in range(rng.randint(0, 4))]
        seq, flat = Runs(runs), [v for v, n in runs for _ in range(n)]
        sums = list(itertools.accumulate(flat, initial=0))
        a, b = rng.randint(-3, len(flat) + 2), rng.randint(-3, len(flat) + 2)
        assert list(seq) == flat and list(seq[a:b]) == flat[a:b]
        assert [seq.offset(i) for i in range(len(flat) + 1)] == sums
        assert all(seq.reaching(x) == bisect.bisect_left(sums, x) for x in range(sum(flat) + 2))


def test_the_site_imports_nothing_from_the_command_line():
    """The CLI sits on top of the engine: the site and its pages read kvcore below it (the live runs' default
    weights come from kvcore.memory.formulas, not kvcore.cli)."""
    found = []
    for path in [*ROOT.glob("kvsite/**/*.py"), *ROOT.glob("pages/*.py"), ROOT / "streamlit_app.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.startswith("kvcore.cli")]
    assert found == []
