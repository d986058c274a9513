"""The prefill-and-decode chapter's batching sections (kvsite.sections.shared's conventions): B sequences
decoding together, total and per-sequence tok/s from kvcore.views.speed with the chapter's fitted
efficiencies (kvsite.sections.prefill), and a run's measured batch points with the roofline fitted
to them.

Example: batch_model("M4 Max (40-core GPU)", "llama-3.2-1b", "mlx-q4", "en")["caption"]
"""

from __future__ import annotations

import pandas as pd

from kvcore.fits import decode as decode_runs
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import KvSpec
from kvcore.recordings.store import Recording
from kvcore.timing import hardware
from kvcore.units import fmt_num
from kvcore.views import speed as time_views
from kvsite import i18n
from kvsite.charts.chart import make_chart
from kvsite.data.recording_text import as_text
from kvsite.data.sources import source_label

from .prefill import RUNTIME, efficiency, residual_text
from .shared import cached, cols

BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
BATCH_CONTEXTS = (1024, 8192, 32768)


@cached
def batch_model(chip_name: str, model: str, weights: str, lang: str) -> dict:
    """Total and per-sequence tok/s against the batch at three contexts, and where KV reads overtake the weights."""
    t = i18n.translator(lang, "prefill.")
    chip, g = hardware.get_chip(chip_name), preset_geometry(model, RUNTIME)
    contexts = [
        c for c in BATCH_CONTEXTS if not g.max_position_embeddings or c <= g.max_position_embeddings
    ] or [1024]
    curve = time_views.batch_curve(
        g, weights, KvSpec(), chip, efficiency(chip_name), contexts, list(BATCHES)
    )
    largest = max(chip.memory_gb, default=0) * 1e9  # GB as the vendor states them
    cut = bool(largest) and bool((curve["memory_bytes"] > largest).any())
    if largest:  # a batch whose weights and KV exceed the chip's largest memory is not drawn
        curve = curve[curve["memory_bytes"] <= largest]
    if curve.empty:
        return {
            "chart": None,
            "caption": t("batch_none", chip=chip.chip, gb=fmt_num(largest / 1e9)),
        }
    long = pd.concat(
        [
            curve.assign(
                series=curve["context"].map(lambda c: t("s_total", context=fmt_num(c))),
                tok_s=curve["tokens_per_s_total"],
            ),
            curve.assign(
                series=curve["context"].map(lambda c: t("s_per_seq", context=fmt_num(c))),
                tok_s=curve["tokens_per_s"],
            ),
        ],
        ignore_index=True,
    )
    marks, words = [], []
    for c in contexts:
        b = time_views.kv_overtakes_weights(g, weights, KvSpec(), c)
        if b >= 1:
            marks.append(
                {"batch": b, "label": t("crossing_mark", context=fmt_num(c))}
            )  # the caption gives the numbers
            words.append(t("crossing", context=fmt_num(c), b=fmt_num(b)))
        else:
            words.append(t("crossing_none", context=fmt_num(c)))
    marks = [m for m in marks if m["batch"] <= BATCHES[-1]]
    titles = {**cols(lang, "series", "batch"), "tok_s": t("batch_y")}
    table = long[["series", "batch", "tok_s", "bound"]].rename(columns=titles)
    dashed = [t("s_per_seq", context=fmt_num(c)) for c in contexts]
    chart = make_chart(
        table,
        "series_chart",
        long[["series", "batch", "tok_s"]],
        "batch",
        "tok_s",
        "series",
        t("batch_x"),
        t("batch_y"),
        log_x=True,
        log_y=True,
        dashed=dashed,
        rules=pd.DataFrame(marks) if marks else None,
        titles=titles,
        height=380,
    )
    caption = t(
        "batch_model_caption",
        model=model,
        weights=weights,
        chip=chip.chip,
        contexts=", ".join(fmt_num(c) for c in contexts),
        crossings=i18n.translate(lang, "recordings.list_sep").join(words),
    )
    if cut:
        caption = i18n.join(
            lang, caption, t("batch_cut", chip=chip.chip, gb=fmt_num(largest / 1e9))
        )
    return {"chart": chart, "caption": caption}


@cached
def batch_measured(rec: Recording, lang: str) -> dict | None:
    """A run's batch points, with the roofline fitted to them when kvcore knows its model."""
    t = i18n.translator(lang, "prefill.")
    pts = time_views.batch_points(rec)
    if pts.empty:
        return None
    name = as_text(rec)(
        source_label(rec, lang)
    )  # in a caption and a heading: an upload's words as text
    fitted = time_views.batch_fit(rec)
    many = pts["series"].nunique() > 1 or (pts["series"] != "").all()
    label = (
        (lambda r: t("s_series_measured", series=r["series"], context=fmt_num(r["context"])))
        if many
        else (lambda r: t("s_context", context=fmt_num(r["context"])))
    )  # a context's points and fitted line share a colour
    pts = pts.assign(series_name=pts.apply(label, axis=1))
    lines = None
    if fitted is not None:
        curve = fitted["curve"]
        lines = curve.assign(
            series_name=curve["context"].map(lambda c: t("s_context", context=fmt_num(c)))
        )
        fit = fitted["fit"]
        undetermined = t("fit_undetermined")
        caption = t(
            "measured_caption",
            source=name,
            compute=fmt_num(fit["compute_flops"] / 1e9, unit="GFLOP/s")
            if fit["compute_flops"]
            else undetermined,
            bandwidth=fmt_num(fit["bandwidth_bytes"] / 1e9, unit="GB/s")
            if fit["bandwidth_bytes"]
            else undetermined,
            residual=residual_text(fit["residuals"]),
        )
        if rec.kind == "measured" and not time_views.chip_known(rec):
            caption = i18n.join(lang, caption, t("fit_this_run"))
    else:
        why = "no_format" if decode_runs.no_fit_reason(rec) == "no_format" else "no_model"
        caption = t("measured_caption_no_fit", why=t(f"why_{why}"))
    titles = {
        **cols(lang, "batch", "context", "tokens_per_s_total", "tokens_per_s_seq"),
        "series_name": i18n.translate(lang, "cols.series"),
    }
    table = pts.rename(columns={"tokens_per_s": "tokens_per_s_seq"})[
        ["series_name", "context", "batch", "tokens_per_s_total", "tokens_per_s_seq"]
    ].rename(columns=titles)
    chart = make_chart(
        table,
        "series_chart",
        lines,
        "batch",
        "tokens_per_s_total",
        "series_name",
        t("batch_x"),
        t("batch_y"),
        points=pts[["series_name", "batch", "tokens_per_s_total", "context"]],
        log_x=True,
        log_y=True,
        titles={
            "series_name": titles["series_name"],
            "batch": titles["batch"],
            "tokens_per_s_total": titles["tokens_per_s_total"],
        },
        height=360,
    )
    return {"chart": chart, "caption": caption, "title": t("measured_title", source=name)}
