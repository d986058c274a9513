"""A recording's rows: each section's rows hold the fields kvcore.recordings.schema.ROW_FIELDS names, as numbers,
texts or lists of numbers, counts whole, and the words a section reads (a memory row's part and unit, a peak row's
KV format) spelled as kvcore knows them; anything else is one sentence (RecordingError, with its code). `fail` and
`number` are what kvcore.recordings.check shares with them.

Example: check_rows("peak", [{"prompt_tokens": 0, ...}], "run.yaml") -> RecordingError
"run.yaml: sections.peak[0].prompt_tokens must be a whole number of at least 1, not 0".
"""

from __future__ import annotations

import math

from kvcore.errors import KvError, quote
from kvcore.memory.formats import FORMATS, get_format
from kvcore.recordings import schema
from kvcore.recordings.schema import RecordingError


def fail(label: str, code: str, problem: str, **params):
    raise RecordingError(f"{label}: {problem}", code, label=label, **params) from None


def number(value, where: str, label: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        fail(
            label,
            "rec_number",
            f"{where} must be a number, not {quote(value)}",
            field=where,
            value=quote(value),
        )
    if abs(value) > schema.MAX_NUMBER:  # a huge int is compared exactly, never converted to float
        fail(label, "rec_range", f"{where} is out of range", field=where)
    if value < 0:
        fail(label, "rec_negative", f"{where} must not be negative", field=where)
    return value


def check_rows(name: str, rows, label: str) -> None:
    """The rows of section `name` (a known section): a non-empty list of mappings holding its fields only."""
    if not isinstance(rows, list) or not rows:
        fail(label, "rec_rows", f"section {name!r} must be a non-empty list of rows", name=name)
    required, optional = schema.SECTIONS[name]
    for i, row in enumerate(rows):
        where = f"sections.{name}[{i}]"
        if not isinstance(row, dict):
            fail(label, "rec_row", f"{where} must be a mapping", field=where)
        for key in (*required, *schema.REQUIRED_TEXT.get(name, ())):
            if key not in row:
                fail(label, "rec_missing", f"{where} is missing {key!r}", field=f"{where}.{key}")
        for key, value in row.items():
            if key in required or key in optional:
                number(value, f"{where}.{key}", label)
                if key in schema.WHOLE.get(name, ()) and value != int(value):
                    fail(
                        label,
                        "rec_whole",
                        f"{where}.{key} must be a whole number, not {quote(value)}",
                        field=f"{where}.{key}",
                        value=quote(value),
                    )
                if key in schema.COUNTS.get(name, ()) and (value < 1 or value != int(value)):
                    fail(
                        label,
                        "rec_count",
                        f"{where}.{key} must be a whole number of at least 1, not {quote(value)}",
                        field=f"{where}.{key}",
                        value=quote(value),
                    )
            elif key in schema.LIST_FIELDS.get(name, ()):
                if not isinstance(value, list) or not value or len(value) > schema.MAX_LIST:
                    fail(
                        label,
                        "rec_list",
                        f"{where}.{key} must be a non-empty list of numbers",
                        field=f"{where}.{key}",
                    )
                for j, item in enumerate(value):
                    number(item, f"{where}.{key}[{j}]", label)
            elif key in schema.TEXT_FIELDS[name]:
                if not isinstance(value, str):
                    fail(
                        label,
                        "rec_not_text",
                        f"{where}.{key} must be text",
                        field=f"{where}.{key}",
                    )
            else:
                fail(
                    label,
                    "rec_field",
                    f"{where} has an unknown field {quote(key)}",
                    field=where,
                    key=quote(key),
                )
        if name == "memory":
            _memory_words(row, where, label)
        if name == "peak":
            _peak_format(row, where, label)
        if name == "server" and row["cached_tokens"] > row["prompt_tokens"]:
            field = f"{where}.cached_tokens"  # a server serves from its cache at most the prompt
            fail(label, "rec_range", f"{field} is out of range", field=field)
        if name == "long_context":
            _positions(row, where, label)
        if name == "retrieval":
            _verdict(row, where, label)


def _positions(row: dict, where: str, label: str) -> None:
    """A long_context row: a scope kvcore knows, positions start < end with tokens their count, shares and the
    tail percentile in range."""
    if row["scope"] not in schema.SCOPES:
        valid, value = ", ".join(schema.SCOPES), quote(row["scope"])
        text = f"{where}.scope must be one of {valid}, not {value}"
        fail(label, "rec_scope", text, field=f"{where}.scope", valid=valid, value=value)
    if row["tokens"] != row["end"] - row["start"]:
        text = (
            f"{where} scores positions {row['start']}..{row['end']}, so tokens must be "
            f"{row['end'] - row['start']}, not {row['tokens']}"
        )
        fail(label, "rec_positions", text, field=where)
    if row["top1_agreement"] > 1:
        fail(label, "rec_share", f"{where}.top1_agreement must be at most 1", field=where)
    if row["perplexity"] < 1:
        fail(label, "rec_share", f"{where}.perplexity must be at least 1", field=where)


def _verdict(row: dict, where: str, label: str) -> None:
    """A retrieval row's verdict is 0 or 1 and says what its answer says: right exactly when the answer names
    the expected text."""
    right = row["expected"].lower() in row["answer"].lower()
    if row["correct"] not in (0, 1) or bool(row["correct"]) != right:
        text = (
            f"{where}.correct must be {int(right)}: the answer {quote(row['answer'])} "
            f"{'names' if right else 'does not name'} {quote(row['expected'])}"
        )
        fail(label, "rec_verdict", text, field=f"{where}.correct")


def _peak_format(row: dict, where: str, label: str) -> None:
    """A peak row's kv_format is one kvcore knows (its plan reads the bytes of that format), never a typo."""
    try:
        get_format(row["kv_format"])
    except KvError:
        known = ", ".join(FORMATS)
        field, value = f"{where}.kv_format", quote(row["kv_format"])
        text = f"{field} {value} is not a KV cache format kvcore knows (known: {known})"
        fail(label, "rec_kv_format", text, field=field, value=value, known=known)


def _memory_words(row: dict, where: str, label: str) -> None:
    """A memory row names its part and unit in kvcore's words (schema.MEMORY_PARTS, MEMORY_UNITS), never a typo."""
    for key, words in (("part", schema.MEMORY_PARTS), ("unit", schema.MEMORY_UNITS)):
        if row[key] not in words:
            valid, value, field = ", ".join(words), quote(row[key]), f"{where}.{key}"
            text = f"{field} must be one of {valid}, not {value}"
            fail(label, "rec_memory_word", text, field=field, valid=valid, value=value)
