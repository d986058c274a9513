"""A GGUF file's header, read with bounds: its metadata and tensor table, never the tensor data.

The layout (ggml-org/llama.cpp `ggml/src/gguf.cpp`, the file gguf-py's GGUFReader and GGUFWriter follow):
magic "GGUF", u32 version (2 or 3), u64 tensor count, u64 key-value count; the key-values (string key,
u32 value type, value); the tensor infos (string name, u32 n_dims, n_dims x u64 sizes, u32 ggml type,
u64 offset into the data); padding to `general.alignment` (default 32); then the tensor data.
Every count and length in the file is checked against the bytes left before anything is read or kept
(a lying file costs a few reads, never memory), long arrays (the tokenizer's) are walked, not kept, and
the header is refused past MAX_HEADER_BYTES. Each problem is one KvError sentence with a code.
Example: read_header("SmolLM2-135M-Instruct.Q4_1.gguf").metadata["llama.block_count"] -> 30
"""

from __future__ import annotations

import io
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from kvcore.errors import KvError, quote
from kvcore.inputs.textfile import open_regular
from kvcore.limits import MAX_GGUF_TENSORS

MAGIC = b"GGUF"
VERSIONS = (2, 3)  # gguf.cpp reads 2 and 3 (version 1 had 32-bit counts)
MAX_HEADER_BYTES = 512 * 1024 * 1024  # a real header (a 262k-token vocabulary) is tens of MB
MAX_KV = 1 << 16  # real files carry ~40 keys
MAX_TENSORS = MAX_GGUF_TENSORS  # DeepSeek V3 has ~1,900 tensors; per-expert layouts ~14,000
MAX_STRING = 64 * 1024 * 1024  # one string (a chat template is ~100 kB)
MAX_KEPT = 4096  # arrays up to this long are kept (per-layer values); longer ones only counted
MAX_DIMS = 4  # GGML_MAX_DIMS
MAX_NESTING = 4
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
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class LongArray:
    """An array too long to keep (a tokenizer's tokens or merges): its element type and length."""

    value_type: int
    count: int


@dataclass(frozen=True)
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
        size = struct.calcsize("<" + code)
        self._ensure(size)
        value = struct.unpack_from("<" + code, self.buf, self.pos)
        self.pos += size
        return value[0] if len(value) == 1 else value

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
        n = self.length(what, limit)
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
        """Walk `count` strings without keeping them (a fast loop inside the buffer)."""
        while count:
            buf, pos, end = self.buf, self.pos, len(self.buf)
            while count and pos + 8 <= end:
                n = struct.unpack_from("<Q", buf, pos)[0]
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


def _value(cur: _Cursor, value_type: int, key: str, depth: int = 0):
    if value_type in _SCALARS:
        return cur.unpack(_SCALARS[value_type])
    if value_type == _STRING:
        return cur.string(f"the string {quote(key)}")
    if value_type != _ARRAY:
        raise _corrupt(cur.label, f"the key {quote(key)} has an unknown value type {value_type}")
    if depth >= MAX_NESTING:
        raise _corrupt(cur.label, f"the key {quote(key)} nests arrays deeper than {MAX_NESTING}")
    item_type, count = cur.unpack("I"), cur.unpack("Q")
    smallest = (
        struct.calcsize("<" + _SCALARS[item_type])
        if item_type in _SCALARS
        else 8
        if item_type in (_STRING, _ARRAY)
        else 0
    )
    if not smallest:
        raise _corrupt(cur.label, f"the array {quote(key)} has an unknown element type {item_type}")
    if count * smallest > cur.left():
        raise _corrupt(
            cur.label, f"the array {quote(key)} claims {count:,} elements, more than the file holds"
        )
    if item_type in _SCALARS:
        size = smallest * count
        if count > MAX_KEPT:  # only its length matters: stepped over, never read into memory
            cur.skip(size)
            return LongArray(item_type, count)
        cur._ensure(size)
        values = struct.unpack_from(f"<{count}{_SCALARS[item_type]}", cur.buf, cur.pos)
        cur.pos += size
        return list(values)
    if item_type == _STRING and count > MAX_KEPT:
        cur.skip_strings(count)
        return LongArray(item_type, count)
    if (
        count > MAX_KEPT
    ):  # a long array of arrays: walked, each element dropped as soon as it is read
        for _ in range(count):
            _value(cur, item_type, key, depth + 1)
        return LongArray(item_type, count)
    return [_value(cur, item_type, key, depth + 1) for _ in range(count)]


def _parse(stream, size: int, label: str, available: int | None = None) -> Header:
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
        metadata[key] = _value(cur, cur.unpack("I"), key)
    tensors, names = [], set()
    for _ in range(n_tensors):
        name = cur.string("a tensor name", MAX_NAME)
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
    source: str | Path | bytes, label: str | None = None, file_bytes: int | None = None
) -> Header:
    """The header of a GGUF file given by path (read from disk, only as far as the header) or by its bytes: the
    whole file, or (with `file_bytes`, the whole file's size) its first bytes up to the end of the tensor table,
    as a browser reads them (kvsite.gguf_browser): every bound is then the file's, and a header that goes on past
    the bytes given is refused in one sentence.

    Raises KvError with one sentence when the file is missing, not GGUF, truncated or claims sizes it cannot hold.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        size = len(data) if file_bytes is None else file_bytes
        if size < len(data):
            raise ValueError(f"file_bytes {size} is less than the {len(data)} bytes given")
        return _parse(io.BytesIO(data), size, label or "the uploaded file", len(data))
    label = label or str(source)
    with open_regular(source, label) as f:
        return _parse(f, os.fstat(f.fileno()).st_size, label)
