"""Display units: bytes stay bytes until shown; MiB/GiB (1024-based) and GB (1000-based) both named."""

from __future__ import annotations

KIB, MIB, GIB = 1024, 1024**2, 1024**3


def fmt_bytes(n: float) -> str:
    """Example: fmt_bytes(2**30) -> '1.00 GiB (1.07 GB)'; fmt_bytes(512) -> '512 B'."""
    if n < KIB:
        return f"{n:,.0f} B"
    for unit, size, dec, dec_size in (("GiB", GIB, "GB", 1e9), ("MiB", MIB, "MB", 1e6), ("KiB", KIB, "kB", 1e3)):
        if n >= size:
            return f"{n / size:,.2f} {unit} ({n / dec_size:,.2f} {dec})"
    raise AssertionError("unreachable")


def mib(n: float) -> float:
    return n / MIB


def gib(n: float) -> float:
    return n / GIB
