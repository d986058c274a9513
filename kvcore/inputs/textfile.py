"""A small text file handed to the engine (a config.json, a recording): read safely or refused in one sentence.

One reader for every file a person points the engine at, on the command line or uploaded to the site:
at most `max_bytes + 1` bytes are ever read (so `/dev/zero` or `/dev/urandom` cannot grow memory), only
a regular file is opened for reading (a FIFO, a device or a socket is refused at once, before any read
can wait on it), and the bytes must be UTF-8 text without NUL bytes. Every sentence starts with the label. Errors are KvError with a code
(errors.CODES), so the site says them in the reader's language.
Example: read_text_file("config.json", 1_000_000) -> '{"model_type": "llama", ...}'
         decode_text(b"\\x00\\x01", 1_000_000, "upload.json") -> KvError code "file_binary"
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from kvcore.errors import KvError


def _kb(max_bytes: int) -> str:
    return f"{max_bytes // 1000:,}"


def decode_text(data: bytes, max_bytes: int, label: str) -> str:
    """Bytes of a file -> its text; KvError when larger than `max_bytes`, binary (a NUL byte) or not UTF-8.

    A UTF-8 byte-order mark is dropped (some Windows editors write one).
    """
    if len(data) > max_bytes:
        raise KvError(
            f"{label} is larger than {_kb(max_bytes)} kB; that is too large for this file.",
            "file_too_large",
            label=label,
            kb=_kb(max_bytes),
        )
    if b"\x00" in data:
        raise KvError(f"{label} is a binary file, not text.", "file_binary", label=label)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise KvError(
            f"{label} is not UTF-8 text (byte {e.start:,} cannot be read as UTF-8).",
            "file_not_utf8",
            label=label,
            position=e.start,
        ) from None


def read_text_file(path: str | Path, max_bytes: int, label: str | None = None) -> str:
    """A regular file's text, reading at most `max_bytes + 1` bytes; `label` names it in errors (default: the path)."""
    label = label or str(path)
    return decode_text(read_file_bytes(path, max_bytes, label), max_bytes, label)


def read_file_bytes(path: str | Path, max_bytes: int, label: str | None = None) -> bytes:
    """A regular file's first `max_bytes + 1` bytes (one more than allowed, so the caller can tell it is too large);
    KvError when it is missing, unreadable, a folder, or not a regular file."""
    label = label or str(path)
    with open_regular(path, label) as f:
        try:  # what the file holds (a buffer of its size, not of the limit's), one byte more to see it grew
            want = min(max_bytes, os.fstat(f.fileno()).st_size) + 1
            data = f.read(want)
            if (
                len(data) == want <= max_bytes
            ):  # larger than it said (it grew, or /proc): the rest, up to the limit
                data += f.read(max_bytes + 1 - want)
            return data
        except OSError as e:
            raise KvError(
                f"{label} cannot be read ({e.strerror or e}).",
                "file_unreadable",
                label=label,
                detail=e.strerror or str(e),
            ) from None


def open_regular(path: str | Path, label: str | None = None) -> BinaryIO:
    """A regular file opened for binary reading (the caller closes it); KvError when it is missing, unreadable,
    a folder, or not a regular file (a FIFO, a device or a socket is refused before any read can wait on it)."""
    path = Path(path)
    label = label or str(path)
    try:
        # O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise KvError(f"{label} does not exist.", "file_missing", label=label) from None
    except OSError as e:
        raise KvError(
            f"{label} cannot be read ({e.strerror or e}).",
            "file_unreadable",
            label=label,
            detail=e.strerror or str(e),
        ) from None
    f = os.fdopen(fd, "rb")
    mode = os.fstat(f.fileno()).st_mode
    if not stat.S_ISREG(mode):
        f.close()
        if stat.S_ISDIR(mode):
            raise KvError(f"{label} is a folder, not a file.", "file_folder", label=label)
        raise KvError(
            f"{label} is not a regular file (a device, a pipe or a socket); give a file.",
            "file_not_regular",
            label=label,
        )
    return f
