"""The decode slowdown chapter's sections: measured runs against their bytes per token, the fit in
words, the what-if on another chip, every run's slowdown against the bytes model's.

Example: decode(runs, "en", runs)["fit"] -> the first run's kvcore.timing.decode_model.Fit.
"""

from __future__ import annotations

import pandas as pd

from kvcore.fits import decode as decode_runs
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import weights_bytes
from kvcore.recordings.provenance import source_class
from kvcore.recordings.store import Recording
from kvcore.timing import hardware
from kvcore.timing.decode_model import FAR_BELOW_PEAK, Fit
from kvcore.units import GIB, fmt_num, fmt_pct, fmt_size
from kvcore.views import memory as views
from kvcore.views import what_if as decode_what_if
from kvsite import i18n
from kvsite.charts.chart import make_chart
from kvsite.charts.tables import md_table
from kvsite.data.recording_text import as_text

from .shared import cached, cols, source_colors, source_names, speed_curves


@cached
def decode(runs: list[Recording], lang: str, all_recs: list[Recording]) -> dict | None:
    """Measured points and fitted curves of every run (a fit that does not describe its run is dashed); the first
    run's worked check, fit and chip. None: no run names a model. all_recs: every recording, for the colours."""
    runs_decode = [decode_runs.analyse(r) for r in runs]
    # a run without a model geometry is still drawn: its measured points, no bytes line (no_fit says why)
    pts = [
        a.points if a is not None else pd.DataFrame(r.rows("decode")).assign(recording=r.id)
        for r, a in zip(runs, runs_decode)
        if r.rows("decode")
    ]
    if not pts:
        return None
    names = source_names(runs, lang)
    no_fit = [
        {"run": names[r.id], "why": decode_runs.no_fit_reason(r)}
        for r, a in zip(runs, runs_decode)
        if a is None and r.rows("decode")
    ]
    points = pd.concat(pts, ignore_index=True)
    for col in ("bytes_per_token", "implied_gbps"):
        if col not in points:
            points[col] = float("nan")
    points = points.assign(
        series=points["recording"].map(names), source=points["recording"].map(names)
    )
    points = views.decode_spread(
        points, "iqr", fallback="range"
    )  # spread over passes, where recorded
    lines = pd.concat(
        [a.curve for a in runs_decode if a is not None]
        or [pd.DataFrame(columns=["context", "tokens_per_s", "recording"])],
        ignore_index=True,
    )
    lines = lines.assign(series=lines["recording"].map(names), source=lines["recording"].map(names))
    unfit = [
        names[r.id] for r, a in zip(runs, runs_decode) if a is not None and not a.fit.memory_bound
    ]
    titles = cols(
        lang, "context", "tokens_per_s", "series", "bytes_per_token", "implied_gbps", "source"
    )
    table = points[["series", "context", "tokens_per_s", "bytes_per_token", "implied_gbps"]].rename(
        columns=titles
    )
    chart = speed_curves(
        table,
        lines,
        lang,
        points=points,
        log_y=True,
        dashed=unfit,
        colors=source_colors(all_recs, lang),
        titles=titles,
        error=("tokens_per_s_low", "tokens_per_s_high"),
        height=280,  # the worked check's numbers under it stay in the first screen
    )
    first = runs_decode[0]
    return {
        "chart": chart,
        "fit": first and first.fit,
        "check": first and first.check,
        "chip": first and first.chip,
        "unfit": bool(unfit),
        "spread": bool(points["tokens_per_s_low"].notna().any()),
        "no_fit": no_fit,
    }


def check_text(check: dict, fit: Fit, lang: str) -> str:
    """The worked check in words; whether both points imply the same bandwidth is the fit's verdict, not assumed."""
    values = dict(
        a=f"{check['context_a']:,}",
        b=f"{check['context_b']:,}",
        w=fmt_size(check["weights_bytes"]),
        kva=fmt_size(check["kv_bytes_a"]),
        kvb=fmt_size(check["kv_bytes_b"]),  # sizes in GiB/MiB site-wide
        ta=fmt_num(check["tokens_per_s_a"]),
        tb=fmt_num(check["tokens_per_s_b"]),
        ga=fmt_num(check["gbps_a"]),
        gb=fmt_num(check["gbps_b"]),
        pred=fmt_num(check["predicted_slowdown"]),
        meas=fmt_num(check["measured_slowdown"]),
    )
    return i18n.translate(
        lang,
        "decode.check_text"
        if fit.verdict_code == "memory_bound"
        else "decode.check_text_not_bound",
        **values,
    )


def verdict_text(fit: Fit, lang: str) -> str:
    """The decode fit's verdict in `lang`, from its code and numbers (Fit.verdict is the English CLI sentence)."""
    t = i18n.translator(lang, "decode.verdict_")
    nums = {
        "bw": fmt_num(fit.bandwidth_gbps),
        "peak": fmt_num(fit.peak_gbps or 0),
        "rms": fmt_pct(fit.rms_residual),
        "limit": fmt_pct(FAR_BELOW_PEAK),
    }
    if (
        fit.verdict_code == "below_any_memory"
    ):  # the one verdict that quotes the floor (a table lookup)
        nums["floor"] = fmt_num(hardware.slowest_memory()[0])
    parts = [t(fit.verdict_code, **nums)]
    if fit.verdict_code == "memory_bound":
        if fit.peak_gbps:
            parts.append(
                t("share", share=fmt_pct(fit.bandwidth_gbps / fit.peak_gbps), peak=nums["peak"])
            )
        if fit.overhead_s > 0:
            parts.append(t("overhead", ms=fmt_num(fit.overhead_s * 1e3)))
    return i18n.join(lang, *parts)


@cached
def default_efficiency(rec: Recording | None) -> float:
    """The efficiency Article A's run implies on its M5 Pro (the calculator's assumption without it)."""
    return round(decode_what_if.efficiency([rec] if rec is not None else []).share, 2)


@cached
def what_if(chip: str, model: str, weights: str, eff: float, lang: str) -> dict:
    """Predicted tok/s on a chip where the model fits and supports the context; why not, where it does not."""
    t = i18n.translator(lang)
    g, c = preset_geometry(model), hardware.get_chip(chip)
    pred = decode_what_if.what_if(g, weights, KvSpec(), c, eff, WHAT_IF_MAX)
    memory = decode_what_if.chip_memory_bytes(c)
    caveat = t("decode.caveat" if c.unified else "decode.caveat_gpu")
    if pred.empty:
        return {
            "chart": None,
            "caveat": caveat,
            "text": t(
                "decode.whatif_no_fit",
                model=model,
                weights=weights,
                need=fmt_num(weights_bytes(g, weights) / GIB),
                chip=chip,
                memory=fmt_num(memory / GIB),
            ),
        }
    notes = []
    top = int(pred["context"].max())
    if g.max_position_embeddings and top == g.max_position_embeddings < WHAT_IF_MAX:
        notes.append(t("decode.whatif_model_limit", model=model, n=f"{top:,}"))
    elif top < min(WHAT_IF_MAX, g.max_position_embeddings or WHAT_IF_MAX):
        notes.append(
            t("decode.whatif_memory_limit", n=f"{top:,}", chip=chip, memory=fmt_num(memory / GIB))
        )
    pred["series"] = pred["series"].map(i18n.translator(lang, "decode."))
    titles = cols(lang, "context", "series", "tokens_per_s", "bytes_per_token")
    return {
        "chart": speed_curves(pred.rename(columns=titles), pred, lang, log_y=True, titles=titles),
        "text": i18n.join(lang, *notes),
        "caveat": caveat,
    }


WHAT_IF_MAX = 131072  # the what-if's longest context, unless the model's own limit is shorter


MOST_COLOURED = 8  # runs drawn in a colour of their own at once; the rest grey, behind them


@cached
def slowdown_runs(recs: list[Recording], lang: str) -> tuple[list[str], list[str]]:
    """(every run the slowdown-vs-bytes chart can draw, by its site name; the runs coloured by default: the
    published and Apple Silicon ones, at most MOST_COLOURED)."""
    frame = decode_runs.slowdown_vs_bytes(recs)
    names = source_names(recs, lang)
    ids = list(dict.fromkeys(frame["recording"]))
    by_id = {r.id: r for r in recs}
    mac = [i for i in ids if source_class(by_id[i]) != "other"]
    return [names[i] for i in ids], [names[i] for i in mac[:MOST_COLOURED]]


@cached
def slowdown_vs_bytes(
    recs: list[Recording], lang: str, coloured: tuple[str, ...] | None = None
) -> dict | None:
    """Every run's measured slowdown against the bytes model's (decode_runs.slowdown_vs_bytes): the chart (each run named
    and coloured as everywhere on the site), a table of each run's longest context, and the runs shown.
    None when no run has two points and a model."""
    frame = decode_runs.slowdown_vs_bytes(recs)
    if frame.empty:
        return None
    t, names = i18n.translator(lang, "decode."), source_names(recs, lang)
    frame = frame.assign(run=frame["recording"].map(names))
    # at most about eight colours can be told apart: the runs the reader picked keep theirs, the others are grey
    other = t("sb_other")
    frame = frame.assign(
        shown=frame["run"].where(
            frame["run"].isin(coloured if coloured is not None else frame["run"]), other
        )
    )
    fields = [
        "run",
        "chip",
        "runtime",
        "model",
        "context",
        "tokens_per_s",
        "predicted_slowdown",
        "measured_slowdown",
    ]
    titles = cols(lang, *fields)
    chart = make_chart(
        frame[fields].rename(columns=titles),
        "slowdown_scatter",
        frame,
        "predicted_slowdown",
        "measured_slowdown",
        "shown",
        t("sb_x"),
        t("sb_y"),
        t("sb_identity"),
        tooltip=("run", "chip", "runtime", "model", "context", "tokens_per_s"),
        colors=source_colors(recs, lang),
        titles={**titles, "shown": titles["run"]},
        detail="run",
        faded=other,
    )
    summary = decode_runs.slowdown_summary(frame)
    # one column for the contexts compared: with a From and a To column the ratio was pushed off a phone's screen
    # an upload's name is text in the table (recording_text.as_text: its short_label could hold markdown)
    as_shown = {names[r.id]: as_text(r)(names[r.id]) for r in recs}
    spans = summary.assign(
        tokens=[f"{a:,} → {b:,}" for a, b in zip(summary["context_first"], summary["context"])],
        run=summary["run"].map(lambda n: as_shown.get(n, n)),
    )
    table = md_table(
        spans,
        {
            "run": (t("sb_run"), None),
            "tokens": (t("sb_tokens"), None),
            "predicted_slowdown": (t("sb_predicted"), "{:.2f}×"),
            "measured_slowdown": (t("sb_measured"), "{:.2f}×"),
            "ratio": (t("sb_ratio"), "{:.2f}"),
        },
    )
    return {"chart": chart, "table": table, "runs": tuple(summary["run"])}
