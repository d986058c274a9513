"""This machine as a run records it: the mlx backend and device, the chip, its memory and what the backend may use,
versions and the date (the recording schema's provenance). mlx is imported inside functions only.

Example: backend() -> {"backend": "mlx cpu", "device": "Device(cpu, 0)", "dtype": "fp32"} on Linux.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def mlx_core():
    """mlx.core, imported on first use (tests stand in for the Metal build's API here: tests/test_metal_api.py)."""
    import mlx.core as mx

    return mx


def metal_info() -> dict | None:
    """Metal's device info (mlx 0.32.4: `mx.device_info(mx.gpu)`: device_name, architecture, memory_size,
    max_recommended_working_set_size, max_buffer_length, resource_limit), or None without a Metal GPU.

    The deprecated `mx.metal.device_info()` warns on every call; it is never used.
    """
    try:
        mx = mlx_core()
        if not mx.is_available(mx.gpu):
            return None
        return dict(mx.device_info(mx.gpu))
    except (ImportError, AttributeError, RuntimeError, ValueError):
        return None


def backend() -> dict:
    """{"backend": "mlx metal"|"mlx cpu", "device": str, "dtype": "fp16"|"fp32"}: fp32 on CPU (fp16 is pathological there)."""
    mx = mlx_core()
    metal = mx.is_available(mx.gpu) and mx.default_device() == mx.gpu
    return {
        "backend": "mlx metal" if metal else "mlx cpu",
        "device": str(mx.default_device()),
        "dtype": "fp16" if metal else "fp32",
    }


def available_memory() -> tuple[int, str]:
    """(bytes the backend may use, where that figure comes from): Metal's recommended working set, else
    MemAvailable (Linux) or the free pages."""
    info = metal_info()
    if info and info.get("max_recommended_working_set_size"):
        return int(
            info["max_recommended_working_set_size"]
        ), "Metal's recommended working set (mx.device_info)"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024, "MemAvailable in /proc/meminfo"
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free pages (sysconf)"
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3, "unknown (8 GiB assumed)"


def available_memory_bytes() -> int:
    """Memory the backend may use: Metal's recommended working set, else MemAvailable (Linux) or free pages."""
    return available_memory()[0]


def chip_name() -> str:
    """The chip's name: Metal's device name on a Mac (e.g. "Apple M3 Max"), else the CPU's brand string."""
    info = metal_info()
    if info and info.get("device_name"):
        return str(info["device_name"])
    if platform.system() == "Darwin":
        import subprocess

        try:
            return (
                subprocess.run(
                    ["sysctl", "-n", "machdep.cpu.brand_string"],
                    capture_output=True,
                    text=True,
                    timeout=5,
                ).stdout.strip()
                or platform.machine()
            )
        except (OSError, subprocess.SubprocessError):
            return platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gb() -> float:
    """The machine's memory in GB (10^9 bytes): Metal's memory_size on a Mac, else MemTotal or the physical pages."""
    info = metal_info()
    if info and info.get("memory_size"):
        return round(int(info["memory_size"]) / 1e9, 1)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) * 1024 / 1e9, 1)
    except OSError:
        pass
    try:
        return round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 1e9, 1)
    except (ValueError, OSError, AttributeError):
        return 0.0


def this_machine() -> dict:
    """This machine in the recording schema's shape (provenance.machine): os, chip, memory, cores; what
    kvcore.recordings.provenance.is_apple_silicon reads."""
    return {
        "os": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "chip": chip_name(),
        "memory_gb": memory_gb(),
        "cpu_cores": os.cpu_count() or 0,
    }


def measured_provenance(command: str) -> dict:
    """Machine, backend and versions of this run, in the recording schema's shape."""
    from datetime import datetime, timezone
    from importlib.metadata import PackageNotFoundError, version

    from kvcore import __version__
    from kvcore.measure import blas

    def ver(pkg: str) -> str:
        try:
            return version(pkg)
        except PackageNotFoundError:
            return "unknown"

    b = backend()
    return {
        "machine": this_machine(),
        "backend": b["backend"],
        "device": b["device"],
        "blas": blas.state()["note"],
        "versions": {
            "python": platform.python_version(),
            "mlx": ver("mlx"),
            "mlx_lm": ver("mlx-lm"),
            "kvcore": __version__,
        },
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": command,
    }
