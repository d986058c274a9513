"""The calculator page's widgets and cached engine calls (the arithmetic is kvcore.calculator's)."""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from kvcore import calculator, savings_views
from kvcore import gguf as kgguf
from kvcore.errors import KvError
from kvcore.formulas import KvSpec, formula_terms
from kvcore.limits import MAX_CONTEXT
from kvcore.config import parse_json_text
from kvcore.geometry import Geometry, parse_config, preset_geometry
from kvcore.runtimes import RUNTIMES, get_runtime, gguf_runtime, runtime_of
from kvcore.hardware import chips, get_chip, gpu_memory_limit_gb, mac_gpu_share
from kvcore.units import GIB, fmt_bytes

from . import i18n
from .cache import section_cache
from .tables import arrow, md_table
from .chart import make_chart
from .growth_sections import formula_markdown
from .sections import limit_rule

CUSTOM = "custom"
NUMBERS = (
    "kv_bytes",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "kv_prefill_peak_bytes",
    "weights_bytes",
    "weights_bytes_active",
)
LOG_STEPS = [
    1,
    16,
    256,
    1024,
    2048,
    4096,
    8192,
    16384,
    32768,
    65536,
    131072,
    262144,
    524288,
    1_048_576,
    2_097_152,
    4_194_304,
    10_000_000,
    100_000_000,
]


@dataclass(frozen=True)
class Memory:
    bytes: int
    reason: str


def chip_names() -> list[str]:
    return [CUSTOM, *(c.chip for c in chips())]


def available_memory(f, chip: str, col_ram, col_limit) -> Memory:
    """Memory the model may use: a custom GiB figure, or the chip's RAM (macOS's GPU share on a Mac, overridable).

    Vendors' "GB" of RAM and GPU memory are binary: a 16 GB Mac has 16 GiB.
    """
    from .frame import url_choice

    if chip == CUSTOM:
        gib = col_ram.number_input(
            f.t("calc.custom_gib"), 0.5, 1e6, 24.0, step=1.0, key="gib", bind="query-params"
        )
        return Memory(int(gib * GIB), f.t("calc.reason_custom"))
    c = get_chip(chip)
    if c.memory_gb:
        options = list(c.memory_gb)
        ram = url_choice(
            col_ram.selectbox,
            f.t("calc.ram"),
            options,
            options[len(options) // 2],
            "ram",
            format_func=lambda v: f"{v} GB",
            help=f.t("calc.ram_help"),
        )
    else:
        ram = col_ram.number_input(
            f.t("calc.ram"), 1, 4096, 48, key="ramn", bind="query-params", help=f.t("calc.ram_help")
        )
    limit_gb, _ = gpu_memory_limit_gb(float(ram), c.unified)
    share, source = (
        mac_gpu_share(float(ram)) if c.unified else (1.0, "")
    )  # for the translated reason
    override = col_limit.number_input(
        f.t("calc.override"),
        0.0,
        1e6,
        0.0,
        step=1.0,
        key="limit",
        bind="query-params",
        help=f.t("calc.override_help"),
    )
    if override > 0:
        return Memory(int(override * GIB), f.t("calc.reason_override"))
    reason = (
        f.t("calc.reason_mac", share=f"{share:.0%}", source=i18n.data_text(f.lang, source))
        if c.unified
        else f.t("calc.reason_gpu")
    )
    return Memory(int(limit_gb * GIB), reason)


GGUF_UPLOAD_MB = 100  # an upload is held whole in the server's memory; a larger file is read by its path (header only)
_GGUF_UPLOADS: OrderedDict = (
    OrderedDict()
)  # digest -> geometry of an uploaded GGUF (its header read once), the last 8


def gguf_upload_source(data: bytes, name: str) -> tuple:
    """An uploaded GGUF file -> the model source text the cached sections key on: ("gguf", digest), its header
    read once here (kvcore.gguf); KvError (one sentence) when it is not a GGUF kvcore reads or is too large."""
    if len(data) > GGUF_UPLOAD_MB * 1_000_000:
        raise KvError(
            f"{name} is larger than {GGUF_UPLOAD_MB} MB; GGUF uploads are limited to {GGUF_UPLOAD_MB} MB: give a "
            "larger file by its path (only its header is read).",
            "gguf_upload_large",
            label=name,
            mb=GGUF_UPLOAD_MB,
        )
    key = ("gguf", hashlib.sha256(data).hexdigest()[:24])
    if key not in _GGUF_UPLOADS:
        _GGUF_UPLOADS[key] = kgguf.geometry(data, name)
        while len(_GGUF_UPLOADS) > 8:
            _GGUF_UPLOADS.popitem(last=False)
    return key


def gguf_path_source(path: str) -> tuple:
    """A GGUF file on this machine -> ("gguf-path", its modification time): the header is read again when it changes."""
    try:
        return ("gguf-path", os.stat(path).st_mtime_ns)
    except OSError:
        kgguf.geometry(path)  # the engine's sentence: missing, unreadable, a folder
        raise


@section_cache(max_entries=32)
def config_geometry(
    text: str | bytes | None, name: str, runtime: str, settings: tuple = ()
) -> Geometry:
    """A preset (text None) or a pasted config.json -> geometry; KvError names the problem field.

    The model source `src` the page passes around is (text, name, runtime, settings): settings are the values of
    the runtime's own settings, in its order (llama.cpp: unified cache, micro-batch, swa_full; see runtime_options).
    """
    if text is None:
        return preset_geometry(name, runtime)
    if (
        isinstance(text, tuple) and not get_runtime(runtime).reads_gguf
    ):  # a GGUF's layers are llama.cpp's reading
        raise KvError(
            f"{name} is a GGUF file: it is sized under {gguf_runtime().name}'s rules; choose {gguf_runtime().name}.",
            "gguf_runtime",
            label=name,
            runtime=runtime,
        )
    if isinstance(text, tuple) and text[0] == "gguf":  # an upload, read by gguf_upload_source
        if text not in _GGUF_UPLOADS:
            raise KvError(
                f"{name} is no longer held by this server; upload it again.",
                "gguf_upload_lost",
                label=name,
            )
        return _GGUF_UPLOADS[text]
    if isinstance(text, tuple) and text[0] == "gguf-path":  # a local file: its header only
        return kgguf.geometry(name)
    return parse_config(parse_json_text(text, name), name, runtime)


def runtime_options(src: tuple, seqs: int):
    """The runtime's options for a model source: `seqs` sequences and the page's values of its settings."""
    runtime = get_runtime(src[2])
    values = src[3] if len(src) > 3 else ()
    return runtime.options(seqs, **{s.field: value for s, value in zip(runtime.settings, values)})


# ---------------------------------------------------------------- cached sections (read-only results)
# Keys are cheap: the model source (preset name or pasted text), runtime, and the widget values.

cached = section_cache(max_entries=64)


@cached
def numbers(src: tuple, ctx: int, seqs: int, k: str, v: str, w: str, mem_bytes: int) -> dict:
    """calc --json's numbers, the verdict, and (when it does not fit) the three levers."""
    g, spec, opts = config_geometry(*src), KvSpec(k, v), runtime_options(src, seqs)
    result = calculator.calculate(g, ctx, seqs, spec, w, opts)
    need = result["weights_bytes"] + result["kv_bytes"]
    out = {
        "result": result,
        "need": need,
        "verdict": calculator.verdict(need, mem_bytes),
        "layers": pd.DataFrame(result["per_layer"]),
    }
    if out["verdict"].status != "fits":
        weights = result["weights_bytes"]
        out["levers"] = (
            calculator.max_context(g, spec, seqs, weights, mem_bytes, opts),
            calculator.max_sequences(g, spec, ctx, weights, mem_bytes, opts),
            calculator.formats_that_fit(g, ctx, seqs, weights, mem_bytes, spec, opts),
        )
    return out


@cached
def numbers_table(
    src: tuple, ctx: int, seqs: int, k: str, v: str, w: str, mem_bytes: int, lang: str
) -> str:
    """numbers()' byte counts as a markdown table in `lang`: each quantity's name, its size in readable units and
    its exact bytes."""
    result = numbers(src, ctx, seqs, k, v, w, mem_bytes)["result"]
    t = i18n.translator(lang)
    windowed = (
        result["kv_bytes_per_token_at_context"] != result["kv_bytes_per_token"]
    )  # sliding windows stop growing
    rows = []
    for q in NUMBERS:
        if (
            q == "kv_bytes_per_token" and windowed
        ):  # what one token adds only until the windows are full; and the average
            rows.append(
                {
                    "quantity": t("calc.q_kv_bytes_per_token_window"),
                    "size": fmt_bytes(result[q]),
                    "bytes": result[q],
                }
            )
            avg = result["kv_bytes_per_token_average"]
            rows.append(
                {
                    "quantity": t("calc.q_kv_bytes_per_token_average", n=f"{ctx:,}"),
                    "size": fmt_bytes(avg),
                    "bytes": round(avg),
                }
            )
            continue
        rows.append(
            {"quantity": t(f"calc.q_{q}"), "size": fmt_bytes(result[q]), "bytes": result[q]}
        )
    rows = pd.DataFrame(rows)
    return md_table(
        rows,
        {
            "quantity": (t("calc.col_quantity"), None),
            "size": (t("calc.col_size"), None),
            "bytes": (t("calc.col_bytes"), "{:,}"),
        },
    )


@cached
def layers_table(
    src: tuple, ctx: int, seqs: int, k: str, v: str, w: str, mem_bytes: int, lang: str
):
    """numbers()' per-layer rows with the layer kinds in `lang`, as the Arrow table st.dataframe sends."""
    layers = numbers(src, ctx, seqs, k, v, w, mem_bytes)["layers"]
    return arrow(
        layers.assign(
            kind=layers["kind"].map(lambda kind: i18n.translate(lang, f"growth.kind_{kind}"))
        )
    )


def chart_contexts(ctx: int) -> list[int]:
    return calculator.log_contexts(1024, min(MAX_CONTEXT, max(1_048_576, 8 * ctx)))


@cached
def memory_chart(
    src: tuple, ctx: int, seqs: int, k: str, v: str, weights: int, mem_bytes: int, lang: str
):
    """Weights + KV vs context for several formats (the reader's first), the available memory as a dashed line."""
    g, t = config_geometry(*src), i18n.translator(lang)
    contexts = chart_contexts(ctx)
    formats = list(dict.fromkeys([k if k == v else "fp16", *calculator.CURVE_FORMATS]))
    curves = pd.DataFrame(
        calculator.memory_curves(
            g, contexts, weights, seqs, KvSpec(k, v), formats, runtime_options(src, seqs)
        )
    )
    curves = savings_views.one_line_per_cost(curves, g)  # formats of equal cost: one line, one name
    line = pd.DataFrame(
        [
            {"context": c, "format": t("calc.available_line"), "total_bytes": mem_bytes}
            for c in (contexts[0], contexts[-1])
        ]
    )
    data = pd.concat([curves, line], ignore_index=True).assign(gib=lambda d: d["total_bytes"] / GIB)
    return make_chart(
        data,
        "series_chart",
        data,
        "context",
        "gib",
        "format",
        t("common.context"),
        "GiB",
        log_x=True,
        log_y=True,
        dashed=t("calc.available_line"),
        rules=limit_rule(g, contexts[-1], lang),
    )


@cached
def decode_chart(
    src: tuple,
    ctx: int,
    seqs: int,
    k: str,
    v: str,
    w: str,
    mem_bytes: int,
    chip: str,
    share: float,
    lang: str,
) -> dict:
    """Predicted tok/s vs context on `chip` at `share` of its peak, marked at the reader's context ("here").

    When weights + KV do not fit at `ctx`, nothing is predicted there (here None) and the curve stops at the
    longest context that fits (`fits_to`; 0: not even one token, no chart).
    """
    g, t = config_geometry(*src), i18n.translator(lang)
    out = numbers(src, ctx, seqs, k, v, w, mem_bytes)
    fits = out["verdict"].status != "no"
    fits_to = ctx if fits else out["levers"][0]
    if fits_to < 1:
        return {"chart": None, "here": None, "fits_to": 0}
    contexts = (
        chart_contexts(ctx)
        if fits
        else calculator.log_contexts(min(1024, max(1, fits_to // 64)), fits_to)
    )
    llama = runtime_options(src, seqs)
    rows = calculator.predict_decode(g, contexts, KvSpec(k, v), w, chip, share, seqs, llama)
    at = (
        calculator.predict_decode(g, [ctx], KvSpec(k, v), w, chip, share, seqs, llama)[0]
        if fits
        else None
    )
    here = at["tokens_per_s"] if at else None
    each = t(f"calc.decode_each_{runtime_of(g).sequence_noun}")  # slot (llama.cpp) or sequence
    dec = pd.DataFrame(rows).assign(series=t("calc.predicted") + (f" ({each})" if seqs > 1 else ""))
    if seqs > 1:  # the total of all sequences is a second line, named as such
        total = pd.DataFrame(rows).assign(
            tokens_per_s=lambda d: d["tokens_per_s_total"],
            series=t("calc.predicted") + f" ({t('calc.decode_all', n=seqs)})",
        )
        dec = pd.concat([dec, total], ignore_index=True)
    marks = (
        pd.DataFrame(
            [{"context": ctx, "tokens_per_s": here, "label": f"{ctx:,}: {here:,.1f} tok/s"}]
        )
        if here is not None
        else None
    )
    return {
        "chart": make_chart(
            dec,
            "marked_series_chart",
            dec,
            "context",
            "tokens_per_s",
            "series",
            t("common.context"),
            t("common.tok_s"),
            log_x=True,
            rules=limit_rule(g, contexts[-1], lang),
            marks=marks,
        ),
        "here": here,
        "here_total": at["tokens_per_s_total"] if at else None,
        "each": each,
        "fits_to": fits_to,
    }


@section_cache(max_entries=8)
def efficiency(recs: list) -> calculator.Efficiency:
    """BW_eff / peak from the recordings on known chips (recordings hash by content)."""
    return calculator.efficiency(recs)


DEFAULT_CONTEXT = 32768


def context_inputs(f, col_log, col_exact) -> int:
    """The calculator's context: an exact number and a log slider that set each other, bound to ?ctx= here rather
    than by Streamlit. Its binding leaves out a value equal to the widget's declared default (the minimum, 1, since
    the real default comes from session state), so ?ctx=1 was neither written nor read back: it came back 32,768."""
    state = st.session_state
    if "ctx" not in state:
        url = st.query_params.get("ctx", "")
        state["ctx"] = (
            int(url) if url.isdigit() and 1 <= int(url) <= MAX_CONTEXT else DEFAULT_CONTEXT
        )

    def to_url() -> None:
        value = int(state["ctx"])
        if value == DEFAULT_CONTEXT:
            st.query_params.pop("ctx", None)
        else:
            st.query_params["ctx"] = str(value)

    def from_log() -> None:
        state["ctx"] = state["ctx_log"]
        to_url()

    ctx = col_exact.number_input(
        f.t("calc.ctx_exact"), 1, MAX_CONTEXT, step=1024, key="ctx", on_change=to_url
    )
    state["ctx_log"] = max(
        s for s in LOG_STEPS if s <= ctx
    )  # the log slider follows the exact value
    col_log.select_slider(
        f.t("calc.ctx_log"),
        LOG_STEPS,
        key="ctx_log",
        format_func=lambda v: f"{v:,}",
        on_change=from_log,
    )
    return int(ctx)


@section_cache(max_entries=8)
def efficiency_sources(recs: list, lang: str) -> str:
    """The recordings calculator.efficiency fitted, named as the site names them everywhere (not their English titles)."""
    from .sources import source_label

    return i18n.translate(lang, "recordings.list_sep").join(
        source_label(r, lang) for r in recs if calculator.efficiency([r]).source != "assumption"
    )


@cached
def runtimes_compared(src: tuple, ctx: int, seqs: int, lang: str) -> str:
    """The same model, context and sequences under each runtime's rules (fp16 K and V, llama.cpp with the page's
    options or its defaults), as a markdown table: KV bytes and why they differ (padding, windows)."""
    t = i18n.translator(lang)
    rows = []
    for runtime in (
        [gguf_runtime()] if isinstance(src[0], tuple) else RUNTIMES.values()
    ):  # a GGUF: its reader's rules only
        here = (*src[:2], runtime.name, src[3] if runtime is get_runtime(src[2]) else ())
        g = config_geometry(src[0], src[1], runtime.name)
        r = calculator.calculate(
            g, ctx, seqs, KvSpec("fp16", "fp16"), "bf16", runtime_options(here, seqs)
        )
        why = [t(f"calc.note_{code}", window=window) for code, window in g.note_codes]
        if runtime.preallocates:
            cells = ", ".join(
                t("calc.cmp_cells", name=c["name"], cells=f"{c['cells']:,}", streams=c["streams"])
                for c in r["caches"]
            )
            why.insert(0, t("calc.cmp_llamacpp", cells=cells))
        rows.append(
            {
                "runtime": runtime.name,
                "kv": fmt_bytes(r["kv_bytes"], decimal=False),
                "bytes": r["kv_bytes"],
                "why": i18n.join(lang, *why) or "—",
            }
        )
    return md_table(
        pd.DataFrame(rows),
        {
            "runtime": (t("calc.runtime"), "`{}`"),
            "kv": (t("calc.cmp_kv"), None),
            "bytes": (t("calc.col_bytes"), "{:,}"),
            "why": (t("calc.cmp_why"), None),
        },
    )


@cached
def formula(src: tuple, ctx: int, seqs: int, k: str, v: str, lang: str) -> str:
    """The KV formula with this model's numbers, written out in `lang` (mlx_lm and reference rules)."""
    g, spec = config_geometry(*src), KvSpec(k, v)
    return formula_markdown(formula_terms(g, ctx, spec, seqs), spec, lang)
