"""Reader-facing text, one YAML file per language with the same keys: t("trap.title", n=3)."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import yaml

FOLDER = Path(__file__).parent / "i18n"
LANGUAGES = {
    "ja": "日本語",
    "en": "English",
}  # code -> its own name on the language switch; texts in i18n/<code>.yaml
LANGS = tuple(LANGUAGES)
DEFAULT = "en"


def _flatten(tree: dict, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = str(value)
    return out


@lru_cache(maxsize=None)
def texts(lang: str) -> dict[str, str]:
    """Every key of one language file, flattened: {'home.title': '...'}."""
    return _flatten(yaml.safe_load((FOLDER / f"{lang}.yaml").read_text(encoding="utf-8")))


@lru_cache(maxsize=None)
def data_texts(lang: str) -> dict[str, str]:
    """Renderings of the data files' own English texts in `lang` (i18n/data.<lang>.yaml), keyed by the English."""
    path = FOLDER / f"data.{lang}.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {} if path.exists() else {}


def data_text(lang: str, text: str) -> str:
    """A data file's text (a citation, a note, a method word, a hardware source) in `lang` where it has a rendering,
    else as written. data_text("ja", "vendor spec") -> 「メーカーの仕様」; data_text("en", x) -> x."""
    return data_texts(lang).get(text, text) if lang != DEFAULT and isinstance(text, str) else text


def translate(lang: str, key: str, /, **values) -> str:
    text = texts(lang).get(key)
    if text is None:  # a missing key shows itself rather than breaking the page (tests catch it)
        return f"⟨{key}⟩"
    return text.format(**values) if values else text


def join(lang: str, *sentences: str) -> str:
    """Sentences of one paragraph, joined as the language writes them: Japanese runs them on without a space,
    English puts one between. join("ja", "値です。", "記事 A…") -> "値です。記事 A…"."""
    return ("" if lang == "ja" else " ").join(s for s in sentences if s)


# Japanese characters: hiragana, katakana (with ー), CJK ideographs, CJK and full-width punctuation.
JAPANESE_CHARS = "\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u4e00-\u9fff\uff00-\uffef"
STRAY_SPACE = re.compile(rf"[{JAPANESE_CHARS}][ \t]+[{JAPANESE_CHARS}]|[、。][ \t]+\S")


def stray_spaces(markdown: str) -> list[str]:
    """Spaces a Japanese reader sees where Japanese writes none: between two Japanese characters, or after 、。.
    A paragraph's line breaks count as the spaces a browser makes of them; blank lines, list items, table
    rows and headings stay apart; bold markers are dropped. stray_spaces("使い、\\n補間") -> ["、 補"]."""
    blocks = re.split(r"\n\s*\n|\n(?=\s*[-|#])", markdown.replace("**", ""))
    return [
        m.group(0)
        for b in blocks
        for m in STRAY_SPACE.finditer(re.sub(r"\s*\n\s*", " ", b.strip()))
    ]


def translator(lang: str, prefix: str = ""):
    """t(key, **values) for one language, keys under `prefix`: the one way code says texts.

    Example: t = translator("ja", "decode."); t("title") -> 「decode が遅くなる理由」.
    """
    return lambda key, /, **values: translate(lang, f"{prefix}{key}", **values)


def error_text(lang: str, error: Exception) -> str:
    """An engine error in `lang`: a coded KvError through errors.<code> (its English sentence lives at the
    raise site, so English and uncoded errors are str(error))."""
    code = getattr(error, "code", None)
    if lang == "en" or code is None or not has(lang, f"errors.{code}"):
        return str(error)
    return translate(lang, f"errors.{code}", **error.params)


def has(lang: str, key: str) -> bool:
    return key in texts(lang)


def from_locale(locale: str | None, accept_language: str | None = None) -> str:
    """'ja-JP' -> 'ja'; a language the site does not have -> 'en'. Falls back to the Accept-Language header."""
    for value in (locale, accept_language):
        if value:
            code = value.strip().lower()[:2]
            return code if code in LANGUAGES else DEFAULT
    return DEFAULT
