"""Chapter 7 — recordings: every run with its provenance, side by side, downloadable; live suite runs."""

import streamlit as st

from kvsite import live, sections
from kvsite.data import csv_bytes, yaml_bytes
from kvsite.export import show_chart
from kvsite.frame import setup, url_choice

f = setup("recordings")
st.title(f.t("recordings.title"))
st.markdown(f.t("recordings.lead"))
st.dataframe(sections.recordings_table(f.recs, tuple(sorted(f.local_ids))), hide_index=True, width="stretch")

ids = [r.id for r in f.recs]
if ids:
    by_id = {r.id: r for r in f.recs}
    pick = url_choice(st.selectbox, f.t("recordings.pick"), ids, ids[0], "rec", format_func=lambda i: f.label(by_id[i]))
    rec = by_id[pick]
    f.badge(rec)
    st.download_button(f.t("recordings.yaml"), lambda: yaml_bytes(rec), f"{rec.id}.yaml", "application/x-yaml", key="rec_yaml",
                       on_click="ignore", icon=":material/download:")
    for section, rows, table in sections.recording_sections(rec):
        st.markdown(f"**{f.t('recordings.section')}: `{section}`** — {len(rows)} {f.t('recordings.rows')}")
        st.dataframe(table, hide_index=True, width="stretch")
        st.download_button(f.t("common.csv"), lambda rows=rows: csv_bytes(rows), f"{rec.id}-{section}.csv", "text/csv",
                           key=f"rec_csv_{section}", on_click="ignore")

    st.header(f.t("recordings.compare_title"))
    decode_ids = [r.id for r in f.recs if r.has("decode")]
    chosen = st.multiselect(f.t("recordings.compare"), decode_ids, decode_ids, key="cmp", format_func=lambda i: f.label(by_id[i]))
    if chosen:
        show_chart(f, sections.compare([by_id[i] for i in chosen], f.lang)["chart"], "compare_chart", "kv-recordings-decode")

st.header(f.t("recordings.live_title"))
if not f.live_ok:
    st.info(f.t(f.live_reason))
else:
    st.markdown(f.t("recordings.live_lead"))
    live.job_panel(f, "suite")
