"""The Calculator's "as a server" expander: the reader's model behind its runtime's server (kvcore.views.as_server),
users taking turns, what stays resident after the last turn and the conversation's peak, GPU side and host side,
each with its verdict. Computed only while the expander is open (opening it reruns this fragment alone), once per
request and conversation (`cached`): a warm rerun does no engine work.

Example: as_server(f, inputs) -> an expander; open, it shows four figures, two verdicts and a table per turn.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from kvcore.capacity.request import Request
from kvcore.errors import KvError
from kvcore.limits import (
    MAX_CHAPTER_TURN_TOKENS,
    MAX_CHAPTER_TURNS,
    MAX_CHAPTER_USERS,
    MAX_PROMPT_CACHE_ENTRIES,
)
from kvcore.units import fmt_bytes
from kvcore.views import as_server as serving
from kvsite import i18n
from kvsite.charts.tables import md_table
from kvsite.layout import lazy_expander
from kvsite.sections.shared import cached

from . import compute as calc_sections
from .inputs import Inputs

DEFAULTS = {"users": 2, "turns": 8, "message": 256, "reply": 256}


@cached
def answer(request: Request, asked: tuple) -> serving.ServerResult:
    """The engine's answer for this request and the conversation's widgets (`asked`: ServerAsk's fields in order,
    bounded there, inside the cache: a warm rerun builds nothing), the model as the Calculator read it."""
    return serving.as_server(request, serving.ServerAsk(*asked), calc_sections.geometry(request))


def _size(n_bytes: int) -> str:
    """A table cell's size: binary units only, narrow enough for a phone's column."""
    return fmt_bytes(int(n_bytes), decimal=False)


@cached
def turns_table(request: Request, asked: tuple, lang: str) -> str:
    """Turn by turn: the tokens processed again and served from the cache, each side after the turn, the peak."""
    t = i18n.translator(lang)
    rows = pd.DataFrame(list(answer(request, asked).turns)).assign(
        gpu=lambda d: d["gpu_resident_bytes"].map(_size),
        host=lambda d: d["host_resident_bytes"].map(_size),
        peak=lambda d: (d["gpu_peak_bytes"] + d["host_peak_bytes"]).map(_size),
    )
    columns = {
        "turn": (t("calc.srv_col_turn"), "{:,}"),
        "reprocessed_tokens": (t("calc.srv_col_processed"), "{:,}"),
        "cached_tokens": (t("calc.srv_col_cached"), "{:,}"),
        "gpu": (t("calc.srv_col_gpu"), None),
        "host": (t("calc.srv_col_host"), None),
        "peak": (t("calc.srv_col_peak"), None),
    }
    if (
        serving.SERVER_OF[request.runtime] != serving.llama_server.NAME
    ):  # mlx_lm.server: no host side
        del columns["host"]
    return md_table(rows, columns, lang)


def _ask(f, box, server: str, ram_bytes: int | None) -> tuple:
    """The conversation's widgets (each bounded as the engine bounds it) and the server's own option, as
    ServerAsk's fields in order (the other server's option at its default)."""
    c = box.columns(5)
    users = c[0].number_input(
        f.t("calc.srv_users"), 1, MAX_CHAPTER_USERS, DEFAULTS["users"], key="srv_users"
    )
    turns = c[1].number_input(
        f.t("calc.srv_turns"), 1, MAX_CHAPTER_TURNS, DEFAULTS["turns"], key="srv_turns"
    )
    message = c[2].number_input(
        f.t("calc.srv_message"), 1, MAX_CHAPTER_TURN_TOKENS, DEFAULTS["message"], key="srv_msg"
    )
    reply = c[3].number_input(
        f.t("calc.srv_reply"), 1, MAX_CHAPTER_TURN_TOKENS, DEFAULTS["reply"], key="srv_reply"
    )
    cache_ram, entries = serving.DEFAULTS["--cache-ram"], serving.DEFAULTS["--prompt-cache-size"]
    if server == serving.llama_server.NAME:
        cache_ram = c[4].number_input(
            f.t("calc.srv_cache_ram"),
            -1,
            serving.MAX_CACHE_RAM_MIB,
            serving.DEFAULTS["--cache-ram"],
            key="srv_cram",
            help=f.t("calc.srv_cache_ram_help"),
        )
    else:
        entries = c[4].number_input(
            "--prompt-cache-size",
            1,
            MAX_PROMPT_CACHE_ENTRIES,
            serving.DEFAULTS["--prompt-cache-size"],
            key="srv_pcs",
            help=f.t("calc.srv_prompt_cache_help"),
        )
    return (*map(int, (users, turns, message, reply, cache_ram, entries)), ram_bytes)


@st.fragment
def as_server(f, inputs: Inputs) -> None:
    """The expander: the reader's own model as a server, only computed while it is open."""
    box = lazy_expander(f.t("calc.srv_title"), "srv_open", icon=":material/dns:")
    if not box:
        return
    r = inputs.request
    if r.runtime not in serving.SERVER_OF:
        box.info(f.t("calc.srv_no_server", runtime=r.runtime))
        return
    server = serving.SERVER_OF[r.runtime]
    box.caption(f.t(f"calc.srv_lead_{'llama' if server == serving.llama_server.NAME else 'mlx'}"))
    try:
        asked = _ask(f, box, server, inputs.memory.ram_bytes)
        got = answer(r, asked)
    except KvError as e:  # what the server does not do, or a conversation its slots cannot hold
        box.error(i18n.error_markdown(f.lang, e))
        return
    box.code(got.command, language=None, wrap_lines=True)
    _figures(f, box, got)
    _verdicts(f, box, inputs, got)
    box.markdown(turns_table(r, asked, f.lang))
    said = f.t(
        f"calc.srv_line_{'llama' if server == serving.llama_server.NAME else 'mlx'}",
        line=got.server_line,
    )
    ledger = f.t(
        "calc.srv_ledger", resident=fmt_bytes(got.resident_bytes), peak=fmt_bytes(got.peak_bytes)
    )
    box.caption(i18n.join(f.lang, said, ledger))
    box.caption(i18n.join(f.lang, *(f.t(f"calc.srv_note_{code}") for code in got.notes)))


def _figures(f, box, got: serving.ServerResult) -> None:
    """GPU side and host side, after the last turn and at the peak, each exact on hover."""
    m = box.container(horizontal=True)  # kvsite.layout.row, inside the expander
    n = f"{len(got.turns):,}"
    for label, value in (
        (f.t("calc.srv_gpu_after", n=n), got.gpu_resident_bytes),
        (f.t("calc.srv_gpu_peak"), got.gpu_peak_bytes),
        (f.t("calc.srv_host_after", n=n), got.host_resident_bytes),
        (f.t("calc.srv_host_peak"), got.host_peak_bytes),
    ):
        m.metric(
            label,
            fmt_bytes(value, decimal=False),
            help=f.t("calc.metric_help", exact=f"{value:,}", short=fmt_bytes(value)),
        )


def _verdicts(f, box, inputs: Inputs, got: serving.ServerResult) -> None:
    """The GPU side against what the GPU may use (the Calculator's verdict); the host side with it against RAM."""
    fit = got.fit
    show = {"fits": box.success, "tight": box.warning, "unplanned": box.info, "no": box.error}
    show[fit.status](
        f.t(
            f"calc.srv_gpu_{fit.status}",
            need=fmt_bytes(fit.need_bytes, decimal=False),
            share=f"{fit.share:.0%}",
            available=fmt_bytes(inputs.memory.bytes, decimal=False),
            weights=fmt_bytes(got.weights_bytes, decimal=False),
            working=fmt_bytes(got.working_bytes, decimal=False),
        )
    )
    if got.server != serving.llama_server.NAME:
        box.caption(f.t("calc.srv_host_none"))
        return
    cap = (
        f.t("calc.srv_cap", cap=fmt_bytes(got.host_cap_bytes, decimal=False))
        if got.host_cap_bytes is not None
        else f.t("calc.srv_cap_none")
    )
    host = got.host_fit
    if host is None:  # a custom memory figure: the RAM is not known
        box.info(i18n.join(f.lang, f.t("calc.srv_host_unjudged"), cap))
        return
    said = f.t(
        f"calc.srv_host_{host['status']}",
        need=fmt_bytes(host["need_bytes"], decimal=False),
        host=fmt_bytes(got.host_peak_bytes, decimal=False),
        ram=fmt_bytes(host["ram_bytes"], decimal=False),
    )
    (box.success if host["status"] == "fits" else box.error)(i18n.join(f.lang, said, cap))
