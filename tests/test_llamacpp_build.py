"""The engine against a real llama.cpp: `calc --runtime llama.cpp` prints the cache lines the build logs.

llama-cpp-python 0.3.36 (vendored llama.cpp 0c1e570), built once by scripts/test.sh into a wheel cache. For
one preset per family (and the widest geometries), a tiny GGUF (tests/gguf_files.py: the real block count,
heads, KV heads, key/value length, window and pattern, MLA and recurrent keys; 64 wide elsewhere; its tensor
table is the one llama.cpp asks for) is loaded with no_alloc, and one context is created per case of GRID
(through llama_context_params: n_seq_max, kv_unified, swa_full, n_batch, n_ubatch, type_k, type_v) in a child
process (kvcore.measure.llamacpp_probe.run_isolated). Every cache line llama.cpp logs (cells, layers, seqs/streams,
K and V MiB) must equal the engine's, and the model's bytes must equal the tensor table's.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

if not os.environ.get(
    "KVSITE_REQUIRE_LLAMACPP"
):  # scripts/test.sh installs it and sets this: never skipped there
    pytest.importorskip("llama_cpp")

import gguf_files  # noqa: E402

from kvcore.capacity import calculator
from kvcore.errors import KvError  # noqa: E402
from kvcore.inputs import gguf
from kvcore.inputs.preset_files import load_preset  # noqa: E402
from kvcore.measure.llamacpp_probe import Request, run_isolated  # noqa: E402
from kvcore.memory.formats import KvSpec  # noqa: E402
from kvcore.runtimes import llamacpp_cache as llamacpp  # noqa: E402

# one preset per family, plus the deepest (126 layers) and a 128-wide Gemma 3
PRESETS = [*gguf_files.LLAMACPP_FAMILY_PRESETS, "llama-3.1-405b", "gemma-3-4b"]
TYPES = [
    "f32",
    "f16",
    "bf16",
    "q8_0",
    "q4_0",
    "q4_1",
    "q5_0",
    "q5_1",
    "iq4_nl",
]  # common/arg.cpp kv_cache_types
MIXED = [
    ("q8_0", "q4_0"),
    ("f16", "q8_0"),
    ("q4_0", "f16"),
    ("bf16", "q5_1"),
    ("iq4_nl", "q8_0"),
    ("q5_0", "q4_1"),
]


def grid(max_seqs: int = 256) -> list[Request]:
    """The cases: odd and 256-multiple contexts up to 131,072; 1-256 sequences, split and unified; micro-batches
    and batches (clamped by the context); --swa-full; every cache type, and mixed K/V."""
    cases = [Request(n_ctx=c) for c in (1, 255, 256, 257, 1000, 4096, 4097, 8191, 65536, 131072)]
    for seqs in [s for s in (2, 3, 7, 10, 64, 256) if s <= max_seqs]:
        cases += [
            Request(n_ctx=c, n_seq_max=seqs, kv_unified=u)
            for c in (4096, 32768)
            for u in (False, True)
        ]
    cases += [
        Request(n_ctx=c, n_batch=b, n_ubatch=ub)
        for c in (300, 8192)
        for b, ub in ((2048, 1), (2048, 64), (2048, 777), (2048, 2048), (256, 512), (4096, 4096))
    ]
    cases += [
        Request(n_ctx=c, n_seq_max=s, kv_unified=s > 1, swa_full=True)
        for c in (1000, 8192)
        for s in (1, min(4, max_seqs))
    ]
    cases += [Request(n_ctx=4096, type_k=t, type_v=t) for t in TYPES]
    cases += [Request(n_ctx=5000, n_seq_max=min(3, max_seqs), type_k=k, type_v=v) for k, v in MIXED]
    cases += [
        Request(n_ctx=c, flash_attn="off") for c in (777, 4096)
    ]  # f16: the same cells with FA off
    return cases


def engine_lines(g, r: Request) -> list[str]:
    options = llamacpp.Options(r.n_seq_max, r.kv_unified, r.n_batch, r.n_ubatch, r.swa_full)
    result = calculator.calculate(
        g, r.n_ctx, r.n_seq_max, KvSpec(r.type_k, r.type_v), "gguf-file", options
    )
    return result.runtime_report["log_lines"]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("gguf")


@pytest.mark.parametrize("preset", PRESETS)
def test_calc_prints_the_cache_lines_the_real_llamacpp_logs(files, preset):
    arch, keys = gguf_files.metadata(load_preset(preset)["config"])
    path = files / f"{preset}.gguf"
    gguf_files.complete_for(path, arch, keys)
    g = gguf.geometry(path)
    # the recurrent state is allocated for real even under no_alloc (llama-memory-recurrent.cpp): few sequences there
    cases = grid(4 if g.count("linear") else 256)
    results = run_isolated(str(path), cases)
    disagreements, refused = [], []
    for r, built in zip(cases, results):
        assert not built.get("crashed"), (r, built)
        if built[
            "error"
        ]:  # llama.cpp refuses the case (MLA with K != V): the engine refuses it too
            with pytest.raises(KvError):
                engine_lines(g, r)
            refused.append(r)
            continue
        ours = engine_lines(g, r)
        if ours != built["caches"]:
            disagreements.append((r, built["caches"], ours))
    assert not disagreements, "\n".join(
        f"{r}\n  llama.cpp {b}\n  engine    {o}" for r, b, o in disagreements[:5]
    )
    assert (
        results[0]["model_bytes"] == g.file_weights.bytes
    )  # llama_model_size == the tensor table's bytes
    assert len(cases) >= 50 and len(refused) == (len(MIXED) if g.count("mla") else 0)


def test_the_grid_covers_every_family_and_option():
    from kvcore.model.families import FAMILIES

    assert {gguf_files.metadata(load_preset(p)["config"])[0] for p in PRESETS} == {
        gguf_files.ARCH[f] for f in FAMILIES
    }
    cases = grid()
    assert {r.type_k for r in cases} == set(TYPES) and any(r.type_k != r.type_v for r in cases)
    assert {r.n_seq_max for r in cases} >= {1, 256} and {r.kv_unified for r in cases} == {
        True,
        False,
    }
    assert any(r.swa_full for r in cases) and max(r.n_ctx for r in cases) == 131072
    assert {r.n_ctx % 256 for r in cases} - {0} and {r.n_ubatch for r in cases} >= {
        1,
        64,
        512,
        777,
        2048,
        4096,
    }


def test_a_dense_model_without_its_ffn_width_is_refused_as_llamacpp_refuses_it(files):
    """llama.cpp reads feed_forward_length as optional but shapes each dense layer's FFN tensors from it: a file
    without it fails to load at its first FFN tensor. The engine refuses it too, naming the key, where it once read
    a width of 0."""
    from kvcore.measure.llamacpp_probe import load_only

    arch, keys = gguf_files.metadata(load_preset("smollm2-135m")["config"])
    path = files / "no-ffn.gguf"
    tensors = gguf_files.complete_for(path, arch, keys)  # loads with the key
    gguf_files.write(
        path, arch, {k: v for k, v in keys.items() if k != ".feed_forward_length"}, tensors
    )
    error, _ = load_only(str(path))
    assert error is not None and "has wrong shape" in error and "ffn_" in error, error
    with pytest.raises(KvError) as e:
        gguf.geometry(path)
    assert e.value.code == "gguf_missing" and f"'{arch}.feed_forward_length'" in str(e.value)
