"""Live mode in the pages: the trap probe, a sweep that runs, one that is stopped, saving, read-only mode."""

from __future__ import annotations

import os
import re
import time
import xml.etree.ElementTree as ET

import pytest
from app_helpers import charts, page, texts

from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import mlx_cache_formats
from kvcore.views import charts as kcharts
from kvcore.views import memory as views
from kvsite import i18n
from kvsite.charts import chart as chart_view
from kvsite.sections import shared as sections

pytest.importorskip("mlx.core")
pytestmark = pytest.mark.mlx


def _wait(at, key: str, timeout_s: float = 120):
    """Rerun until the background job stored under `key` has finished."""
    deadline = time.time() + timeout_s
    while at.session_state[key].state == "running":
        assert time.time() < deadline, "live job did not finish"
        time.sleep(0.3)
    return at.run()


def _start_sweep(at, contexts=(256, 512), steps=2):
    at.multiselect(key="live_ctx_decode").set_value(list(contexts))
    at.slider(key="live_steps_decode").set_value(steps)
    at.selectbox(key="live_model_decode").select("cpu-demo")
    at.selectbox(key="live_w_decode").select("fp32")
    return at.button(key="live_run_decode").click().run()


def test_trap_probe_runs_live_in_the_page(rec_dir):
    at = page("pages/2_Nbytes_trap.py", "en", src="live", tokens=300)
    at.button(key="live_trap_run").click().run()
    assert not at.exception
    data = charts(at)[0]["data"]
    live = data[data["source"] == "Live, on the server running this site"]
    alloc = live[live["series"] == "allocated (.nbytes)"].set_index("tokens")["mib"]
    assert (alloc[256], alloc[257]) == (
        8.0,
        16.0,
    )  # the real mlx_lm KVCache, 16 layers of Llama-3.2-1B


@pytest.mark.parametrize("fmt", mlx_cache_formats())
def test_the_live_trap_measures_each_offered_format_in_its_own_cache(rec_dir, fmt):
    """Every format the page offers (those an mlx_lm cache class holds) is measured in its own cache class and
    dtype: the real .nbytes at 256 and 257 tokens are the simulation's (fp32 twice fp16's)."""
    at = page("pages/2_Nbytes_trap.py", "en", src="live", tokens=300, fmt=fmt)
    at.button(key="live_trap_run").click().run()
    assert not at.exception and not at.error
    data = charts(at)[0]["data"]
    live = data[data["source"] == "Live, on the server running this site"]
    alloc = live[live["series"] == "allocated (.nbytes)"].set_index("tokens")["mib"]
    want = views.trap_at(preset_geometry(views.ARTICLE_MODEL), (256, 257), fmt)
    assert (alloc[256], alloc[257]) == (want[(256, "allocated")], want[(257, "allocated")])


def test_sweep_runs_shows_results_and_saves_into_the_local_folder(rec_dir):
    at = _start_sweep(page("pages/4_Decode_slowdown.py", "en", src="live"))
    assert not at.exception
    at = _wait(at, "job_decode")
    assert "Run finished" in texts(at)
    data = charts(at)[0]["data"]
    points = data[
        data["recording"].str.contains("cpu-demo") & data["ms_per_token"].notna()
    ]  # the live run, named by its model
    assert set(points["context"]) == {256, 512}
    assert "not an Apple Silicon measurement" in texts(
        at
    )  # the live CPU run is labelled for what it is
    at.button(key="live_save_decode").click().run()
    saved = list((rec_dir / "local").glob("*.yaml"))
    assert len(saved) == 1 and "cpu-demo" in saved[0].read_text()
    assert at.session_state["job_decode"].saved


def test_sweep_can_be_stopped_and_nothing_is_saved(rec_dir):
    at = _start_sweep(
        page("pages/4_Decode_slowdown.py", "en", src="live"),
        contexts=(256, 512, 1024, 2048, 4096),
        steps=32,
    )
    at.button(key="live_stop_decode").click().run()
    at = _wait(at, "job_decode")
    assert at.session_state["job_decode"].state == "stopped"
    assert "Stopped before the end" in texts(at)
    assert "live_save_decode" not in [b.key for b in at.button]
    assert not (rec_dir / "local").exists()


def test_read_only_hides_saving_writes_nothing_and_still_runs_the_trap(rec_dir, monkeypatch):
    monkeypatch.setenv("KVCORE_READ_ONLY", "1")
    before = sorted(p.name for p in rec_dir.rglob("*"))
    at = page("pages/2_Nbytes_trap.py", "en", src="live", tokens=300)
    at.button(key="live_trap_run").click().run()
    assert any(
        d["source"] == "Live, on the server running this site"
        for _, d in charts(at)[0]["data"].iterrows()
    )
    assert "not the computer you are reading on" in texts(at)  # it says whose machine it measures
    # the hosted demo builds no model: the decode chapter offers no live option, and a shared ?src=live says so
    at = page("pages/4_Decode_slowdown.py", "en", src="live")
    assert "live" not in at.selectbox(key="src__w").options
    assert "does not run for this chapter" in at.warning[0].value
    assert not [b for b in at.button if b.key and b.key.startswith("live_")]
    assert "Read-only mode" in " ".join(c.value for c in at.sidebar.caption)
    assert "runs on this site's server, not on your computer" in " ".join(
        c.value for c in at.sidebar.caption
    )
    at = page(
        "pages/9_Recordings.py", "en"
    )  # nor does the Recordings page offer to record the server
    assert not [b for b in at.button if b.key and b.key.startswith("live_")]
    assert "builds no model on its server" in texts(at)
    assert sorted(p.name for p in rec_dir.rglob("*")) == before


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root can write anywhere; tests/browser runs the server unprivileged for this",
)
def test_unwritable_recordings_folder_means_read_only(rec_dir):
    rec_dir.chmod(0o555)
    try:
        at = page("pages/9_Recordings.py", "en")
        assert "Read-only mode" in " ".join(c.value for c in at.sidebar.caption)
    finally:
        rec_dir.chmod(0o755)


def test_without_mlx_live_is_explained_and_the_rest_works(rec_dir, monkeypatch):
    import kvsite.frame.page

    monkeypatch.setattr(kvsite.frame.page, "live_status", lambda: (False, "live.no_mlx"))
    at = page("pages/4_Decode_slowdown.py", "en", src="live")
    assert not at.exception
    assert "Live mode is unavailable" in " ".join(c.value for c in at.caption)
    assert charts(at)  # the published figures still show
    at = page("pages/9_Recordings.py", "en")
    assert "Live mode is unavailable" in texts(at)


def test_a_live_run_that_would_not_fit_is_refused_with_the_reason(rec_dir, monkeypatch):
    from kvcore.measure import machine

    monkeypatch.setattr(machine, "available_memory_bytes", lambda: 10_000_000)
    at = _wait(_start_sweep(page("pages/4_Decode_slowdown.py", "en", src="live")), "job_decode")
    assert at.session_state["job_decode"].state == "error"
    assert "refused or failed" in texts(at)
    assert not at.exception


def test_chart_exports_are_valid_png_and_svg():
    df = views.trap_curve(preset_geometry("llama-3.2-1b"), 300)
    chart = kcharts.series_chart(df, "tokens", "mib", "series", "tokens", "MiB", step=True)
    png = chart_view.png_bytes(chart)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    svg = ET.fromstring(chart_view.svg_text(chart))
    assert svg.tag.endswith("svg")


def test_a_second_live_sweep_on_the_server_waits_for_the_first(rec_dir):
    from kvsite.inputs.live import MACHINE

    assert MACHINE.acquire(blocking=False)  # as if another reader's sweep were running
    try:
        at = _start_sweep(page("pages/4_Decode_slowdown.py", "en", src="live"))
        assert not at.exception and "job_decode" not in at.session_state
        assert "Another live run is measuring" in texts(at)
    finally:
        MACHINE.release()
    at = _wait(
        _start_sweep(at), "job_decode"
    )  # free again: it runs, and releases the machine when done
    assert at.session_state["job_decode"].state == "done" and MACHINE.acquire(blocking=False)
    MACHINE.release()


def test_a_finished_run_keeps_its_results_in_view_until_saved_or_discarded(rec_dir):
    # the same job panel runs the Recordings page's suite; a decode sweep is its quick part (the suite's
    # without-cache comparison takes minutes on a shared CPU)
    at = _wait(
        _start_sweep(page("pages/4_Decode_slowdown.py", "ja", src="live"), contexts=(1024,)),
        "job_decode",
    )
    assert at.session_state["job_decode"].state == "done" and not at.exception

    def results():  # the run's own table, headers in the page's language
        return [
            d.value for d in at.dataframe if "tok/s" in d.value and "文脈長（トークン）" in d.value
        ]

    # numbers as the site writes them: a context with its thousands separator, times to 3 significant figures
    assert len(results()) == 1 and list(results()[0]["文脈長（トークン）"]) == ["1,024"]
    [row] = results()[0].drop(columns="文脈長（トークン）").to_dict("records")
    whole = re.compile(r"\d{1,3}(,\d{3})*")  # 1,234: a whole number in full
    assert all(whole.fullmatch(v) or len(re.sub(r"\D|^0\.0*", "", v)) <= 3 for v in row.values()), (
        row
    )
    assert {"live_save_decode", "live_discard_decode"} <= {b.key for b in at.button}
    at.run()  # a rerun (any widget) keeps them
    assert len(results()) == 1
    at.button(key="live_discard_decode").click().run()
    assert (
        "job_decode" not in at.session_state and not results() and not (rec_dir / "local").exists()
    )

    at = _wait(_start_sweep(at, contexts=(256,)), "job_decode")
    at.button(key="live_save_decode").click().run()
    assert len(list((rec_dir / "local").glob("*.yaml"))) == 1
    at.run()  # saved: the run is a recording now; the panel says where it went
    assert not results() and "live_save_decode" not in {b.key for b in at.button}
    assert "ローカルの記録" in texts(at)


def test_the_prefill_chapters_live_run_measures_both_sweeps_and_draws_them(rec_dir):
    at = page("pages/5_Prefill_and_decode.py", "en", src="live")
    at.selectbox(key="live_model_throughput").select("cpu-demo")
    at.selectbox(key="live_w_throughput").select("fp32")
    at.multiselect(key="live_prompts").set_value([128, 256])
    at.multiselect(key="live_batches").set_value([1, 2])
    at.multiselect(key="live_ctx_throughput").set_value([256])
    at = _wait(at.button(key="live_run_throughput").click().run(), "job_throughput", 300)
    assert not at.exception
    job = at.session_state["job_throughput"]
    assert job.state == "done", job.error
    rec = job.recording()
    assert [r["prompt_tokens"] for r in rec.rows("prefill")] == [128, 256]
    assert [(r["batch"], r["context"]) for r in rec.rows("batch")] == [(1, 256), (2, 256)]
    assert {"prefill", "batch", "settings", "backend"} <= set(
        rec.data["method"]
    )  # the one runner's method
    shown = texts(at)
    assert "Batching as run: " in shown and "the roofline fitted to this run's own points" in shown
    assert (
        "Points: a real prefill measured at each prompt length" in shown
    )  # the live run's own prefill


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_after_a_live_probe_the_trap_numbers_are_the_real_caches(rec_dir, lang):
    """The metrics at 256 and 257 tokens and their caption come from the probe just run on the real mlx_lm cache,
    not from the simulation the page shows before it (which the caption then says agrees)."""
    t = i18n.translator(lang, "trap.")
    at = page("pages/2_Nbytes_trap.py", lang, src="live", tokens=300)
    assert t("metrics_note", model="llama-3.2-1b", **sections.article_geometry()) in texts(at)
    at.button(key="live_trap_run").click().run()
    assert not at.exception and not at.error
    words = texts(at)
    assert t("metrics_note_live", model="llama-3.2-1b", **sections.article_geometry()) in words
    assert t("metrics_note", model="llama-3.2-1b", **sections.article_geometry()) not in words
    assert t("sim_agrees") in words
    assert [m.value for m in at.metric][:2] == ["8.000 MiB", "16.000 MiB"]
