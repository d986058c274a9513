"""The code is formatted by ruff at 100 columns (ruff.toml): a change that is not fails here."""

import shutil
import subprocess
import sys
from pathlib import Path

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
