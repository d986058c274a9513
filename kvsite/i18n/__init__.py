"""Reader-facing text, one YAML file per language with the same keys: t("trap.title", n=3).

A language is one file, i18n/<code>.yaml, and one entry in LANGUAGES. Its file holds every key of the English
file with the same {placeholders} (and errors.<code> sentences of its own, optional: English says an error at its
raise site); a file that does not is refused, naming the file and the keys, when it is read (check_languages reads
every file present).
"""

from __future__ import annotations

import re
import string
from functools import lru_cache
from pathlib import Path

import yaml

from kvcore.errors import CODES, KvError, Quoted

FOLDER = Path(__file__).parent
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


def _read(folder: Path, lang: str) -> dict[str, str]:
    return _flatten(yaml.safe_load((folder / f"{lang}.yaml").read_text(encoding="utf-8")) or {})


@lru_cache(maxsize=None)
def texts(lang: str) -> dict[str, str]:
    """Every key of one language file, flattened: {'home.title': '...'}; a file whose keys or placeholders are
    not the English file's is refused (KvError naming the file and the keys)."""
    found = _read(FOLDER, lang)
    if lang != DEFAULT:
        check_language(lang, found, _read(FOLDER, DEFAULT))
    return found


def fields(text: str) -> set[str]:
    """The values a text names: fields("{n:,} tokens of {model}") -> {"n", "model"} (a text str.format cannot
    read names "{" so that it differs from any other)."""
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError:
        return {"{"}
    return {name.split(".")[0].split("[")[0] for _, name, _, _ in parsed if name is not None}


def _named(keys) -> str:
    keys = sorted(keys)
    return ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")


def check_language(lang: str, found: dict[str, str], english: dict[str, str]) -> None:
    """Refuse a language whose file lacks a key of the English file, has one it does not (errors.<code> aside:
    a language may say an engine error in its own words), or names other {placeholders} in a text."""
    file = f"{lang}.yaml"
    if missing := set(english) - set(found):
        raise KvError(
            f"The language file {file} lacks {len(missing)} key(s) of en.yaml: {_named(missing)}; "
            "every key is in every language file."
        )
    if extra := {k for k in found if k not in english and not k.startswith("errors.")}:
        raise KvError(
            f"The language file {file} has {len(extra)} key(s) en.yaml does not: {_named(extra)}; "
            "add them to every language file or remove them."
        )
    if stray := {k for k in found if k.startswith("errors.") and k[7:] not in CODES}:
        raise KvError(
            f"The language file {file} words {len(stray)} error(s) kvcore does not raise: {_named(stray)}; "
            "an errors.<code> key is a code of kvcore.errors.CODES."
        )
    if differ := {k for k in english if fields(str(found[k])) != fields(english[k])}:
        raise KvError(
            f"The language file {file} fills other {{placeholders}} than en.yaml in {_named(differ)}; "
            "a text names the same values in every language."
        )


def language_files() -> tuple[str, ...]:
    """The languages with a file in i18n/ (data.<code>.yaml files render data, not the site's keys)."""
    return tuple(sorted(p.stem for p in FOLDER.glob("*.yaml") if not p.stem.startswith("data.")))


def check_languages() -> None:
    """Every language file present and every language the switch lists: one file each, all keys in every one
    (texts refuses a file that lacks one). A KvError in one sentence names the first that is not."""
    files = language_files()
    if unlisted := [code for code in files if code not in LANGUAGES]:
        raise KvError(
            f"The language file {unlisted[0]}.yaml is not in kvsite.i18n.LANGUAGES; list it there with its "
            "own name for the language switch."
        )
    if no_file := [code for code in LANGUAGES if code not in files]:
        raise KvError(
            f"The language {no_file[0]!r} in kvsite.i18n.LANGUAGES has no file {no_file[0]}.yaml."
        )
    for code in files:
        check_language(code, _read(FOLDER, code), _read(FOLDER, DEFAULT))


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


def error_markdown(lang: str, error: Exception) -> str:
    """error_text(lang, error) as markdown a page shows as written (st.error, st.warning): every value the error
    quotes from outside (its params: what a link, an upload or a pasted text put in it) escaped by
    kvsite.layout.plain, so none becomes a link, an image or emphasis; the site's own words as they are. An error
    without a code has no params to find its values by, and is escaped whole.

    Example: error_markdown("en", KvError("'[x](https://e.x)' is not ...", "updates_bad", text=quote(...)))
    -> "'\\[x\\]\\(https\u2060\\:...' is not ..." (shown as typed, no link)."""
    from kvsite.layout import plain

    code, params = getattr(error, "code", None), getattr(error, "params", {})
    if code is None:
        return plain(str(error))
    if lang == "en" or not has(lang, f"errors.{code}"):
        values = sorted({v for v in params.values() if isinstance(v, str) and v}, key=len)
        if not values:
            return str(error)
        found = re.compile("|".join(re.escape(v) for v in reversed(values)))  # the longest first
        return found.sub(lambda m: plain(m[0]), str(error))
    escaped = {k: _Escaped(v) if isinstance(v, str) else v for k, v in params.items()}
    return translate(lang, f"errors.{code}", **escaped)


class _Escaped(str):
    """A value an error quotes, in a translated sentence: escaped as {value} and as {value!r} alike (a Quoted's
    repr is itself, a plain str's its repr)."""

    def __new__(cls, value: str):
        from kvsite.layout import plain

        self = super().__new__(cls, plain(value))
        self.quoted = plain(value if isinstance(value, Quoted) else repr(value))
        return self

    def __repr__(self) -> str:
        return self.quoted


def has(lang: str, key: str) -> bool:
    return key in texts(lang)


def from_locale(locale: str | None, accept_language: str | None = None) -> str:
    """'ja-JP' -> 'ja'; a language the site does not have -> 'en'. Falls back to the Accept-Language header."""
    for value in (locale, accept_language):
        if value:
            code = value.strip().lower()[:2]
            return code if code in LANGUAGES else DEFAULT
    return DEFAULT


def browser_language() -> str:
    """'ja' or 'en' from the browser's locale, else its Accept-Language header."""
    import streamlit as st  # the site's reader of the browser; the rest of i18n needs no Streamlit

    ctx = st.context
    locale = getattr(ctx, "locale", None)
    return (
        from_locale(locale)
        if locale
        else from_locale(None, ctx.headers.get("Accept-Language") if ctx.headers else None)
    )
