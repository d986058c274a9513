"""Display units: bytes stay bytes until shown; MiB/GiB (1024-based) and GB (1000-based) both named."""

from __future__ import annotations

KIB, MIB, GIB = 1024, 1024**2, 1024**3


def fmt_bytes(n: float, decimal: bool = True) -> str:
    """Example: fmt_bytes(2**30) -> '1.00 GiB (1.07 GB)'; fmt_bytes(2**30, decimal=False) -> '1.00 GiB'."""
    if n < KIB:
        return f"{n:,.0f} B"
    for unit, size, dec, dec_size in (("GiB", GIB, "GB", 1e9), ("MiB", MIB, "MB", 1e6), ("KiB", KIB, "kB", 1e3)):
        if n >= size:
            binary = f"{n / size:,.2f} {unit}"
            return f"{binary} ({n / dec_size:,.2f} {dec})" if decimal else binary
    raise AssertionError("unreachable")


def mib(n: float) -> float:
    return n / MIB


def gib(n: float) -> float:
    return n / GIB
