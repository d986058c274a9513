"""The home page's sections: its key numbers and decode labels, from Article A's recording.

Example: home_decode(rec, key_numbers(rec))["a"] -> "1K" (the worked check's first context).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from kvcore.recordings import provenance as run_info
from kvcore.recordings.store import Recording
from kvcore.views import memory as views
from kvsite import i18n
from kvsite.frame.chapters import CHAPTERS

from .shared import cached

README = Path(__file__).resolve().parent.parent.parent / "README.md"
REPO_ENV = "KVCORE_REPO_URL"  # the repository's public https address, where the host states one
# a recording section -> the chapter that draws it (each chapter's picker section, and the sections a chapter reads
# beside it); a section no chapter draws is on the Recordings page
SECTION_CHAPTER = {
    **{c.section: c.slug for c in CHAPTERS if c.section},
    "prefill": "prefill_decode",
    "benchmark": "savings",
}


@cached
def key_numbers(rec: Recording | None) -> dict:
    """The home page's key numbers (kvcore.views.memory.key_numbers), once per recording."""
    return views.key_numbers(rec)


def _k(tokens: int) -> str:
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else f"{tokens:,}"


def home_decode(rec: Recording | None, numbers: dict) -> dict:
    """The home page's decode labels: first/last context of the worked check, the recording's chip (with its vendor,
    and without: chip_name) and model."""
    p = run_info.badge_fields(rec) if rec is not None else {"chip": "", "model": ""}
    vendor = rec.data.get("hardware", {}).get("vendor", "") if rec is not None else ""
    return {
        "a": _k(numbers["context_a"]),
        "b": _k(numbers["context_b"]),
        "chip": " ".join(filter(None, (vendor, p["chip"]))),
        "chip_name": p[
            "chip"
        ],  # where room is short: the metric's label (its help names the vendor)
        "model": p["model"].split("/")[-1],
    }


# The two articles the site reads (the readers' Article A, and Article B it quotes), by their recordings: the card
# on the Recordings page names each one's title, author and what the site takes from it.
ARTICLES = {
    "article_a": "published-article-a-m5-pro",
    "article_b": "published-article-b-t4-mechanism",
}


def link_text(url: str) -> str:
    """A source's link in a few words, the same in every language: a GitHub pull request or issue as
    owner/repo #N, a file as owner/repo: its name, anything else by its host.

    Example: link_text("https://github.com/ggml-org/llama.cpp/pull/12952") -> "ggml-org/llama.cpp #12952"."""
    m = re.match(r"https://github\.com/([^/]+/[^/]+)/(?:pull|issues)/(\d+)", url)
    if m:
        return f"{m[1]} #{m[2]}"
    m = re.match(r"https://github\.com/([^/]+/[^/]+)/blob/[^/]+/(?:.*/)?([^/#?]+)", url)
    if m:
        return f"{m[1]}: {m[2]}"
    m = re.match(r"https://arxiv\.org/abs/([\w.]+)", url)
    if m:
        return f"`arXiv:{m[1]}`"  # an identifier, not a number
    return re.sub(r"^https?://(www\.)?([^/]+).*", r"\2", url)


@cached
def sources(recs: list[Recording], lang: str) -> str:
    """Every published source with a public address, as links under the chapter that draws it (markdown)."""
    from kvcore.recordings.published import figures

    groups: dict[str, dict[str, str]] = {}
    for r in recs:
        url = run_info.badge_fields(r)["url"]
        if r.kind == "published" and url.startswith("https://"):
            for section in r.data.get("sections", {}):
                groups.setdefault(SECTION_CHAPTER.get(section, "recordings"), {})[url] = ""
    for row in figures()["kv_quality"]:
        groups.setdefault("savings", {})[row["url"]] = ""
    colon = i18n.translate(lang, "recordings.colon")
    return "\n".join(
        f"- **{i18n.translate(lang, 'nav.' + c.slug)}**{colon}"
        + " · ".join(f"[{link_text(u)}]({u})" for u in groups[c.slug])
        for c in CHAPTERS
        if c.slug in groups
    )


def repository() -> str | None:
    """The repository's public https address when the host states one (KVCORE_REPO_URL), else None."""
    url = os.environ.get(REPO_ENV, "").strip().rstrip("/")
    return url if re.fullmatch(r"https://[\w.-]+(/[\w.~-]+)+", url) else None


@cached
def readme_commands() -> tuple[str, ...]:
    """The commands under the README's "## The two commands" (its shell blocks), as the README writes them."""
    text = README.read_text(encoding="utf-8")
    part = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    return tuple(block.strip() for block in re.findall(r"```sh\n(.*?)```", part, flags=re.S))
