"""Which BLAS mlx's CPU matmuls use, chosen before mlx is first imported, and said in every run's provenance.

The `mlx[cpu]` wheel links the reference (netlib) BLAS it bundles: an fp32 matmul runs at a few GFLOP/s on
a server CPU. Debian's OpenBLAS (`apt-get install libopenblas0-pthread`) loaded into the process with
RTLD_GLOBAL before mlx is imported takes over mlx's cblas calls (the dynamic linker binds the first
definition it sees), some 30x faster here, with results equal to float64 numpy to ~1e-4. kvcore loads it
when `import kvcore` runs, where it is present and mlx has not been imported yet; `KVCORE_BLAS=reference`
keeps the wheel's own. On macOS mlx uses Apple's Accelerate (and Metal for the GPU).
Example: state() -> {"blas": "openblas", "library": "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
                     "note": "Debian's OpenBLAS, loaded before mlx (RTLD_GLOBAL)"}
"""

from __future__ import annotations

import os
import platform
import sys

ENV = "KVCORE_BLAS"  # "reference": keep the BLAS the mlx[cpu] wheel bundles
OPENBLAS_PATHS = (
    "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread/libopenblas.so.0",
)
INSTALL_HINT = "apt-get install libopenblas0-pthread"
_STATE: dict = {}


def preload() -> dict:
    """Load OpenBLAS globally if it is present, wanted and still in time (mlx not imported); return state()."""
    if _STATE:
        return _STATE
    if platform.system() == "Darwin":
        _STATE.update(blas="accelerate", library="", note="Apple Accelerate (mlx on macOS)")
        return _STATE
    path = next((p for p in OPENBLAS_PATHS if os.path.exists(p)), None)
    if os.environ.get(ENV, "").strip().lower() == "reference":
        _STATE.update(
            blas="reference",
            library="",
            note=f"the mlx[cpu] wheel's reference BLAS ({ENV}=reference)",
        )
    elif path is None:
        _STATE.update(
            blas="reference",
            library="",
            note=f"the mlx[cpu] wheel's reference BLAS (OpenBLAS not installed: {INSTALL_HINT})",
        )
    elif "mlx.core" in sys.modules:
        _STATE.update(
            blas="reference",
            library="",
            note="the mlx[cpu] wheel's reference BLAS (mlx was imported "
            "before kvcore, too late to load OpenBLAS)",
        )
    else:
        import ctypes

        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            _STATE.update(
                blas="reference",
                library="",
                note=f"the mlx[cpu] wheel's reference BLAS ({path}: {e})",
            )
        else:
            _STATE.update(
                blas="openblas",
                library=path,
                note="Debian's OpenBLAS, loaded before mlx (RTLD_GLOBAL)",
            )
    return _STATE


def state() -> dict:
    """{"blas": "openblas" | "reference" | "accelerate", "library": path or "", "note": one line}."""
    return dict(preload())


def label() -> str:
    """A short name for labels: "OpenBLAS", "reference BLAS" or "Accelerate"."""
    return {"openblas": "OpenBLAS", "reference": "reference BLAS", "accelerate": "Accelerate"}[
        state()["blas"]
    ]
