"""How a page groups its elements, at the least cost per rerun: widgets or metrics in one horizontal block,
consecutive headings and paragraphs as one markdown element.
"""

from __future__ import annotations

import re
from pathlib import Path

import streamlit as st

from kvcore.limits import MAX_SHOWN

# The marks that make markdown inline, wherever they stand (CommonMark escapes each with a backslash): links,
# images and reference definitions ([ ]), autolinks and HTML (<), emphasis (* ~, and _ where it can open or close
# one: not inside a word, as in q_lora_rank), code (`), Streamlit's $math$ and :shortcodes: (a colon before a
# letter), entities (&), and the backslash itself. A period, hyphen, pipe or colon inside a line is text, and stays
# as it is (a file name reads as typed).
_MARKDOWN = re.compile(r"([\\`*\[\]<~$&])|:(?=[^\W\d_])|(?<![^\W_])_|_(?![^\W_])")
# What makes a block of a line that starts with it (a heading, a list, a quote, a table row)
_LINE_START = re.compile(r"^(\s*\d*)([#>+\-|=.)])")


# What GitHub-flavoured markdown links by itself, escaped or not (its autolink literals: http://, https://, www.,
# an e-mail address): a word joiner (U+2060, invisible) after the scheme or before the @ keeps it text
_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|www)(?=[:.])|(?<=\S)(@)(?=\S)")


def plain(value, limit: int = MAX_SHOWN) -> str:
    """Text from outside (an uploaded run's title or note, a link's value, an error's sentence) as markdown that
    shows it as written: cut to `limit` characters (with …), every mark that makes markdown escaped, line breaks
    made spaces, an address kept from becoming a link, so no image loads, no link forms and nothing is bold. The
    one way a page echoes what it was given; a link's value goes through kvcore.errors.quote first (a prefix).

    Example: plain("![x](https://a.b/c.png) **b**") -> "!\\[x\\](https\u2060\\://a.b/c.png) \\*\\*b\\*\\*"."""
    text = str(value)
    text = text if len(text) <= limit else text[:limit] + "…"
    text = _AUTOLINK.sub(lambda m: (m[1] or "") + "\u2060" + (m[2] or ""), text)
    text = _MARKDOWN.sub(lambda m: "\\" + m[0], text).replace("\r", " ").replace("\n", " ")
    return _LINE_START.sub(r"\1\\\2", text, count=1)


def row(**kwargs):
    """Widgets or metrics side by side: one horizontal block (st.columns sends a block per column, each a
    cost on every rerun); each item takes its share of the width, and the row wraps when it runs out."""
    return st.container(horizontal=True, **kwargs)


def lazy_expander(label: str, key: str, **kwargs):
    """An expander whose inside is drawn only while a reader has it open: the expander itself, or None while it
    is closed. Opening it reruns the fragment it sits in (or the page); while closed, a rerun sends one element
    for it instead of everything inside (elements, a chart's data), which every step of a slider above it pays."""
    box = st.expander(label, key=key, on_change="rerun", **kwargs)
    return box if box.open else None


def text(*blocks: str) -> None:
    """Consecutive headings ("## ...") and paragraphs as one markdown element: Streamlit's cost is per element
    (~0.1 ms a rerun), and adjacent markdown looks the same either way."""
    st.markdown("\n\n".join(b for b in blocks if b))


_CSS = (Path(__file__).with_name("site.css")).read_text(encoding="utf-8")


def style() -> None:
    """The site's layout rules (kvsite/site.css: tables that fit a phone's column), once per page run: a
    style-only st.html goes to Streamlit's event container and takes no room on the page."""
    st.html(f"<style>{_CSS}</style>")


def uploader_words(key: str, button: str, note: str, drop: str) -> None:
    """A file uploader's own English (its "Upload" button, its "2MB per file • YAML" line, the "Drag and drop a file
    here" shown while a file is dragged over it) replaced by `button`, `note` and `drop`: Streamlit 1.67 takes no text
    for them, so a style scoped to the widget's key (its st-key-<key> class) draws ours in their place."""

    def css(text: str) -> str:  # a CSS string: quotes and backslashes escaped, no line break
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'

    zone = f".st-key-{key} [data-testid='stFileUploaderDropzone']"
    st.html(
        "<style>"
        f"{zone} button [data-testid='stMarkdownContainer'] p,"
        f"{zone} [data-testid='stFileUploaderDropzoneInstructions'] span,"
        f"{zone} > div:not([data-testid]) span {{font-size: 0}}"
        f"{zone} button [data-testid='stMarkdownContainer'] p::after {{content: {css(button)}}}"
        f"{zone} [data-testid='stFileUploaderDropzoneInstructions'] span::after"
        f" {{content: {css(note)}}}"
        f"{zone} > div:not([data-testid]) span::after {{content: {css(drop)}}}"
        f"{zone} p::after, {zone} span::after {{font-size: 0.875rem}}"
        "</style>"
    )
