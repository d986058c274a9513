"""The recordings page's sections: every run in one table, one run's sections, chosen runs compared, and the
published memory figures beside kvcore's.

Example: recording_sections(rec, "en")[0][0] -> the recording's first section name ("trap").
"""

from __future__ import annotations

import pandas as pd

from kvcore.recordings import provenance as run_info
from kvcore.recordings.store import Recording
from kvcore.views import memory as views
from kvcore.views import published_memory
from kvsite import i18n
from kvsite.charts.tables import arrow, md_table
from kvsite.data.recording_text import as_text, group_name, translated_table

from .shared import cached, cols, source_colors, source_names, speed_curves


@cached
def recordings_table(recs: list[Recording], local_ids: tuple[str, ...], lang: str) -> object:
    """Every recording, one row each, with headers, kinds, places and section names in `lang`."""
    df = run_info.recordings_table(recs, set(local_ids))
    if df.empty:
        return arrow(df)
    t = i18n.translator(lang)
    sep = t("recordings.list_sep")
    df = df.assign(
        kind=df["kind"].map(lambda k: t(f"recordings.kind_{k}")),
        where=df["where"].map(lambda w: t(f"recordings.where_{w}")),
        date=df["date"].str[:10],
        label=df["recording"].map(source_names(recs, lang, local_ids)),
        sections=[sep.join(group_name(lang, s) for s in r.data["sections"]) for r in recs],
    )
    return arrow(translated_table(df, lang, "recordings.col_"))


@cached
def recording_sections(rec: Recording, lang: str) -> list[tuple]:
    """(section, its name in `lang`, rows as recorded, Arrow table with headers in `lang`) per section of one recording."""
    out = []
    for section in rec.data["sections"]:
        rows = views.section_frame([rec], section).drop(columns=["source", "recording"])
        out.append((section, group_name(lang, section), rows, arrow(translated_table(rows, lang))))
    return out


@cached
def compare(recs: list[Recording], lang: str, all_recs: list[Recording]) -> dict:
    """Decode speed vs context of the chosen runs, each in its site-wide colour."""
    names = source_names(recs, lang)
    rows = views.section_frame(recs, "decode")
    rows = rows.assign(source=rows["recording"].map(names))
    titles = cols(lang, "context", "tokens_per_s", "source")
    return {
        "chart": speed_curves(
            rows[["source", "context", "tokens_per_s"]].rename(columns=titles),
            None,
            lang,
            series="source",
            points=rows,
            log_y=True,
            colors=source_colors(all_recs, lang),
            titles=titles,
            height=200,
        )
    }


MOST_SERIES = 8  # colours a reader tells apart at once (more are picked in the multiselect)
DEFAULT_SERIES = 6  # the comparison opens on fewer: its chart and legend fit the first screen


@cached
def compare_default(recs: list[Recording]) -> list[str]:
    """The runs the comparison opens on: published or Apple Silicon runs whose chip is stated, DEFAULT_SERIES of
    them (under MOST_SERIES), in the list's order (Linux CPU demonstrations and the rest are there to pick)."""
    mac = [
        r.id
        for r in recs
        if r.has("decode")
        and run_info.source_class(r) != "other"
        and run_info.badge_fields(r)["chip"] not in ("", "not stated")
    ]
    return mac[:DEFAULT_SERIES]


MEMORY_COLUMNS = ("source", "part", "context", "published", "kvcore", "reason")


@cached
def memory_rows(rec: Recording) -> list[dict]:
    """kvcore.views.published_memory.recording_rows(rec), once per recording's content: a bundled run's figures are
    computed once for every session, an upload's once (at most MAX_MEMORY_FIGURES of them, its model read once)."""
    return published_memory.recording_rows(rec)


@cached
def has_memory_figures(recs: list[Recording]) -> bool:
    """Whether any recording holds a published memory figure (read from the rows, nothing computed; once per
    set of recordings, not on every rerun)."""
    return any(published_memory.figures(r) for r in recs)


@cached
def memory_figures(recs: list[Recording], lang: str) -> str:
    """The published Mac memory figures beside kvcore's (kvcore.views.published_memory) as a markdown table in
    `lang`: each run by its short name linked to its source, the part and reason in words; "" when none is bundled.
    An upload's own words (its name, a series, a refusal quoting it) are text (recording_text.as_text), unlinked."""
    rows = [row for rec in recs for row in memory_rows(rec)]
    if not rows:
        return ""
    t = i18n.translator(lang)
    names = source_names(recs, lang)
    by_id = {r.id: r for r in recs}
    shown = {rid: as_text(rec) for rid, rec in by_id.items()}
    df = pd.DataFrame(rows).assign(
        source=[
            f"[{names[r['run']]}]({r['url']})"
            if r.get("url") and by_id[r["run"]].path
            else shown[r["run"]](names[r["run"]])
            for r in rows
        ],
        part=[t(f"recordings.mem_part_{r['part']}") for r in rows],
        published=[
            shown[r["run"]](
                f"{r['published']} ({r['series']})" if r.get("series") else r["published"]
            )
            for r in rows
        ],
        reason=[
            shown[r["run"]](r["reason"])
            if r["reason_key"] == "refused"
            else t(f"recordings.mem_reason_{r['reason_key']}")
            for r in rows
        ],
    )
    headers = {
        c: (t(f"recordings.mem_col_{c}"), "{:,}" if c == "context" else None)
        for c in MEMORY_COLUMNS
    }
    return md_table(df, headers, lang)
