"""The log reader on the page (kvsite.sections.log): a pasted log read back line by line in the page's language,
hostile pastes refused in one sentence, and the corpus shown on the Recordings page as "logs from real Macs"."""

from __future__ import annotations

import re

import pytest
from app_helpers import ROOT, page, texts
from streamlit.testing.v1 import AppTest

from kvcore.limits import MAX_LOG_LINES

JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
METAL_2026 = ROOT / "recordings" / "logs" / "llamacpp-metal-m4-qwen2.5-0.5b-2026.log"
# the section alone, as the Calculator calls it (one click below its verdict): a frame of the page's language
SCRIPT = """
import streamlit as st
from kvsite import i18n
from kvsite.sections.log import log_reader

class Frame:
    lang = st.query_params.get("lang", "en")
    t = staticmethod(i18n.translator(lang))

log_reader(Frame)
"""


def reader(lang: str) -> AppTest:
    at = AppTest.from_string(SCRIPT, default_timeout=60)
    at.query_params["lang"] = lang
    return at.run()


def paste(at: AppTest, text: str) -> AppTest:
    at.text_area(key="log_paste").input(text)
    return at.run()


@pytest.mark.parametrize(
    "lang,yes,words",
    [("en", "yes", "within this Mac's working-set limit"), ("ja", "はい", "収まっています")],
)
def test_a_pasted_metal_log_is_read_line_by_line_in_the_pages_language(lang, yes, words):
    at = paste(reader(lang), METAL_2026.read_text(encoding="utf-8"))
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    kv = table[table.iloc[:, 1] == "kv_cache"].iloc[0]
    assert kv.iloc[2] == "6.00 MiB" and kv.iloc[3] == "6.00 MiB" and kv.iloc[4] == yes
    compute = table[table.iloc[:, 0] == 521].iloc[0]  # MTL0's compute buffer, by the Metal plan
    assert compute.iloc[3] == "300.25 MiB" and compute.iloc[4] == yes
    assert all(bool(JAPANESE.search(why)) == (lang == "ja") for why in table.iloc[:, 5])
    assert words in texts(at)
    assert len(at.expander) == 1  # the lines it does not know, listed one click below


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize(
    "hostile,words",
    [
        ("print_info: n_layer = 30\n\x00\x01\x02", {"en": "binary", "ja": "バイナリ"}),
        (
            "a\n" * (MAX_LOG_LINES + 1),
            {"en": f"at most {MAX_LOG_LINES:,}", "ja": f"{MAX_LOG_LINES:,} 行まで"},
        ),
        ("x" * 20_000, {"en": "characters", "ja": "文字"}),
    ],
)
def test_a_hostile_paste_gets_one_sentence_in_the_pages_language(lang, hostile, words):
    at = paste(reader(lang), hostile)
    assert not at.exception
    assert [e.value.count("\n") for e in at.error] == [0]
    assert words[lang] in at.error[0].value and not at.dataframe


@pytest.mark.parametrize("lang,title", [("en", "Logs from real Macs"), ("ja", "実際の Mac のログ")])
def test_the_recordings_page_shows_the_corpus_each_log_with_its_source_and_table(lang, title):
    at = page("pages/9_Recordings.py", lang)
    assert not at.exception
    shown = texts(at)
    assert title in shown
    logs = sorted(p.stem for p in (ROOT / "recordings" / "logs").glob("*.log"))
    pick = at.selectbox(key="log_pick")
    assert sorted(pick.options) == logs  # every log, one at a time
    gollek = next(s for s in logs if "gollek" in s or "qwen2.5-0.5b" in s.lower())
    pick.set_value(gollek).run()
    shown = texts(at)
    assert "https://github.com/bhangun/gollek/blob/60a70cf" in shown  # the public log's address
    assert ("Machine: Apple M4" if lang == "en" else "マシン：Apple M4") in shown
    assert at.dataframe  # the reader's table


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_calculator_reads_a_pasted_log_and_refuses_a_binary_one(lang):
    """Issue 35: the Calculator is where a reader pastes a log; its sizes re-derived there as in the section alone,
    and a binary paste is one sentence on the Calculator too."""
    at = page("pages/8_Calculator.py", lang)
    at.text_area(key="log_paste").input(METAL_2026.read_text(encoding="utf-8"))
    at.run()
    assert not at.exception
    table = next(d.value for d in at.dataframe if "kv_cache" in set(d.value.iloc[:, 1].astype(str)))
    assert table[table.iloc[:, 1] == "kv_cache"].iloc[0].iloc[3] == "6.00 MiB"
    at.text_area(key="log_paste").input("print_info: n_layer = 30\n\x00\x01")
    at.run()
    assert not at.exception and any(
        ("binary" if lang == "en" else "バイナリ") in e.value for e in at.error
    )
