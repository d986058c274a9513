"""The suite runs on two workers (pytest-xdist, `-n 2 --dist loadgroup` in pytest.ini; `-n 0` for one).

Tests that share something costly stay on one worker, in order: a module whose module- or session-scoped
fixture loads a model or builds files (the real model, the tiny mlx models, the GGUF files), and each page's
state sweep (the whole-range sweep finds the widgets the random states and the data-source check then use);
and the tests that run servers as the unprivileged user (uid 65534: the read-only and hosted servers, nginx's
workers), since the upload test checks that this user wrote nothing in the shared temporary folders.
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
UNPRIVILEGED = ("readonly_server", "hosted_server")  # fixtures that run a server as uid 65534
NGINX = "tests/deploy/test_nginx.py"  # nginx started as root runs its workers as nobody (65534)


def pytest_collection_modifyitems(items):
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path == SWEEP and hasattr(item, "callspec") and "path" in item.callspec.params:
            item.add_marker(pytest.mark.xdist_group(f"sweep {item.callspec.params['path']}"))
        elif path in SHARED_FIXTURES:
            item.add_marker(pytest.mark.xdist_group(path))
        elif path == NGINX or set(UNPRIVILEGED) & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("uid 65534"))
