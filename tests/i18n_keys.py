"""What the site's language files lack, said as what to add where: a test of the texts fails with
"add nav.glossary to kvsite/i18n/ja.yaml", not with ('ja', 'nav.glossary')."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kvsite import i18n

ROOT = Path(__file__).resolve().parent.parent


def language_file(lang: str) -> str:
    """The file a language's texts live in: language_file("ja") -> "kvsite/i18n/ja.yaml"."""
    path = (i18n.FOLDER / f"{lang}.yaml").resolve()
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def missing_keys(keys: Iterable[str], langs: Iterable[str] = i18n.LANGS) -> str:
    """One line a key that a language's file lacks, naming the files to add it to ('' when none):
    missing_keys(["nav.glossary"]) -> "add nav.glossary to kvsite/i18n/ja.yaml"."""
    langs = tuple(langs)
    lines = []
    for key in sorted(set(keys)):
        files = [language_file(lang) for lang in langs if not i18n.has(lang, key)]
        if files:
            lines.append(f"add {key} to {' and '.join(files)}")
    return "\n".join(lines)
