"""AppTest fixtures: a private recordings folder per test and clean Streamlit caches."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import streamlit as st
import yaml

from app_helpers import CPU_DEMO, ROOT, measured_recording


@pytest.fixture(autouse=True)
def clean_caches():
    st.cache_data.clear()
    st.cache_resource.clear()
    yield


@pytest.fixture
def rec_dir(tmp_path, monkeypatch) -> Path:
    """A recordings folder of our own: the bundled files plus one measured CPU run."""
    folder = tmp_path / "recordings"
    shutil.copytree(ROOT / "recordings", folder, ignore=shutil.ignore_patterns("local"))
    (folder / f"{CPU_DEMO}.yaml").write_text(
        yaml.safe_dump(measured_recording(), sort_keys=False), encoding="utf-8"
    )
    monkeypatch.setenv("KVCORE_RECORDINGS_DIR", str(folder))
    monkeypatch.delenv("KVCORE_READ_ONLY", raising=False)
    return folder
