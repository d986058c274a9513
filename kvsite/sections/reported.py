"""The Many conversations chapter's "What Mac users reported": public threads and the servers' documents quoted as
written (kvcore/servers/reported.yaml), Mac reports first, and the ledger's figure beside a reported one where it
computes the same quantity (kvcore.servers.reported.compared).

Example: reported_list("ja") -> markdown in Japanese: this site's words, and each quote translated (said so; the
thread keeps the original, one click away).
"""

from __future__ import annotations

import re

from kvcore.servers import reported
from kvcore.units import fmt_num
from kvsite import i18n

from .shared import cached

_ISSUE = re.compile(r"https://github\.com/([^/]+/[^/]+)/(?:issues|pull)/(\d+)")
_BLOB = re.compile(r"https://github\.com/([^/]+/[^/]+)/blob/([0-9a-f]{7})[0-9a-f]*/(.+)")


def _source(row: dict, lang: str) -> str:
    """The address as a short link (owner/repo #N, or owner/repo path @commit) and the post's date."""
    url = row["url"]
    if m := _ISSUE.match(url):
        label, when = f"{m[1]} #{m[2]}", str(row["date"])
    elif m := _BLOB.match(url):
        label, when = f"{m[1]} {m[3]}", f"@{m[2]}"
    else:
        label, when = url, str(row.get("date", ""))
    return i18n.translate(lang, "servers.reported_source", link=f"[{label}]({url})", when=when)


def _ledger(row: dict, lang: str) -> str:
    """The ledger's figure beside the reported one and whether they agree, then the row's note; the note alone
    when the ledger has no figure for it."""
    t = i18n.translator(lang, "servers.")
    note = i18n.data_text(lang, row["note"])
    c = reported.compared(row["id"])
    if c is None:
        return note
    if c["kind"] == "llama_state":
        said = t(
            "reported_state",
            ledger=f"{c['ledger_bytes'] / reported.KIB:,.0f}",
            cells=f"{c['cells']:,}",
            model=c["model"],
            per=f"{c['per_token']:,}",
            reported=f"{c['reported_bytes'] / reported.KIB:,.0f}",
            share=fmt_num(abs(c["share"]) * 100),
            side=t("reported_more" if c["share"] > 0 else "reported_less"),
            verdict=t(
                "reported_agrees" if c["agrees"] else "reported_differs",
                pct=fmt_num(reported.RSS_TOLERANCE * 100),
            ),
        )
    else:
        cases = [
            t(
                "reported_slots_case",
                argv=case["argv"],
                slots=case["slots"],
                ledger=f"{case['ledger']:,}",
                reported=f"{case['reported']:,}",
            )
            for case in c["cases"]
        ]
        said = t(
            "reported_slots",
            cases=t("reported_join").join(cases),
            verdict=t("reported_same" if c["agrees"] else "reported_not_same"),
        )
    return t("reported_then", said=said, note=note)


def _item(row: dict, lang: str) -> str:
    """One report as a list item: where and on what, then what was reported with its words, then the ledger."""
    t = i18n.translator(lang, "servers.")
    said = lambda key: i18n.data_text(lang, row[key])  # noqa: E731 - this site's words in `lang`
    if "date" not in row:  # a document: its rule holds for any machine and model
        head = t("reported_doc_item", source=_source(row, lang), server=row["server"])
    else:
        head = t(
            "reported_item",
            source=_source(row, lang),
            server=row["server"],
            machine=said("machine") if row["machine"] else t("reported_not_stated"),
            model=said("model"),
            runtime=said("runtime"),
        )
    quote = t(
        "reported_said", what=said("what"), figure=said("figure")
    )  # ja: a translation, said so
    return f"- {head}\n  - {quote}\n  - {_ledger(row, lang)}"


@cached
def reported_list(lang: str) -> str:
    """Every reported row as markdown in `lang`: Mac reports first, then threads from other or unstated
    machines, then the servers' documents; each with its address, its words as written and the ledger."""
    t = i18n.translator(lang, "servers.")
    rows = reported.reports()
    groups = (
        ("reported_group_mac", [r for r in rows if r["mac"] is True]),
        ("reported_group_other", [r for r in rows if r["mac"] is not True and "date" in r]),
        ("reported_group_docs", [r for r in rows if r["mac"] is not True and "date" not in r]),
    )
    return "\n\n".join(
        f"**{t(key)}**\n\n" + "\n".join(_item(r, lang) for r in group)
        for key, group in groups
        if group
    )
