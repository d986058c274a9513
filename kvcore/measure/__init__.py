"""Measurement: the only part of kvcore that imports mlx, mlx_lm and llama-cpp-python, each inside the functions
that use it. mlx probes and sweeps on the real mlx_lm caches, llama.cpp probes and sessions, the real model, the
quality of each KV format.

Importing this package loads Debian's OpenBLAS into the process where it is installed (kvcore.measure.blas), so
that mlx, once imported, runs its CPU matmuls on it; nothing else in kvcore loads a library.
"""

from kvcore.measure import blas as _blas

_blas.preload()
