"""The frame every page calls first: page config, language, navigation, data source and its badge.

Example (a page):
    f = setup("trap")
    rec = f.pick_source("trap")
"""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st

from kvcore.errors import quote
from kvcore.limits import MAX_DIGITS
from kvcore.recordings import store as recordings
from kvcore.recordings.provenance import is_apple_silicon
from kvcore.recordings.store import Recording
from kvsite import i18n
from kvsite.charts.chart import Export
from kvsite.data import recording_text
from kvsite.data.sources import badge_fields, live_status, load_recordings, source_label
from kvsite.inputs import uploads
from kvsite.inputs.choices import unknown_choice
from kvsite.inputs.guard import drop_odd_numbers, install
from kvsite.layout import plain, row, style, text

from . import chapters
from .chapters import HOME, by_slug

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_SOURCE = "published-article-a-m5-pro"  # Article A's own Apple Silicon figures
LIVE = "live"
SIDEBAR_PX = 300  # the sidebar's width on a desktop (a phone folds it away): the chapter list and the language
SOURCE_PX = 340  # the data-source picker's width in the page body: a whole run name, within a phone's 358 px column


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
    )  # this reader's uploads (kvsite.inputs.uploads), in recs too
    source_text: str = (
        ""  # the data source the last badge named, in plain words (what an export cites)
    )
    demo: bool = (
        False  # the hosted demo (KVCORE_READ_ONLY=1): no model is built or measured on its server
    )

    def t(self, key: str, **values) -> str:
        return i18n.translate(self.lang, key, **values)

    def label(self, rec: Recording | str, short: bool = False) -> str:
        """How the UI names a source: its kind (published / measured on Apple Silicon / CPU demo) and what (short:
        kvcore's short name, where room is short), and where it is kept (this machine, an upload)."""
        if rec == LIVE:
            return self.t("source.live")
        where = (
            "local"
            if rec.id in self.local_ids
            else "uploaded"
            if rec.id in self.uploaded_ids
            else ""
        )
        return source_label(rec, self.lang, where, short=short)

    def with_section(self, section: str, where=None) -> list[Recording]:
        """The recordings with rows of `section` (and, given `where`, those rows it accepts)."""
        return [
            r for r in self.recs if r.has(section) and (where is None or where(r.rows(section)))
        ]

    def pick_source(
        self,
        section: str,
        default: str = DEFAULT_SOURCE,
        live: bool = False,
        live_model: bool = False,
        where=None,
    ):
        """The sidebar's data-source picker (bound to ?src=) for one recording section; shows the badge.

        live: offer live measurement on the server; live_model: that probe builds a model, so the hosted demo
        (self.demo) does not offer it; where: which of the section's rows the page draws (a predicate on them). A ?src= the picker cannot show is named in a sentence, never silently replaced.
        """
        options = [r.id for r in self.with_section(section, where)]
        live_here = live and self.live_ok and not (live_model and self.demo)
        if live_here:
            options.append(LIVE)
        if not options:
            st.info(self.t("source.none"))
            return None
        by_id = {r.id: r for r in self.recs}
        index = options.index(default) if default in options else 0
        # one line in the page body (a phone folds the sidebar away): the picker, then the source's badge, whose
        # provenance opens on a click (method and every field are on the run's card on the Recordings page)
        line = row(vertical_alignment="center")
        with line:
            chosen = url_choice(
                st.selectbox,
                self.t("source.label"),
                options,
                options[index],
                "src",
                format_func=lambda o: self.short_label(by_id.get(o, o)),
                help=self.t("source.help"),
                width=SOURCE_PX,
                label_visibility="collapsed",
                say_unknown=False,  # _missing_source says why, below
            )
        rec = by_id.get(chosen, LIVE)
        asked = st.query_params.get("src")
        if asked and asked not in options:
            self._missing_source(asked, rec, live and asked == LIVE)
        with line:
            self.badge(rec, section)
        if live and not self.live_ok:
            st.caption(self.t(self.live_reason))
        if rec == LIVE:
            st.caption(
                ":material/dns: "
                + i18n.join(
                    self.lang,
                    self.t("live.server_note"),
                    self.run_yourself("python -m kvcore record"),
                )
            )
        return rec

    def _missing_source(self, asked: str, shown, live_refused: bool) -> None:
        """A shared link's ?src= that this page cannot show (an upload from another session, a run that is gone, live
        on the hosted demo), said in one sentence above what is shown instead."""
        shown_name = self.label(shown) if shown == LIVE or shown.path else plain(self.label(shown))
        name = plain(quote(asked))  # the link's words as text, a short prefix of them
        if live_refused:
            st.warning(self.t("source.live_not_here", shown=shown_name))
        elif asked.startswith(uploads.PREFIX):
            st.warning(self.t("source.upload_missing", id=name, shown=shown_name))
        else:
            st.warning(self.t("source.unknown", id=name, shown=shown_name))

    def short_label(self, rec: Recording | str) -> str:
        """A source's name where room is short (the sidebar's picker, legends on a phone): kvcore's short name."""
        return self.label(rec, short=True)

    def badge(self, rec: Recording | str, section: str | None = None, full: bool = False) -> None:
        """The visible provenance of what the page shows. A chapter: one line, the source's kind and name, which opens
        on a click to machine, chip, model, method (of `section`), versions, date or citation, and a link to the run's
        card; a run not on Apple Silicon says so beside it. full: every field as a list (the Recordings page)."""
        if full:
            with st.container(border=True):
                self._badge_body(rec, section, full)
            return
        if rec == LIVE:
            import platform

            title = f"{self.t('source.live')} — {platform.system()} {platform.machine()}"
            icon = "bolt"
        else:
            title = (
                self.label(rec) if rec.path else plain(self.label(rec))
            )  # an upload's name: text
            icon = "menu_book" if badge_fields(rec)["kind"] == "published" else "science"
        with st.popover(title, icon=f":material/{icon}:", width="content", wrap=True):
            self._badge_body(rec, section, full)
            if rec != LIVE:
                st.page_link(
                    by_slug("recordings").path,
                    label=self.t("source.card"),
                    icon=":material/arrow_forward:",
                    query_params={"lang": self.lang, "rec": rec.id},
                )
        if rec != LIVE and badge_fields(rec)["class"] == "other":  # measured, not on Apple Silicon
            # a memory peak is not a speed: say what carries over to a Mac for it
            st.caption(
                ":material/warning: "
                + self.t("badge.not_apple_peak" if section == "peak" else "badge.not_apple")
            )

    def _badge_body(self, rec: Recording | str, section: str | None, full: bool) -> None:
        if rec == LIVE:
            import platform

            self.source_text = f"{self.t('source.live')} — {platform.system()} {platform.machine()}"
            st.markdown(
                f":material/bolt: **{self.t('source.live')}** — {platform.system()} {platform.machine()}, "
                f"Python {platform.python_version()}"
            )
            from kvcore.measure.machine import this_machine  # live mode: mlx is in use here already

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
                    runtime=i18n.data_text(self.lang, p["runtime"]),
                    grade=p["grade"] or "—",
                )
                if p["kind"] == "published" and p["url"] and rec.path  # an upload's: no link
                else ""
            )
            st.caption(recording_text.badge_line(rec, section, self.lang) + source)
        if full and p["class"] == "other":  # measured, not on Apple Silicon
            st.caption(":material/warning: " + self.t("badge.not_apple"))

    def export(self, key: str, settings: dict | None = None, source: str | None = None):
        """What a chart's downloads say about themselves (kvsite.charts.chart.Export): its title (`export.<key>`), the
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
        """This page's prefix in the language files (kvsite/frame/chapters.py)."""
        return by_slug(self.page).texts

    def intro(self, **values) -> None:
        """The page's title (h1) and lead paragraph: `<texts>.title` and `<texts>.lead`, one element."""
        text("# " + self.t(f"{self.texts}.title"), self.t(f"{self.texts}.lead", **values))

    def faq(self, questions: tuple[str, ...], **values) -> None:
        """The chapter's readers' questions, each answered in place, as one markdown element (a heading per
        question gives each answer an anchor to link to; one element, where an expander per question costs
        ~0.3 ms a rerun each)."""
        with st.expander(
            self.t("faq.title"), icon=":material/help:"
        ):  # evidence on demand, not the story
            text(
                *(
                    f"#### {self.t(f'{self.texts}.faq_{q}_q')}\n\n{self.t(f'{self.texts}.faq_{q}_a', **values)}"
                    for q in questions
                ),
            )

    def chapter_end(self) -> None:
        """The previous and the next chapter (kvsite/frame/chapters.py: number and title as the navigation names them), at
        the end of every chapter: the reading path does not depend on the sidebar a phone folds away."""
        pages = chapters.all_pages()
        i = [c.slug for c in pages].index(self.page)
        st.divider()
        c = row(horizontal_alignment="distribute")
        if i > 0:
            before = pages[i - 1]
            c.page_link(
                before.path,
                label=self.t("nav.previous", name=self.t("nav." + before.slug)),
                icon=":material/arrow_back:",
                query_params={"lang": self.lang},
            )
        if i + 1 < len(pages):
            after = pages[i + 1]
            c.page_link(
                after.path,
                label=self.t("nav.next", name=self.t("nav." + after.slug)),
                icon=":material/arrow_forward:",
                icon_position="right",
                query_params={"lang": self.lang},
            )

    def run_yourself(self, command: str) -> str:
        """How a reader runs `command` on their own machine: the project (this repository), its install command,
        then the command (one text, appended wherever a page says "run it yourself")."""
        return self.t("site.get_project", command=command)

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
    A ?key= naming no option is said beside the widget (say_unknown=False: the caller says it)."""
    say_unknown = kwargs.pop("say_unknown", True)
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

    chosen = widget(label, options, key=wkey, on_change=_sync, format_func=format_func, **kwargs)
    if url and say_unknown and not any(str(o) == url for o in options):
        unknown_choice(key, label, [url], format_func(chosen))
        st.query_params.pop(key, None)  # said once, as Streamlit's own binding drops such a value
    return chosen


def _value(default):
    return default() if callable(default) else default


_FROZEN_AT = [0]  # how many modules were loaded when the process's objects were last frozen


def _freeze_what_stays() -> None:
    """Python's full collections walk every object the process holds; most of them are modules, classes and
    functions (Streamlit, Altair's schema, pandas, kvcore) that live as long as the process. Once a page has imported
    something new, the garbage is collected and what is left is frozen (gc.freeze): later full collections skip it.
    Measured on the slider benchmark's server: one full collection took 120 ms in a 170-ms slider step."""
    if len(sys.modules) > _FROZEN_AT[0]:
        gc.collect()
        gc.freeze()
        _FROZEN_AT[0] = len(sys.modules)


def setup(page: str) -> Frame:
    """Page config, language switch, navigation, read-only note and broken-recording warnings."""
    _freeze_what_stays()
    url = st.query_params.get("lang")
    lang = (
        url if url in i18n.LANGUAGES else i18n.browser_language()
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
                i18n.browser_language,
                "lang",
                format_func=i18n.LANGUAGES.get,
                required=True,
                say_unknown=False,  # said in the page's body below, where a phone shows it
            )
            or lang
        )
        t = i18n.translator(lang)
    install(lang)  # the last line of defence, for this run and the session's next ones
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
    if url and url not in i18n.LANGUAGES:
        unknown_choice("lang", "言語 / Language", [url], i18n.LANGUAGES[lang])
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
