"""A server's options in its own spelling: each one the ledger knows, its default at the pinned version and where
the server defines it; a flag not given takes that default, an unknown one is refused with its name.

Example: parse_options(OPTIONS, ["--prompt-cache-size", "4"])["--prompt-cache-size"] -> 4
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from kvcore.errors import KvError, did_you_mean, quote
from kvcore.limits import MAX_BYTES, MAX_CONTEXT, MAX_DIGITS


@dataclass(frozen=True)
class Option:
    flag: str  # the server's long spelling, the key of the parsed options
    kind: Callable[[str], Any]  # int, str, a size parser; bool: a switch that takes no value
    default: Any
    source: str  # where the pinned server defines it (file#line)
    aliases: tuple[str, ...] = field(default=())
    low: int = 0
    high: int = MAX_CONTEXT
    modelled: bool = (
        True  # False: the ledger knows the option but does not model it, and refuses it
    )


def parse_options(options: tuple[Option, ...], argv: list[str], server: str = "") -> dict:
    """`argv` (flags and values, as the server's command line takes them) -> {flag: value} for every option."""
    by_name = {name: o for o in options for name in (o.flag, *o.aliases)}
    values = {o.flag: o.default for o in options}
    args = list(argv)
    while args:
        name, _, inline = args.pop(0).partition("=")
        option = by_name.get(name)
        if option is None:
            raise KvError(
                f"{server} has no option {quote(name)} that the ledger knows."
                + did_you_mean(name, by_name)
            )
        if not option.modelled:
            raise KvError(f"The ledger does not model {server}'s {option.flag} yet.")
        if option.kind is bool:
            values[option.flag] = True
            continue
        if not inline and not args:
            raise KvError(f"{server}'s {name} needs a value.")
        text = inline or args.pop(0)
        try:
            if len(text) > MAX_DIGITS:
                raise ValueError(text)
            value = option.kind(text)
        except KvError:  # a kind that says itself what it takes
            raise
        except (ValueError, ArithmeticError, KeyError):
            raise KvError(f"{server}'s {name} does not take {quote(text)}.") from None
        high = MAX_BYTES if option.kind not in (int, str) else option.high
        if isinstance(value, int) and not option.low <= value <= high:
            raise KvError(f"{server}'s {name} must be from {option.low:,} to {high:,}.")
        values[option.flag] = value
    return values
