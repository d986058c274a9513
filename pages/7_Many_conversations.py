"""Chapter 7 — many conversations: what a local server (mlx_lm.server, llama-server) keeps between turns and users,
what it counts of it, and its options as levers (kvsite.sections.servers over kvcore.views.servers and
kvcore.views.llama_server, the servers' ledgers)."""

import streamlit as st

from kvcore.limits import MAX_CHAPTER_TURN_TOKENS, MAX_CHAPTER_TURNS, MAX_CHAPTER_USERS
from kvcore.units import GIB, fmt_num
from kvcore.views.servers import DEFAULT_MODEL, LEVER_CHIP, drawn, mac_memories, server_models
from kvsite import i18n
from kvsite.charts.chart import show_chart
from kvsite.frame.page import setup, url_choice
from kvsite.inputs.choices import bound_choice
from kvsite.layout import row, text
from kvsite.sections import reported
from kvsite.sections import servers as sections

TOKENS = tuple(n for n in (64, 128, 256, 512, 1024, 2048, 4096) if n <= MAX_CHAPTER_TURN_TOKENS)
RECORDING = "measured-linux-cpu-mlx-lm-server-smollm2-135m"
LLAMA = sections.SERVERS[1]

f = setup("conversations")
f.intro()
rec = f.pick_source("server", default=RECORDING, where=drawn)
shown = sections.SERVERS[0]  # the server the recorded chart shows: users × turns starts with it
if rec is not None:
    names = sections.conversations(rec)
    above = (
        st.container()
    )  # the chart, above the conversation picker: a phone's first screen holds its plot
    name = None
    if len(names) > 1:  # llama-server's recording: one conversation per option set
        name = url_choice(
            st.selectbox,
            f.t("servers.conversation"),
            list(names),
            names[0],
            "conv",
            format_func=lambda n: i18n.data_text(f.lang, n),
        )
    first = sections.recorded(rec, f.lang, name)
    if "error" in first:
        st.error(first["error"])
    else:
        shown = first["server"]
        with above:
            show_chart(f, first["chart"], "servers_recorded", "kv-server-turns")
        m = row()
        for label, value in first["metrics"]:
            m.metric(label, value)
        st.caption(first["note"])


@st.fragment
def users_and_levers() -> None:
    """Users × turns for a model the reader picks through a server the reader picks, and that server's options
    as levers: a change reruns this (not the section's heading, drawn above it once); the users slider reruns its
    own part (users_part)."""
    servers = list(sections.SERVERS)
    server = url_choice(
        st.segmented_control,
        f.t("servers.server"),
        servers,
        shown,
        "server",
        required=True,
        wrap=True,
    )
    c = row()
    models = list(server_models())
    model = bound_choice(
        c.selectbox, f.t("common.model"), models, "model", index=models.index(DEFAULT_MODEL)
    )
    users_slot = c.container()  # the users slider, drawn by its own part
    turns = c.slider(
        f.t("servers.turns"), 1, MAX_CHAPTER_TURNS, 8, key="turns", bind="query-params"
    )
    c = row()
    message = bound_choice(
        c.select_slider, f.t("servers.message"), TOKENS, "msg", value=512, format_func="{:,}".format
    )
    reply = bound_choice(
        c.select_slider, f.t("servers.reply"), TOKENS, "reply", value=256, format_func="{:,}".format
    )
    rams = list(mac_memories())
    ram = bound_choice(
        c.selectbox,
        f.t("servers.ram"),
        rams,
        "ram",
        index=rams.index(sections.MAC_RAM_GB),
    )
    users_part(users_slot, server, model, turns, message, reply, ram)


@st.fragment
def users_part(users_slot, server: str, model: str, turns: int, message: int, reply: int, ram: int):
    """The users slider and everything it drives (chart, numbers, levers): a step reruns these alone."""
    users = users_slot.slider(
        f.t("servers.users"), 1, MAX_CHAPTER_USERS, 4, key="users", bind="query-params"
    )
    out = sections.users_turns(server, model, users, turns, message, reply, ram, f.lang)
    if "error" in out or "warning" in out:
        (st.error if "error" in out else st.warning)(out.get("error") or out["warning"])
        return
    if out["cut"]:
        st.caption(":material/info: " + out["cut"])
    settings = {
        f.t("servers.server"): server,
        f.t("common.model"): model,
        f.t("servers.users"): users,
        f.t("servers.turns"): turns,
        f.t("servers.message"): f"{message:,}",
        f.t("servers.reply"): f"{reply:,}",
    }
    show_chart(
        f,
        out["chart"],
        "servers_users",
        f"kv-server-{model}-{users}x{turns}",
        settings=settings,
        source=f.t("export.computed"),
    )
    m = row()
    llama = server == LLAMA
    if llama:
        m.metric(f.t("servers.m_pool"), f"{fmt_num(out['gpu'] / GIB)} GiB")
        m.metric(f.t("servers.m_host"), f"{fmt_num(out['host_peak'] / GIB)} GiB")
    else:
        m.metric(f.t("servers.m_resident"), f"{fmt_num(out['resident'] / GIB)} GiB")
        m.metric(f.t("servers.m_users_peak"), f"{fmt_num(out['peak'] / GIB)} GiB")
    m.metric(f.t("servers.m_limit", ram=ram), f"{fmt_num(out['limit'] / GIB)} GiB")
    note = "servers.users_note_llama" if llama else "servers.users_note"
    st.caption(
        f.t(
            note + ("_over" if out["over"] else ""),
            line=fmt_num(out["line"] / GIB),
            reprocessed=f"{out['reprocessed']:,}",
            prompt=f"{out['prompt']:,}",
            gpu=fmt_num(out["gpu"] / GIB),
            host=fmt_num(out["host_peak"] / GIB),
            cells=f"{out['cells']:,}",
        )
    )
    st.subheader(f.t("servers.levers_title"))
    st.markdown(out["levers_md"])
    st.caption(
        f.t("servers.llama_levers_note" if llama else "servers.levers_note", chip=LEVER_CHIP)
    )


st.header(f.t("servers.users_title"))
users_and_levers()

st.subheader(f.t("servers.trap_title"))
st.markdown(f.t("servers.trap_text"))
# what Mac users reported in public, quoted, with the ledger's figure beside where it computes the same quantity
# (kvsite.sections.reported): one click below, built only when opened
published = st.expander(
    f.t("servers.reported_title"), icon=":material/forum:", key="reported", on_change="rerun"
)
if published.open:
    with published:
        text(f.t("servers.reported_lead"), reported.reported_list(f.lang))
f.faq(("again", "second"))

f.chapter_end()
