"""The .nbytes trap chapter's sections: allocated vs used vs theory token by token, the update patterns, and
mlx_lm's measured peak beside its plan (the third line).

Example: trap_chart(300, "fp16", "en", None, {})["at"][(257, "allocated")] -> 16.0 (MiB).
"""

from __future__ import annotations

import pandas as pd

from kvcore.errors import KvError
from kvcore.inputs.presets import preset_geometry
from kvcore.memory import allocsim
from kvcore.recordings.store import Recording
from kvcore.units import MIB
from kvcore.views import memory as views
from kvcore.views import peaks
from kvsite import i18n
from kvsite.charts.chart import make_chart
from kvsite.charts.tables import md_table

from .shared import cached, cols, source_names


@cached
def article_trap(rec: Recording | None) -> dict | None:
    """Article A's own trap figures at the block edge (allocated and used MiB), from its recording's rows."""
    rows = {r["tokens"]: r for r in rec.rows("trap")} if rec is not None else {}
    a, b = rows.get(allocsim.STEP), rows.get(allocsim.STEP + 1)
    if a is None or b is None:
        return None
    return {
        "alloc_a": a["allocated_mib"],
        "alloc_b": b["allocated_mib"],
        "used_a": a["used_mib"],
        "used_b": b["used_mib"],
    }


@cached
def chunk_examples(patterns: tuple[tuple[int, ...], ...]) -> dict:
    """{p1: '1 + 256', c1: 257, ...}: the capacity mlx_lm's allocator ends at for each update pattern (allocsim)."""
    out = {"step": allocsim.STEP}
    for i, updates in enumerate(patterns, 1):
        out[f"p{i}"] = " + ".join(str(n) for n in updates)
        out[f"c{i}"] = allocsim.simulate("KVCache", list(updates)).capacity
    return out


TRAP_SERIES = ("allocated", "used", "theory")


def trap_chart(
    tokens: int, fmt: str, lang: str, points: pd.DataFrame | None, names: dict[str, str]
) -> dict:
    """The simulated curve from its breakpoints and measured points (already cut at `tokens`), the 256/257 numbers:
    the live probe's where it measured both (at_source "live", sim: the simulation's beside them), else simulated.

    points: long rows (recording, tokens, series, mib); names: recording id -> legend name."""
    t = i18n.translator(lang)
    g = preset_geometry(views.ARTICLE_MODEL)
    series = {s: t(f"trap.{s}") for s in TRAP_SERIES}
    curve = views.trap_curve(g, tokens, fmt)
    curve = curve.assign(series=curve["series"].map(series), source=t("trap.simulated"))
    pts = None
    if points is not None and not points.empty:
        pts = points.assign(
            series=points["series"].map(series), source=points["recording"].map(names)
        )[["tokens", "series", "mib", "source"]]
    titles = cols(lang, "tokens", "series", "mib", "source")
    table = (curve if pts is None else pd.concat([curve, pts], ignore_index=True)).rename(
        columns=titles
    )
    edge = (allocsim.STEP, allocsim.STEP + 1)
    sim = views.trap_at(g, edge, fmt)
    live = {} if points is None else _live_at(points, edge)
    return {
        "chart": make_chart(
            table, "trap_chart", curve, pts, series, t("trap.x"), "MiB", titles=titles, height=280
        ),
        "at": live or sim,
        "at_source": "live" if live else "simulation",
        "sim": sim,
    }


def _live_at(points: pd.DataFrame, edge: tuple[int, int]) -> dict:
    """{(n, "allocated" | "used"): MiB} at the block edge as the live probe measured it; {} when it did not."""
    live = points[(points["recording"] == "live") & points["tokens"].isin(edge)]
    got = {(int(r.tokens), r.series): float(r.mib) for r in live.itertuples()}
    want = [(n, kind) for n in edge for kind in ("allocated", "used")]
    return {k: got[k] for k in want} if all(k in got for k in want) else {}


@cached
def trap_recorded(tokens: int, fmt: str, lang: str, recs: list[Recording]) -> dict:
    """trap_chart with the points of every recording that measured KVCache token by token in `fmt`."""
    points = views.trap_measured(recs, fmt)
    return trap_chart(
        tokens, fmt, lang, points[points["tokens"] <= tokens], source_names(recs, lang)
    )


@cached
def chunking(fmt: str, patterns: tuple[str, ...], custom: str, lang: str) -> tuple:
    """(markdown table, error text or None): the reader's pattern added unless it is one of ours or invalid."""
    g = preset_geometry(views.ARTICLE_MODEL)
    error = None
    try:
        rows = views.chunking_table(
            g, [*patterns, custom] if custom not in patterns else list(patterns), fmt
        )
    except KvError as e:
        rows, error = views.chunking_table(g, list(patterns), fmt), i18n.error_markdown(lang, e)
    t = i18n.translator(lang, "trap.col_")
    return md_table(
        rows,
        {
            "updates": (t("updates"), "`{}`"),
            "tokens": (t("tokens"), "{:,}"),
            "capacity": (t("capacity"), "{:,}"),
            "allocated_mib": (t("alloc"), "{:.3f}"),
            "used_mib": (t("used"), "{:.3f}"),
            "slack_pct": (t("slack"), "{:.1f}%"),
        },
    ), error


@cached
def peak_source(recs: list[Recording]) -> Recording | None:
    """The recording the third line is drawn from: the first that measured mlx_lm's peak (measured runs first)."""
    found = peaks.peak_recordings(recs)
    return found[0] if found else None


@cached
def peak_steps(rec: Recording) -> list[int]:
    """The prefill steps the recording drew a line at (kvcore.views.peaks.prefill_steps)."""
    return peaks.prefill_steps(rec)


@cached
def peak_chart(rec: Recording, prefill_step: int, lang: str) -> dict:
    """mlx_lm's measured peak (points) against the prompt, kvcore's plan for the same runs (line) and the caches'
    allocated and used bytes, MiB above the weights; the numbers either side of the 256 boundary and how close the
    plan is to every run in the recording."""
    t = i18n.translator(lang)
    data = peaks.peak_lines(rec, prefill_step)
    names = {s: t(f"trap.peak_{s}") for s in peaks.SERIES}
    lines = data["lines"].assign(series=data["lines"]["series"].map(names))
    points = data["points"].assign(series=data["points"]["series"].map(names))
    titles = {**cols(lang, "tokens", "series", "mib"), "tokens": t("trap.peak_x")}
    table = pd.concat([points, lines], ignore_index=True).rename(columns=titles)
    chart = make_chart(
        table,
        "series_chart",
        lines,
        "tokens",
        "mib",
        "series",
        t("trap.peak_x"),
        t("trap.peak_y"),
        points=points,
        dashed=[names["used"]],
        titles=titles,
        height=300,
    )
    check = peaks.checks(rec)
    check = check.assign(used=check["worst_mib"].abs() / check["allowed_mib"])
    worst = check.loc[check["used"].idxmax()]  # the run nearest its tolerance's edge
    return {
        "chart": chart,
        "boundary": peaks.boundary(rec, prefill_step),
        "generated": data["generated"],
        "kv_format": data["kv_format"],
        "fit": {
            "n": len(check),
            "within": int(check["within"].sum()),
            "worst_mib": abs(float(worst["worst_mib"])),
            "worst_of_allowed": float(worst["used"]),
            "worst_prompt": int(worst["prompt_tokens"]),
            "worst_step": int(worst["prefill_step"]),
            "floor": peaks.FLOOR / MIB,
            "tol": float(check["tolerance"].iloc[0]),
        },
    }
