"""What a reader reads on home and around Streamlit's own widgets: links to the sources and to the project's
documentation and install steps, numbers with their units, and no English of Streamlit's on a Japanese page."""

from __future__ import annotations

import re

import pytest
from app_helpers import page, texts

from kvsite import i18n
from kvsite.sections import home as home_sections


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_home_links_the_sources_each_chapter_quotes(rec_dir, lang):
    at = page(None, lang)
    assert not at.exception
    links = re.findall(r"\]\((https://[^)]+)\)", texts(at))
    assert "https://github.com/ggml-org/llama.cpp/pull/12952" in links  # a decode run's source
    assert "https://github.com/ml-explore/mlx-lm/pull/1555" in links  # a quality figure's source
    assert i18n.translate(lang, "nav.decode_slowdown") in texts(at)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_without_a_repository_address_home_shows_the_readmes_two_commands(
    rec_dir, lang, monkeypatch
):
    monkeypatch.delenv(home_sections.REPO_ENV, raising=False)
    at = page(None, lang)
    shown = [c.value for c in at.code]
    readme = home_sections.README.read_text(encoding="utf-8")
    assert "bash scripts/test.sh" in shown
    assert any(c.startswith("python3 -m venv .venv") and c in readme for c in shown)


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_with_a_repository_address_home_links_its_readme_and_docs(rec_dir, lang, monkeypatch):
    monkeypatch.setenv(home_sections.REPO_ENV, "https://github.com/example/kv-cache-site/")
    at = page(None, lang)
    words = texts(at)
    assert "(https://github.com/example/kv-cache-site#the-two-commands)" in words
    assert "(https://github.com/example/kv-cache-site/tree/HEAD/docs)" in words
    assert not [c.value for c in at.code if "scripts/test.sh" in c.value]
    monkeypatch.setenv(
        home_sections.REPO_ENV, "javascript:alert(1)"
    )  # not an https address: not a link
    assert "javascript" not in texts(page(None, lang))


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_homes_decode_speed_carries_its_unit(rec_dir, lang):
    at = page(None, lang)
    [speed] = [m.value for m in at.metric if "→" in m.value]
    assert re.fullmatch(r"[\d,.]+ → [\d,.]+ tok/s", speed), speed


@pytest.mark.parametrize(
    ("path", "key", "params"),
    [
        ("pages/9_Recordings.py", "rec_upload", {}),
        ("pages/8_Calculator.py", "upload", {"msrc": "config"}),
    ],
)
def test_a_japanese_page_says_the_uploaders_words_in_japanese(rec_dir, path, key, params):
    """Streamlit 1.67 writes "Upload", "Drag and drop a file here" and "2MB per file" itself, in English: on a Japanese
    page a style scoped to the uploader draws the site's words in their place."""

    def styles(at) -> str:
        return "\n".join(
            el.proto.body for el in at.get("html") if f".st-key-{key} " in el.proto.body
        )

    at = page(path, "ja", **params)
    assert not at.exception
    css = styles(at)
    for word in ("upload_button", "upload_drop"):
        assert f'content: "{i18n.translate("ja", "common." + word)}"' in css
    assert "stFileUploaderDropzoneInstructions" in css and "font-size: 0" in css
    assert not styles(page(path, "en", **params))  # English: Streamlit's own words
