"""Figures quoted from publications that are not recordings: kvcore/recordings/published.yaml.

Example: figures()["turbo3_speed"]["drop_pct_high"] -> 11.8 (Article B, M4 Max).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

TABLE = Path(__file__).parent / "published.yaml"


@lru_cache(maxsize=1)
def figures() -> dict:
    """The whole table, loaded once with yaml.safe_load."""
    return yaml.safe_load(TABLE.read_text(encoding="utf-8"))


def source(key: str) -> str:
    """The citation text for a source key, e.g. source("article_b")."""
    return figures()["sources"][key]
