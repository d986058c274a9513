"""The home page's sections: its key numbers and decode labels, from Article A's recording.

Example: home_decode(rec, key_numbers(rec))["a"] -> "1K" (the worked check's first context).
"""

from __future__ import annotations

from kvcore.recordings import provenance as run_info
from kvcore.recordings.store import Recording
from kvcore.views import memory as views

from .sections import cached


@cached
def key_numbers(rec: Recording | None) -> dict:
    """The home page's key numbers (kvcore.views.memory.key_numbers), once per recording."""
    return views.key_numbers(rec)


def _k(tokens: int) -> str:
    return f"{tokens // 1024}K" if tokens % 1024 == 0 else f"{tokens:,}"


def home_decode(rec: Recording | None, numbers: dict) -> dict:
    """The home page's decode labels: first/last context of the worked check, the recording's chip and model."""
    p = run_info.badge_fields(rec) if rec is not None else {"chip": "", "model": ""}
    vendor = rec.data.get("hardware", {}).get("vendor", "") if rec is not None else ""
    return {
        "a": _k(numbers["context_a"]),
        "b": _k(numbers["context_b"]),
        "chip": " ".join(filter(None, (vendor, p["chip"]))),
        "model": p["model"].split("/")[-1],
    }


# The two articles the site reads (the readers' Article A, and Article B it quotes), by their recordings: the card
# on the Recordings page names each one's title, author and what the site takes from it.
ARTICLES = {
    "article_a": "published-article-a-m5-pro",
    "article_b": "published-article-b-t4-mechanism",
}
