"""How a recording reads on the site: its provenance as translated fields, its method in words, its tables with
translated headers. The recording's own texts (titles, citations, free-text method notes) are quoted as written.

Example: method_words(rec, "decode", "en") -> "fill: synthetic; 3 warm-up steps; 16 timed steps; 3 repeats"
"""

from __future__ import annotations

import pandas as pd

from kvcore.recordings.provenance import method_groups
from kvcore.recordings.store import Recording
from kvcore.units import fmt_num
from kvsite import i18n
from kvsite.layout import plain

from .cache import section_cache
from .sources import badge_fields

cached = section_cache(max_entries=128)


def _value(lang: str, value, within: str = "") -> str:
    """A method or table value for readers: thousands separators, short floats, known words translated. `within`:
    the name of the mapping the value's fields belong to (see _phrase)."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)):
        return fmt_num(
            value, 4
        )  # the site's one number format, with a 4th figure for timings such as 47.75 ms
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, dict) for v in value):  # entries of several fields each
            sep = i18n.translate(lang, "recordings.item_sep")
            return sep.join(_value(lang, v, within) for v in value)
        return ", ".join(_value(lang, v) for v in value)
    if isinstance(value, dict):
        return i18n.translate(lang, "recordings.list_sep").join(
            _phrase(lang, k, v, within) for k, v in value.items()
        )
    return value_text(lang, str(value))


def value_text(lang: str, value: str) -> str:
    """A recorded word the site has a translation for (`recordings.value_<word>`, e.g. 'token by token'), else as written."""
    key = "recordings.value_" + value.strip().replace(" ", "_")
    return i18n.translate(lang, key) if i18n.has(lang, key) else i18n.data_text(lang, value)


def _phrase(lang: str, field: str, value, within: str = "") -> str:
    """One method field in words, or `field`: value for a field the site has no words for. A field of a nested
    mapping reads `recordings.m_<mapping>_<field>` where the same name means something else elsewhere (retrieval's
    `asked`: m_retrieval_asked), else `recordings.m_<field>`."""
    keys = [f"recordings.m_{within}_{field}"] if within else []
    key = next((k for k in [*keys, f"recordings.m_{field}"] if i18n.has(lang, k)), None)
    text = _value(lang, value, field)
    return i18n.translate(lang, key, v=text) if key else f"`{field}`: {text}"


def group_name(lang: str, group: str) -> str:
    """A section's or method group's name in `lang` (`recordings.section_<name>`), else the name itself."""
    key = f"recordings.section_{group}"
    return i18n.translate(lang, key) if i18n.has(lang, key) else group


def _items(lang: str, items: list) -> str:
    sep = i18n.translate(lang, "recordings.method_sep")
    return sep.join(
        _phrase(lang, k, v)
        if not isinstance(v, dict)
        else i18n.translate(
            lang, "recordings.named", name=group_name(lang, k), v=_value(lang, v, k)
        )
        for k, v in items
    )


@cached
def method_words(rec: Recording, section: str | None, lang: str) -> str:
    """The recording's method in one line: its top-level fields and, given a section, that section's method."""
    groups = method_groups(badge_fields(rec)["method"])
    chosen = [(g, items) for g, items in groups if g == "" or g == section]
    return i18n.translate(lang, "recordings.method_sep").join(
        _items(lang, items) for _, items in chosen if items
    )


def _date(text: str) -> str:
    """'2026-11-29T15:09:09Z' -> '2026-11-29 15:09 UTC'; anything else as written."""
    if len(text) >= 16 and text[10] == "T" and text.endswith("Z"):
        return f"{text[:10]} {text[11:16]} UTC"
    return text


@cached
def badge_line(rec: Recording, section: str | None, lang: str) -> str:
    """The chapter pages' one-line badge: published (citation, chip, model) or measured (chip, machine, model,
    the method of the section shown, versions, date)."""
    p = badge_fields(rec)
    t = i18n.translator(lang)
    shown = as_text(rec)
    if p["kind"] == "published":
        return t(
            "badge.published",
            citation=shown(i18n.data_text(lang, p["citation"])),
            chip=shown(p["chip"]),
            model=shown(p["model"]),
        )
    return t(
        "badge.measured",
        machine=shown(p["machine"]),
        chip=shown(p["chip"]),
        model=shown(p["model"]),
        method=shown(method_words(rec, section, lang) or "—"),
        versions=shown(p["versions"]),
        date=shown(_date(p["date"])),
    )


def as_text(rec: Recording):
    """How a recording's own words go into markdown: as written for a file of the site's (bundled or saved here),
    escaped (kvsite.layout.plain: no image, link or emphasis) for a reader's upload, which has no file."""
    return plain if rec.path is None else (lambda value: value)


@cached
def provenance_card(rec: Recording, lang: str) -> str:
    """The full provenance as a markdown list of translated fields: machine, chip, model, weights and KV format,
    method in words (one line per group), versions, date, command, citation. Fields the recording lacks are left out."""
    p = badge_fields(rec)
    t = i18n.translator(lang)
    shown = as_text(rec)
    machine = p["machine"] + (t("recordings.memory", gb=p["memory_gb"]) if p["memory_gb"] else "")
    fields = [
        ("machine", machine),
        ("chip", " ".join(filter(None, (p["vendor"], p["chip"])))),
        ("model", p["model"]),
        (
            "weights_format",
            value_text(lang, str(p["weights_format"])) if p["weights_format"] else "",
        ),
        ("kv_format", value_text(lang, str(p["kv_format"])) if p["kv_format"] else ""),
        ("method", None),
        ("versions", p["versions"]),
        ("date", _date(p["date"])),
        ("command", f"`{p['command']}`" if p["command"] and rec.path else p["command"]),
        (
            "citation",
            f"[{i18n.data_text(lang, p['citation'])}]({p['url']})"
            if p["url"] and rec.path
            else " ".join(filter(None, (i18n.data_text(lang, p["citation"]), p["url"]))),
        ),
        ("author", p.get("author", "")),
        ("published", _date(p.get("published", ""))),
        ("runtime", i18n.data_text(lang, p.get("runtime", ""))),
        ("grade", p.get("grade", "")),
        ("note", i18n.data_text(lang, p["note"])),
    ]
    lines, groups = [], method_groups(p["method"])
    for name, value in fields:
        if name == "method" and groups:
            lines.append(f"- **{t('recordings.f_method')}**")
            for group, items in groups:
                words = _items(lang, items)
                lines.append(
                    f"  - {words}"
                    if not group
                    else f"  - **{group_name(lang, group)}**{t('recordings.colon')}{words}"
                )
        elif value:
            value = (
                value if rec.path or name == "method" else shown(value)
            )  # an upload's words, as text
            lines.append(f"- **{t('recordings.f_' + name)}**{t('recordings.colon')}{value}")
    return "\n".join(lines)


def source_words(rec: Recording, lang: str, label: str) -> str:
    """A recording as an export cites it, in one plain line: its name on the site, then its citation and address
    (published) or its machine, versions and date (measured)."""
    p = badge_fields(rec)
    if p["kind"] == "published":
        return " — ".join(filter(None, (label, i18n.data_text(lang, p["citation"]), p["url"])))
    return " — ".join(filter(None, (label, p["machine"], p["versions"], _date(p["date"]))))


def translated_table(df: pd.DataFrame, lang: str, prefix: str = "cols.") -> pd.DataFrame:
    """A recording section's rows with headers in `lang` (`cols.<field>`, the site's column names; the recordings
    list: `recordings.col_<field>`) and known words translated."""
    out = df.copy()
    for col in out.columns:
        if not pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col].map(lambda v: value_text(lang, v) if isinstance(v, str) else v)
    key = lambda c: f"{prefix}{c}"  # noqa: E731
    return out.rename(
        columns={c: i18n.translate(lang, key(c)) for c in out.columns if i18n.has(lang, key(c))}
    )
