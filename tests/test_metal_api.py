"""The Metal-only branches of the live code, run here without a Mac: a stand-in for mlx 0.32.4's documented
Metal API (`mx.is_available(mx.gpu)`, `mx.device_info(mx.gpu)` and its keys) drives device info, the
working-set limit, the fp16 activation dtype and the chip name, so a Mac user's first run meets no
untested line. Everything the stand-in does not override is the real mlx.core (computations run on CPU).

Keys of Metal's device info, as mlx 0.32.4 fills them (mlx/backend/metal/device_info.cpp, ml-explore/mlx):
device_name, architecture, max_buffer_length, max_recommended_working_set_size, memory_size, resource_limit.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

mx = pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

from kvcore.cli import doctor  # noqa: E402
from kvcore.errors import KvError  # noqa: E402
from kvcore.measure import caches as live_memory  # noqa: E402
from kvcore.measure import machine  # noqa: E402
from kvcore.measure import models as live_models  # noqa: E402
from kvcore.measure import recording as live_record  # noqa: E402
from kvcore.units import fmt_bytes  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
GIB = 2**30
M3_MAX = {  # an Apple M3 Max with 36 GB, as Metal reports it (values of the documented keys)
    "device_name": "Apple M3 Max",
    "architecture": "applegpu_g15s",
    "max_buffer_length": 28_991_029_248,
    "max_recommended_working_set_size": 28_991_029_248,
    "memory_size": 38_654_705_664,
    "resource_limit": 499_000,
}


class _DeprecatedMetal:
    """mx.metal as seen by code that must not use it: device_info() is deprecated in mlx 0.32.4 (it warns on
    every call), so the stand-in fails the test if it is called."""

    def __getattr__(self, name):
        if name == "device_info":
            raise AssertionError(
                "mx.metal.device_info is deprecated in mlx 0.32.4; use mx.device_info(mx.gpu)"
            )
        return getattr(mx.metal, name)


class MetalCore:
    """mlx.core as on a Mac with Metal: the GPU is available and the default device; device_info(gpu) has Metal's keys."""

    def __init__(self, info: dict = M3_MAX):
        self.info = dict(info)
        self.metal = _DeprecatedMetal()

    def is_available(self, device) -> bool:
        return True

    def default_device(self):
        return mx.gpu

    def device_info(self, d=None) -> dict:
        assert d is None or d == mx.gpu, d
        return dict(self.info)

    def __getattr__(self, name):  # everything else is the real mlx.core
        return getattr(mx, name)


@pytest.fixture
def metal(monkeypatch) -> MetalCore:
    core = MetalCore()
    monkeypatch.setattr(machine, "mlx_core", lambda: core)
    return core


def test_the_stand_in_speaks_mlx_0_32_4s_api():
    """The calls the stand-in answers exist in the installed mlx with the documented shape."""
    assert mx.__version__ == "0.32.4"
    assert callable(mx.is_available) and callable(mx.device_info) and callable(mx.default_device)
    assert "device_info(d: None | Device | DeviceType = None)" in mx.device_info.__doc__
    assert isinstance(mx.device_info(mx.cpu), dict) and mx.is_available(mx.cpu)
    assert (
        mx.is_available(mx.gpu) is False
    )  # this machine: the CPU build, so every Metal branch below needs the stand-in


def test_metal_backend_computes_in_fp16(metal):
    b = machine.backend()
    assert b["backend"] == "mlx metal" and b["dtype"] == "fp16"


def test_metal_memory_is_the_recommended_working_set(metal):
    assert machine.available_memory_bytes() == M3_MAX["max_recommended_working_set_size"]
    assert "working set" in machine.available_memory()[1]
    assert machine.memory_gb() == 38.7


def test_the_guard_on_metal_uses_the_working_set(metal):
    metal.info["max_recommended_working_set_size"] = 4 * GIB
    with pytest.raises(KvError) as e:
        live_memory.guard(2 * GIB, 131072, 131072, model="llama-3.1-8b")
    assert e.value.params["budget"] == fmt_bytes(4 * GIB)  # the working set, none of it kept back


def test_the_chip_is_metals_device_name(metal, monkeypatch):
    monkeypatch.setattr(machine.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(
        subprocess,
        "run",
        lambda *a, **k: pytest.fail("sysctl is not needed when Metal names the chip"),
    )
    assert machine.chip_name() == "Apple M3 Max"


def test_a_metal_run_is_labelled_apple_silicon(metal, monkeypatch):
    monkeypatch.setattr(machine.platform, "system", lambda: "Darwin")
    monkeypatch.setattr(machine.platform, "release", lambda: "24.6.0")
    monkeypatch.setattr(machine.platform, "machine", lambda: "arm64")
    prov = machine.measured_provenance("python -m kvcore record")
    assert prov["backend"] == "mlx metal" and prov["machine"]["chip"] == "Apple M3 Max"
    assert prov["machine"]["memory_gb"] == 38.7 and prov["machine"]["os"].startswith("Darwin")
    assert live_record.default_label(prov) == "Measured — Apple M3 Max (Metal), live run"
    from kvcore.recordings.provenance import is_apple_silicon

    assert is_apple_silicon(prov)  # the one test the chapters' badges and the labels share


def test_a_random_model_on_metal_is_built_in_fp16(metal):
    model = live_models.build_random("cpu-demo", live_models.BUILTIN_CONFIGS["cpu-demo"], "mlx-q4")
    assert model.dtype == "fp16"
    assert model.module.layers[0].input_layernorm.weight.dtype == mx.float16


def test_doctor_on_metal(metal, monkeypatch):
    monkeypatch.setattr(machine.platform, "system", lambda: "Darwin")
    report = dict(doctor.rows())
    assert report["backend"].startswith("Metal (mlx metal") and "fp16" in report["backend"]
    assert report["chip"] == "Apple M3 Max"
    assert "27.00 GiB" in report["memory"] and "working set" in report["memory"]
    assert "max_recommended_working_set_size 28,991,029,248" in report["metal"]
    assert report["probe"] == "can start"


def test_doctor_without_metal_says_so_on_a_mac(monkeypatch):
    class CpuOnly(MetalCore):
        def is_available(self, device):
            return device != mx.gpu

        def default_device(self):
            return mx.cpu

    monkeypatch.setattr(machine, "mlx_core", lambda: CpuOnly())
    monkeypatch.setattr(doctor.platform, "system", lambda: "Darwin")
    report = dict(doctor.rows())
    assert report["backend"].startswith("CPU (mlx cpu") and "no Metal GPU" in report["metal"]


def test_the_live_code_prints_no_deprecation_warning():
    code = (
        "from kvcore.cli import doctor; from kvcore.measure import machine; machine.measured_provenance('x'); machine.available_memory_bytes();"
        "doctor.rows()"
    )
    r = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "deprecated" not in r.stderr.lower()


def test_doctor_on_this_machine_fits_one_screen():
    r = subprocess.run(
        [sys.executable, "-m", "kvcore", "doctor"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) <= 24 and max(map(len, lines)) <= 200
    report = {line[:12].strip(): line[12:] for line in lines}
    assert report["mlx"] == mx.__version__ and report["backend"].startswith("CPU (mlx cpu")
    assert report["python"].startswith(sys.version.split()[0])
    assert all(report[c] == "can start" for c in doctor.NEEDS)


def test_doctor_without_mlx_says_why_no_probe_can_start():
    code = "import sys; sys.modules['mlx'] = None; from kvcore.cli.main import main; sys.exit(main(['doctor']))"
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr
    report = {line[:12].strip(): line[12:] for line in r.stdout.splitlines()}
    assert (
        report["backend"].startswith("none: mlx.core cannot be imported")
        and "pip install" in report["install"]
    )
    assert all(report[c].startswith("cannot start: mlx.core") for c in doctor.NEEDS)
