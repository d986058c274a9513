"""The code is formatted by ruff at 100 columns (ruff.toml): a change that is not fails here."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> str:
    here = Path(sys.executable).with_name("ruff")
    return str(here) if here.exists() else (shutil.which("ruff") or "ruff")


def test_the_code_is_ruff_formatted():
    done = subprocess.run(
        [_ruff(), "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_check_passes_with_imports_sorted():
    """`ruff check` (pyflakes, pycodestyle and import sorting, ruff.toml) finds nothing."""
    done = subprocess.run(
        [_ruff(), "check", "--output-format", "concise", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _tracked_python_files() -> set[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files to compare with")
    done = subprocess.run(
        ["git", "ls-files", "-z", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return {name for name in done.stdout.split("\0") if name}


def test_ruff_reads_every_tracked_python_file():
    """An exclude in ruff.toml that matches a name (`recordings`) also skips a package of that name
    (kvcore/recordings/): every .py file git tracks must be among the files ruff reads."""
    done = subprocess.run(
        [_ruff(), "check", "--show-files", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    read = {
        Path(line).resolve().relative_to(ROOT).as_posix()
        for line in done.stdout.splitlines()
        if line.strip().endswith(".py")
    }
    skipped = sorted(_tracked_python_files() - read)
    assert not skipped, f"ruff (ruff.toml) skips {len(skipped)} tracked files: {', '.join(skipped)}"
