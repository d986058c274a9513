"""Whole numbers written as text (a link's value, a pasted list, a box a reader types in): the one reader of them.

Only the ASCII digits 0-9 make a number here. Python's str.isdigit() is true for '²' and '①', which int() then
refuses with a ValueError, and int() itself reads other scripts' digits ('٣' is 3): neither is a number a reader
typed on purpose, so both are refused in one sentence, as are a sign, a space inside, and more than MAX_DIGITS
digits (checked before int() converts anything).

Example: whole_number("300", "ctx") -> 300; whole_number("²", "ctx") -> KvError code "number_text".
"""

from __future__ import annotations

from kvcore.errors import KvError, quote
from kvcore.limits import MAX_DIGITS

DIGITS = frozenset("0123456789")


def is_digits(text: str) -> bool:
    """True for text of the ASCII digits 0-9 only (and at least one): what whole_number reads."""
    return bool(text) and all(ch in DIGITS for ch in text)


def whole_number(text: str, what: str, low: int = 0, high: int = 10**MAX_DIGITS - 1) -> int:
    """`text` of ASCII digits as an int from `low` to `high`; KvError (code "number_text") for anything else.

    Args:
        text: the text as given (surrounding spaces are the caller's to strip).
        what: the field by its name, for the sentence (a link's key such as "ctx").
        low, high: the range the number must be in.
    Returns:
        the number.
    """
    if not is_digits(text) or len(text) > MAX_DIGITS or not low <= int(text) <= high:
        raise KvError(
            f"{what} must be a whole number from {low:,} to {high:,} written in the digits 0-9, "
            f"not {quote(text)}.",
            "number_text",
            what=what,
            low=f"{low:,}",
            high=f"{high:,}",
            value=quote(text),
        )
    return int(text)
