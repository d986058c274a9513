"""kvcore: exact KV-cache arithmetic, mlx_lm allocation, decode model and live measurement.

Importing kvcore never imports Streamlit, Altair or mlx: `kvcore.live` imports mlx lazily. It does load
Debian's OpenBLAS into the process where it is installed, so that mlx, once imported, uses it (kvcore.blas).
"""

__version__ = "0.1.0"

from . import blas as _blas  # noqa: E402

_blas.preload()
