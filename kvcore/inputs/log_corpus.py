"""The corpus of real runtime logs (recordings/logs/): each log verbatim from a public thread or recorded on this
machine, beside a YAML sidecar that names its source (url, where), runtime, machine (chip, ram_gb, macos) and note.

Example: [c.stem for c in corpus()][0] -> "llamacpp-2023-metal-m1max-32gb-cloning"
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

CORPUS_DIR = Path(__file__).resolve().parents[2] / "recordings" / "logs"


@dataclass(frozen=True)
class CorpusLog:
    """One log of the corpus: its file's stem, its sidecar as written, and its text."""

    stem: str
    source: dict
    text: str


def corpus(folder: Path = CORPUS_DIR) -> list[CorpusLog]:
    """Every log of the corpus that has its sidecar, in name order."""
    logs = []
    for path in sorted(folder.glob("*.log")):
        sidecar = path.with_suffix(".yaml")
        if sidecar.exists():
            source = yaml.safe_load(sidecar.read_text(encoding="utf-8"))
            logs.append(CorpusLog(path.stem, source, path.read_text(encoding="utf-8")))
    return logs
