"""Display units and numbers for readers: bytes stay bytes until shown; MiB/GiB (1024-based) and GB
(1000-based) both named; every number a page, chart or CLI prints goes through `fmt_num` or `fmt_bytes`.

Example: fmt_num(26.7775) -> '26.8'; fmt_num(131072) -> '131,072'; fmt_bytes(2**30) -> '1.00 GiB (1.07 GB)'.
"""

from __future__ import annotations

import math

KIB, MIB, GIB = 1024, 1024**2, 1024**3
SIG = 3  # significant figures a reader sees by default


def fmt_num(x: float, sig: int = SIG, unit: str = "") -> str:
    """A number for readers: whole numbers in full with thousands separators, others to `sig` significant figures.

    Example: fmt_num(0.72879) -> '0.729'; fmt_num(210.84) -> '211'; fmt_num(292.0) -> '292'; fmt_num(3.5, unit='GB/s') -> '3.5 GB/s'.
    """
    x = float(x)
    if not math.isfinite(x):
        text = "—"
    elif x == int(x) or abs(x) >= 10**sig:
        text = f"{round(x):,}"
    else:
        decimals = max(0, sig - 1 - math.floor(math.log10(abs(x))))
        text = f"{x:,.{decimals}f}"
        if "." in text:
            text = text.rstrip("0").rstrip(".")
    return f"{text} {unit}" if unit else text


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def fmt_small(x: float, sig: int = 2) -> str:
    """A number that can be tiny (a KL divergence): below 0.01 as a power of ten, else as fmt_num.

    Example: fmt_small(0.00067) -> '6.7×10⁻⁴'; fmt_small(0.173) -> '0.173'; fmt_small(0) -> '0'.
    """
    x = float(x)
    if x == 0 or not math.isfinite(x) or abs(x) >= 0.01:
        return fmt_num(x)
    exp = math.floor(math.log10(abs(x)))
    mantissa = f"{x / 10**exp:.{sig - 1}f}"
    if mantissa.startswith("10"):  # 9.96e-4 rounds up to 10 × 10^-4
        mantissa, exp = f"{1:.{sig - 1}f}", exp + 1
    return f"{mantissa}×10{str(exp).translate(SUPERSCRIPT)}"


def fmt_ratio(x: float, sig: int = SIG) -> str:
    """A ratio such as a slowdown, to `sig` significant figures (trailing zeros kept: they are significant).

    Example: fmt_ratio(2.4271) -> '2.43×'; fmt_ratio(2.0) -> '2.00×'; fmt_ratio(47.31) -> '47.3×'.
    """
    if not (math.isfinite(x) and x > 0):
        return "—"
    decimals = max(0, sig - 1 - math.floor(math.log10(x)))
    return f"{x:,.{decimals}f}×"


def fmt_pct(share: float) -> str:
    """A share as a percentage without a space (house style): fmt_pct(0.6867) -> '69%'."""
    return f"{share:.0%}"


def fmt_bytes(n: float, decimal: bool = True) -> str:
    """Example: fmt_bytes(2**30) -> '1.00 GiB (1.07 GB)'; fmt_bytes(2**30, decimal=False) -> '1.00 GiB'."""
    if n < KIB:
        return f"{n:,.0f} B"
    for unit, size, dec, dec_size in (
        ("GiB", GIB, "GB", 1e9),
        ("MiB", MIB, "MB", 1e6),
        ("KiB", KIB, "kB", 1e3),
    ):
        if n >= size:
            binary = f"{n / size:,.2f} {unit}"
            return f"{binary} ({n / dec_size:,.2f} {dec})" if decimal else binary
    raise AssertionError("unreachable")


def fmt_size(n: float) -> str:
    """An amount of memory (a cache, weights, bytes read per token) for readers: always in binary units (GiB, MiB,
    KiB), the site's one unit for sizes; rates (bandwidth) stay in GB/s, as chips are published.

    Example: fmt_size(2**30) -> '1 GiB'; fmt_size(1_073_741_824 + 2**29) -> '1.5 GiB'; fmt_size(8.03 * MIB) -> '8.03 MiB'.
    """
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= size:
            return fmt_num(n / size, unit=unit)
    return fmt_num(n, unit="B")


def gib(n: float) -> float:
    return n / GIB
