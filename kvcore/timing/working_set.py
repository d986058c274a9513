"""The GPU working-set limit of a Mac: what macOS lets Metal hold (`recommendedMaxWorkingSetSize`), by RAM and
macOS version, from the lines real Macs printed (kvcore/timing/working_set.yaml, one public thread per row).

A RAM size and macOS with a row is measured. macOS 26 where no macOS 26 row exists takes macOS 15's figure (the
lower one: macOS 26 reports more, 128 GB 107.52 GiB against the rule's 96; a 16 GB M3 11.84 against 10.67, its
macOS not stated), said as such. A RAM size
no row measures takes the rule the macOS 15 rows follow (two thirds up to 32 GB, three quarters above), said as
an estimate. `sudo sysctl iogpu.wired_limit_mb=N` overrides all of it (kvcore.capacity.memory_fit.gpu_limit).

Example: working_set(32).bytes / 2**30 -> 21.33 (measured, ollama #434); working_set(128, "26") -> 107.52 GiB;
working_set(48).how -> "rule".
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from kvcore.errors import KvError, quote
from kvcore.numbers import is_digits, whole_number
from kvcore.units import GIB, MIB

TABLE = Path(__file__).parent / "working_set.yaml"
MACOS = ("15", "26")  # "15": macOS 15 or earlier; "26": macOS 26
DEFAULT_MACOS = (
    "15"  # the version most rows were printed on: every RAM size but 128 GB has its figure
)
UNITS = {
    "MiB": MIB,
    "GiB": GIB,
    "MB": 1_000_000,
}  # what the printed number means (ggml's 2023 "MB" were MiB)


@dataclass(frozen=True)
class Report:
    """One Mac's printed working set: the RAM, the macOS (None: not stated), the line verbatim and its source."""

    ram_gb: int
    macos: str | None
    value: float
    unit: str
    line: str
    machine: str
    date: datetime.date | None
    url: str
    note: str

    @property
    def bytes(self) -> int:
        return round(self.value * UNITS[self.unit])


@dataclass(frozen=True)
class WorkingSet:
    """The limit for a RAM size on a macOS: its bytes and how it is known.

    how: "measured" (a report for this RAM and macOS), "older_macos" (macOS 26 asked, only macOS 15 measured:
    its report), "rule" (no report for this RAM: the macOS 15 rows' share, an estimate)."""

    bytes: int
    ram_gb: float
    macos: str
    how: str
    report: Report | None = None
    share: float | None = None  # the rule's share of RAM (how == "rule")


@lru_cache(maxsize=1)
def reports() -> tuple[Report, ...]:
    """Every bundled report, in the table's order."""
    data = yaml.safe_load(TABLE.read_text(encoding="utf-8"))
    return tuple(Report(**r) for r in data["reports"])


@lru_cache(maxsize=1)
def _rule() -> tuple[tuple[float | None, float], ...]:
    data = yaml.safe_load(TABLE.read_text(encoding="utf-8"))
    return tuple((r["up_to_ram_gb"], r["share"]) for r in data["rule"])


def rule_share(ram_gb: float) -> float:
    """The share of RAM the macOS 15 rows follow: 2/3 up to 32 GB, 3/4 above (an estimate where unmeasured)."""
    return next(share for up_to, share in _rule() if up_to is None or ram_gb <= up_to)


def check_macos(macos: str) -> str:
    """The macOS version as the table names it: "15" for 15 or earlier (e.g. "14", "13.6"), "26" for 26 (e.g.
    "26.3"); anything else (macOS went from 15 to 26; not a version) a KvError naming it."""
    text = str(macos).strip()
    major, _, minor = text.partition(".")
    if len(text) <= 8 and is_digits(major) and (not minor or is_digits(minor.replace(".", ""))):
        number = whole_number(major, "macOS")
        if 10 <= number <= 15:
            return "15"
        if number == 26:
            return "26"
    raise KvError(
        f"The working-set table knows macOS 15 or earlier and macOS 26, not {quote(text)}.",
        "macos_version",
        value=text,
    )


def working_set(ram_gb: float, macos: str = DEFAULT_MACOS) -> WorkingSet:
    """The GPU working set macOS gives a Mac of `ram_gb` GB (GiB, as Apple counts them) on `macos`."""
    macos = check_macos(macos)
    rows = [r for r in reports() if r.ram_gb == ram_gb]
    for wanted, how in ((macos, "measured"), ("15", "older_macos")):
        row = next((r for r in rows if r.macos == wanted), None)
        if row is not None:
            return WorkingSet(row.bytes, ram_gb, macos, how, row)
    share = rule_share(ram_gb)
    return WorkingSet(int(ram_gb * share * GIB), ram_gb, macos, "rule", None, share)


def macos_name(macos: str) -> str:
    """ "15" -> "macOS 15 or earlier", "26" -> "macOS 26"."""
    return "macOS 15 or earlier" if macos == "15" else f"macOS {macos}"


def source_words(ws: WorkingSet) -> str:
    """How the limit is known, in one English sentence (calc's text; the site has its own, kvsite.i18n)."""
    gib = f"{ws.bytes / GIB:.2f} GiB"
    if ws.how == "rule":
        return (
            f"{gib}: no public report for {ws.ram_gb:g} GB; the macOS 15 reports' rule "
            f"({ws.share:.0%} of RAM), an estimate"
        )
    r = ws.report
    said = f"{gib} as printed on {macos_name(r.macos)} ({r.machine}: {r.url})"
    if ws.how == "older_macos":
        said += f"; no {macos_name(ws.macos)} report for {ws.ram_gb:g} GB, so this lower figure"
    return said
