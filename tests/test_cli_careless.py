"""`python -m kvcore` tried as a careless new user would (issue 12, item 5): each case gets one plain sentence,
exit 2 and no traceback, or the output a reader can trust."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kvcore.inputs.preset_files import load_preset
from kvcore.limits import MAX_RAM_GB, MIN_RAM_GB
from kvcore.recordings import store as recordings
from kvcore.recordings.store import RecordingError

ROOT = Path(__file__).resolve().parents[1]
try:
    import mlx_lm  # noqa: F401

    HAS_MLX = True
except ImportError:
    HAS_MLX = False
mlx = pytest.mark.skipif(not HAS_MLX, reason="mlx / mlx-lm not installed")


def kvcore(*args, env=None, timeout=60, code=None):
    environ = {**os.environ, **(env or {})}
    cmd = [sys.executable, "-c", code] if code else [sys.executable, "-m", "kvcore", *args]
    return subprocess.run(
        cmd, cwd=ROOT, capture_output=True, text=True, env=environ, timeout=timeout
    )


def one_line(r, words: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-2000:])
    err = r.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert words in err, err
    return err


# ------------------------------------------------------ what to install, and the documented commands


def test_a_missing_pyyaml_is_one_line_saying_what_to_install():
    code = (
        "import runpy, sys; sys.modules['yaml'] = None; sys.argv = ['kvcore', 'calc', '--model', 'llama-3.2-1b', "
        "'--context', '10']; runpy.run_module('kvcore', run_name='__main__')"
    )
    err = one_line(kvcore(code=code), "PyYAML is not installed")
    assert "pip install -r requirements.txt" in err and ".venv/bin/python -m kvcore" in err


def test_a_missing_mlx_is_one_line_saying_what_to_install():
    code = "import sys; sys.modules['mlx'] = None; from kvcore.cli.main import main; sys.exit(main(['probe', '--tokens', '3']))"
    err = one_line(kvcore(code=code), "mlx is not installed")
    assert "mlx-lm" in err and "calc" in err


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
def test_the_docs_run_the_cli_with_the_projects_python(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    commands = re.findall(r"^`?([^\s`]*python\S*) -m kvcore ", text, flags=re.M)  # code or inline
    assert commands and set(commands) == {".venv/bin/python"}, set(commands)
    assert "PyYAML" in text and "mlx" in text  # the line on what to install


# ---------------------------------------------------------------- files that are not files


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "config.json"
    os.mkfifo(path)
    yield path
    # should a reader still wait on it, a writer releases it so the test run never hangs
    threading.Thread(target=lambda: open(path, "w").close(), daemon=True).start()


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_calc_refuses_a_device_at_once(device):
    one_line(
        kvcore("calc", "--model", device, "--context", "10", timeout=30), "is not a regular file"
    )


def test_calc_refuses_a_fifo_at_once(fifo):
    one_line(
        kvcore("calc", "--model", str(fifo), "--context", "10", timeout=30), "is not a regular file"
    )


@mlx
def test_a_live_command_refuses_a_fifo_at_once(fifo):
    one_line(kvcore("kv", "--model", str(fifo), timeout=30), "is not a regular file")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_recording_that_is_a_device_is_refused(device):
    with pytest.raises(RecordingError, match="is not a regular file"):
        recordings.load(Path(device))


def test_a_recording_that_is_a_fifo_is_refused_without_waiting(fifo):
    result = {}

    def load():
        try:
            recordings.load(fifo)
        except RecordingError as e:
            result["error"] = str(e)

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(10)
    assert "is not a regular file" in result.get("error", "still waiting on the FIFO")


def test_a_huge_regular_file_is_read_only_up_to_the_limit(tmp_path):
    big = tmp_path / "config.json"
    with open(big, "wb") as f:  # sparse: 4 GiB of zeros on no disk
        f.truncate(4 * 2**30)
    code = (
        "import resource, sys; from kvcore.cli.main import main; rc = main(['calc', '--model', sys.argv[1], '--context', '10']);"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(rc)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(big)], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    err, rss_kib = r.stderr.strip().splitlines()
    assert r.returncode == 2 and "larger than 1,000 kB" in err
    assert int(rss_kib) < 1024 * 1024  # well under the file's 4 GiB


def test_calc_accepts_a_model_folder_like_the_live_commands(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(load_preset("llama-3.2-1b")["config"]))
    r = kvcore("calc", "--model", str(tmp_path), "--context", "1000", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kv_bytes"] == 1000 * 32768
    (tmp_path / "config.json").unlink()
    one_line(
        kvcore("calc", "--model", str(tmp_path), "--context", "10"),
        "is a folder without a config.json",
    )


# ---------------------------------------------------------------- hints and wording


def test_a_doubled_kvcore_is_named():
    err = one_line(kvcore("kvcore", "--help"), "written twice")
    assert "kvcore kvcore --help" not in err


def test_an_unknown_command_points_at_the_right_help():
    err = one_line(kvcore("nosuch"), "invalid choice")
    assert "`python -m kvcore --help`" in err and "Did you mean" not in err
    one_line(kvcore("docter"), "Did you mean doctor?")


@mlx
def test_weights_that_do_not_exist_are_named_as_a_missing_path():
    err = one_line(
        kvcore("decode", "--model", "cpu-demo", "--weights", "/nonexistent"),
        "/nonexistent does not exist",
    )
    assert "Repo id" not in err and ".." not in err


@mlx
def test_a_model_path_that_does_not_exist_is_named():
    one_line(kvcore("decode", "--model", "/nonexistent"), "/nonexistent does not exist")


@mlx
def test_a_near_miss_of_cpu_demo_gets_a_suggestion():
    one_line(kvcore("probe", "--model", "cpu-dem0"), "Did you mean cpu-demo?")


@pytest.mark.parametrize(
    "args, words",
    [
        (
            ["calc", "--model", "llama-3.2-1b", "--context", "0"],
            "context must be a whole number from 1 to 100,000,000, not '0'",
        ),
        (
            ["calc", "--model", "llama-3.2-1b", "--context", "10", "--sequences", "0"],
            "from 1 to 100,000, not '0'",
        ),
        pytest.param(
            ["probe", "--tokens", "0"],
            "tokens must be a whole number from 1 to 100,000, not '0'",
            marks=mlx,
        ),
        pytest.param(
            ["decode", "--steps", "0"],
            "steps must be a whole number from 1 to 10,000, not '0'",
            marks=mlx,
        ),
        pytest.param(
            ["decode", "--contexts", "0"],
            "every context must be a whole number from 1 to 1,048,576",
            marks=mlx,
        ),
    ],
)
def test_ranges_are_worded_alike_with_thousands_separators(args, words):
    err = one_line(kvcore(*args), words)
    assert ".." not in err and ". (" not in err


@pytest.mark.parametrize(
    "ram", ["inf", "nan", "-inf", "1e400", "1e30", "1e-300", "0", "0.5", "5000"]
)
def test_ram_out_of_a_computers_range_is_one_sentence_naming_ram_and_its_range(ram):
    """Not 'could not handle this input (OverflowError ...)', a 39-digit byte count or '0 B the GPU may use'."""
    limits = f"from {MIN_RAM_GB:,} to {MAX_RAM_GB:,}"
    args = ["calc", "--model", "llama-3.2-1b", "--context", "1000", f"--ram={ram}"]
    err = one_line(kvcore(*args), f"--ram: ram must be a number of GB {limits}, not '{ram}'")
    assert "Error" not in err


@pytest.mark.parametrize("ram", [str(MIN_RAM_GB), "16", str(MAX_RAM_GB)])
def test_ram_in_range_gives_the_verdict(ram):
    r = kvcore("calc", "--model", "llama-3.2-1b", "--context", "1000", "--ram", ram, "--json")
    assert r.returncode == 0, r.stderr
    limit = json.loads(r.stdout)["fit"]["limit"]["bytes"]
    assert 0 < limit <= int(ram) * 2**30


@mlx
@pytest.mark.parametrize("contexts", ["1024,,2048", "1024,", ",1024"])
def test_contexts_with_an_empty_item_are_refused(contexts):
    one_line(kvcore("kv", "--contexts", contexts), "separated by single commas")


@mlx
@pytest.mark.parametrize("command", ["probe", "record"])
def test_no_save_with_out_is_refused(command, tmp_path):
    one_line(
        kvcore(command, "--no-save", "--out", str(tmp_path)),
        "--no-save and --out contradict each other",
    )


# ---------------------------------------------------------------- where a run is saved


@mlx
def test_record_checks_its_destination_before_measuring(tmp_path, monkeypatch, capsys):
    from kvcore.cli import main as cli
    from kvcore.measure import models as live_models

    def measured(*args, **kwargs):
        raise AssertionError("a model was built before the destination was checked")

    monkeypatch.setattr(live_models, "get_model", measured)
    monkeypatch.setattr(live_models, "build_random", measured)
    not_a_folder = tmp_path / "passwd"
    not_a_folder.write_text("root:x:0:0\n")
    for out in (not_a_folder, not_a_folder / "inside"):
        assert cli.main(["record", "--model", "cpu-demo", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "is a file, not a folder" in err and "Traceback" not in err
    assert not_a_folder.read_text() == "root:x:0:0\n"


@mlx
def test_record_into_etc_passwd_fails_at_once():
    one_line(
        kvcore("record", "--model", "cpu-demo", "--out", "/etc/passwd", timeout=30),
        "is a file, not a folder",
    )


@mlx
def test_probes_save_only_when_asked_and_label_runs_apart(tmp_path, monkeypatch, capsys):
    from kvcore.cli import main as cli

    monkeypatch.setenv("KVCORE_RECORDINGS_DIR", str(tmp_path))
    monkeypatch.delenv("KVCORE_READ_ONLY", raising=False)
    probe = ["probe", "--model", "cpu-demo", "--tokens", "3"]
    assert cli.main(probe) == 0
    assert "saved" not in capsys.readouterr().out and not (tmp_path / "local").exists()
    for _ in range(2):
        assert cli.main([*probe, "--save"]) == 0 and "saved" in capsys.readouterr().out
    assert cli.main(["kv", "--model", "cpu-demo", "--contexts", "256", "--save"]) == 0
    labels = [recordings.load(p).label for p in sorted((tmp_path / "local").glob("*.yaml"))]
    assert len(labels) == 3
    assert sum("trap" in label and "cpu-demo" in label for label in labels) == 2
    assert sum("growth" in label for label in labels) == 1
    assert cli.main([*probe, "--out", str(tmp_path / "runs")]) == 0  # --out alone saves there
    assert len(list((tmp_path / "runs").glob("*.yaml"))) == 1


def test_file_names_are_cut_between_words():
    stem = recordings._slug(
        "2026-11-30T19:10:00Z-Live run: mechanism — llama-3.2-1b (decode, mechanism); cpu-demo geometry"
    )
    assert len(stem) <= 60 and stem.endswith("-decode")
    words = "2026 11 30t19 10 00z live run mechanism llama 3 2 1b decode mechanism cpu demo geometry".split()
    assert stem.split("-") == words[: len(stem.split("-"))]


# ---------------------------------------------------------------- what the output says


def test_the_formula_says_its_bytes_per_token_are_per_layer_and_the_summary_per_token_in_all_layers():
    r = kvcore("calc", "--model", "llama-3.2-1b", "--context", "1000")
    assert (
        "[2,048 B/token/layer]" in r.stdout
        and "32,768 B per token per sequence (all layers)" in r.stdout
    )
    assert "[2,048 B/token]" not in r.stdout


def test_bytes_per_token_of_a_sliding_window_model_know_the_window():
    r = kvcore("calc", "--model", "gemma-3-4b", "--context", "100000", "--json")
    out = json.loads(r.stdout)
    full_layers = sum(1 for row in out["per_layer"] if row["kind"] == "full")
    assert (
        out["kv_bytes_per_token"] == 34 * 4096
        and out["kv_bytes_per_token_at_context"] == full_layers * 4096
    )
    text = kvcore("calc", "--model", "gemma-3-4b", "--context", "100000").stdout
    assert (
        "139,264 B per token" in text
        and f"{full_layers * 4096:,} B per token at 100,000 tokens" in text
    )
    short = json.loads(kvcore("calc", "--model", "gemma-3-4b", "--context", "100", "--json").stdout)
    assert short["kv_bytes_per_token_at_context"] == short["kv_bytes_per_token"]


def test_reference_rules_do_not_claim_mlx_lm_prefill():
    r = kvcore("calc", "--model", "mistral-7b-v0.1", "--context", "8192", "--runtime", "reference")
    assert r.returncode == 0 and "reference rules" in r.stdout and "mlx_lm" not in r.stdout
    mlx_rules = kvcore("calc", "--model", "gemma-3-4b", "--context", "8192").stdout
    assert "prefill peak (mlx_lm chunked prefill)" in mlx_rules


@mlx
def test_mechanism_prints_the_model_and_which_columns_are_per_token(capsys):
    from kvcore.cli import main as cli

    argv = [
        "mechanism",
        "--model",
        "cpu-demo",
        "--weights-format",
        "fp32",
        "--new-tokens",
        "2",
        "--prompt-tokens",
        "2",
    ]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("model      cpu-demo (random weights, fp32")
    assert "per token" in out and "with ms/token" in out and "with s so far" in out


# ---------------------------------------------------------------- presets cite the public config only


@pytest.mark.parametrize(
    "path", sorted((ROOT / "kvcore" / "inputs" / "presets").glob("*.json")), ids=lambda p: p.stem
)
def test_a_preset_cites_its_public_config_json_and_nothing_internal(path):
    preset = json.loads(path.read_text(encoding="utf-8"))
    hf_id = preset["hf_id"]
    hf = rf"https://huggingface\.co/{re.escape(hf_id)}/blob/[0-9a-f]{{40}}/config\.json"
    mirror = r"https://github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+"  # a gated or unrevisioned config, quoted at a commit
    assert re.fullmatch(hf, preset["source"]) or re.fullmatch(mirror, preset["source"]), preset[
        "source"
    ]  # the public file at a fixed revision
    text = json.dumps({k: v for k, v in preset.items() if k != "config"})
    assert not re.search(r"search-index|\bids? \d{6,}|reference/", text, flags=re.I), text
