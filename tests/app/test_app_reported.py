"""The Many conversations chapter's "What Mac users reported": closed, the page builds nothing for it; opened, it
shows every reported row with its address, the ledger's figure computed beside the reported one, in both
languages (Japanese everywhere: each quote translated and said to be, the thread one click away; only the
names of models, runtimes and servers stay as they are written)."""

from __future__ import annotations

import pytest
from app_helpers import english_runs, page

from kvcore.servers import reported
from kvcore.units import fmt_num
from kvsite import i18n

PAGE = "pages/7_Many_conversations.py"


def _section(at, lang: str) -> str:
    (table,) = [
        m.value
        for m in at.markdown
        if m.value.startswith(i18n.translate(lang, "servers.reported_lead"))
    ]
    return table


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_closed_the_section_is_only_its_title(lang):
    at = page(PAGE, lang)
    assert not at.exception and not at.error
    title = i18n.translate(lang, "servers.reported_title")
    assert title in [e.label for e in at.expander]
    assert not [m for m in at.markdown if "github.com/ml-explore/mlx-lm/issues/1390" in m.value]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_opened_it_shows_every_report_with_its_address_and_the_ledgers_figures(lang):
    t = i18n.translator(lang, "servers.")
    at = page(PAGE, lang, state={"reported": True})
    assert not at.exception and not at.error
    table = _section(at, lang)
    rows = [line for line in table.splitlines() if line.startswith("- [")]
    assert len(rows) == len(reported.reports())
    for r in reported.reports():
        assert f"]({r['url']})" in table, r["id"]
    assert "mlx-lm #1390" in rows[0] and table.index(t("reported_group_mac")) < table.index(
        t("reported_group_docs")
    )  # Mac reports first
    state = reported.compared("llama-25740")
    assert f"{state['ledger_bytes'] / 1024:,.0f} KiB" in table  # computed by the ledger, not typed
    assert (
        t("reported_agrees", pct=fmt_num(reported.RSS_TOLERANCE * 100)) in table
        and t("reported_same") in table
    )
    slots = reported.compared("llama-23652")["cases"]
    for c in slots:
        said = t(
            "reported_slots_case",
            argv=c["argv"],
            slots=c["slots"],
            ledger=f"{c['ledger']:,}",
            reported=f"{c['reported']:,}",
        )
        assert said in table, said


def test_the_japanese_section_speaks_japanese_its_quotes_translated():
    at = page(PAGE, "ja", state={"reported": True})
    table = _section(at, "ja")
    names = set()
    for r in reported.reports():
        names |= {r["model"], r["runtime"], r["server"]}
        assert r["figure"] not in table  # the translation, not the English
    assert not english_runs(table, names)
    assert table.count("（原文は英語。ここでは訳しています）") == len(reported.reports())
    assert not i18n.stray_spaces(table)
    assert i18n.translate("ja", "servers.reported_group_mac") in table
