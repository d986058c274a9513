"""The Many conversations chapter over both bundled server recordings, in both languages: llama-server's every
recorded conversation drawn by part (the slot pool on the GPU side, the prompt cache in host RAM, the server's
own cache state as the line), and users × turns through either server with that server's options as levers."""

from __future__ import annotations

import pytest
from app_helpers import charts, md_tables, page

from kvcore.recordings import store
from kvsite import i18n

PAGE = "pages/7_Many_conversations.py"
LLAMA = "measured-linux-cpu-llama-server-smollm2-135m"
MLX = "measured-linux-cpu-mlx-lm-server-smollm2-135m"
NAMES = list(
    dict.fromkeys(
        r["conversation"] for r in store.load(f"recordings/{LLAMA}.yaml").data["sections"]["server"]
    )
)


def _clean(at) -> None:
    assert not at.exception and not at.error and not at.warning


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_both_servers_recordings_are_offered_and_mlx_lm_servers_comes_first(lang):
    at = page(PAGE, lang)
    _clean(at)
    (source,) = [s for s in at.selectbox if s.value == MLX]
    assert set(source.options) == {source.format_func(MLX), source.format_func(LLAMA)}
    (picker,) = [
        s for s in at.selectbox if s.value == "one user, 8 turns"
    ]  # mlx_lm.server's replayable two
    assert picker.options == [
        i18n.data_text(lang, n) for n in ("one user, 8 turns", "one user, 8 turns, --kv-bits 8")
    ]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_mlx_lm_servers_kv_bits_conversation_is_drawn_with_its_whole_entries(lang):
    """The recording's --kv-bits conversation (the sequential path): each bar's parts, nothing beyond the server's
    count, which is the tick, and the note says why."""
    t = i18n.translator(lang, "servers.")
    at = page(PAGE, lang, conv="one user, 8 turns, --kv-bits 8")
    _clean(at)
    data = charts(at)[0]["data"]
    bars = data.dropna(subset=["part"]).drop_duplicates(["request", "part"])
    assert t("part_uncounted") not in set(bars[bars["mib"] > 0]["part"])
    counted = (
        bars[bars["part"].isin([t("part_active"), t("part_counted")])]
        .groupby("request")["mib"]
        .sum()
    )
    line = bars.groupby("request")["line_mib"].first()
    assert (abs(counted - line) < 1e-9).all() and len(line) == 8
    assert any(t("recorded_kv_bits", bits=8, start="64") in c.value for c in at.caption)


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("name", NAMES)
def test_each_llama_server_conversation_is_drawn_by_part_with_its_cache_state_line(lang, name):
    t = i18n.translator(lang, "servers.")
    at = page(PAGE, lang, src=LLAMA, conv=name)
    _clean(at)
    (picker,) = [s for s in at.selectbox if s.value == name]
    assert picker.options == [i18n.data_text(lang, n) for n in NAMES]
    first = charts(at)[0]
    parts = set(first["data"]["part"])
    assert t("part_slots") in parts  # the pool, on the GPU side
    if name != "one user, 8 turns":  # a single user never leaves its slot: nothing saved
        assert t("part_cache") in parts
    data = first["data"].drop_duplicates(["request", "part"])  # the bars (the ticks repeat a row)
    host = data[data["part"].isin([t("part_cache"), t("part_cache_copies")])]
    held = host.groupby("request")["mib"].sum()
    line = data.groupby("request")[
        "line_mib"
    ].first()  # the server's cache state: what it holds after
    assert (abs(line - held.reindex(line.index, fill_value=0)) < 1e-9).all()
    assert t("m_pool") in [m.label for m in at.metric]
    caption = next(c.value for c in at.caption if t("basis_ids") in c.value)
    options = store.load(f"recordings/{LLAMA}.yaml").data["sections"]["server"]
    assert next(r["options"] for r in options if r["conversation"] == name) in caption
    if lang == "ja":
        assert "Slot pool" not in str(first["data"]) and "host RAM" not in caption


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_users_and_turns_through_llama_server_show_its_options_as_levers(lang):
    t = i18n.translator(lang, "servers.")
    at = page(PAGE, lang, server="llama-server", users=4, turns=3)
    _clean(at)
    (table,) = md_tables(at)
    assert list(table.columns)[:3] == [t("llama_lever"), t("llama_gpu"), t("llama_host")]
    flags = list(table[t("llama_lever")])
    assert flags[0] == t("llama_default") and "`-np 4 -kvu`" in flags and "`--cache-ram 0`" in flags
    assert any(t("llama_levers_note", chip="")[:20] in c.value for c in at.caption)
    users = charts(at)[1]
    assert t("part_slots") in set(users["data"]["part"])


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_llama_server_recording_starts_users_and_turns_on_llama_server(lang):
    """The server the first chart shows is the one users × turns starts with; the reader may switch."""
    t = i18n.translator(lang, "servers.")
    at = page(PAGE, lang, src=LLAMA)
    _clean(at)
    (table,) = md_tables(at)
    assert t("llama_lever") in table.columns
    at = page(PAGE, lang, src=LLAMA, server="mlx_lm.server")
    _clean(at)
    (table,) = md_tables(at)
    assert t("lever") in table.columns


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_link_naming_no_server_says_so_and_shows_mlx_lm_server(lang):
    at = page(PAGE, lang, server="ollama")
    assert not at.exception and not at.error
    (warning,) = at.warning
    assert "ollama" in warning.value
    (table,) = md_tables(at)
    assert i18n.translate(lang, "servers.lever") in table.columns


@pytest.mark.parametrize("src", [MLX, LLAMA])
@pytest.mark.parametrize("lang", ["en", "ja"])
def test_each_part_keeps_its_colour_in_every_chart_of_the_chapter(lang, src):
    """The recorded chart and users × turns hold different parts; a part's colour is the part's, not its place
    among those a chart holds (the copy alive during a request was red in one chart and green in the next)."""
    server = {MLX: "mlx_lm.server", LLAMA: "llama-server"}[src]
    at = page(PAGE, lang, src=src, server=server)
    _clean(at)
    seen: dict[str, set[str]] = {}
    for chart in charts(at):
        scale = chart["spec"]["layer"][0]["encoding"]["color"]["scale"]
        for part, colour in zip(scale["domain"], scale["range"]):
            seen.setdefault(part, set()).add(colour)
    assert len(charts(at)) == 2 and all(len(c) == 1 for c in seen.values()), seen
    assert len({c for cs in seen.values() for c in cs}) == len(seen)  # and no two parts share one
