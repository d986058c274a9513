"""A GGUF header as the Calculator's browser component sends it (kvsite.sections.calc.gguf_browser): the bytes up to the end of
the tensor table, gzip and base64, with the file's real size. Read by the engine's own GGUF reader, it gives the
geometry the whole file gives; anything else a client could send is refused in one sentence with a code the page
says in Japanese too; and the largest header the label promises fits one message Streamlit accepts."""

from __future__ import annotations

import base64
import gzip
import os

import gguf_files
import pytest
from streamlit import config

from kvcore.errors import CODES, KvError
from kvcore.inputs import gguf, gguf_header
from kvsite import i18n
from kvsite.sections.calc.gguf_browser import CHOSEN, HEADER_LIMIT, HEADER_MB, read_sent, remember


def sent(raw: bytes, size: int, name: str = "model.gguf", encoding: str = "gzip") -> dict:
    """What gguf_reader.js sends for a header `raw` of a file of `size` bytes."""
    body = gzip.compress(raw) if encoding == "gzip" else raw
    data = base64.b64encode(body).decode()
    return {"name": name, "size": size, "length": len(raw), "encoding": encoding, "data": data}


def header_of(path) -> bytes:
    """The bytes the browser reads: up to the end of the tensor table (the data offset less its padding)."""
    with open(path, "rb") as f:
        return f.read(gguf_header.read_header(path).data_offset)


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """Llama-3.1-8B's full geometry in Q4_K (~4.5 GB, a hole on disk) with a 128,256-token vocabulary."""
    return gguf_files.full_llama(tmp_path_factory.mktemp("gguf-browser") / "llama-3.1-8b.gguf")


def test_the_header_alone_gives_what_the_whole_file_gives(big):
    raw = header_of(big)
    size = big.stat().st_size
    assert 2**20 < len(raw) < HEADER_LIMIT < size  # a real vocabulary: MBs of header, GBs of file
    for encoding in ("gzip", "raw"):
        key, name, g, header, file_bytes = read_sent(sent(raw, size, encoding=encoding))
        assert (name, header, file_bytes) == ("model.gguf", len(raw), size)
        assert g == gguf.geometry(big, "model.gguf")
        assert key[0] == "gguf"


def test_the_files_size_bounds_its_tensors(big):
    raw = header_of(big)
    with pytest.raises(KvError) as e:  # the tensor table lies past a file of this size: truncated
        read_sent(sent(raw, big.stat().st_size - 1))
    assert e.value.code == "gguf_tensor_past_end"


def refusal(value) -> KvError:
    with pytest.raises(KvError) as e:
        read_sent(value)
    assert e.value.code in CODES and i18n.has("ja", f"errors.{e.value.code}"), e.value.code
    for lang in ("en", "ja"):  # one sentence, in each language
        text = i18n.error_text(lang, e.value)
        assert "\n" not in text and 0 < len(text) < 400, text
    return e.value


def test_every_refusal_is_one_sentence_with_its_code(big):
    raw = header_of(big)
    size = big.stat().st_size
    cases = {
        "not_gguf": (sent(b"PK\x03\x04", 10**6, "notes.gguf"), "gguf_not_gguf"),
        "limit": ({"name": "huge.gguf", "size": 10**10, "error": "limit"}, "gguf_browser_large"),
        "unread": (
            {"name": "gone.gguf", "size": 10**10, "error": "unreadable"},
            "gguf_browser_unread",
        ),
        "short": (sent(raw[: len(raw) // 2], size), "gguf_header_short"),
        "eof": (sent(raw[: len(raw) // 2], len(raw) // 2), "gguf_truncated"),
        "version": (sent(b"GGUF\x09\x00\x00\x00", size), "gguf_version"),
        "not_dict": ("GGUF", "gguf_browser_bad"),
        "no_size": ({**sent(raw, size), "size": "5"}, "gguf_browser_bad"),
        "size_below": ({**sent(raw, size), "size": len(raw) - 1}, "gguf_browser_bad"),
        "base64": ({**sent(raw, size), "data": "not base64!"}, "gguf_browser_bad"),
        "length": ({**sent(raw, size), "length": len(raw) + 1}, "gguf_browser_bad"),
        "encoding": ({**sent(raw, size), "encoding": "br"}, "gguf_browser_bad"),
        "gzip_bomb": (
            {**sent(b"\0" * (HEADER_LIMIT + 1), size), "length": HEADER_LIMIT},
            "gguf_browser_bad",
        ),
    }
    for what, (value, code) in cases.items():
        assert refusal(value).code == code, what
    assert "notes.gguf" in str(refusal(cases["not_gguf"][0]))
    assert f"{HEADER_MB} MB" in str(refusal(cases["limit"][0]))


def test_the_largest_header_promised_fits_one_message_streamlit_accepts():
    """A header of HEADER_LIMIT bytes that gzip cannot shrink (random bytes: stored blocks), base64 and its JSON
    envelope, under server.maxWidgetStateSize (the bound on what a browser may send in one message)."""
    worst = base64.b64encode(gzip.compress(os.urandom(HEADER_LIMIT), compresslevel=6))
    envelope = 64 * 1024  # the other fields, the other widgets' values, the protobuf around them
    assert len(worst) + envelope <= config.get_option("server.maxWidgetStateSize") * 1_000_000


@pytest.mark.parametrize(
    "value, code",
    [
        (sent(b"PK\x03\x04", 10**6, "notes.gguf"), "gguf_not_gguf"),
        ({**sent(b"GGUF", 10**6), "data": "not base64!"}, "gguf_browser_bad"),  # raised from None
    ],
)
def test_a_refused_header_is_kept_in_the_session_as_its_sentence_only(value, code):
    """Issue 38: the page kept the KvError itself, and its traceback kept the reader's frames and all they had
    built (1.4 GB with two sessions, minutes after they closed). What the session keeps has no traceback, cause
    or context, and says the same sentence."""
    state = {}
    remember(state, value)
    kept = state[CHOSEN]
    assert isinstance(kept, KvError) and kept.code == code
    assert (kept.__traceback__, kept.__context__, kept.__cause__) == (None, None, None)
    assert str(kept) == str(refusal(value)) and kept.params == refusal(value).params
