"""Chapter 7 — recordings: every run with its provenance, side by side, downloadable; live suite runs."""

import streamlit as st

from kvcore.recordings import store as recordings
from kvsite.charts.chart import show_chart
from kvsite.charts.tables import csv_bytes
from kvsite.data.sources import yaml_bytes
from kvsite.frame.page import DEFAULT_SOURCE, setup, url_choice
from kvsite.inputs import live, uploads
from kvsite.layout import text, uploader_words
from kvsite.sections import log as log_sections
from kvsite.sections import recordings as recordings_sections

f = setup("recordings")
f.intro()
st.subheader(f.t("recordings.compare_title"))
by_id = {r.id: r for r in f.recs}
decode_ids = [r.id for r in f.recs if r.has("decode")]
chosen = st.multiselect(
    f.t("recordings.compare"),
    decode_ids,
    recordings_sections.compare_default(
        f.recs
    ),  # Mac runs, six of them: each in a colour of its own
    key="cmp",
    format_func=lambda i: f.short_label(by_id[i]),  # a chip is ~200 px wide: the short name
)
if chosen:
    show_chart(
        f,
        recordings_sections.compare([by_id[i] for i in chosen], f.lang, f.recs)["chart"],
        "compare_chart",
        "kv-recordings-decode",
        source=f.t("recordings.list_sep").join(f.short_label(by_id[i]) for i in chosen),
    )

with st.expander(f.t("recordings.all_runs", n=len(f.recs)), icon=":material/table:"):
    st.dataframe(
        recordings_sections.recordings_table(f.recs, tuple(sorted(f.local_ids)), f.lang),
        hide_index=True,
        width="stretch",
    )

# public Mac memory figures beside what kvcore computes for them (kvcore.views.published_memory): the evidence,
# one click below, computed only when opened (a plan per figure; an upload's are bounded by MAX_MEMORY_FIGURES)
if recordings_sections.has_memory_figures(f.recs):
    figures = st.expander(
        f.t("recordings.memory_title"),
        icon=":material/memory:",
        key="rec_memory",
        on_change="rerun",
    )
    if figures.open:
        with figures:
            text(f.t("recordings.memory_lead"), recordings_sections.memory_figures(f.recs, f.lang))

ids = [r.id for r in f.recs]
if ids:
    by_id = {r.id: r for r in f.recs}
    pick = url_choice(
        st.selectbox,
        f.t("recordings.pick"),
        ids,
        DEFAULT_SOURCE
        if DEFAULT_SOURCE in ids
        else ids[0],  # Article A's Mac run first, as every chapter
        "rec",
        format_func=lambda i: f.label(by_id[i]),
    )
    rec = by_id[pick]
    f.badge(rec, full=True)
    st.download_button(
        f.t("recordings.yaml"),
        lambda: yaml_bytes(rec),
        f"{rec.id}.yaml",
        "application/x-yaml",
        key="rec_yaml",
        on_click="ignore",
        icon=":material/download:",
    )
    parts = recordings_sections.recording_sections(rec, f.lang)
    # one tab per section; lazy (on_change="rerun"): only the open tab's table and button are sent
    tabs = (
        st.tabs(
            [f.t("recordings.tab", name=name, n=f"{len(rows):,}") for _, name, rows, _ in parts],
            key=f"rec_tab_{rec.id}",
            on_change="rerun",
        )
        if parts
        else []
    )
    for tab, (section, _, rows, table) in zip(tabs, parts):
        if tab.open:
            with tab:
                st.dataframe(table, hide_index=True, width="stretch")
                st.download_button(
                    f.t("common.csv"),
                    lambda rows=rows: csv_bytes(rows),
                    f"{rec.id}-{section}.csv",
                    "text/csv",
                    key=f"rec_csv_{section}",
                    on_click="ignore",
                )

# public runtime logs, each read back line by line beside kvcore's plan (kvsite.sections.log)
log_sections.corpus_logs(f)

# a reader's own run (the file `python -m kvcore record` writes): this session only, never written
text(
    "## " + f.t("recordings.upload_title"),
    f.t("recordings.upload_lead"),
    f.run_yourself("python -m kvcore record"),
)
if f.lang != "en":  # Streamlit's own words in the box are English
    uploader_words(
        uploads.UPLOADER,
        f.t("common.upload_button"),
        f.t("common.upload_note", mb=recordings.MAX_FILE_BYTES // 1_000_000, types="YAML"),
        f.t("common.upload_drop"),
    )
st.file_uploader(
    f.t("recordings.upload", mb=recordings.MAX_FILE_BYTES // 1_000_000),
    type=["yaml", "yml"],
    key=uploads.UPLOADER,
    on_change=uploads.receive,
    max_upload_size=uploads.MAX_WIDGET_MB,
)
uploads.show(f)

if not f.live_ok or f.demo:  # the suite builds models: never on the hosted demo
    st.header(f.t("recordings.live_title"))
    st.info(f.t("recordings.live_demo" if f.live_ok else f.live_reason))
    st.caption(f.run_yourself("python -m kvcore record"))
else:
    text("## " + f.t("recordings.live_title"), f.t("recordings.live_lead"))
    live.job_panel(f, "suite")

f.chapter_end()
