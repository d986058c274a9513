"""Home: the one-screen story, the key numbers, where the data comes from, links to the chapters."""

import streamlit as st

from kvcore.units import fmt_num, fmt_ratio, fmt_size
from kvsite.frame.chapters import CHAPTERS, by_slug
from kvsite.frame.page import DEFAULT_SOURCE, setup
from kvsite.layout import row, text
from kvsite.sections import home as home_sections
from kvsite.sections import shared as sections

f = setup("home")
f.intro()

rec = next((r for r in f.recs if r.id == DEFAULT_SOURCE), None)
n = home_sections.key_numbers(rec)
geo = sections.article_geometry()
dec = (
    home_sections.home_decode(rec, n) if "tokens_per_s_a" in n else {"chip": "—", "chip_name": "—"}
)
c = row(gap="medium")  # a metric takes its label's width: the four share one row at 1400 px
c.metric(
    f.t("home.m_per_token"),
    f"{n['kv_per_token'] / 1024:,.0f} KiB",
    help=f.t("home.m_per_token_help", **geo),
    width="content",
)
c.metric(
    f.t("home.m_32k"),
    fmt_size(n["kv_32k"]),
    help=f.t("home.m_32k_help", weights=fmt_size(n["weights_q4"])),
    width="content",
)
if "tokens_per_s_a" in n:
    c.metric(
        f.t("home.m_decode", **dec),
        f"{fmt_num(n['tokens_per_s_a'])} → {fmt_num(n['tokens_per_s_b'])} tok/s",
        help=f.t("home.m_decode_help", **dec),
        width="content",
    )
    c.metric(
        f.t("home.m_pred"),
        fmt_ratio(n["predicted_slowdown"]),
        f"{f.t('home.m_measured')} {fmt_ratio(n['measured_slowdown'])}",
        delta_color="off",
        delta_arrow="off",
        help=f.t("home.m_pred_help", **dec),
        width="content",
    )
else:
    st.info(f.t("source.none"))
st.caption(f.t("home.numbers_source", **dec))

st.subheader(f.t("home.chapters"))
for chapter in CHAPTERS:
    with st.container(border=True):
        st.page_link(
            chapter.path, label=f"**{f.t('nav.' + chapter.slug)}**", query_params={"lang": f.lang}
        )
        st.caption(f.t(f"home.ch.{chapter.slug}", **geo))

text("### " + f.t("home.data_title"), f.t("home.data"), "#### " + f.t("home.articles_title"))
for (
    article
) in home_sections.ARTICLES:  # the two articles the site quotes: each one's card on Recordings
    st.page_link(
        by_slug("recordings").path,
        label=f.t(f"home.{article}"),
        icon=":material/menu_book:",
        query_params={"lang": f.lang, "rec": home_sections.ARTICLES[article]},
    )
    st.caption(f.t(f"home.{article}_note"))
with st.expander(f.t("home.sources_title"), icon=":material/link:"):
    st.markdown(home_sections.sources(f.recs, f.lang))

st.markdown("#### " + f.t("home.run_title"))
repository = home_sections.repository()
if repository:  # the hosted site names its repository: the README holds the install steps
    st.markdown(f.t("home.run_repo", url=repository))
else:  # no address to link: the README's own two commands
    st.caption(f.t("home.run_commands"))
    for command in home_sections.readme_commands():
        st.code(command, language="sh", wrap_lines=True)
f.chapter_end()
