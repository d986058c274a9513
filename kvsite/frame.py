"""The frame every page calls first: page config, language, navigation, data source and its badge.

Example (a page):
    f = setup("trap")
    rec = f.pick_source("trap")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from kvcore import recordings
from kvcore.recordings import Recording

from . import i18n, recording_text, uploads
from . import chapters
from .chapters import HOME, by_slug
from .sources import live_status, load_recordings, provenance, source_label

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = "published-article-a-m5-pro"  # Article A's own Apple Silicon figures
LIVE = "live"


@dataclass
class Frame:
    page: str
    lang: str
    recs: list[Recording]
    errors: list[str]
    local_ids: set[str]
    read_only: bool
    live_ok: bool
    live_reason: str
    uploaded_ids: set[str] = field(default_factory=set)  # this reader's uploads (kvsite.uploads), in recs too

    def t(self, key: str, **values) -> str:
        return i18n.translate(self.lang, key, **values)

    def label(self, rec: Recording | str) -> str:
        """How the UI names a source: its kind (published / measured on Apple Silicon / CPU demo) and what."""
        if rec == LIVE:
            return self.t("source.live")
        where = "local" if rec.id in self.local_ids else "uploaded" if rec.id in self.uploaded_ids else ""
        return source_label(rec, self.lang, where)

    def with_section(self, section: str) -> list[Recording]:
        return [r for r in self.recs if r.has(section)]

    def pick_source(self, section: str, default: str = DEFAULT_SOURCE, live: bool = False):
        """The sidebar's data-source picker (bound to ?src=) for one recording section; shows the badge."""
        options = [r.id for r in self.with_section(section)]
        if live and self.live_ok:
            options.append(LIVE)
        if not options:
            st.info(self.t("source.none"))
            return None
        by_id = {r.id: r for r in self.recs}
        index = options.index(default) if default in options else 0
        with st.sidebar:
            chosen = url_choice(st.selectbox, self.t("source.label"), options, options[index], "src",
                                format_func=lambda o: self.label(by_id.get(o, o)), help=self.t("source.help"))
        if live and not self.live_ok:
            st.sidebar.caption(self.t(self.live_reason))
        rec = by_id.get(chosen, LIVE)
        self.badge(rec, section)
        return rec

    def badge(self, rec: Recording | str, section: str | None = None, full: bool = False) -> None:
        """The visible provenance of what the page shows: machine, chip, model, method (of `section`), versions,
        date or citation, in one line; full: every field as a list (the Recordings page)."""
        with st.container(border=True):
            if rec == LIVE:
                import platform

                st.markdown(f":material/bolt: **{self.t('source.live')}** — {platform.system()} {platform.machine()}, "
                            f"Python {platform.python_version()}")
                if not (platform.system() == "Darwin" and platform.machine() == "arm64"):
                    st.caption(":material/warning: " + self.t("badge.not_apple"))
                return
            p = provenance(rec)
            st.markdown(f":material/{'menu_book' if p['kind'] == 'published' else 'science'}: **{self.label(rec)}**")
            if full:
                st.markdown(recording_text.provenance_card(rec, self.lang))
            else:
                source = (self.t("badge.source", url=p["url"], author=p["author"], date=p["published"], runtime=p["runtime"],
                                 grade=p["grade"] or "—") if p["kind"] == "published" and p["url"] else "")
                st.caption(recording_text.badge_line(rec, section, self.lang) + source)
            if p["class"] == "other":  # measured, not on Apple Silicon
                st.caption(":material/warning: " + self.t("badge.not_apple"))

    @property
    def texts(self) -> str:
        """This page's prefix in the language files (kvsite/chapters.py)."""
        return by_slug(self.page).texts

    def intro(self, **values) -> None:
        """The page's title (h1) and lead paragraph: `<texts>.title` and `<texts>.lead`, one element."""
        text("# " + self.t(f"{self.texts}.title"), self.t(f"{self.texts}.lead", **values))

    def faq(self, questions: tuple[str, ...], **values) -> None:
        """The chapter's readers' questions, each answered in place, as one markdown element (a heading per
        question gives each answer an anchor to link to; one element, where an expander per question costs
        ~0.3 ms a rerun each)."""
        text(f"## {self.t('faq.title')}",
             *(f"#### {self.t(f'{self.texts}.faq_{q}_q')}\n\n{self.t(f'{self.texts}.faq_{q}_a', **values)}" for q in questions))

    def selected(self, event, field_name: str) -> list[str]:
        """Legend values the reader picked in a chart (empty: nothing picked)."""
        try:
            return [p[field_name] for p in event.selection.get("pick", []) if field_name in p]
        except AttributeError:
            return []


def row(**kwargs):
    """Widgets or metrics side by side: one horizontal block (st.columns sends a block per column, each a
    cost on every rerun); each item takes its share of the width, and the row wraps when it runs out."""
    return st.container(horizontal=True, **kwargs)


def text(*blocks: str) -> None:
    """Consecutive headings ("## ...") and paragraphs as one markdown element: Streamlit's cost is per element
    (~0.1 ms a rerun), and adjacent markdown looks the same either way."""
    st.markdown("\n\n".join(b for b in blocks if b))


def url_choice(widget, label: str, options: list, default, key: str, format_func=str, **kwargs):
    """A choice widget bound to ?key=<option> by its raw value (Streamlit's own binding puts the
    *formatted* label in the URL). The URL wins when valid; a change rewrites it; the default is omitted.
    default may be a function, called only when needed (the URL holds no valid choice, or the reader changed it).
    """
    url = st.query_params.get(key)
    value = next((o for o in options if str(o) == url), None)
    if value is None:
        value = _value(default)
        value = value if value in options else options[0]
    wkey = f"{key}__w"
    state = st.session_state
    if wkey not in state or state[wkey] != value:  # a write costs more than a read, and is rarely needed
        state[wkey] = value

    def _sync():
        new = st.session_state[wkey]
        if new is None or new == _value(default):
            st.query_params.pop(key, None)
        else:
            st.query_params[key] = str(new)

    return widget(label, options, key=wkey, on_change=_sync, format_func=format_func, **kwargs)


def _value(default):
    return default() if callable(default) else default


def browser_language() -> str:
    """'ja' or 'en' from the browser's locale, else its Accept-Language header."""
    ctx = st.context
    locale = getattr(ctx, "locale", None)
    return i18n.from_locale(locale) if locale else i18n.from_locale(None, ctx.headers.get("Accept-Language") if ctx.headers else None)


def setup(page: str) -> Frame:
    """Page config, language switch, navigation, read-only note and broken-recording warnings."""
    url = st.query_params.get("lang")
    lang = url if url in i18n.LANGUAGES else browser_language()  # the browser is asked only without ?lang=
    st.set_page_config(page_title=f"{i18n.translate(lang, 'nav.' + page)} — {i18n.translate(lang, 'site.name')}",
                       page_icon=":material/memory:", layout="wide")
    with st.sidebar:
        lang = url_choice(st.segmented_control, "言語 / Language", list(i18n.LANGUAGES), browser_language, "lang",
                          format_func=i18n.LANGUAGES.get, required=True) or lang
        t = i18n.translator(lang)
        # page_link switches pages inside the session (a live run's panel stays reachable); it costs
        # ~0.15 ms per link and rerun, which markdown links would save at the price of a page reload.
        st.page_link(HOME.path, label=t("nav.home"), icon=":material/home:", query_params={"lang": lang})
        for chapter in chapters.CHAPTERS:  # read at each run: the one list
            st.page_link(chapter.path, label=t("nav." + chapter.slug), query_params={"lang": lang})
    recs, errors, local_ids = load_recordings()
    mine = uploads.uploaded()  # shown beside the bundled runs, to this reader only
    read_only = recordings.read_only() or not recordings.writable(recordings.local_dir())
    live_ok, live_reason = live_status()
    frame = Frame(page, lang, [*recs, *mine] if mine else recs, errors, local_ids, read_only, live_ok, live_reason,
                  uploaded_ids={r.id for r in mine})
    if read_only:
        st.sidebar.caption(":material/lock: " + t("site.read_only"))
    if errors:
        st.warning(t("site.broken", count=len(errors)) + "\n\n" + "\n".join(f"- `{e}`" for e in errors))
    return frame
