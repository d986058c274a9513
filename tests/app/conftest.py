"""AppTest fixtures: a private recordings folder per test and clean Streamlit caches."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import streamlit as st
import streamlit.testing.v1.app_test as app_test
import streamlit.testing.v1.local_script_runner as local_script_runner
import yaml
from app_helpers import CPU_DEMO, ROOT, measured_recording
from streamlit.components.v2 import manifest_scanner
from streamlit.runtime.scriptrunner.script_cache import ScriptCache


@pytest.fixture(scope="session", autouse=True)
def components_scanned_once():
    """Every new AppTest scans every installed distribution's metadata for Streamlit components (most of a
    fresh page run: ~0.4 s of ~0.6 s here); a server scans once at startup, and the environment does not change
    during a session. The session scans once too, with Streamlit's own scanner."""
    found = tuple(manifest_scanner.scan_component_manifests())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(manifest_scanner, "scan_component_manifests", lambda *a, **k: list(found))
        yield


@pytest.fixture(autouse=True)
def clean_caches(monkeypatch):
    """Streamlit's caches emptied; one bytecode cache for the test's runs, as a server compiles each script once
    (AppTest alone recompiles the entry point and the page, with the magic pass, on every run)."""
    st.cache_data.clear()
    st.cache_resource.clear()
    scripts = ScriptCache()
    monkeypatch.setattr(app_test, "ScriptCache", lambda: scripts)
    monkeypatch.setattr(local_script_runner, "ScriptCache", lambda: scripts)
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
