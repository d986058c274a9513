"""Deployment tests: real replicas (`python -m streamlit run`), Debian's nginx, a fresh virtual environment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/deploy" in str(item.fspath):
            item.add_marker(pytest.mark.deploy)
