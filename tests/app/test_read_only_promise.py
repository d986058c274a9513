"""The hosted demo's promise (KVCORE_READ_ONLY=1): no model is built and no sweep starts, on any page.

Every page is run with and without ?src=live; every live control it shows is set, then every button on the page
is pressed, one per run. The engine counts the models it makes (kvcore.measure.live_model.LiveModel.built) and the site
the sweeps it starts (kvsite.inputs.live.STARTED): neither may move. The one live probe the demo keeps, the trap's, builds
no model (real mlx_lm cache classes with random tensors) and is pressed too.
"""

from __future__ import annotations

import threading

import pytest
from app_helpers import APP, PAGES, page

from kvcore.measure.live_model import LiveModel
from kvsite.inputs import live

pytest.importorskip("mlx.core")
pytestmark = pytest.mark.mlx

KEPT = {"live_trap_run"}  # the model-free probe the demo's sidebar names


def _drive(at) -> None:
    """Each live widget set away from its default, then each button pressed (a fresh rerun per button)."""
    for box in at.selectbox:
        if box.key and box.key.startswith("live_") and len(box.options) > 1:
            box.select(box.options[-1]).run()
    for multi in at.multiselect:
        if multi.key and multi.key.startswith("live_"):
            multi.set_value(list(multi.options[:2])).run()
    for button in list(at.button):
        if not button.disabled:
            button.click().run()


@pytest.mark.parametrize("path", [None, *PAGES])
@pytest.mark.parametrize("src", [None, "live"])
def test_read_only_builds_no_model_and_starts_no_sweep(rec_dir, monkeypatch, path, src):
    monkeypatch.setenv("KVCORE_READ_ONLY", "1")
    built, started = LiveModel.built, len(live.STARTED)
    at = page(path, "en", APP, **({"src": src} if src else {}))
    assert not at.exception
    offered = {b.key for b in at.button if b.key and b.key.startswith("live_")}
    assert offered <= KEPT, f"{path}: live controls on the hosted demo: {sorted(offered - KEPT)}"
    for box in at.selectbox:  # a data source "live" only where it builds no model
        if "live" in box.options:
            assert path == "pages/2_Nbytes_trap.py", f"{path} offers live measurement"
    _drive(at)
    assert len(live.STARTED) == started, f"{path}: a sweep started on the hosted demo"
    for thread in threading.enumerate():
        assert not thread.name.startswith("kvsite-live-"), f"{path}: {thread.name} is running"
    assert LiveModel.built == built, f"{path}: a model was built on the hosted demo"


def test_the_counters_see_a_model_and_a_sweep(rec_dir):
    """Not read-only: the same drive does start the prefill chapter's sweeps and build their model (so the test
    above can fail)."""
    built, started = LiveModel.built, len(live.STARTED)
    at = page("pages/5_Prefill_and_decode.py", "en", src="live")
    at.selectbox(key="live_model_throughput").select("cpu-demo").run()
    at.button(key="live_run_throughput").click().run()
    assert len(live.STARTED) == started + 1
    job = at.session_state["job_throughput"]
    job.stop.set()
    for thread in threading.enumerate():
        if thread.name.startswith("kvsite-live-"):
            thread.join(120)
    assert LiveModel.built == built + 1


def test_run_it_yourself_ends_with_the_project_the_install_and_the_command(rec_dir, monkeypatch):
    """Where the demo sends a reader to their own machine, it says how: this repository, the install command from
    its README, the command."""
    from app_helpers import texts

    monkeypatch.setenv("KVCORE_READ_ONLY", "1")
    readme = APP.rsplit("/", 1)[0] + "/README.md"
    install = "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt"
    assert install in open(readme, encoding="utf-8").read()
    for lang, repo in (("en", "this repository"), ("ja", "このリポジトリ")):
        shown = texts(page("pages/9_Recordings.py", lang))
        assert repo in shown and install in shown and ".venv/bin/python -m kvcore record" in shown


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_mechanism_points_to_live_measurement_only_where_it_runs(rec_dir, monkeypatch, lang):
    from app_helpers import texts

    from kvsite import i18n

    live_here = i18n.translate(lang, "mechanism.measured_live")
    assert live_here in texts(page("pages/1_Mechanism.py", lang))
    monkeypatch.setenv("KVCORE_READ_ONLY", "1")
    shown = texts(page("pages/1_Mechanism.py", lang))
    assert live_here not in shown and "kvcore record" in shown
