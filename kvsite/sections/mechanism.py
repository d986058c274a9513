"""The mechanism chapter's sections: work per step with and without a cache, measured totals, a real
model's run.

Example: mechanism_work(16, 50, False, "en")["with"] -> 50 (rows computed with a cache).
"""

from __future__ import annotations

from kvcore.recordings import provenance as run_info
from kvcore.recordings.store import Recording
from kvcore.units import fmt_num, fmt_ratio
from kvcore.views import memory as views
from kvsite import i18n
from kvsite.charts.chart import make_chart

from .shared import cached, cols, source_names


@cached
def mechanism_work(prompt: int, new: int, per_step: bool, lang: str) -> dict:
    work = views.mechanism_work(prompt, new)
    y = "rows_per_step" if per_step else "cumulative_rows"
    data = work.assign(mode=work["mode"].map(i18n.translator(lang, "mechanism.")))[
        ["step", "mode", y]
    ]
    t = i18n.translator(lang)
    titles = cols(lang, "step", "mode", y)
    last = work[work["step"] == new].set_index("mode")["cumulative_rows"]
    return {
        "chart": make_chart(
            data.rename(columns=titles),
            "series_chart",
            data,
            "step",
            y,
            "mode",
            t("mechanism.x_step"),
            t(f"mechanism.y_{y}"),
            titles=titles,
            height=280,  # the totals under it stay in the first screen
        ),
        "with": int(last["with_cache"]),
        "without": int(last["without_cache"]),
    }


@cached
def mechanism_measured(recs: list[Recording], rec_id: str, lang: str) -> dict:
    """The chosen run's totals (its largest N) as two bars, with and without a cache, named by its machine and
    model; its speed-up. One run at a time: runs on other machines, models and lengths are not like with like
    (the picker offers each)."""
    t = i18n.translator(lang)
    df = views.mechanism_measured(recs)
    df = df[df["recording"] == rec_id]
    names = source_names(recs, lang)
    chips = {
        r.id: " · ".join(
            p for p in (run_info.badge_fields(r)["chip"] or names[r.id], _model_name(r)) if p
        )
        for r in recs
    }  # short enough for a phone's axis
    totals = df[df["recording"] == rec_id].iloc[0]
    rec = next(r for r in recs if r.id == rec_id)
    note = (
        t("mechanism.measured_note")  # the one published point: Article B's T4 demonstration
        if rec.kind == "published"
        else t(
            "mechanism.measured_note_run",
            name=names[rec_id],
            n=fmt_num(totals["new_tokens"]),
        )
    )
    df = df.assign(
        run=df["recording"].map(chips)
        + df["new_tokens"].map(lambda n: t("mechanism.run_tokens", n=fmt_num(n))),
        source=df["recording"].map(names),
        mode=df["mode"].map(i18n.translator(lang, "mechanism.")),
        label=df["seconds"].map(lambda v: fmt_num(v, unit="s")),
    )
    titles = cols(lang, "run", "source", "mode", "seconds", "new_tokens")
    table = df[["source", "mode", "seconds", "new_tokens"]].rename(columns=titles)
    return {
        "chart": make_chart(
            table,
            "measured_bars",
            df,
            "run",
            "mode",
            "seconds",
            t("mechanism.seconds"),
            "label",
            titles=titles,
            tooltip=("source", "new_tokens"),
            x_title=t("mechanism.x_run"),
        ),
        "new_tokens": int(totals["new_tokens"]),
        "speedup": float(totals["speedup"]),
        "note": note,
    }


@cached
def mechanism_text(rec: Recording, published: Recording | None, lang: str) -> dict | None:
    """A real model's mechanism run in words: prompt, generated text, both totals, beside the published run's ratio."""
    text = views.mechanism_text(rec)
    if text is None:
        return None
    t = i18n.translator(lang)
    totals = views.mechanism_totals(rec)
    published = (
        fmt_ratio(views.mechanism_totals(published)["speedup"]) if published is not None else "—"
    )
    note = t(
        "mechanism.text_note",
        model=rec.data["model"]["name"],
        n=fmt_num(text["new_tokens"]),
        with_s=fmt_num(totals["with_cache_s"], unit="s"),
        without_s=fmt_num(totals["without_cache_s"], unit="s"),
        ratio=fmt_ratio(totals["speedup"]),
        published=published,
    )
    return {**text, "note": note}


def _model_name(rec: Recording) -> str:
    """A run's model, without its hub owner: 'HuggingFaceTB/SmolLM2-1.7B' -> 'SmolLM2-1.7B'."""
    return str((rec.data.get("model") or {}).get("name", "")).rsplit("/", 1)[-1]
