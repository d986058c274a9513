"""Start a real `streamlit run` server on a free port (tests, benchmark, screenshot script), and
wait for a page the way Streamlit's own browser tests do."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import ExitStack, contextmanager
from pathlib import Path

from kvsite.frame.chapters import all_pages

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PAGES = {chapter.slug: chapter.url for chapter in all_pages()}  # slug -> URL path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server(str):
    """A running server's base URL (a str), with the pid of the process started for it."""

    pid: int


def memory_mib(pid: int) -> dict[str, float]:
    """A process's resident memory now (VmRSS) and its high-water mark (VmHWM), in MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


@contextmanager
def streamlit_server(env: dict | None = None, **kwargs):
    """Yields the base URL of a fresh server for app_dir/streamlit_app.py (run by `python`, with extra `args`: the
    arguments of _started); stops it (and only it) afterwards."""
    with streamlit_servers(1, env=env, **kwargs) as (base,):
        yield base


@contextmanager
def streamlit_servers(count: int, **kwargs):
    """`count` fresh servers (streamlit_server's arguments), started together so their start-ups overlap; yields
    their base URLs, each server not yet asked for anything but its health."""
    with ExitStack() as stack:
        started = [stack.enter_context(_started(**kwargs)) for _ in range(count)]
        for _, ready in started:
            ready()
        try:
            yield [base for base, _ in started]
        finally:  # all asked to stop first, so their shutdowns overlap too
            for base, _ in started:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(base.pid, signal.SIGTERM)


@contextmanager
def _started(
    env: dict | None = None,
    timeout_s: float = 60,
    prefix: list[str] | None = None,
    app_dir: Path = ROOT,
    python: str = sys.executable,
    args: tuple[str, ...] = (),
):
    """A server process started: yields (base URL, a function that waits until it answers its health check)."""
    port = free_port()
    cmd = [
        *(prefix or []),
        python,
        "-m",
        "streamlit",
        "run",
        "streamlit_app.py",
        "--server.headless=true",
        "--server.address=127.0.0.1",
        f"--server.port={port}",
        "--server.fileWatcherType=none",
        "--browser.gatherUsageStats=false",
        "--client.toolbarMode=minimal",
        *args,
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=app_dir,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = Server(f"http://127.0.0.1:{port}")
    base.pid = proc.pid

    def why() -> str:
        return proc.stderr.read().decode()[-2000:] if proc.poll() is not None else "timeout"

    try:
        yield base, lambda: _wait_healthy(base, proc, timeout_s, why, "streamlit")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _wait_healthy(base: str, proc: subprocess.Popen, timeout_s: float, why, what: str) -> None:
    """Poll base/_stcore/health until it answers ok; RuntimeError with why() when the process dies or time runs out."""
    deadline = time.time() + timeout_s
    while True:
        try:
            if urllib.request.urlopen(f"{base}/_stcore/health", timeout=2).read() == b"ok":
                return
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"{what} did not start: {why()}")
        time.sleep(0.1)


def wait_ready(page, timeout_ms: int = 60_000) -> None:
    """~200 ms, connected, script not running, no skeletons left."""
    page.wait_for_timeout(200)
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-connection-state='CONNECTED']", timeout=timeout_ms
    )
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-script-state='notRunning']", timeout=timeout_ms
    )
    page.wait_for_function(
        "!document.querySelector(\"[data-testid='stSkeleton']\")", timeout=timeout_ms
    )


def upload_recording(page, name: str, data: dict) -> None:
    """Drop a recording (`data` as YAML, named `name`) into the Recordings page's upload box."""
    import yaml

    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(
        files=[
            {
                "name": name,
                "mimeType": "application/x-yaml",
                "buffer": yaml.safe_dump(data).encode(),
            }
        ]
    )


def pick(page, label: str, option: str, tries: int = 3) -> None:
    """Choose `option` in the select box labelled `label` (the first, where a page has several),
    then wait_ready: open the box, type into its own input, click the first option with the text.
    A box the page redraws between the click and the typing closes again (seen once at the end of
    a fragment's rerun: the typing went nowhere, the option never came): it is opened again, up to
    `tries` times."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    box = page.get_by_role("combobox", name=label, exact=True).first
    match = page.get_by_role("option").filter(has_text=option).first
    for _ in range(tries):
        box.click()
        box.press_sequentially(option)
        try:
            match.click(timeout=5_000)
            break
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    else:
        raise AssertionError(
            f"{option!r} did not appear in the list of {label!r} after {tries} tries"
        )
    wait_ready(page)


NGINX = shutil.which("nginx") or "/usr/sbin/nginx"  # Debian's nginx (scripts/test.sh installs it)
NGINX_SITE = ROOT / "deploy" / "nginx-kvsite.conf"


def nginx_conf(tmp: Path, port: int, replicas: list[int]) -> Path:
    """deploy/nginx-kvsite.conf as shipped, on loopback ports, inside a main configuration that keeps every file
    nginx writes (pid, logs, temp) in `tmp`: it runs without touching /etc, /var or /run, as any user."""
    site = NGINX_SITE.read_text(encoding="utf-8")
    for shipped, now in zip((8501, 8502), replicas):
        if site.count(f"127.0.0.1:{shipped}") != 2:
            raise RuntimeError(
                f"{NGINX_SITE.name}: expected replica 127.0.0.1:{shipped} in the upstream and its health URL"
            )
        site = site.replace(f"127.0.0.1:{shipped}", f"127.0.0.1:{now}")
    if len(replicas) == 1:  # one replica: the second server line and health URL go
        site = "\n".join(line for line in site.splitlines() if "127.0.0.1:8502" not in line)
        site = site.replace("    location = /_replica/2/health {\n    }\n", "")
    if site.count("listen 80;") != 1:
        raise RuntimeError(f"{NGINX_SITE.name}: expected one 'listen 80;'")
    (tmp / "kvsite.conf").write_text(
        site.replace("listen 80;", f"listen 127.0.0.1:{port};"), encoding="utf-8"
    )
    temps = "\n".join(
        f"    {kind}_temp_path {tmp}/{kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    main = tmp / "nginx.conf"
    main.write_text(
        f"""daemon off;
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log {tmp}/access.log;
{temps}
    include {tmp}/kvsite.conf;
}}
""",
        encoding="utf-8",
    )
    return main


@contextmanager
def nginx_server(tmp: Path, replicas: list[int], timeout_s: float = 20):
    """Yields the base URL of nginx on a free loopback port in front of the replicas (ports); stops it afterwards."""
    if not Path(NGINX).exists():
        raise RuntimeError("Debian's nginx is not installed (scripts/test.sh installs it with apt)")
    tmp.chmod(
        0o755
    )  # nginx's workers (user nobody when started as root) create their temp folders here
    port = free_port()
    conf = nginx_conf(tmp, port, replicas)
    proc = subprocess.Popen(
        [NGINX, "-p", str(tmp), "-c", str(conf), "-e", str(tmp / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(
            base, proc, timeout_s, lambda: (tmp / "error.log").read_text()[-2000:], "nginx"
        )
        yield base
    finally:
        proc.terminate()
        proc.wait(10)
