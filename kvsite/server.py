"""Start a real `streamlit run` server on a free port (tests, benchmark, screenshot script), and
wait for a page the way Streamlit's own browser tests do."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from .chapters import all_pages

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
PAGES = {chapter.slug: chapter.url for chapter in all_pages()}  # slug -> URL path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server(str):
    """A running server's base URL (a str), with the pid of the process started for it."""

    pid: int


@contextmanager
def streamlit_server(env: dict | None = None, timeout_s: float = 60, prefix: list[str] | None = None, app_dir: Path = ROOT):
    """Yields the base URL of a fresh server for app_dir/streamlit_app.py; stops it (and only it) afterwards."""
    port = free_port()
    cmd = [*(prefix or []), sys.executable, "-m", "streamlit", "run", "streamlit_app.py", "--server.headless=true",
           "--server.address=127.0.0.1", f"--server.port={port}", "--server.fileWatcherType=none",
           "--browser.gatherUsageStats=false", "--client.toolbarMode=minimal"]
    proc = subprocess.Popen(cmd, cwd=app_dir, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    base = Server(f"http://127.0.0.1:{port}")
    base.pid = proc.pid
    try:
        deadline = time.time() + timeout_s
        while True:
            try:
                if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"streamlit did not start: {proc.stderr.read().decode()[-2000:] if proc.poll() is not None else 'timeout'}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def wait_ready(page, timeout_ms: int = 60_000) -> None:
    """~200 ms, connected, script not running, no skeletons left."""
    page.wait_for_timeout(200)
    page.wait_for_selector("[data-testid='stApp'][data-test-connection-state='CONNECTED']", timeout=timeout_ms)
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']", timeout=timeout_ms)
    page.wait_for_function("!document.querySelector(\"[data-testid='stSkeleton']\")", timeout=timeout_ms)
