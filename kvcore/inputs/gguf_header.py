"""A GGUF file's header, read with bounds: its metadata and tensor table, never the tensor data.

The layout (ggml-org/llama.cpp `ggml/src/gguf.cpp`, the file gguf-py's GGUFReader and GGUFWriter follow):
magic "GGUF", u32 version (2 or 3), u64 tensor count, u64 key-value count; the key-values (string key,
u32 value type, value); the tensor infos (string name, u32 n_dims, n_dims x u64 sizes, u32 ggml type,
u64 offset into the data); padding to `general.alignment` (default 32); then the tensor data.
Every count and length in the file is checked against the bytes left before anything is read or kept
(a lying file costs a few reads, never memory), and the header is refused past MAX_HEADER_BYTES.
Only what the caller reads is kept: every number, and the strings and arrays of the keys in `keep` (an
array packed as the file stores it, array.array); every other string or array (a tokenizer's, a chat
template, junk) is stepped over, never built, and recorded as Skipped(type, length). A string array is
walked length by length (a run of empty strings at once); an array of arrays is refused, as gguf.cpp
refuses it. What is kept is charged against one budget (kvcore.limits.MAX_GGUF_METADATA_BYTES), so any
header costs at most that much memory and time in proportion to its bytes. Each problem is one KvError
sentence with a code.
Example: read_header("SmolLM2-135M-Instruct.Q4_1.gguf").metadata["llama.block_count"] -> 30
"""

from __future__ import annotations

import io
import os
import struct
import sys
from array import array
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from kvcore.errors import KvError, quote
from kvcore.inputs.textfile import open_regular
from kvcore.limits import MAX_GGUF_METADATA_BYTES, MAX_GGUF_TENSORS

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # gguf.cpp reads 2 and 3 (version 1 had 32-bit counts)
MAX_HEADER_BYTES = 512 * 1024 * 1024  # a real header (a 262k-token vocabulary) is tens of MB
MAX_KV = 1 << 12  # real files carry ~40 keys; each costs a few µs and ~200 bytes kept
MAX_TENSORS = MAX_GGUF_TENSORS  # DeepSeek V3 has ~1,900 tensors; per-expert layouts ~14,000
MAX_STRING = 64 * 1024 * 1024  # one string (a chat template is ~100 kB)
MAX_KEPT = 4096  # values of a kept array (per-layer values: llama.cpp has at most 512 layers)
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NESTING = 1  # an array holds numbers or strings: gguf.cpp refuses an array of arrays ("invalid GGUF type")
_ENTRY = (
    160  # bytes charged per key beyond its name and value: a dict slot, a number or Skipped object
)
_TENSOR = 320  # bytes charged per tensor beyond its name: its TensorInfo, shape and numbers
MAX_NAME = 65535  # a key or a tensor name (gguf.cpp reads them as strings; none is near this)
DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT
_CHUNK = 1 << 20

# GGUF value types (gguf.cpp enum gguf_type; gguf-py GGUFValueType): struct code, or None for string/array
_SCALARS = {
    0: "B",
    1: "b",
    2: "H",
    3: "h",
    4: "I",
    5: "i",
    6: "f",
    7: "?",
    10: "Q",
    11: "q",
    12: "d",
}
# array.array's code for each scalar type where it differs (a bool is a byte; "l"/"L" may be 4 bytes wide)
_PACKED = {**_SCALARS, 7: "B", 10: "Q", 11: "q"}
_FORMS = {code: struct.Struct("<" + code) for code in ("I", "Q", *_SCALARS.values())}
_STRING, _ARRAY = 8, 9
_ZEROS = (bytes(8 * 512), bytes(8 * 8))  # runs of empty strings skip_strings steps over at once


@dataclass(frozen=True, slots=True)
class Skipped:
    """A string or array the reader stepped over (a tokenizer's tokens, a chat template, a key nobody reads): its
    GGUF type (an array's element type) and its length (a string's bytes, an array's elements)."""

    value_type: int
    count: int
    array: bool = True

    def __repr__(self) -> str:  # as an error sentence quotes it
        return (
            f"<an array of {self.count:,} values>"
            if self.array
            else f"<a string of {self.count:,} bytes>"
        )


@dataclass(frozen=True, slots=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]  # ne[0] (the row, contiguous) first, as ggml and GGUF store it
    ggml_type: int  # ggml_type / gguf-py GGMLQuantizationType
    offset: int  # from the start of the data section


@dataclass(frozen=True)
class Header:
    version: int
    metadata: dict
    tensors: tuple[TensorInfo, ...]
    data_offset: int  # where the tensor data starts in the file
    file_bytes: int
    alignment: int


class _Cursor:
    """Sequential reads from a binary stream that know how many bytes the file still has."""

    def __init__(self, stream, size: int, label: str, available: int | None = None):
        self.f, self.size, self.label = stream, size, label
        # the bytes given: all of the file, or (a browser's) its header only
        self.available = size if available is None else available
        self.buf, self.pos, self.base = b"", 0, 0  # base: file offset of buf[0]
        self.kept = 0  # bytes of metadata kept so far (charge)

    def charge(self, n: int) -> None:
        """Count `n` more bytes of metadata kept, before they are built: past MAX_GGUF_METADATA_BYTES, refuse."""
        self.kept += n
        if self.kept > MAX_GGUF_METADATA_BYTES:
            raise KvError(
                f"{self.label} has more metadata than a model's GGUF header holds (its keys and the values "
                f"kvcore keeps pass {MAX_GGUF_METADATA_BYTES // 2**20} MiB): it is not a model file kvcore "
                "reads.",
                "gguf_metadata_large",
                label=self.label,
                mib=MAX_GGUF_METADATA_BYTES // 2**20,
            )

    @property
    def offset(self) -> int:
        return self.base + self.pos

    def left(self) -> int:
        return self.size - self.offset

    def _ensure(self, n: int) -> None:
        if self.pos + n <= len(self.buf):
            return
        if self.offset + n > min(self.size, MAX_HEADER_BYTES):
            if self.offset + n > self.size:
                raise KvError(
                    f"{self.label} ends inside its GGUF header (at byte {self.size:,}): the file is truncated.",
                    "gguf_truncated",
                    label=self.label,
                    size=self.size,
                )
            raise KvError(
                f"{self.label} has a GGUF header larger than {MAX_HEADER_BYTES // 2**20} MiB; that is not a "
                "model file kvcore reads.",
                "gguf_header_large",
                label=self.label,
                mib=MAX_HEADER_BYTES // 2**20,
            )
        if self.offset + n > self.available:  # inside the file, past the bytes given
            raise KvError(
                f"{self.label}: only the first {self.available:,} bytes of its GGUF header were given, and the "
                "header goes on past them; choose the file again.",
                "gguf_header_short",
                label=self.label,
                size=self.available,
            )
        rest = self.buf[self.pos :]
        self.base += self.pos
        self.buf, self.pos = rest + self.f.read(max(_CHUNK, n - len(rest))), 0
        if len(self.buf) < n:
            raise KvError(
                f"{self.label} ends inside its GGUF header (at byte {self.offset + len(self.buf):,}): the file "
                "is truncated.",
                "gguf_truncated",
                label=self.label,
                size=self.offset + len(self.buf),
            )

    def unpack(self, code: str):
        """One little-endian value of struct type `code`."""
        form = _FORMS[code]
        if self.pos + form.size > len(self.buf):
            self._ensure(form.size)
        value = form.unpack_from(self.buf, self.pos)[0]
        self.pos += form.size
        return value

    def length(self, what: str, limit: int) -> int:
        n = self.unpack("Q")
        if n <= limit and n > self.left():  # a plausible length the file is too short for
            raise KvError(
                f"{self.label} ends inside its GGUF header (at byte {self.size:,}): the file is truncated.",
                "gguf_truncated",
                label=self.label,
                size=self.size,
            )
        if n > limit:
            raise KvError(
                f"{self.label} claims {what} of {n:,} bytes at byte {self.offset - 8:,}, more than any GGUF holds: "
                "it is not a valid GGUF file.",
                "gguf_corrupt",
                label=self.label,
                what=what,
                offset=self.offset - 8,
            )
        return n

    def string(self, what: str, limit: int = MAX_STRING) -> str:
        return self.text(self.length(what, limit))

    def text(self, n: int) -> str:
        """The next `n` bytes as UTF-8 (a byte that is not: U+FFFD)."""
        self._ensure(n)
        text = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8", "replace")
        self.pos += n
        return text

    def skip(self, n: int) -> None:
        """Step over `n` bytes without keeping them (a long array whose length is all that matters): within the
        buffer, or by seeking past it; bounded by the file and MAX_HEADER_BYTES as a read is."""
        if self.pos + n <= len(self.buf):
            self.pos += n
            return
        end = self.offset + n
        if end > min(self.size, MAX_HEADER_BYTES, self.available):
            self._ensure(n)  # raises the truncated or too-large sentence
        self.f.seek(end)
        self.buf, self.pos, self.base = b"", 0, end

    def skip_strings(self, count: int) -> None:
        """Walk `count` strings without keeping them: a fast loop inside the buffer, and a run of empty strings
        (eight zero bytes each) stepped over at once, so 2 million of them cost a scan, not 2 million steps."""
        unpack = _FORMS["Q"].unpack_from
        while count:
            buf, pos, end = self.buf, self.pos, len(self.buf)
            while count and pos + 8 <= end:
                n = unpack(buf, pos)[0]
                if not n:  # empty strings: 512 or 8 at a time where the zeros go on (a memcmp each)
                    for zeros in _ZEROS:
                        if count >= len(zeros) // 8 and buf.startswith(zeros, pos):
                            pos, count = pos + len(zeros), count - len(zeros) // 8
                            break
                    else:
                        pos, count = pos + 8, count - 1
                    continue
                if pos + 8 + n > end:
                    break
                pos, count = pos + 8 + n, count - 1
            self.pos = pos
            if count:  # the next string crosses the buffer's end: read it the careful way
                n = self.length("a string", MAX_STRING)
                self._ensure(n)
                self.pos, count = self.pos + n, count - 1


def _corrupt(label: str, detail: str) -> KvError:
    return KvError(
        f"{label} is not a valid GGUF file: {detail}.",
        "gguf_corrupt_detail",
        label=label,
        detail=detail,
    )


def _value(cur: _Cursor, value_type: int, key: str, keep: bool):
    """The value of `key` at the cursor: a number; a string or an array of numbers when `keep`; else Skipped."""
    if value_type in _SCALARS:
        return cur.unpack(_SCALARS[value_type])
    if value_type == _STRING:
        n = cur.length(f"the string {quote(key)}", MAX_STRING)
        if keep:
            cur.charge(4 * n)  # at most 4 bytes a character once decoded
            return cur.text(n)
        cur.skip(n)
        return Skipped(_STRING, n, array=False)
    if value_type != _ARRAY:
        raise _corrupt(cur.label, f"the key {quote(key)} has an unknown value type {value_type}")
    item_type, count = cur.unpack("I"), cur.unpack("Q")
    if item_type == _ARRAY:
        raise KvError(
            f"{cur.label}: the key {quote(key)} holds arrays of arrays, which llama.cpp does not read.",
            "gguf_nested_array",
            label=cur.label,
            key=quote(key),
        )
    smallest = (
        _FORMS[_SCALARS[item_type]].size
        if item_type in _SCALARS
        else 8
        if item_type == _STRING
        else 0
    )
    if not smallest:
        raise _corrupt(cur.label, f"the array {quote(key)} has an unknown element type {item_type}")
    if count * smallest > cur.left():
        raise _corrupt(
            cur.label, f"the array {quote(key)} claims {count:,} elements, more than the file holds"
        )
    if item_type == _STRING:
        cur.skip_strings(count)
        return Skipped(item_type, count)
    size = smallest * count
    if (
        not keep or count > MAX_KEPT
    ):  # only its length matters: stepped over, never read into memory
        cur.skip(size)
        return Skipped(item_type, count)
    cur.charge(size)
    cur._ensure(size)
    values = array(_PACKED[item_type])
    values.frombytes(cur.buf[cur.pos : cur.pos + size])
    if sys.byteorder != "little":
        values.byteswap()
    cur.pos += size
    return values


def _parse(
    stream, size: int, label: str, available: int | None = None, keep: Collection[str] = ()
) -> Header:
    cur = _Cursor(stream, size, label, available)
    if size < 4:
        raise KvError(
            f"{label} is not a GGUF file (it does not start with 'GGUF').",
            "gguf_not_gguf",
            label=label,
        )
    cur._ensure(4)  # the magic first: a file that is not GGUF is refused on its first four bytes
    if cur.buf[:4] != MAGIC:
        raise KvError(
            f"{label} is not a GGUF file (it does not start with 'GGUF').",
            "gguf_not_gguf",
            label=label,
        )
    cur.pos = 4
    version = cur.unpack("I")
    if version & 0xFFFF == 0 and version:
        raise KvError(
            f"{label} is a big-endian GGUF file; kvcore reads the little-endian files llama.cpp runs on Macs "
            "and PCs.",
            "gguf_big_endian",
            label=label,
        )
    if version not in VERSIONS:
        raise KvError(
            f"{label} is GGUF version {version}; kvcore reads versions 2 and 3.",
            "gguf_version",
            label=label,
            version=version,
        )
    n_tensors, n_kv = cur.unpack("Q"), cur.unpack("Q")
    for count, what, limit, smallest in (
        (n_kv, "metadata keys", MAX_KV, 13),
        (n_tensors, "tensors", MAX_TENSORS, 25),
    ):
        if count > limit or count * smallest > cur.left():
            raise KvError(
                f"{label} claims {count:,} {what}, more than a GGUF file of {size:,} bytes can hold: it is not a "
                "valid GGUF file.",
                "gguf_count",
                label=label,
                count=count,
                what=what,
                size=size,
            )
    metadata = {}
    for _ in range(n_kv):
        key = cur.string("a key", MAX_NAME)
        if key in metadata:
            raise _corrupt(label, f"the key {quote(key)} appears twice")
        cur.charge(sys.getsizeof(key) + _ENTRY)
        metadata[key] = _value(cur, cur.unpack("I"), key, key in keep)
    tensors, names = [], set()
    for _ in range(n_tensors):
        name = cur.string("a tensor name", MAX_NAME)
        cur.charge(sys.getsizeof(name) + _TENSOR)
        n_dims = cur.unpack("I")
        if not 1 <= n_dims <= MAX_DIMS:
            raise _corrupt(
                label,
                f"the tensor {quote(name)} has {n_dims} dimensions (ggml allows 1 to {MAX_DIMS})",
            )
        shape = tuple(cur.unpack("Q") for _ in range(n_dims))
        ggml_type, offset = cur.unpack("I"), cur.unpack("Q")
        if name in names:
            raise _corrupt(label, f"the tensor {quote(name)} appears twice")
        names.add(name)
        tensors.append(TensorInfo(name, shape, ggml_type, offset))
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if (
        isinstance(alignment, bool)
        or not isinstance(alignment, int)
        or alignment < 1
        or alignment & (alignment - 1)
    ):
        raise _corrupt(label, f"general.alignment = {quote(alignment)} is not a power of two")
    data_offset = -(-cur.offset // alignment) * alignment
    return Header(version, metadata, tuple(tensors), data_offset, size, alignment)


def read_header(
    source: str | Path | bytes,
    label: str | None = None,
    file_bytes: int | None = None,
    keep: Collection[str] = ("general.architecture",),
) -> Header:
    """The header of a GGUF file given by path (read from disk, only as far as the header) or by its bytes: the
    whole file, or (with `file_bytes`, the whole file's size) its first bytes up to the end of the tensor table,
    as a browser reads them (kvsite.sections.calc.gguf_browser): every bound is then the file's, and a header that goes on past
    the bytes given is refused in one sentence. `keep`: the keys whose strings and arrays the caller reads (every
    number is kept; any other string or array is Skipped).

    Raises KvError with one sentence when the file is missing, not GGUF, truncated or claims sizes it cannot hold.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        size = len(data) if file_bytes is None else file_bytes
        if size < len(data):
            raise ValueError(f"file_bytes {size} is less than the {len(data)} bytes given")
        return _parse(io.BytesIO(data), size, label or "the uploaded file", len(data), keep)
    label = label or str(source)
    with open_regular(source, label) as f:
        return _parse(f, os.fstat(f.fileno()).st_size, label, keep=keep)
