"""A real `streamlit run` server and Debian's Chromium (pytest-playwright), for the browser tests."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harness.server import CHROMIUM, CHROMIUM_ARGS, ROOT, streamlit_server, wait_ready  # noqa: E402


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser_type_launch_args():
    return {"executable_path": CHROMIUM, "headless": True, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def server():
    """One warm server for the interaction tests (the cold-start tests start their own)."""
    with streamlit_server() as base:
        yield base


@pytest.fixture
def ready():
    return wait_ready


@pytest.fixture
def readonly_server():
    """A server run as an unprivileged user, on a copy of recordings/ it cannot write to."""
    yield from _unprivileged_server({})


@pytest.fixture
def hosted_server():
    """The hosted demo's settings (KVCORE_READ_ONLY=1) on top of readonly_server's; also yields the server's
    own folder (its HOME, with its TMPDIR inside), where anything it wrote would be found."""
    yield from _unprivileged_server({"KVCORE_READ_ONLY": "1"}, with_home=True)


def _unprivileged_server(extra_env: dict, with_home: bool = False):
    if not shutil.which("setpriv") or os.geteuid() != 0:
        pytest.skip("needs root to drop privileges with setpriv")
    base_dir = Path(
        tempfile.mkdtemp(prefix="kvsite-ro-", dir="/tmp")
    )  # pytest's tmp is private to root
    base_dir.chmod(0o755)
    folder = base_dir / "recordings"
    shutil.copytree(ROOT / "recordings", folder, ignore=shutil.ignore_patterns("local"))
    home = base_dir / "home"
    (home / "tmp").mkdir(
        parents=True
    )  # the server's temporary folder too (TMPDIR): inside what the test owns
    for p in (home, home / "tmp"):
        os.chown(p, 65534, 65534)
    for p in [folder, *folder.rglob("*")]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    env = {
        "KVCORE_RECORDINGS_DIR": str(folder),
        "HOME": str(home),
        "MPLCONFIGDIR": str(home),
        "TMPDIR": str(home / "tmp"),
        **extra_env,
    }
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    try:
        with streamlit_server(env=env, prefix=prefix) as base:
            yield (base, folder, home) if with_home else (base, folder)
    finally:
        for p in [folder, *folder.rglob("*")]:
            p.chmod(0o755)
        shutil.rmtree(base_dir)
