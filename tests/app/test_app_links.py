"""A shared link whose value a page does not offer (?model=llama-3.1-9b) is said in one sentence, in the page's
language: which value was not understood, and what the page shows instead. Streamlit's own binding drops such a
value without a word and shows the default, so the reader would believe the link."""

from __future__ import annotations

import re

import pytest
from app_helpers import PAGES, page

from kvsite import i18n

JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
UNKNOWN = "no-such-choice-9"
CHOICES = ("selectbox", "select_slider", "multiselect", "radio", "button_group")
# A state in which more URL-bound choices appear (llama.cpp's settings)
STATES = {"pages/8_Calculator.py": [{}, {"rt": "llama.cpp"}]}


def warnings(at) -> list[str]:
    """The page's warnings as a reader sees them (markdown's escapes taken out)."""
    return [str(w.value).replace("\\", "") for w in at.warning]


def choice_keys(at) -> set[str]:
    """The URL keys of the page's choice widgets: Streamlit's binding (query_param_key) or kvsite.frame.page.url_choice
    (its widget key is <key>__w); the language control is checked apart."""
    keys = set()
    for kind in CHOICES:
        for el in at.get(kind):
            bound = getattr(el.proto, "query_param_key", "")
            if bound:
                keys.add(bound)
            elif el.key and el.key.endswith("__w") and el.key != "lang__w":
                keys.add(el.key[: -len("__w")])
    return keys


@pytest.mark.parametrize("path", PAGES)
def test_every_url_choice_says_a_value_it_does_not_offer(rec_dir, path):
    failures, runs = [], 0
    for base in STATES.get(path, [{}]):
        plain = page(path, "en", **base)
        assert not plain.exception and not plain.warning, [w.value for w in plain.warning]
        for i, key in enumerate(sorted(choice_keys(plain) - set(base))):
            lang = ("ja", "en")[i % 2]
            at = page(path, lang, **{**base, key: UNKNOWN})
            runs += 1
            said = [w for w in warnings(at) if UNKNOWN in w]
            if at.exception or len(said) != 1:
                failures.append(f"?{key}= {base} ({lang}): {warnings(at)}")
            elif (JAPANESE.search(said[0].replace(UNKNOWN, "")) is not None) != (lang == "ja"):
                failures.append(f"?{key}= {base} ({lang}) not in the page's language: {said[0]}")
    assert runs, f"no URL-bound choice found on {path}"
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_model_the_site_does_not_have_names_the_link_and_the_model_shown(rec_dir, lang):
    at = page("pages/8_Calculator.py", lang, model="llama-3.1-9b")
    assert not at.exception
    assert at.selectbox(key="model").value == "llama-3.1-8b"
    [warning] = warnings(at)
    assert "'model'" in warning and "'llama-3.1-9b'" in warning and "llama-3.1-8b" in warning
    assert (JAPANESE.search(warning) is not None) == (lang == "ja")
    at.selectbox(key="model").select("qwen3-8b").run()  # the reader moves on: the sentence goes
    assert not at.warning


def test_an_unknown_language_in_the_link_is_said_in_the_language_shown(rec_dir):
    at = page("pages/3_Linear_growth.py", "fr")  # AppTest's browser asks for no language: English
    assert not at.exception
    [warning] = warnings(at)
    assert "'lang'" in warning and "'fr'" in warning and "English" in warning
    assert warning.startswith(i18n.translate("en", "site.url_choice").split("{")[0])
