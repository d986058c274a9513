"""What every chapter's sections share. A chapter's sections are in kvsite/sections/<chapter>.py,
one cached function each: cheap keys in (widget values, language, recordings), everything the
section shows out (chart with Arrow data, tables, numbers), so a rerun only re-sends it.

Results are shared between reruns and sessions (kvsite.data.cache.section_cache, a cheaper
st.cache_resource: no copy per rerun): treat them as read-only. Recordings key by content, once per
recording object. Here: that cache (`cached`), column titles, run names and colours, Article A's
geometry, the model-limit mark, and the two curves several chapters draw against the context
(memory per format, tokens per second).
Example: cols("en", "context") -> {"context": "Context (tokens)"}.
"""

from __future__ import annotations

import pandas as pd

from kvcore.inputs.presets import preset_geometry
from kvcore.memory import allocsim
from kvcore.memory.formats import FORMATS
from kvcore.recordings.store import Recording
from kvcore.views import chart_parts
from kvcore.views import memory as views
from kvsite import i18n
from kvsite.charts.chart import Chart, make_chart
from kvsite.data.cache import section_cache

cached = section_cache(max_entries=64)


def cols(lang: str, *fields: str) -> dict[str, str]:
    """Column and tooltip titles for a chart's fields, in `lang` (cols.<field>)."""
    return {f: i18n.translate(lang, f"cols.{f}") for f in fields}


def source_names(
    recs: list[Recording], lang: str, local_ids: tuple[str, ...] = ()
) -> dict[str, str]:
    """{recording id: its name in legends and pickers} in `lang`, plus "live"."""
    from kvsite.data.sources import source_label

    names = {
        r.id: source_label(r, lang, short=True) for r in recs
    }  # short where made (Recording.short_name)
    taken = list(names.values())
    for r in recs:  # two runs kvcore names alike keep their full names
        if taken.count(names[r.id]) > 1 or r.id in local_ids:
            names[r.id] = source_label(r, lang, "local" if r.id in local_ids else "")
    return {"live": i18n.translate(lang, "source.live"), **names}


def source_colors(recs: list[Recording], lang: str) -> dict[str, str]:
    """{legend name: colour}: each recording keeps one colour on every page (kvcore.views.chart_parts.source_colors)."""
    names, by_id = source_names(recs, lang), chart_parts.source_colors(recs)
    return {names[rid]: colour for rid, colour in by_id.items()}


@cached
def article_geometry() -> dict:
    """Article A's model as the prose states it (shared: read it, never change it): layers, KV heads, head_dim, fp16 bytes per value, block step."""
    g = preset_geometry(views.ARTICLE_MODEL)
    first = next(layer for layer in g.layers if layer.kind == "full")
    return {
        "layers": g.count("full"),
        "kv_heads": first.kv_heads,
        "head_dim": first.k_dim,
        "value_bytes": FORMATS["fp16"].bits // 8,
        "step": allocsim.STEP,
        "step_next": allocsim.STEP + 1,
    }


def limit_rule(g, shown_max: int, lang: str) -> pd.DataFrame | None:
    """A vertical mark at the model's max_position_embeddings when a chart's contexts reach past it."""
    limit = g.max_position_embeddings
    if not limit or shown_max <= limit:
        return None
    return pd.DataFrame(
        [{"context": limit, "label": i18n.translate(lang, "common.model_limit", n=f"{limit:,}")}]
    )


def memory_curves(
    table: pd.DataFrame, data: pd.DataFrame, g, top: int, lang: str, **extra
) -> Chart:
    """GiB against the context (log-log), a line per format, marked at the model's limit when `top`
    passes it: the calculator's memory chart and Savings' formats chart."""
    return make_chart(
        table,
        "series_chart",
        data,
        "context",
        "gib",
        "format",
        i18n.translate(lang, "common.context"),
        "GiB",
        log_x=True,
        log_y=True,
        rules=limit_rule(g, top, lang),
        **extra,
    )


def speed_curves(
    table: pd.DataFrame,
    data: pd.DataFrame | None,
    lang: str,
    builder: str = "series_chart",
    series: str = "series",
    **extra,
) -> Chart:
    """Tokens per second against the context (log x), a line per `series`: the decode runs, the
    what-if's prediction, the calculator's decode chart, the Recordings page's decode rows."""
    return make_chart(
        table,
        builder,
        data,
        "context",
        "tokens_per_s",
        series,
        i18n.translate(lang, "common.context"),
        i18n.translate(lang, "common.tok_s"),
        log_x=True,
        **extra,
    )
