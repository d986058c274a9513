"""The suite runs on two workers (pytest-xdist, `-n 2 --dist loadfile` in pytest.ini; `-n 0` for one).

Each test module runs whole on one worker, in order: a page's state sweep is computed once per session and
reused by that page's random-state and data-source tests (tests/app/test_state_sweep.py), and several modules
share a costly module- or session-scoped fixture (the real model, the tiny mlx models, the GGUF files).
`--dist loadgroup` with xdist_group marks would be finer, but pytest-xdist 3.8 sets its group on
`item._nodeid`, which pytest 9 no longer reads: the marks are silently ignored (measured here).
"""

import os

# One BLAS thread a process: two workers share two cores with Chromium and the servers, and OpenBLAS's second
# thread then spins waiting for a core. tests/test_real_model.py beside one busy core: 49 s wall, 21 s of it system
# time, with OpenBLAS's default of two threads; 35 s and 3 s with one. Set before anything imports kvcore (which
# loads OpenBLAS) and inherited by every process a test starts; a value already set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
