"""The hardware table (kvcore/hardware.yaml): chips, memory options, peak bandwidth, sources."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from .errors import KvError

TABLE = Path(__file__).parent / "hardware.yaml"


@dataclass(frozen=True)
class Chip:
    chip: str
    bandwidth_gbps: float  # vendor peak, GB/s (1e9 bytes per second)
    memory_gb: tuple[int, ...]
    unified: bool
    source: str


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load(TABLE.read_text(encoding="utf-8"))


def chips() -> list[Chip]:
    return list(_chips())


@lru_cache(maxsize=1)
def _chips() -> tuple[Chip, ...]:
    return tuple(Chip(c["chip"], float(c["bandwidth_gbps"]), tuple(c["memory_gb"]), c["unified"], c["source"]) for c in _table()["chips"])


def get_chip(name: str) -> Chip:
    for c in chips():
        if c.chip.lower() == name.lower():
            return c
    raise KvError(f"Unknown chip {name!r}; valid chips: {', '.join(c.chip for c in chips())}.")


def mac_gpu_share(ram_gb: float) -> tuple[float, str]:
    """macOS's default share of unified memory the GPU may wire, for this RAM size: (share, source)."""
    for rule in _table()["mac_gpu_working_set"]:
        if rule["up_to_ram_gb"] is None or ram_gb <= rule["up_to_ram_gb"]:
            return rule["share"], rule["source"]
    raise AssertionError("the last working-set rule has no upper bound")


def efficiency_range() -> tuple[float, float, str]:
    """Share of peak bandwidth decode reaches on Apple Silicon per published llama.cpp tables: (low, high, source)."""
    r = _table()["apple_silicon_efficiency"]
    return float(r["low"]), float(r["high"]), r["source"]


def gpu_memory_limit_gb(ram_gb: float, unified: bool = True) -> tuple[float, str]:
    """Memory the GPU may use by default: macOS's working-set share of RAM on a Mac, all of it elsewhere.

    Returns (GB, the reason with its source).
    """
    if not unified:
        return float(ram_gb), "dedicated GPU memory"
    share, source = mac_gpu_share(ram_gb)
    return ram_gb * share, f"macOS default GPU limit ≈ {share:.0%} of RAM ({source})"
