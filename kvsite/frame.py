"""The frame every page calls first: page config, language, navigation, data source and its badge.

Example (a page):
    f = setup("trap")
    rec = f.pick_source("trap")
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.runtime.state.session_state_proxy import get_session_state

from kvcore.errors import quote
from kvcore.limits import MAX_DIGITS
from kvcore.recordings import store as recordings
from kvcore.recordings.store import Recording, is_apple_silicon

from . import chapters, i18n, recording_text, uploads
from .chapters import HOME, by_slug
from .chart import Export
from .layout import plain, style, text
from .sources import badge_fields, live_status, load_recordings, source_label

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = "published-article-a-m5-pro"  # Article A's own Apple Silicon figures
LIVE = "live"
SIDEBAR_PX = 350  # the sidebar's width on a desktop (a phone folds it away): the data-source picker shows a whole run name


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
    uploaded_ids: set[str] = field(
        default_factory=set
    )  # this reader's uploads (kvsite.uploads), in recs too
    source_text: str = (
        ""  # the data source the last badge named, in plain words (what an export cites)
    )
    demo: bool = (
        False  # the hosted demo (KVCORE_READ_ONLY=1): no model is built or measured on its server
    )

    def t(self, key: str, **values) -> str:
        return i18n.translate(self.lang, key, **values)

    def label(self, rec: Recording | str) -> str:
        """How the UI names a source: its kind (published / measured on Apple Silicon / CPU demo) and what."""
        if rec == LIVE:
            return self.t("source.live")
        where = (
            "local"
            if rec.id in self.local_ids
            else "uploaded"
            if rec.id in self.uploaded_ids
            else ""
        )
        return source_label(rec, self.lang, where)

    def with_section(self, section: str) -> list[Recording]:
        return [r for r in self.recs if r.has(section)]

    def pick_source(
        self,
        section: str,
        default: str = DEFAULT_SOURCE,
        live: bool = False,
        live_model: bool = False,
    ):
        """The sidebar's data-source picker (bound to ?src=) for one recording section; shows the badge.

        live: offer live measurement on the server; live_model: that probe builds a model, so the hosted demo
        (self.demo) does not offer it. A ?src= the picker cannot show is named in a sentence, never silently replaced.
        """
        options = [r.id for r in self.with_section(section)]
        live_here = live and self.live_ok and not (live_model and self.demo)
        if live_here:
            options.append(LIVE)
        if not options:
            st.info(self.t("source.none"))
            return None
        by_id = {r.id: r for r in self.recs}
        index = options.index(default) if default in options else 0
        with st.sidebar:
            chosen = url_choice(
                st.selectbox,
                self.t("source.label"),
                options,
                options[index],
                "src",
                format_func=lambda o: self.short_label(by_id.get(o, o)),
                help=self.t("source.help"),
            )
        if live and not self.live_ok:
            st.sidebar.caption(self.t(self.live_reason))
        rec = by_id.get(chosen, LIVE)
        asked = st.query_params.get("src")
        if asked and asked not in options:
            self._missing_source(asked, rec, live and asked == LIVE)
        self.badge(rec, section)
        if rec == LIVE:
            st.caption(":material/dns: " + self.t("live.server_note"))
        return rec

    def _missing_source(self, asked: str, shown, live_refused: bool) -> None:
        """A shared link's ?src= that this page cannot show (an upload from another session, a run that is gone, live
        on the hosted demo), said in one sentence above what is shown instead."""
        shown_name = self.label(shown)
        if live_refused:
            st.warning(self.t("source.live_not_here", shown=shown_name))
        elif asked.startswith(uploads.PREFIX):
            st.warning(self.t("source.upload_missing", id=asked, shown=shown_name))
        else:
            st.warning(self.t("source.unknown", id=asked, shown=shown_name))

    def short_label(self, rec: Recording | str) -> str:
        """A source's name where room is short (the sidebar's picker, legends on a phone): kvcore's short name."""
        if rec == LIVE:
            return self.t("source.live")
        where = (
            "local"
            if rec.id in self.local_ids
            else "uploaded"
            if rec.id in self.uploaded_ids
            else ""
        )
        return source_label(
            rec, self.lang, where, short=True
        )  # the kind, kvcore's short name, where it is kept

    def badge(self, rec: Recording | str, section: str | None = None, full: bool = False) -> None:
        """The visible provenance of what the page shows: machine, chip, model, method (of `section`), versions,
        date or citation, in one line; full: every field as a list (the Recordings page)."""
        with st.container(border=True):
            if rec == LIVE:
                import platform

                self.source_text = (
                    f"{self.t('source.live')} — {platform.system()} {platform.machine()}"
                )
                st.markdown(
                    f":material/bolt: **{self.t('source.live')}** — {platform.system()} {platform.machine()}, "
                    f"Python {platform.python_version()}"
                )
                from kvcore.measure.machine import (
                    this_machine,  # live mode: mlx is in use here already
                )

                if not is_apple_silicon(
                    {"machine": this_machine()}
                ):  # the one rule a recording is labelled by
                    st.caption(":material/warning: " + self.t("badge.not_apple"))
                return
            p = badge_fields(rec)
            self.source_text = recording_text.source_words(rec, self.lang, self.label(rec))
            name = self.label(rec) if rec.path else plain(self.label(rec))  # an upload's name: text
            st.markdown(
                f":material/{'menu_book' if p['kind'] == 'published' else 'science'}: **{name}**"
            )
            if full:
                st.markdown(recording_text.provenance_card(rec, self.lang))
            else:
                source = (
                    self.t(
                        "badge.source",
                        url=p["url"],
                        author=p["author"],
                        date=p["published"],
                        runtime=p["runtime"],
                        grade=p["grade"] or "—",
                    )
                    if p["kind"] == "published" and p["url"] and rec.path  # an upload's: no link
                    else ""
                )
                st.caption(recording_text.badge_line(rec, section, self.lang) + source)
            if p["class"] == "other":  # measured, not on Apple Silicon
                st.caption(":material/warning: " + self.t("badge.not_apple"))

    def export(self, key: str, settings: dict | None = None, source: str | None = None):
        """What a chart's downloads say about themselves (kvsite.chart.Export): its title (`export.<key>`), the
        settings it was drawn with ("label: value", in this language), its source and the site."""
        colon = self.t("recordings.colon")
        lines = (
            [
                self.t(
                    "export.settings",
                    items=self.t("recordings.list_sep").join(
                        f"{label}{colon}{value}" for label, value in settings.items()
                    ),
                )
            ]
            if settings
            else []
        )
        lines.append(
            self.t("export.source", source=source or self.source_text or self.t("export.computed"))
        )
        lines.append(self.t("export.site", name=self.t("site.name")))
        return Export(self.t(f"export.{key}"), tuple(lines))

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
        text(
            f"## {self.t('faq.title')}",
            *(
                f"#### {self.t(f'{self.texts}.faq_{q}_q')}\n\n{self.t(f'{self.texts}.faq_{q}_a', **values)}"
                for q in questions
            ),
        )

    def selected(self, event, field_name: str) -> list[str]:
        """Legend values the reader picked in a chart (empty: nothing picked)."""
        try:
            return [p[field_name] for p in event.selection.get("pick", []) if field_name in p]
        except AttributeError:
            return []


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
    if (
        wkey not in state or state[wkey] != value
    ):  # a write costs more than a read, and is rarely needed
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
    return (
        i18n.from_locale(locale)
        if locale
        else i18n.from_locale(None, ctx.headers.get("Accept-Language") if ctx.headers else None)
    )


def odd_number(value: str) -> bool:
    """A URL value a number widget cannot take: one that reads as a number but is not finite (inf, -inf, nan,
    1e400, 5,000 digits: Streamlit's own binding turns these into an OverflowError), or a numeral of more than
    MAX_DIGITS digits. Text that is not a number at all is left to its widget."""
    text = value.strip()
    digits = sum(ch.isdigit() for ch in text)
    if digits > MAX_DIGITS and len(text) - digits <= 3:  # 999...9, -999...9, 9.99...9
        return True
    try:
        return not math.isfinite(float(text))
    except (ValueError, OverflowError):
        return False


def drop_odd_numbers() -> list[tuple[str, str]]:
    """Before any widget reads the link: every query value that is an odd number (odd_number) is taken out of the
    link and of what Streamlit seeds widgets from, so the widget opens at its default; returns (key, value) for
    each one, for the page's one sentence. Streamlit keeps the first load's values apart from st.query_params
    (QueryParams._initial_query_params, streamlit 1.67), and only there does taking a value out stop the seeding."""
    dropped = []
    with get_session_state().query_params() as qp:
        initial = getattr(qp, "_initial_query_params", {})
        for key in [k for k in qp if k != "lang"]:
            values = qp.get_all(key)
            bad = next((v for v in values if odd_number(v)), None)
            if bad is None:
                continue
            dropped.append((key, bad))
            initial.pop(key, None)
            if not qp.is_bound(key):
                qp.pop(key, None)
        for key in [k for k, values in initial.items() if any(odd_number(v) for v in values)]:
            dropped.append((key, initial.pop(key)[0]))
    return dropped


def last_line(lang: str):
    """The site's last line of defence, for an exception no page caught: Streamlit has already logged it with its
    traceback on the server; the reader gets one sentence in the page's language (an engine error's own sentence,
    else that the page failed and the error was logged) and never a traceback or a server path. Installed as the
    run's on_script_error (what streamlit.App(on_script_error=...) sets; `streamlit run` has no option for it)."""

    def handler(ex: Exception) -> bool:
        from kvcore.errors import KvError

        text = (
            i18n.error_text(lang, ex)
            if isinstance(ex, KvError) and ex.code
            else i18n.translate(lang, "site.failed")
        )
        st.error(text)
        return True  # no traceback on the page

    return handler


def setup(page: str) -> Frame:
    """Page config, language switch, navigation, read-only note and broken-recording warnings."""
    url = st.query_params.get("lang")
    lang = (
        url if url in i18n.LANGUAGES else browser_language()
    )  # the browser is asked only without ?lang=
    st.set_page_config(
        page_title=f"{i18n.translate(lang, 'nav.' + page)} — {i18n.translate(lang, 'site.name')}",
        page_icon=":material/memory:",
        layout="wide",
        initial_sidebar_state=SIDEBAR_PX,
    )
    style()
    odd = drop_odd_numbers()  # before any widget is made: Streamlit would raise on them
    with st.sidebar:
        lang = (
            url_choice(
                st.segmented_control,
                "言語 / Language",
                list(i18n.LANGUAGES),
                browser_language,
                "lang",
                format_func=i18n.LANGUAGES.get,
                required=True,
            )
            or lang
        )
        t = i18n.translator(lang)
    ctx = get_script_run_ctx()
    if ctx is not None:  # None in bare mode (a page imported, not run)
        ctx.on_script_error = last_line(lang)
    with st.sidebar:
        # page_link switches pages inside the session (a live run's panel stays reachable); it costs
        # ~0.15 ms per link and rerun, which markdown links would save at the price of a page reload.
        st.page_link(
            HOME.path, label=t("nav.home"), icon=":material/home:", query_params={"lang": lang}
        )
        for chapter in chapters.CHAPTERS:  # read at each run: the one list
            st.page_link(chapter.path, label=t("nav." + chapter.slug), query_params={"lang": lang})
    recs, errors, local_ids = load_recordings()
    mine = uploads.uploaded()  # shown beside the bundled runs, to this reader only
    demo = recordings.read_only()
    read_only = demo or not recordings.writable(recordings.local_dir())
    live_ok, live_reason = live_status()
    frame = Frame(
        page,
        lang,
        [*recs, *mine] if mine else recs,
        errors,
        local_ids,
        read_only,
        live_ok,
        live_reason,
        uploaded_ids={r.id for r in mine},
        demo=demo,
    )
    if read_only:
        st.sidebar.caption(
            ":material/lock: "
            + i18n.join(lang, t("site.read_only"), t("site.demo") if demo and live_ok else "")
        )
    if errors:
        st.warning(
            t("site.broken", count=len(errors)) + "\n\n" + "\n".join(f"- `{e}`" for e in errors)
        )
    for key, value in odd[:1]:  # one sentence, for the first such value
        st.warning(
            t(
                "site.url_number",
                param=plain(quote(key)),
                value=plain(quote(value)),
                digits=MAX_DIGITS,
            )
        )
    return frame
