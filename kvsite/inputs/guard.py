"""What keeps a hostile link or an unforeseen error from reaching a reader as a traceback: link values a number
widget cannot take are taken out before any widget reads them, and the session's last line of defence shows one
sentence in the page's language (the traceback stays in the server's log).

Example: ?ctx=1e400 -> drop_odd_numbers() == [("ctx", "1e400")]; the widget opens at its default.
"""

from __future__ import annotations

import math

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
from streamlit.runtime.state.session_state_proxy import get_session_state

from kvcore.limits import MAX_DIGITS
from kvsite import i18n


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
    a value nested too deeply for Python to decode said as such, else that the page failed and the error was
    logged) and never a traceback or a server path. Installed by install()."""

    def handler(ex: Exception) -> bool:
        from kvcore.errors import KvError

        if isinstance(ex, KvError) and ex.code:
            text = i18n.error_markdown(lang, ex)
        elif isinstance(ex, RecursionError):  # e.g. a widget's JSON value nested 5,000 deep
            text = i18n.translate(lang, "site.nested")
        else:
            text = i18n.translate(lang, "site.failed")
        st.error(text)
        return True  # no traceback on the page

    return handler


def install(lang: str) -> None:
    """last_line(lang) for this run and for every later run of this session until the next page run installs it
    again: as the run's on_script_error (what streamlit.App(on_script_error=...) sets; `streamlit run` has no
    option for it) and as its session's. Streamlit 1.67 starts a new ScriptRunner, with a new context that takes
    its handler from the session, for each run after the last one ended: a fragment rerun (fragment.py calls
    handle_user_script_exception with that context's handler), and the widget callbacks and the decoding of the
    widgets' values that run before any page code (script_runner.py, session_state.on_script_will_rerun). Only
    the run's handler is set where no server runs the page (AppTest, bare mode)."""
    ctx = get_script_run_ctx()
    if ctx is None:  # bare mode: a page imported, not run
        return
    handler = last_line(lang)
    ctx.on_script_error = handler
    # a server's session creates the next run's context (runtime/app_session.py); AppTest's runtime is a mock
    manager = getattr(Runtime.instance(), "_session_mgr", None) if Runtime.exists() else None
    info = manager.get_session_info(ctx.session_id) if manager is not None else None
    if info is not None:
        info.session._on_script_error = handler
