"""As a host runs the site (docs/hosting.md): requirements.txt installed into a fresh virtual environment,
then `python -m streamlit run streamlit_app.py` with KVCORE_READ_ONLY = "1" in its Secrets (as Streamlit Community
Cloud sets it); the health endpoint answers and pages are served without an exception, read-only. And requirements.txt resolves for Apple Silicon (macOS arm64) too.

The wheels are downloaded once per requirements.txt into ~/.cache/kvsite-test-wheels/<hash> (a cache the test keeps):
a rerun installs from there, offline and without byte-compiling, in ~15 s on this 2-core machine (the whole test ~45 s).
The macOS arm64 wheels likewise, into <hash>-macosx_14_0_arm64: pip's resolver asks the package index when they are
downloaded (25-35 s of pip's own CPU reading every file link of every candidate), and a rerun resolves the same
requirements again against those wheels alone, offline (a new requirements.txt is a new hash: asked again).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from harness.reader import Reader
from harness.server import ROOT, streamlit_server

REQUIREMENTS = ROOT / "requirements.txt"
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]


def wheelhouse(requirements: Path = REQUIREMENTS, *platform: str) -> Path:
    """The wheels `requirements` installs (for `platform`: pip download's --platform, --python-version and
    --only-binary options), downloaded once per requirements and options (their hash names the folder, the
    --platform tag ends it) and kept."""
    digest = hashlib.sha256(requirements.read_bytes() + " ".join(platform).encode()).hexdigest()[
        :16
    ]
    folder = (
        Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        / "kvsite-test-wheels"
        / "-".join(
            [digest, *(platform[i + 1] for i, o in enumerate(platform) if o == "--platform")]
        )
    )
    if not (folder / ".complete").exists():
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(
            [*PIP, "download", "-q", *platform, "-r", str(requirements), "-d", str(folder)],
            check=True,
            timeout=1200,
        )
        (folder / ".complete").touch()
    return folder


def test_requirements_install_into_a_fresh_environment_and_the_site_starts_read_only(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("KVCORE_READ_ONLY", raising=False)
    home = (
        tmp_path / "home"
    )  # the host's Secrets: root-level values become environment variables at startup
    (home / ".streamlit").mkdir(parents=True)
    (home / ".streamlit" / "secrets.toml").write_text('KVCORE_READ_ONLY = "1"\n', encoding="utf-8")
    venv = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    subprocess.run(
        [
            *PIP,
            "--python",
            python,
            "install",
            "-q",
            "--no-compile",
            "--no-index",
            "--find-links",
            str(wheelhouse()),
            "-r",
            str(REQUIREMENTS),
        ],
        check=True,
        timeout=1200,
    )
    here = subprocess.run(
        [python, "-B", "-c", "import streamlit, sys; print(streamlit.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert here.stdout.startswith(str(venv)), (
        here.stdout
    )  # the fresh environment's own packages, not this one's
    # a throwaway environment: its bytecode is not written (pip installed it with --no-compile)
    env = {"HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"}
    with streamlit_server(env=env, python=python, timeout_s=120) as base:
        with Reader(
            base
        ) as reader:  # the health endpoint answered; now pages, as a browser opens them
            reader.rerun("", "lang=ja")
            reader.rerun("Nbytes_trap", "lang=en&src=live&tokens=300")
            shown = " ".join(
                e.markdown.body for e in reader.elements if e.WhichOneof("type") == "markdown"
            )
            assert (
                "Read-only mode" in shown
            )  # KVCORE_READ_ONLY=1 from the host's Secrets reached the site


MAC = {
    "sys_platform": "darwin",
    "platform_system": "Darwin",
    "platform_machine": "arm64",
    "os_name": "posix",
    "python_version": "3.11",
    "python_full_version": "3.11.7",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}


def test_requirements_resolve_for_apple_silicon(tmp_path):
    """requirements.txt's markers evaluated for macOS on Apple Silicon (pip's --platform does not re-evaluate them),
    then pip's resolver for macOS arm64 with wheels only: mlx (Metal) rather than mlx[cpu], every requirement
    with a wheel there."""
    from packaging.requirements import Requirement

    chosen = []
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        text = line.split("#", 1)[0].strip()
        if text:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(MAC):
                chosen.append(str(req).split(";")[0].strip())
    assert (
        "mlx==0.32.4" in chosen and "mlx[cpu]==0.32.4" not in chosen and "mlx-lm==0.32.2" in chosen
    )
    mac = tmp_path / "requirements-mac.txt"
    mac.write_text("\n".join(chosen) + "\n", encoding="utf-8")
    report = tmp_path / "report.json"
    platform = (
        "--platform",
        "macosx_14_0_arm64",
        "--python-version",
        "3.11",
        "--only-binary=:all:",
    )
    subprocess.run(
        [
            *PIP,
            "install",
            "-q",
            "--dry-run",
            "--ignore-installed",
            *platform,
            "--no-index",
            "--find-links",
            str(wheelhouse(mac, *platform)),
            "--target",
            str(tmp_path / "t"),
            "--report",
            str(report),
            "-r",
            str(mac),
        ],
        check=True,
        timeout=1200,
    )
    installs = {
        item["metadata"]["name"].lower(): item["download_info"]["url"]
        for item in json.loads(report.read_text())["install"]
    }
    assert {"streamlit", "altair", "mlx", "mlx-lm", "pandas", "pyyaml"} <= set(installs)
    assert "macosx" in installs["mlx"] and "arm64" in installs["mlx"]


def test_a_replicas_memory_cap_is_at_least_twice_its_measured_peak():
    """deploy/kvsite@.service caps a replica's memory (MemoryMax=); docs/hosting.md holds the peak a replica reached,
    written by benchmarks/bench_replica_memory.py: the cap leaves at least as much again for concurrent readers."""
    import re

    unit = (ROOT / "deploy" / "kvsite@.service").read_text()
    (cap,) = re.findall(r"^MemoryMax=(\d+)([KMG])$", unit, re.M)
    cap_mib = int(cap[0]) * {"K": 1 / 1024, "M": 1, "G": 1024}[cap[1]]
    docs = (ROOT / "docs" / "hosting.md").read_text()
    measured = docs.split("<!-- bench_replica_memory: written")[1].split(
        "<!-- bench_replica_memory: end"
    )[0]
    peaks = [int(m) for m in re.findall(r"\| (\d+) MiB \|$", measured, re.M)]
    assert len(peaks) >= 3 and cap_mib >= 2 * max(peaks), (cap_mib, peaks)
