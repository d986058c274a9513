"""The savings chapter's quality sections: what a smaller cache costs a real model (kvcore.measure.real_model's
scores per KV format: KL and top-1 agreement against the baseline, the answers where they part).

Example: format_label({"kv_format": "mlx-q4", "group_size": 32}, "en") -> "mlx-q4 (group 32)"
"""

from __future__ import annotations

import pandas as pd

from kvcore.recordings.store import Recording
from kvcore.units import fmt_num
from kvcore.views import savings as savings_views
from kvsite import i18n
from kvsite.charts.chart import make_chart
from kvsite.charts.tables import md_table
from kvsite.layout import plain

from .shared import cached, cols


@cached
def quality(rec: Recording, lang: str, others: tuple = ()) -> dict:
    """A real model's quality per KV format: the bytes-per-token vs KL chart (top-1 agreement on each point), the
    figures as a table, the price against context, the published figures, and the answers per prompt. Other
    runtimes' runs on the same model among `others` (savings_views.quality_companions) join the chart and the table,
    each format named with its runtime, and a note compares them at the same bit width."""
    from kvcore.measure import real_model
    from kvcore.recordings.published import figures
    from kvcore.units import fmt_small

    t = i18n.translator(lang)
    df = savings_views.quality_trade([rec, *savings_views.quality_companions(rec, list(others))])
    several = df["runtime"].nunique() > 1
    df = df.assign(
        format=[
            plain(  # a run's words may come from an upload: shown as written
                t(
                    "savings.quality_runtime_format",
                    runtime=r["runtime"],
                    label=format_label(r, lang),
                )
                if several
                else format_label(r, lang)
            )
            for r in df.to_dict("records")
        ]
    )
    df = df.assign(
        top1=df["top1_agreement"].map(lambda v: t("savings.quality_point", pct=f"{v:.1%}"))
    )
    titles = cols(
        lang,
        "format",
        "bytes_per_token",
        "kl_vs_baseline",
        "top1_agreement",
        "perplexity",
        "runtime",
    )
    keep = ["format", "bytes_per_token", "kl_vs_baseline", "top1_agreement", "perplexity"]
    keep += ["runtime"] if several else []
    shown = df[(df["kl_vs_baseline"] > 0) & df["bytes_per_token"].notna()][[*keep, "top1"]]
    chart = (
        None
        if shown.empty
        else make_chart(
            shown[keep].rename(columns=titles),
            "quality_trade",
            shown,
            "bytes_per_token",
            "kl_vs_baseline",
            "format",
            "top1",
            t("savings.quality_x"),
            t("savings.quality_y"),
            titles=titles,
            tooltip=("top1_agreement", "perplexity"),
            shape="runtime" if several else None,
            height=230,
        )
    )
    rows = df.assign(kl=df["kl_vs_baseline"].map(fmt_small))
    table = md_table(
        rows,
        {
            "format": (titles["format"], None),
            "bytes_per_token": (titles["bytes_per_token"], "{:,.0f}"),
            "perplexity": (titles["perplexity"], "{:.2f}"),
            "kl": (titles["kl_vs_baseline"], None),
            "top1_agreement": (titles["top1_agreement"], "{:.1%}"),
        },
        lang,
    )
    growth = savings_views.quality_by_context(rec)
    context_table = None
    lengths = ""
    if not growth.empty and growth["tokens"].nunique() > 1:
        growth = growth.assign(
            format=[plain(format_label(r, lang)) for r in growth.to_dict("records")]
        )
        growth = growth.assign(kl=growth["kl_vs_baseline"].map(fmt_small))
        context_table = md_table(
            growth,
            {
                "format": (titles["format"], None),
                "tokens": (t("cols.tokens"), "{:,}"),
                "perplexity": (titles["perplexity"], "{:.2f}"),
                "kl": (titles["kl_vs_baseline"], None),
                "top1_agreement": (titles["top1_agreement"], "{:.1%}"),
            },
            lang,
        )
        lengths = " / ".join(f"{n:,}" for n in sorted(growth["tokens"].unique()))
    published = _published_table(figures()["kv_quality"], lang)
    return {
        "chart": chart,
        "table": table,
        "context_table": context_table,
        "lengths": lengths,
        "tokens": int(df["tokens"].max()),
        "published": published,
        "answers": savings_views.quality_answers(rec),
        "baseline": df["format"].iloc[0],
        "install_note": None if real_model.available() else t("savings.quality_install"),
        "runtimes_note": _runtimes_note(df, lang) if several else None,
    }


def _runtimes_note(df: pd.DataFrame, lang: str) -> str:
    """Two runtimes' quantized caches at the same bit width, figure by figure, and why they differ."""
    from kvcore.units import fmt_small

    t = i18n.translator(lang)
    quantized = df[df["bits"].notna()] if "bits" in df else df.iloc[0:0]
    pairs = []
    for bits, rows in quantized.groupby("bits", sort=False):
        if rows["runtime"].nunique() < 2:
            continue
        pairs.append(
            t(
                "savings.quality_runtimes_pair",
                bits=int(bits),
                rows=t("recordings.list_sep").join(
                    t(
                        "savings.quality_runtimes_row",
                        fmt=r["format"],
                        kl=fmt_small(r["kl_vs_baseline"]),
                        top1=f"{r['top1_agreement']:.1%}",
                    )
                    for r in rows.to_dict("records")
                ),
            )
        )
    baselines = t("savings.quality_runtimes_baseline_sep").join(
        t(
            "savings.quality_runtimes_baseline",
            runtime=plain(runtime),
            fmt=plain(base["kv_format"]),  # an upload's words, as written
            ppl=f"{base['perplexity']:.2f}",
        )
        for runtime, rows in df.groupby("runtime", sort=False)
        for base in [rows[rows["kl_vs_baseline"] == rows["kl_vs_baseline"].min()].iloc[0]]
    )
    pairs_text = t("savings.quality_runtimes_pair_sep").join(pairs)
    return t("savings.quality_runtimes", baselines=baselines, pairs=pairs_text)


def format_label(row: dict, lang: str) -> str:
    """A scored cache's name in `lang`: the format, with its group size (and start) when quantized."""
    import re

    t = i18n.translator(lang)
    group = row.get("group_size")
    if (
        group is None or group != group
    ):  # an answers row names its group in its label only: "mlx-q4 (group 32)"
        named = re.search(r"\(group (\d+)", str(row.get("label", "")))
        if named is None:
            return row["kv_format"]
        group = int(named[1])
    label = t("savings.quality_format", fmt=row["kv_format"], group=int(group))
    start = row.get("quantized_kv_start") or 0
    return (
        label
        if start != start or not start
        else t("savings.quality_format_start", label=label, start=fmt_num(start))
    )


def answer_text(row: dict, lang: str) -> str:
    """Where an answer parts from the baseline's, in words (or that it does not)."""
    t = i18n.translator(lang)
    if "first_divergence" not in row:
        return t("savings.quality_same")
    margin = fmt_num(row.get("margin", float("nan")))
    if row["first_divergence"] == 0:
        return t("savings.quality_parts_first", margin=margin)
    return t(
        "savings.quality_parts",
        n=fmt_num(row["first_divergence"] + 1),
        agreed=row.get("agreed_text", ""),
        margin=margin,
    )


def default_question(answers: dict[str, list[dict]]) -> int:
    """The question the page opens on: one where a cache format changed the answer (the demonstration), and of
    those the one where the most formats kept the baseline's answer, so it shows what the agreement table says
    (8 bits stays with the baseline, 4 bits leaves it) rather than the rare question where even 8 bits moved."""
    scores = [
        (sum("first_divergence" not in r for r in rows[1:]), -i)
        for i, rows in enumerate(answers.values())
        if any("first_divergence" in r for r in rows[1:])
    ]
    return -max(scores)[1] if scores else 0


@cached
def answers_scope(rec: Recording, lang: str) -> str:
    """What a few answers can show (how an answer changes once a cache moves a prediction) and cannot (how often),
    beside the figure that can: each format's top-1 agreement over every scored position of the text."""
    t = i18n.translator(lang)
    answers = savings_views.quality_answers(rec)
    scored = savings_views.quality_trade([rec])
    top1 = dict(zip(scored["format"], scored["top1_agreement"], strict=True))
    rows = next(iter(answers.values()), [])[1:]
    items = t("recordings.list_sep").join(
        t("savings.quality_point_of", fmt=format_label(r, lang), pct=f"{top1[r['label']]:.1%}")
        for r in rows
        if r.get("label") in top1
    )
    return t(
        "savings.quality_answers_scope",
        n=len(answers),
        tokens=f"{int(scored['tokens'].max()):,}",
        items=items,
    )


def agreement_line(answers: dict[str, list[dict]], lang: str) -> str:
    """Per cache format, on how many of the questions it gave the baseline's answer: "fp16 3 of 3, ..."."""
    rows = list(answers.values())
    labels = [format_label(r, lang) for r in rows[0][1:]]
    same = [sum("first_divergence" not in q[1 + i] for q in rows) for i in range(len(labels))]
    sep = i18n.translate(lang, "recordings.list_sep")
    return i18n.translate(
        lang,
        "savings.quality_answers_agree",
        items=sep.join(
            i18n.translate(lang, "savings.quality_answers_of", fmt=f, n=n, total=len(rows))
            for f, n in zip(labels, same, strict=True)
        ),
    )


@cached
def long_context(recs: tuple, lang: str) -> dict | None:
    """The price against context length from the runs with a long_context section: the chart (mean KL, its 99th
    percentile or top-1 agreement per format, picked inside the chart), every row as a table, each run's
    retrieval answers, and the published long-context figures for larger models (a table, never a line)."""
    from kvcore.recordings.published import figures
    from kvcore.units import fmt_small
    from kvcore.views.chart_parts import Choice

    t = i18n.translator(lang)
    runs = [r for r in recs if r.has("long_context")]
    df = savings_views.long_context(runs)
    if df.empty:
        return None
    df = df.assign(
        series=[
            t("savings.quality_runtime_format", runtime=r["runtime"], label=_pair_label(r, lang))
            for r in df.to_dict("records")
        ]
    )
    metrics = savings_views.LONG_METRICS
    choice = Choice(
        "metric",
        metrics,
        metrics[0],
        t("savings.long_choice"),
        tuple(t(f"savings.long_metric_{m}") for m in metrics),
    )
    titles = {**cols(lang, "series", "context", "perplexity"), "value": t("savings.long_value")}
    chart = make_chart(
        df[["series", "metric", "context", "value", "perplexity"]].rename(columns=titles),
        "price_by_context",
        df,
        "series",
        t("savings.long_x"),
        choice,
        titles=titles,
        dash="runtime",
    )
    wide = pd.concat([pd.DataFrame(r.rows("long_context")).assign(run=r.label) for r in runs])
    wide = wide[wide["kl_mean"] > 0].sort_values(
        ["run", "kv_format", "scope", "end"], kind="stable"
    )
    wide = wide.assign(
        format=[plain(_pair_label(r, lang)) for r in wide.to_dict("records")],
        positions=lambda d: [f"{s:,}–{e:,}" for s, e in zip(d["start"], d["end"])],
        scope_text=lambda d: d["scope"].map(lambda s: t(f"savings.long_scope_{s}")),
        kl=lambda d: d["kl_mean"].map(fmt_small),
        p99=lambda d: d["kl_p99"].map(fmt_small),
    )
    table = md_table(
        wide,
        {
            "format": (t("cols.format"), None),
            "scope_text": (t("savings.long_col_scope"), None),
            "positions": (t("savings.long_col_positions"), None),
            "kl": (t("savings.long_metric_kl_mean"), None),
            "p99": (t("savings.long_metric_kl_p99"), None),
            "top1_agreement": (t("savings.long_metric_top1_agreement"), "{:.1%}"),
            "perplexity": (t("cols.perplexity"), "{:.2f}"),
        },
        lang,
    )
    published = _published_table(figures()["kv_quality_long"], lang, context=True)
    return {
        "chart": chart,
        "table": table,
        "published": published,
        "retrieval": [
            (r.label, _retrieval_reach(r, lang), _retrieval_table(r, lang))
            for r in runs
            if r.has("retrieval")
        ],
        "facts": _facts(runs, lang),
        "finding": _finding(df, lang),
        "sources": " · ".join(r.label for r in runs),
        "tokens": f"{int(df['context'].max()):,}",
        "window": _window(runs[0]),
    }


def _facts(runs: list[Recording], lang: str) -> str:
    """The sentences the runs placed in the text, as their recordings state them, quoted and listed once."""
    said = [
        f["sentence"]
        for r in runs
        for f in r.data["method"]["long_context"].get("retrieval", {}).get("facts", [])
    ]
    return i18n.translate(lang, "recordings.list_sep").join(f"“{f}”" for f in dict.fromkeys(said))


def _window(rec: Recording) -> str:
    """The scored model's trained window (its preset's max_position_embeddings), as a reader reads it."""
    from kvcore.inputs.presets import preset_geometry

    model = rec.data.get("model") or {}
    name = model.get("preset") or model.get("name")
    window = preset_geometry(name).max_position_embeddings
    return f"{window:,}" if window else "?"


def _retrieval_reach(rec: Recording, lang: str) -> str:
    """Where the run's unquantized baseline stops naming the fact, in a sentence (empty where it never does)."""
    reach = savings_views.baseline_reach(rec)
    if reach is None:
        return ""
    right, wrong = reach
    key = "savings.long_retrieval_reach" if right else "savings.long_retrieval_never"
    return i18n.translate(lang, key, right=f"{right:,}", wrong=f"{wrong:,}")


def _retrieval_table(rec: Recording, lang: str) -> str:
    """One run's answers to the facts, per context and format: right or wrong, and what it said."""
    t = i18n.translator(lang)
    df = savings_views.retrieval(rec)
    df = df.assign(
        format=[plain(_pair_label(r, lang)) for r in df.to_dict("records")],
        verdict=df["correct"].map(lambda c: t("savings.long_right" if c else "savings.long_wrong")),
        # the model's own words, verbatim, as code (an English model answers in English on either page)
        said=df["answer"].map(
            lambda a: "`" + " ".join(a.replace("`", "'").replace("|", "/").split()) + "`"
        ),
    )
    return md_table(
        df,
        {
            "context": (t("cols.context"), "{:,}"),
            "question": (t("savings.long_col_question"), None),
            "format": (t("cols.format"), None),
            "verdict": (t("savings.long_col_verdict"), None),
            "said": (t("savings.long_col_answer"), None),
        },
        lang,
    )


def _finding(df: pd.DataFrame, lang: str) -> str:
    """The chart's claim in numbers: per runtime, its 4-bit cache (K and V alike, the largest group: mlx_lm's
    default 64) and its mean KL in the first and the last window."""
    from kvcore.memory.formats import get_format
    from kvcore.units import fmt_small

    t = i18n.translator(lang)
    kl = df[(df["metric"] == "kl_mean") & df["v_format"].isna()]
    kl = kl[[get_format(k).bits == 4 for k in kl["kv_format"]]]
    parts = []
    for _, rows in kl.groupby("runtime", sort=False):
        rows = rows[rows["group_size"].fillna(0) == rows["group_size"].fillna(0).max()]
        rows = rows.sort_values("context")
        first, last = rows.iloc[0], rows.iloc[-1]
        parts.append(
            t(
                "savings.long_finding_row",
                series=first["series"],
                first=fmt_small(first["value"]),
                at_first=f"{int(first['context']):,}",
                last=fmt_small(last["value"]),
                at_last=f"{int(last['context']):,}",
            )
        )
    return t("recordings.list_sep").join(parts)


def _pair_label(row: dict, lang: str) -> str:
    """A cache's name in `lang`: K/V apart as llama.cpp's label names them (q8_0/q4_0), else format_label."""
    v = row.get("v_format")
    return str(row["label"]) if isinstance(v, str) else format_label(row, lang)


def _published_table(rows: list[dict], lang: str, context: bool = False) -> str:
    """Published quality figures for other models as stated, each linked to its source (with the context it was
    measured at, for the long-context ones)."""
    t = i18n.translator(lang)
    pub = pd.DataFrame(rows)
    pub = pub.assign(src=[f"[{s}]({u})" for s, u in zip(pub["source"], pub["url"])])
    columns = {
        "src": (t("savings.col_source"), "{}"),
        "model": (t("savings.col_model"), None),
        "kv": (t("savings.col_kv"), None),
    }
    if context:
        columns["context"] = (t("savings.long_col_context"), None)
    columns["figure"] = (t("savings.col_figure"), "`{}`")
    return md_table(pub, columns, lang)  # as stated
