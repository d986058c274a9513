"""The log reader (kvcore.inputs.logs, log_reading; `python -m kvcore log`) held to real logs: the public corpus in
recordings/logs/ (each file verbatim from its thread) and the real llama.cpp on this machine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kvcore.errors import KvError
from kvcore.inputs.log_reading import NOTES, TEXTS, reading
from kvcore.limits import MAX_LOG_LINE, MAX_LOG_LINES
from kvcore.runtimes.llamacpp_plan import compute_allowance
from kvsite import i18n

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "recordings" / "logs"
REAL = CORPUS / "llamacpp-python-cpu-smollm2-135m-this-machine.log"
PUBLIC = sorted(p for p in CORPUS.glob("*.log") if p != REAL)
MIB = 1024**2

# Every size line of the public corpus, as (line, kind, agrees): True where kvcore's figure equals the printed one,
# None where the log lacks what a plan needs (most excerpts print no print_info lines) or the line is not planned
# (a host's compute buffer, a 2023 build's, Ollama's estimates without the model, mlx_lm's peak). Nothing is False
# today; a change in the reader or the plans shows here.
EXPECTED = {
    "llamacpp-2023-metal-m1max-32gb-cloning": [
        (1, "working_set", None),
        (3, "compute_buffer", None),
        (5, "metal_alloc", None),
        (6, "metal_alloc", None),
        (7, "metal_alloc", None),
    ],
    "llamacpp-2023-metal-m2-32gb-wizardlm-30b": [(19, "kv_cache", True)],
    "llamacpp-metal-gpt-oss-20b-swa": [
        (2, "kv_buffer", None),
        (3, "kv_cache", None),
        (5, "compute_buffer", None),
        (6, "compute_buffer", None),
    ],
    "llamacpp-metal-intel-amd-mixtral": [
        (1, "metal_alloc", None),
        (2, "compute_buffer", None),
        (3, "compute_buffer", None),
    ],
    "llamacpp-metal-m4-16gb-qwen2": [
        (11, "working_set", None),
        (13, "kv_buffer", None),
        (14, "kv_cache", None),
        (15, "output_buffer", None),
        (16, "compute_buffer", None),
        (17, "compute_buffer", None),
    ],
    "llamacpp-metal-m4-qwen2.5-0.5b-2026": [
        (16, "working_set", None),
        (457, "metal_alloc", None),
        (461, "model_buffer", None),  # CPU_Mapped: the input embedding, the same file pages again
        (462, "model_buffer", True),  # MTL0_Mapped: the file's tensors
        (483, "output_buffer", True),
        (508, "kv_buffer", True),
        (509, "kv_cache", True),
        (521, "compute_buffer", True),  # MTL0: the Metal plan
        (522, "compute_buffer", None),  # the host's
    ],
    "llamacpp-print-info-glm-4.7-flash": [],
    "llamacpp-python-cpu-qwen3": [(3, "model_buffer", None), (18, "output_buffer", None)],
    "llamacpp-python-metal-m1pro-16gb": [
        (4, "metal_alloc", None),
        (8, "model_buffer", None),
        (9, "model_buffer", None),
    ],
    "mlx-lm-benchmark-trials": [(n, "mlx_peak", None) for n in range(3, 9)],
    "mlx-lm-m2-ultra-mistral-7b-4bit": [(2, "mlx_peak", None), (5, "mlx_peak", None)],
    "ollama-metal-m-series-16gb": [(8, "working_set", None), (12, "system_memory", None)],
    "ollama-metal-mac-96gb-offload": [(1, "ollama", None)] * 9,
    "ollama-rocm-llama3-70b-offload": [(1, "ollama", None)] * 10,
}
RUNTIMES = {"llama.cpp", "llama-cpp-python", "Ollama", "mlx_lm", "LM Studio"}


def _read(path: Path):
    return reading(path.read_text(encoding="utf-8"), path.name)


def test_the_corpus_is_the_expected_logs_each_with_its_public_source():
    assert {p.stem for p in PUBLIC} == set(EXPECTED)
    for path in PUBLIC:
        source = yaml.safe_load(path.with_suffix(".yaml").read_text(encoding="utf-8"))
        assert source["url"].startswith("https://github.com/"), path.name
        assert source["runtime"] in RUNTIMES and source["note"], path.name
        assert set(source["machine"]) == {"chip", "ram_gb", "macos"}, path.name


@pytest.mark.parametrize("path", PUBLIC, ids=lambda p: p.stem)
def test_every_size_line_of_a_public_log_is_read_and_set_beside_the_plan_or_says_why_not(path):
    r = _read(path)
    sized = [(row.n, row.kind, row.agrees) for row in r.rows if row.printed is not None]
    assert sized == EXPECTED[path.stem]
    for row in r.rows:  # each says why in a sentence of its own code
        assert row.explained and f"log.{row.code}" in {f"log.{c}" for c in TEXTS}
        if row.agrees is None and row.printed is not None and row.kind != "working_set":
            assert row.derived_bytes is None
    # no line dropped: each non-blank line is known (a row) or listed as unknown
    text = path.read_text(encoding="utf-8").splitlines()
    seen = {row.n for row in r.rows} | {n for n, _ in r.unknown_lines}
    assert seen == {n for n, line in enumerate(text, start=1) if line.strip()}
    assert all(text[n - 1] == line for n, line in r.unknown_lines)  # verbatim


def test_a_2023_log_in_mb_is_read_as_mib_and_its_kv_cache_is_the_plan_to_the_byte():
    r = _read(CORPUS / "llamacpp-2023-metal-m2-32gb-wizardlm-30b.log")
    kv = next(row for row in r.rows if row.kind == "kv_cache")
    # 60 layers x 1,024 cells x 6,656 values x 2 (K, V) x 2 bytes (f16): 1,560 MiB, printed "1560.00 MB"
    assert kv.derived_bytes == 2 * 60 * 1024 * 6656 * 2 == kv.printed_bytes
    assert r.model["arch"] == "llama" and r.settings["n_ctx"] == 1024
    assert r.notes == ("mb_1024",)


def test_the_working_set_line_and_the_verdict_come_from_the_log_itself():
    m4 = _read(CORPUS / "llamacpp-metal-m4-16gb-qwen2.log")
    assert (
        m4.verdict["limit_bytes"] == 11_453_250_000
    )  # MB = 10^6 bytes since 2024 (two thirds of 16 GiB)
    assert m4.verdict["over"] is False and m4.notes == ("mb_mixed",)
    assert m4.device == "Metal (Apple M4)"
    old = _read(CORPUS / "llamacpp-2023-metal-m1max-32gb-cloning.log")
    assert (
        old.verdict["over"] is True
    )  # the log's own warning and its running total past 21,845.34 MiB
    assert old.verdict["limit_bytes"] == round(21845.34 * MIB)


def test_the_runtime_of_each_log_is_recognised():
    runtime = {p.stem: _read(p).runtime for p in PUBLIC}
    assert {runtime[s] for s in runtime if s.startswith("ollama")} == {"Ollama"}
    assert {runtime[s] for s in runtime if s.startswith("mlx")} == {"mlx_lm"}
    assert {runtime[s] for s in runtime if s.startswith("llamacpp")} == {"llama.cpp"}


def test_every_explanation_is_the_sites_english_and_has_its_japanese():
    en, ja = i18n.texts("en"), i18n.texts("ja")
    for code, text in TEXTS.items():
        assert en[f"log.{code}"] == text and f"log.{code}" in ja
    for code, text in NOTES.items():
        assert en[f"log.note_{code}"] == text and f"log.note_{code}" in ja


@pytest.mark.skipif(
    not REAL.exists(),
    reason="the real llama.cpp's log is recorded by scripts/record_llamacpp_log.py",
)
def test_the_real_llamacpp_log_of_this_machine_is_re_derived():
    r = _read(REAL)
    rows = {row.kind: row for row in r.rows if row.printed is not None}
    assert r.runtime == "llama.cpp" and r.device == "CPU" and r.settings["n_ctx"] == 4096
    for kind in ("kv_cache", "kv_buffer", "output_buffer", "model_buffer"):
        assert rows[kind].agrees is True, kind
    assert (
        rows["kv_cache"].derived_bytes == 30 * 4096 * 2 * 192 * 2
    )  # SmolLM2-135M: 30 layers, 3 x 64 KV
    compute = rows["compute_buffer"]
    assert compute.agrees is True
    # every size line of the full log is set beside the plan and agrees: none left unknown or undecided
    assert all(row.agrees is True for row in r.rows if row.printed is not None), [
        (row.n, row.kind, row.agrees) for row in r.rows if row.printed is not None
    ]
    assert not [t for _, t in r.unknown_lines if "buffer size" in t or "KV self" in t]
    # the exit line states the same buffer to four decimals; the worst case is the plan's micro-batch
    assert rows["compute_exit"].derived_bytes == compute.derived_bytes
    assert abs(rows["compute_exit"].printed_bytes - compute.printed_bytes) < 0.005 * MIB
    assert r.settings["worst_case_tokens"] == 512
    assert abs(compute.derived_bytes - compute.printed_bytes) <= compute_allowance(
        compute.printed_bytes
    )


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvcore", "log", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_the_cli_json_has_the_documented_shape():
    done = _cli(str(CORPUS / "llamacpp-2023-metal-m2-32gb-wizardlm-30b.log"), "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {"runtime", "device", "model", "settings", "lines", "unknown_lines"} <= set(out)
    assert out["runtime"] == "llama.cpp" and out["model"]["n_layer"] == 60
    line = out["lines"][-1]
    assert {"n", "kind", "printed_bytes", "derived_bytes", "agrees", "explained"} <= set(line)
    assert line["kind"] == "kv_cache" and line["agrees"] is True
    assert line["printed_bytes"] == line["derived_bytes"] == 1_635_778_560
    assert out["unknown_lines"][0] == {"n": 1, "text": "main: build = 685 (dd0ff3a)"}
    human = _cli("-", stdin=(CORPUS / "llamacpp-metal-m4-16gb-qwen2.log").read_bytes())
    assert human.returncode == 0 and b"within the working-set limit" in human.stdout


@pytest.mark.parametrize(
    "name,data,words",
    [
        ("ten-mb.log", b"llama_context: n_ctx = 4096\n" * 400_000, "larger than"),
        ("binary.log", b"print_info: n_layer = 30\n\x00\x01\x02", "binary"),
        ("long-line.log", b"x" * 10**6, f"at most {MAX_LOG_LINE:,}"),
        ("many-lines.log", b"a\n" * 10**5, f"at most {MAX_LOG_LINES:,}"),
    ],
)
def test_hostile_input_is_refused_in_one_sentence(tmp_path, name, data, words):
    path = tmp_path / name
    path.write_bytes(data)
    done = _cli(str(path))
    assert done.returncode == 2 and done.stdout == b""
    message = done.stderr.decode()
    assert message.count("\n") == 1 and message.startswith("error: ") and words in message
    assert "Traceback" not in message


def test_the_reader_refuses_before_reading_a_line():
    with pytest.raises(KvError) as e:
        reading("ok\n" * (MAX_LOG_LINES + 1))
    assert e.value.code == "log_lines_many"


# A public log kept out of the corpus, to hold the reader to lines it was not written against: an M1 Pro's
# llama-cpp-python run pasted in argilla-io/distilabel issue #593, lines verbatim as the thread shows
# them (https://github.com/argilla-io/distilabel/issues/593).
HELD_OUT = """llama_model_loader: - kv  11:                           llama.vocab_size u32              = 128256
llama_model_loader: - kv  12:                 llama.rope.dimension_count u32              = 128
llama_model_loader: - kv  13:                       tokenizer.ggml.model str              = gpt2
ggml_backend_metal_buffer_from_ptr: allocated buffer, size =  1114.92 MiB, ( 1114.98 / 10922.67)
llm_load_tensors: offloading 22 repeating layers to GPU
llm_load_tensors: offloading non-repeating layers to GPU
llm_load_tensors: offloaded 23/23 layers to GPU
llm_load_tensors:        CPU buffer size =    66.41 MiB
llm_load_tensors:      Metal buffer size =  1114.92 MiB
..........................................................................................
llama_new_context_with_model: n_ctx      = 512
llama_new_context_with_model: n_batch    = 512
llama_new_context_with_model: n_ubatch   = 512
llama_new_context_with_model: freq_base  = 10000.0
llama_new_context_with_model: freq_scale = 1
ggml_metal_init: allocating
ggml_metal_init: found device: Apple M1 Pro
ggml_metal_init: picking default device: Apple M1 Pro
ggml_metal_init: using embedded metal library
ggml_metal_init: GPU name:   Apple M1 Pro
ggml_metal_init: GPU family: MTLGPUFamilyApple7  (1007)
ggml_metal_init: GPU family: MTLGPUFamilyCommon3 (3003)"""


def test_a_public_log_outside_the_corpus_is_read_line_by_line():
    """Every size line known and explained, the device and settings read from the log's own lines, the verdict
    against its own working-set total (10,922.67 MiB: 16 GiB x 2/3), every other line listed verbatim; nothing is
    re-derived, because the excerpt names no model (its print_info lines are not in the thread)."""
    r = reading(HELD_OUT, "distilabel-593.log")
    sized = [
        (row.n, row.kind, row.printed, row.agrees) for row in r.rows if row.printed is not None
    ]
    assert sized == [
        (4, "metal_alloc", "1114.92 MiB", None),
        (8, "model_buffer", "66.41 MiB", None),
        (9, "model_buffer", "1114.92 MiB", None),
    ]
    assert all(row.explained for row in r.rows)
    assert "Apple M1 Pro" in r.device and r.settings["n_ubatch"] == 512
    assert r.verdict["limit_bytes"] == round(10922.67 * MIB) and not r.verdict["over"]
    lines = HELD_OUT.splitlines()
    seen = {row.n for row in r.rows} | {n for n, _ in r.unknown_lines}
    assert seen == {n for n, line in enumerate(lines, start=1) if line.strip()}
    assert all(lines[n - 1] == line for n, line in r.unknown_lines)
