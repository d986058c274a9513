"""The hardware table (kvcore/timing/hardware.yaml): chips, memory options, peak bandwidth, sources."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from kvcore.errors import KvError, quote
from kvcore.timing.working_set import (
    DEFAULT_MACOS,
    macos_name,
    source_words,
    working_set,
)
from kvcore.units import GIB

TABLE = Path(__file__).parent / "hardware.yaml"


@dataclass(frozen=True)
class Chip:
    chip: str
    bandwidth_gbps: float  # vendor peak, GB/s (1e9 bytes per second)
    memory_gb: tuple[int, ...]
    unified: bool
    source: str
    fp16_tflops: float | None = None  # peak GPU FP16 compute, TFLOPS (None: no public figure found)
    compute_source: str = ""
    dies: int = 1  # 2 for an Ultra (two Max dies joined by UltraFusion)

    @property
    def peak_flops(self) -> float | None:
        """Peak FP16 FLOP/s, or None when the table has no compute figure for this chip."""
        return self.fp16_tflops * 1e12 if self.fp16_tflops else None

    @property
    def ridge_flops_per_byte(self) -> float | None:
        """The roofline's ridge point: peak FLOP/s over peak bytes/s. Work with more FLOPs per byte read is
        compute-bound on this chip, less is memory-bound. Example: M2 Ultra 27.2e12 / 800e9 = 34 FLOPs/byte."""
        return self.peak_flops / (self.bandwidth_gbps * 1e9) if self.peak_flops else None

    def as_dict(self) -> dict:
        """The row as `chips --json` prints it."""
        return {
            "chip": self.chip,
            "bandwidth_gbps": self.bandwidth_gbps,
            "bandwidth_source": self.source,
            "fp16_tflops": self.fp16_tflops,
            "compute_source": self.compute_source or None,
            "ridge_flops_per_byte": self.ridge_flops_per_byte,
            "memory_gb": list(self.memory_gb),
            "unified": self.unified,
            "dies": self.dies,
        }


@lru_cache(maxsize=1)
def _table() -> dict:
    return yaml.safe_load(TABLE.read_text(encoding="utf-8"))


def chips() -> list[Chip]:
    return list(_chips())


@lru_cache(maxsize=1)
def _chips() -> tuple[Chip, ...]:
    return tuple(
        Chip(
            c["chip"],
            float(c["bandwidth_gbps"]),
            tuple(c["memory_gb"]),
            c["unified"],
            c["source"],
            float(c["fp16_tflops"]) if c.get("fp16_tflops") else None,
            c.get("compute_source", ""),
            int(c.get("dies", 1)),
        )
        for c in _table()["chips"]
    )


def find_chip(name: str) -> Chip | None:
    """The table's chip called `name` (any case), or None when the table has no such row (a measured machine's
    own chip name, a CPU, is often not in it): a lookup that says so rather than an error to catch."""
    return next((c for c in chips() if c.chip.lower() == name.lower()), None)


def variants(name: str) -> list[str]:
    """The table's chips of which `name` is the family, its variant not stated: variants("M4 Max") ->
    ["M4 Max (32-core GPU)", "M4 Max (40-core GPU)"] (no peak bandwidth can be chosen for it)."""
    return [c.chip for c in chips() if c.chip.lower().startswith(name.lower() + " (")]


def get_chip(name: str) -> Chip:
    for c in chips():
        if c.chip.lower() == name.lower():
            return c
    raise KvError(f"Unknown chip {quote(name)}; valid chips: {', '.join(c.chip for c in chips())}.")


def slowest_memory() -> tuple[float, str]:
    """The slowest memory bandwidth a computer has, GB/s, and its source: the floor a decode fit is held to when the
    chip is not in the table (a fit below it cannot be explained by memory reads)."""
    r = _table()["slowest_memory"]
    return float(r["gbps"]), r["source"]


def efficiency_range() -> tuple[float, float, str]:
    """Share of peak bandwidth decode reaches on Apple Silicon per published llama.cpp tables: (low, high, source)."""
    r = _table()["apple_silicon_efficiency"]
    return float(r["low"]), float(r["high"]), r["source"]


def gpu_memory_limit_gb(
    ram_gb: float, unified: bool = True, macos: str = DEFAULT_MACOS
) -> tuple[float, str]:
    """Memory the GPU may use by default: macOS's working set for that RAM and version on a Mac
    (kvcore.timing.working_set), all of it elsewhere.

    Returns (GiB, the reason with its source).
    """
    if not unified:
        return float(ram_gb), "dedicated GPU memory"
    ws = working_set(ram_gb, macos)
    return ws.bytes / GIB, f"{macos_name(macos)}'s default GPU working set: {source_words(ws)}"
