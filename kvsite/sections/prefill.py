"""The prefill-and-decode chapter's sections for one reader, one cached function each
(kvsite.sections.shared's conventions): widget values, language and recordings in; chart, numbers and text
out. The numbers come from kvcore.views.speed (kvcore.timing.estimate underneath) with the efficiencies
kvcore.fits.shares fitted on published runs. Many readers at once (batching): kvsite.sections.batch.

Example: roofline("M4 Max (40-core GPU)", "llama-3.2-1b", "mlx-q4", 2048, 512, 8, "en")["chart"]
"""

from __future__ import annotations

import math

import pandas as pd

from kvcore.fits import shares as timing_fit
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import KvSpec
from kvcore.recordings.provenance import source_class
from kvcore.recordings.store import Recording
from kvcore.runtimes.registry import DEFAULT as DEFAULT_RUNTIME
from kvcore.timing import estimate as timing
from kvcore.timing import hardware
from kvcore.units import fmt_bytes, fmt_num, fmt_pct
from kvcore.views import speed as time_views
from kvsite import i18n
from kvsite.charts.chart import make_chart
from kvsite.charts.tables import md_table
from kvsite.data.recording_text import as_text
from kvsite.data.sources import badge_fields, short_name, source_label

from .shared import cached, cols

RUNTIME = DEFAULT_RUNTIME  # mlx_lm: one cache per sequence (the calculator has llama.cpp slots)


def _k(tokens: int) -> str:
    return fmt_num(tokens)


def efficiency(chip: str) -> timing.Efficiency:
    """The shares of peak this chapter uses on `chip`: kvcore.fits.shares's, fitted on published runs."""
    return timing_fit.efficiency(chip, RUNTIME)


def efficiency_words(chip: str, lang: str) -> str:
    """Where the efficiencies come from, in `lang`: the calibration's runs and chips, its fixed step time, and
    whether this chip's kind of run had a fitted share of its own (timing_fit.Calibration.efficiency_for)."""
    cal = timing_fit.calibration()
    runs = sorted({p.run for p in cal.fit_points})
    chips = sorted({p.chip.chip for p in cal.fit_points})
    own = timing_fit.decode_class(hardware.get_chip(chip), RUNTIME) in cal.bandwidth
    t = i18n.translator(lang, "prefill.")
    words = t(
        "eff_source", runs=len(runs), chips=", ".join(chips), ms=fmt_num(cal.overhead_s * 1e3)
    )
    return words if own else words + t("eff_fallback")


def _quoted(source: str, lang: str) -> str:
    """A hardware source as the table states it (a code span), or its rendering in `lang` (kvsite/i18n/data.*.yaml:
    a Japanese page showed the English estimate's wording)."""
    words = i18n.data_text(lang, source)
    return words if words != source else f"`{source}`"


def _chip_values(chip: hardware.Chip, lang: str) -> dict:
    t = i18n.translator(lang)
    # the hardware table's sources quoted as they stand (a vendor page number such as "Apple support 121553")
    return {
        "chip": chip.chip,
        "bw": fmt_num(chip.bandwidth_gbps),
        "bw_source": f"`{chip.source}`",
        "tflops": fmt_num(chip.fp16_tflops) if chip.fp16_tflops else "—",
        "compute_source": _quoted(chip.compute_source, lang)
        if chip.compute_source
        else t("prefill.no_compute_source"),
        "ridge": fmt_num(chip.ridge_flops_per_byte) if chip.ridge_flops_per_byte else "—",
    }


def _without_chip(name: str, chip: str) -> str:
    """A run's short name without the chip the roof's title names: "M3 Ultra · Qwen3-8B · rapid-mlx" on the
    M3 Ultra's roof -> "Qwen3-8B · rapid-mlx" (a legend entry that fits a phone)."""
    return " · ".join(part for part in name.split(" · ") if not chip.startswith(part))


@cached
def chips_with_runs(recs: list[Recording]) -> list[str]:
    """The hardware table's chips that some run's decode points were measured on (time_views.runs_on), in its order."""
    placed = [r for r in recs if not time_views.measured_points(r).empty]
    return [c.chip for c in hardware.chips() if time_views.runs_on(placed, c)]


@cached
def roofline(
    chip_name: str,
    model: str,
    weights: str,
    prompt: int,
    answer: int,
    sequences: int,
    recs: list[Recording],
    lang: str,
) -> dict:
    """The chip's roof, the model's prefill / decode (1 and B sequences) on it, and the decode points of the runs
    measured on that chip (one chip on the chart: time_views.runs_on)."""
    t = i18n.translator(lang, "prefill.")
    chip, g = hardware.get_chip(chip_name), preset_geometry(model, RUNTIME)
    eff, context = efficiency(chip_name), prompt + answer
    pts = time_views.roofline_points(g, weights, KvSpec(), chip, eff, prompt, context, sequences)
    names = {
        "prefill": t("s_prefill", prompt=_k(prompt)),
        "decode_1": t("s_decode_1", context=_k(context)),
        "decode_b": t("s_decode_b", b=sequences, context=_k(context)),
    }
    pts = pts.assign(series=pts["kind"].map(names))
    runs = time_views.runs_on(recs, chip)
    for run in runs:
        measured = time_views.measured_points(run).assign(
            series=t("s_measured", run=_without_chip(short_name(run), chip.chip)), bound=""
        )
        pts = pd.concat([pts, measured], ignore_index=True)
    lo, hi = time_views.INTENSITY_RANGE  # the roof spans every point
    roof = time_views.roof(
        chip, min(lo, pts["intensity"].min() / 2), max(hi, pts["intensity"].max() * 2)
    )
    roof = roof.assign(series=t("s_roof", chip=chip.chip))
    ridge = chip.ridge_flops_per_byte
    rules = (
        pd.DataFrame([{"intensity": ridge, "label": t("ridge", ridge=fmt_num(ridge))}])
        if ridge
        else None
    )
    titles = {**cols(lang, "series"), "intensity": t("roof_x"), "tflops": t("roof_y")}
    table = pts[["series", "intensity", "tflops"]].rename(columns=titles)
    chart = make_chart(
        table,
        "series_chart",
        roof,
        "intensity",
        "tflops",
        "series",
        t("roof_x"),
        t("roof_y"),
        points=pts[["series", "intensity", "tflops"]],
        log_x=True,
        log_y=True,
        rules=rules,
        titles=titles,
        height=220,
    )
    values = _chip_values(chip, lang)
    sep = i18n.translate(lang, "recordings.list_sep")
    measured_words = (
        t("roof_runs", runs=sep.join(as_text(r)(source_label(r, lang)) for r in runs))
        if runs
        else t("roof_no_runs", chip=chip.chip, chips=sep.join(chips_with_runs(recs)))
    )
    caption = i18n.join(lang, t("roof_caption", **values), measured_words)
    text = t("intensity_text" if chip.peak_flops else "intensity_text_no_compute", **values)
    return {
        "chart": chart,
        "caption": caption,
        "text": text,
        "title": t("roof_title", chip=chip.chip),
    }


@cached
def your_prompt(
    chip_name: str, model: str, weights: str, prompt: int, answer: int, sequences: int, lang: str
) -> dict:
    """One answer: time to first token, decode speed (per sequence and total), total time, memory; every assumption."""
    t = i18n.translator(lang, "prefill.")
    chip, g = hardware.get_chip(chip_name), preset_geometry(model, RUNTIME)
    eff = efficiency(chip_name)
    a = time_views.your_prompt(g, weights, KvSpec(), chip, eff, prompt, answer, sequences)
    seconds = lambda s: "—" if s is None else t("seconds", s=fmt_num(s))  # noqa: E731
    tok_s = lambda v: fmt_num(v, unit="tok/s")  # noqa: E731
    metrics = [(t("ttft"), seconds(a["prefill_s"]))]
    if sequences > 1:
        metrics.append((t("ttft_all", b=sequences), seconds(a["prefill_all_s"])))
    metrics += [
        (
            t("decode_speed"),
            f"{tok_s(a['decode_tokens_per_s_first'])} → {tok_s(a['decode_tokens_per_s_last'])}",
        )
    ]
    if sequences > 1:
        metrics.append(
            (t("decode_total", b=sequences), tok_s(a["decode_tokens_per_s_total_first"]))
        )
    metrics += [
        (t("total_time"), seconds(a["total_s"])),
        (t("memory"), fmt_bytes(a["memory_bytes"], decimal=False)),
    ]
    values = _chip_values(chip, lang)
    attention = a["prefill_flops"] - timing.matrix_flops_per_token(g) * prompt
    assumptions = t(
        "assumptions",
        model=model,
        weights=weights,
        kv="fp16",
        **values,
        ce=fmt_pct(eff.compute),
        be=fmt_pct(eff.bandwidth),
        eff_source=efficiency_words(chip_name, lang),
        chunk=fmt_num(timing.micro_batch(g, prompt)),
        attention=fmt_pct(attention / a["prefill_flops"]),
        b=sequences,
        answer=fmt_num(answer),
        samples=time_views.DECODE_SAMPLES,
        end=fmt_num(a["end_context"]),
    )
    bound = lambda b: t(f"bound_{b}") if b else "—"  # noqa: E731
    same = a["decode_bound_first"] == a["decode_bound_last"]
    bounds = t(
        "answer_bounds_same" if same else "answer_bounds",
        prefill_bound=bound(a["prefill_bound"]),
        decode_first=bound(a["decode_bound_first"]),
        decode_last=bound(a["decode_bound_last"]),
        end=fmt_num(a["end_context"]),
    )
    note = (
        None
        if chip.peak_flops
        else t("no_compute", chip=chip.chip, source=i18n.data_text(lang, chip.compute_source))
    )
    largest = max(chip.memory_gb, default=0)
    too_big = (
        t("too_big", chip=chip.chip, gb=fmt_num(largest))
        if largest and a["memory_bytes"] > largest * 1e9
        else None
    )
    return {
        "metrics": metrics,
        "assumptions": assumptions,
        "bounds": bounds,
        "note": note,
        "too_big": too_big,
        "numbers": a,
    }


def residual_text(residuals: list[float]) -> str:
    """A fit's median absolute residual as a percentage ("—" without residuals)."""
    return fmt_pct(sorted(abs(r) for r in residuals)[len(residuals) // 2]) if residuals else "—"


@cached
def prefill_measured(rec: Recording, lang: str) -> dict | None:
    """A run's prompt tok/s against prompt length, the time model fitted to it (the O(T^2) attention term)."""
    t = i18n.translator(lang, "prefill.")
    fitted = time_views.prefill_fit(rec)
    if fitted is None:
        return None
    pts = fitted["points"].assign(series=t("s_prefill_measured"))
    curve = fitted["curve"].assign(series=t("s_prefill_model"))
    longest = curve.iloc[-1]
    titles = {**cols(lang, "series", "prompt_tokens", "prefill_s"), "tokens_per_s": t("prefill_y")}
    table = pts[["prompt_tokens", "prefill_s", "tokens_per_s", "residual"]].rename(columns=titles)
    chart = make_chart(
        table,
        "series_chart",
        curve[["series", "prompt_tokens", "tokens_per_s"]],
        "prompt_tokens",
        "tokens_per_s",
        "series",
        t("prefill_x"),
        t("prefill_y"),
        points=pts[["series", "prompt_tokens", "tokens_per_s"]],
        log_x=True,
        log_y=True,
        dashed=t("s_prefill_model"),
        titles=titles,
        height=340,
    )
    caption = t(
        "prefill_caption",
        source=as_text(rec)(source_label(rec, lang)),
        prompt=_k(int(longest["prompt_tokens"])),
        share=fmt_pct(longest["attention_share"]),
        residual=residual_text(fitted["fit"]["residuals"]),
    )
    return {"chart": chart, "caption": caption}


@cached
def prefill_section(rec, fallback: Recording | None, lang: str) -> dict | None:
    """The prefill sweep of the chosen run, else of `fallback` (the bundled run that sweeps the prompt length);
    "elsewhere": the fallback's short name when it is shown and is not a Mac run (the page puts it one click away)."""
    for run in (rec, fallback):
        if isinstance(run, Recording) and (p := prefill_measured(run, lang)) is not None:
            other = run is not rec and source_class(run) == "other"
            return {**p, "elsewhere": source_label(run, lang, short=True) if other else None}
    return None


@cached
def pptg_table(recs: list[Recording], lang: str) -> list[tuple[str, str]]:
    """The published prompt-processing / generation pairs at depth (one table per run): (heading, markdown table)."""
    t = i18n.translator(lang, "prefill.")
    out = []
    for rec in recs:
        rows = [r for r in rec.rows("prefill") if "depth" in r]
        if not rows or rec.kind != "published":
            continue
        df = pd.DataFrame(
            [
                {
                    "depth": r["depth"],
                    "pp": r["tokens_per_s"],
                    "tg": r.get("tg_tokens_per_s", math.nan),
                }
                for r in rows
            ]
        )
        table = md_table(
            df,
            {
                "depth": (t("pptg_depth"), "{:,}"),
                "pp": (t("pptg_pp"), "{:,.2f}"),
                "tg": (t("pptg_tg"), "{:,.2f}"),
            },
        )
        p, shown = badge_fields(rec), as_text(rec)
        name, cited = shown(source_label(rec, lang)), shown(f"{p['author']}, {p['published']}")
        # a bundled run links its source; an upload's words are text, unlinked (as its badge)
        out.append((f"{name} · [{cited}]({p['url']})" if rec.path else f"{name} · {cited}", table))
    return out
