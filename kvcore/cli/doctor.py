"""`python -m kvcore doctor`: one screen about this machine for a bug report (backend, chip, memory, versions,
and whether each live probe can start here, and why not).

Nothing is measured and nothing is written; mlx is imported only to ask it what it sees.
Example: rows() -> [("kvcore", "0.1.0"), ("python", "3.11.2 (/…/.venv/bin/python)"), ..., ("probe", "can start"), ...]
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
from importlib.metadata import PackageNotFoundError, version

from kvcore.cli.live_args import DEFAULT_MODEL, DEFAULT_WEIGHTS_FORMAT, default_max_context
from kvcore.errors import KvError
from kvcore.inputs.presets import preset_geometry
from kvcore.units import fmt_bytes

# what each live command needs beyond mlx.core: (module, what it is for)
NEEDS = {
    "probe": [("mlx_lm.models.cache", "mlx_lm's cache classes")],
    "kv": [("mlx_lm.models.cache", "mlx_lm's cache classes")],
    "decode": [("mlx_lm.utils", "mlx_lm's model builder"), ("mlx.nn", "mlx.nn")],
    "mechanism": [("mlx_lm.utils", "mlx_lm's model builder"), ("mlx.nn", "mlx.nn")],
    "record": [
        ("mlx_lm.models.cache", "mlx_lm's cache classes"),
        ("mlx_lm.utils", "mlx_lm's model builder"),
        ("tqdm", "the progress bar (tqdm)"),
    ],
}


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def _importable(module: str) -> str | None:
    """None when `module` imports, else one short reason."""
    try:
        importlib.import_module(module)
        return None
    except ImportError as e:
        return (
            f"{module} cannot be imported ({e.name or e} missing)"
            if isinstance(e, ModuleNotFoundError)
            else f"{module} cannot be imported ({e})"
        )
    except Exception as e:  # a broken build raises anything; the report must still print
        return f"{module} fails to import ({type(e).__name__}: {e})"


def _backend_works() -> str | None:
    """None when a tiny computation runs on the default device, else why not."""
    try:
        import mlx.core as mx

        value = (mx.ones((4,)) + 1).sum()
        mx.eval(value)
        return None if float(value.item()) == 8.0 else "a test computation gave a wrong result"
    except Exception as e:
        return f"a test computation failed ({type(e).__name__}: {e})"


def _default_decode_fits() -> str:
    """Whether the live commands' default run (their --model's random weights at their largest default context,
    kvcore.cli.live_args's defaults) passes the memory guard."""
    from kvcore.measure.caches import guard, kv_spec
    from kvcore.measure.models import guess_weights_bytes
    from kvcore.memory.formulas import kv_bytes

    geometry, context = preset_geometry(DEFAULT_MODEL), default_max_context()
    try:
        need = guard(
            guess_weights_bytes(DEFAULT_MODEL, None, DEFAULT_WEIGHTS_FORMAT) or 0,
            kv_bytes(geometry, 1, kv_spec("fp32", "fp32")),
            context,
            model=DEFAULT_MODEL,
        )
    except KvError as e:
        return f"no: {e}"
    return f"yes (about {fmt_bytes(need)} at {context:,} tokens)"


def rows() -> list[tuple[str, str]]:
    """The report as (label, value) rows, in the order printed."""
    from kvcore import __version__
    from kvcore.recordings import store as recordings

    out = [
        ("kvcore", __version__),
        ("python", f"{platform.python_version()} ({sys.executable})"),
        ("system", f"{platform.system()} {platform.release()} ({platform.machine()})"),
        ("mlx", _version("mlx")),
        ("mlx-lm", _version("mlx-lm")),
    ]
    mlx_missing = _importable("mlx.core")
    broken = None if mlx_missing else _backend_works()
    if mlx_missing:
        out += [
            ("backend", f"none: {mlx_missing}"),
            (
                "install",
                "mlx and mlx-lm: `.venv/bin/pip install mlx mlx-lm` on a Mac, `mlx[cpu] mlx-lm` on Linux",
            ),
        ]
    else:
        from kvcore.measure.machine import (
            available_memory,
            backend,
            chip_name,
            memory_gb,
            metal_info,
        )

        b = backend()
        info = metal_info()
        out.append(
            (
                "backend",
                f"{'Metal' if b['backend'] == 'mlx metal' else 'CPU'} ({b['backend']}, {b['device']}, "
                f"activations {b['dtype']})",
            )
        )
        out.append(("chip", chip_name()))
        memory, source = available_memory()
        out.append(
            (
                "memory",
                f"{memory_gb()} GB in the machine; the backend may use {fmt_bytes(memory)} ({source})",
            )
        )
        if info:
            out.append(
                (
                    "metal",
                    ", ".join(
                        f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}"
                        for k, v in sorted(info.items())
                    ),
                )
            )
        elif platform.system() == "Darwin":
            out.append(
                (
                    "metal",
                    "not available: this mlx sees no Metal GPU (an Intel Mac, or a CPU-only build)",
                )
            )
        if broken:
            out.append(("compute", broken))
    for command, needs in NEEDS.items():
        reasons = [mlx_missing] if mlx_missing else []
        if not mlx_missing:
            reasons += [r for module, _ in needs if (r := _importable(module))]
            if broken:
                reasons.append(broken)
        out.append(
            (
                command,
                "can start"
                if not reasons
                else "cannot start: " + "; ".join(dict.fromkeys(reasons)),
            )
        )
    if not mlx_missing:
        out.append(
            (
                "default run",
                f"decode of {DEFAULT_MODEL} to {default_max_context():,} tokens fits: {_default_decode_fits()}",
            )
        )
    from kvcore.measure import blas, real_model

    out.append(("blas", blas.state()["note"]))
    path = real_model.gguf_path()
    out.append(("real model", f"{real_model.NAME}: {path}" if path else real_model.MISSING))
    folder = recordings.local_dir()
    if recordings.read_only():
        saving = f"no: read-only mode ({recordings.READ_ONLY_ENV}=1)"
    else:
        saving = f"{folder} ({'writable' if recordings.writable(folder) else 'cannot be written'})"
    out.append(("saves to", saving))
    out.append(("cpu cores", str(os.cpu_count() or "unknown")))
    return out


def print_report() -> int:
    for label, value in rows():
        print(f"{label:<12}{value}")
    return 0
