"""The command line's argument parsing, shared by `kvcore calc` and the live commands: one line per bad option
(exit 2, the nearest valid choice named), one wording for every whole-number option.

Example: whole_number("context", 1, 100)("1,024") -> argparse.ArgumentTypeError "context must be a whole number ...".
"""

from __future__ import annotations

import argparse
import re

from kvcore.errors import MAX_QUOTE, KvError, did_you_mean, quote
from kvcore.limits import MAX_DIGITS


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2 (argparse would print the usage too)
        hint = ""
        message = re.sub(  # a long value is quoted by its prefix, as every error quotes input
            rf"'([^']{{{MAX_QUOTE + 1},}})'", lambda m: quote(m[1]), message
        )
        wrong = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if wrong:  # a mistyped command or choice: name the nearest
            hint = did_you_mean(wrong[1], re.findall(r"'([^']*)'", wrong[2]), n=1)
        raise KvError(
            f"{message} (see `{self.prog} --help`).{hint}"
        )  # prog: "python -m kvcore" or "python -m kvcore calc"


def whole_number(label: str, low: int, high: int):
    """An argparse type: a whole number from `low` to `high` (1,024 and 1_024 accepted); one wording for every option."""

    def parse(text: str) -> int:
        try:
            digits = text.strip().replace("_", "").replace(",", "")
            value = int(digits) if len(digits) <= MAX_DIGITS else None
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(
                f"{label} must be a whole number from {low:,} to {high:,}, not {quote(text)}"
            )
        return value

    return parse


def number_in(label: str, low: float, high: float, unit: str):
    """An argparse type: a finite number of `unit` from `low` to `high` (inf, nan and 1e400 refused by name).

    Example: number_in("ram", 1, 4096, "GB")("1e30") -> "ram must be a number of GB from 1 to 4,096, not '1e30'".
    """

    def parse(text: str) -> float:
        try:
            digits = text.strip().replace("_", "").replace(",", "")
            value = float(digits) if len(digits) <= MAX_DIGITS else None
        except ValueError:
            value = None
        if value is None or not low <= value <= high:  # NaN fails both comparisons
            raise argparse.ArgumentTypeError(
                f"{label} must be a number of {unit} from {low:,} to {high:,}, not {quote(text)}"
            )
        return value

    return parse
