"""A runtime's log read back on the page (kvcore.inputs.log_reading): a "paste your log" section, and the corpus
of real logs (recordings/logs/) with each log's source, machine and the reader's table.

Example (a page): log_reader(f) -> the text area, the upload, the table of lines and the verdict.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kvcore.errors import KvError
from kvcore.inputs.log_corpus import corpus
from kvcore.inputs.log_reading import Reading, reading
from kvcore.inputs.logs import decode_log
from kvcore.limits import MAX_LOG_BYTES
from kvsite import i18n
from kvsite.layout import plain, text

MIB = 1024**2
PASTE, UPLOAD = "log_paste", "log_upload"  # widget keys
UPLOAD_MB = -(
    -MAX_LOG_BYTES // 2**20
)  # the uploader's own limit (MB of 2^20), the engine's rounded up


def _mib(n_bytes: int | None) -> str:
    return "—" if n_bytes is None else f"{n_bytes / MIB:,.2f} MiB"


def lines_table(r: Reading, lang: str) -> pd.DataFrame:
    """Each size line: its number, kind, the figure as printed, kvcore's, whether they agree and why (in `lang`)."""
    t = i18n.texts(lang)
    agrees = {True: t["logread.yes"], False: t["logread.no"], None: "—"}
    rows = [
        {
            t["logread.col_line"]: row.n,
            t["logread.col_kind"]: row.kind,
            t["logread.col_printed"]: row.printed,
            t["logread.col_derived"]: _mib(row.derived_bytes),
            t["logread.col_agrees"]: agrees[row.agrees],
            t["logread.col_why"]: i18n.translate(lang, f"log.{row.code}", **row.params),
        }
        for row in r.rows
        if row.printed is not None
    ]
    return pd.DataFrame(rows)


def verdict_text(r: Reading, lang: str) -> str:
    """The verdict against the log's own working-set line, or that the log has none."""
    v = r.verdict
    if not v:
        return i18n.translate(lang, "logread.no_verdict")
    word = {True: "over", False: "within", None: "undecided"}[v["over"]]
    return i18n.translate(
        lang, f"logread.verdict_{word}", total=_mib(v["total_bytes"]), limit=_mib(v["limit_bytes"])
    )


@st.cache_data(max_entries=16, show_spinner=False)
def _read(log_text: str) -> Reading:
    return reading(log_text)


def reading_view(r: Reading, lang: str) -> dict:
    """What show_reading draws, in `lang`: the words above the table, the table, the unknown lines' label and text."""
    t = i18n.texts(lang)
    said = [
        i18n.translate(
            lang, "logread.runtime", runtime=plain(r.runtime or "—"), device=plain(r.device or "—")
        )  # read from the log: shown as written
    ]
    said += [t[key] for key in r.as_dict()["note_keys"]]
    unknown = i18n.translate(lang, "logread.unknown", n=f"{len(r.unknown_lines):,}")
    return {
        "words": (i18n.join(lang, *said), verdict_text(r, lang)),
        "table": lines_table(r, lang),
        "unknown": (unknown, "\n".join(f"{n:>6}  {line}" for n, line in r.unknown_lines)),
    }


def show_reading(view: dict, lang: str) -> None:
    """The reader's table, its notes and verdict, and the lines it does not know (one click below)."""
    text(*view["words"])
    if len(view["table"]):
        st.dataframe(view["table"], hide_index=True, width="stretch")
    else:
        st.info(i18n.translate(lang, "logread.no_sizes"))
    label, unknown = view["unknown"]
    if unknown:
        with st.expander(label):
            st.code(unknown, language=None)


def log_reader(f, heading: bool = True) -> None:
    """The "paste your log" section: a text area and a file upload, bounded by the engine's limits; one
    sentence for what it refuses. heading False: inside an expander that carries the title."""
    t = f.t
    if heading:
        text("## " + t("logread.title"), t("logread.lead"))
    else:
        st.caption(t("logread.lead"))
    pasted = st.text_area(t("logread.paste"), key=PASTE, height=160)
    upload = st.file_uploader(
        t("logread.upload", mb=MAX_LOG_BYTES // 1_000_000),
        type=["log", "txt"],
        key=UPLOAD,
        max_upload_size=UPLOAD_MB,
    )
    data = upload.getvalue() if upload is not None else (pasted or "").encode("utf-8")
    if not data.strip():
        return
    try:
        r = _read(decode_log(data, upload.name if upload is not None else t("logread.pasted")))
    except KvError as e:
        st.error(i18n.error_markdown(f.lang, e))
        return
    show_reading(reading_view(r, f.lang), f.lang)


@st.cache_data(show_spinner=False)
def _corpus(lang: str) -> list[tuple[str, dict, dict]]:
    """Every corpus log read and put in words once per language (a rerun draws, it does not read)."""
    return [(c.stem, c.source, reading_view(reading(c.text, c.stem), lang)) for c in corpus()]


def _machine(source: dict, lang: str) -> str:
    m = source.get("machine") or {}
    parts = [i18n.data_text(lang, m.get("chip") or "")]
    if m.get("ram_gb"):
        parts.append(f"{m['ram_gb']} GB")
    if m.get("macos"):
        parts.append(f"macOS {m['macos']}")
    said = ", ".join(p for p in parts if p)
    return said or i18n.translate(lang, "logread.machine_unknown")


def corpus_logs(f) -> None:
    """The corpus as "logs from real Macs": each log with its source, machine and the reader's table."""
    text("## " + f.t("logread.corpus_title"), f.t("logread.corpus_lead"))
    logs = {stem: (source, view) for stem, source, view in _corpus(f.lang)}
    stem = st.selectbox(
        f.t("logread.pick"), list(logs), key="log_pick"
    )  # one log at a time: a short page
    source, view = logs[stem]
    url, said = source.get("url"), i18n.data_text(f.lang, source.get("where") or "")
    where = f"[{plain(said or url)}]({url})" if url else plain(said)
    text(
        f.t("logread.source", where=where),
        f.t("logread.machine", machine=plain(_machine(source, f.lang))),
    )
    show_reading(view, f.lang)
