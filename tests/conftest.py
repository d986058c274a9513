"""The suite runs on two workers (pytest-xdist, `-n 2 --dist loadgroup` in pytest.ini; `-n 0` for one).

Tests that share something costly stay on one worker, in order: a module whose module- or session-scoped
fixture loads a model or builds files (the real model, the tiny mlx models, the GGUF files), and each page's
state sweep (the whole-range sweep finds the widgets the random states and the data-source check then use).
Every other test goes to whichever worker is free.
"""

from __future__ import annotations

import pytest

SHARED_FIXTURES = (  # modules whose costly fixtures are shared by their tests
    "tests/test_real_model.py",
    "tests/test_live.py",
    "tests/test_live_sweeps.py",
    "tests/test_llamacpp_build.py",
)
SWEEP = "tests/app/test_state_sweep.py"


def pytest_collection_modifyitems(items):
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path == SWEEP and hasattr(item, "callspec") and "path" in item.callspec.params:
            item.add_marker(pytest.mark.xdist_group(f"sweep {item.callspec.params['path']}"))
        elif path in SHARED_FIXTURES:
            item.add_marker(pytest.mark.xdist_group(path))
