"""A reader's own GGUF in Chromium: a ~5.5 GB file (Llama-3.1-8B's full geometry in Q5_K, a real-size vocabulary;
the data a hole on disk) chosen in the Calculator is sized from its header, and the browser sends the server no
more than that header: every websocket frame and HTTP request body the page sends, as Chromium reports them, is
counted. A file that is not GGUF is refused in one sentence, in English and in Japanese, having sent its first
four bytes."""

from __future__ import annotations

import re
import struct

import gguf_files
import pytest
from gguf import GGMLQuantizationType
from playwright.sync_api import expect

from kvcore.errors import KvError
from kvcore.inputs import gguf, gguf_header
from kvcore.inputs.preset_files import load_preset
from kvcore.units import fmt_bytes
from kvsite.sections.calc.gguf_browser import HEADER_MB

ENVELOPE = 64 * 1024  # a rerun message's other fields and widget values


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf-big") / "Llama-3.1-8B-Q5_K.gguf"
    return gguf_files.full_llama(path, weight_type=GGMLQuantizationType.Q5_K)


class Sent:
    """The bytes the page sends the server: websocket frames (Streamlit's only channel back) and request bodies."""

    def __init__(self, page):
        self.frames: list[int] = []
        self.bodies: list[int] = []
        page.on("websocket", lambda ws: ws.on("framesent", self._frame))
        page.on("request", lambda r: self.bodies.append(len(r.post_data_buffer or b"")))

    def _frame(self, payload) -> None:
        self.frames.append(len(payload))

    def total(self) -> int:
        return sum(self.frames) + sum(self.bodies)


def _mounted(page) -> None:
    """The picker's script has run: it writes the label, then sets the input's and the drop's handlers in the same
    task (kvsite/sections/calc/gguf_reader.js); a file given before that would go unread."""
    expect(page.locator(".kv-pick .kv-label")).to_have_text(re.compile(r"\S"), timeout=30_000)


def _choose(page, ready, path) -> None:
    """Choose a file and wait for the page to settle. The browser reads the file and sends its header on its own
    time (on a loaded machine, after this returns), so what follows waits for what it expects, up to 30 s."""
    _mounted(page)
    page.locator("input[type=file][accept='.gguf']").set_input_files(str(path))
    page.wait_for_timeout(300)
    ready(page)


def test_a_5_gb_gguf_is_sized_from_its_header_and_only_the_header_is_sent(server, page, ready, big):
    size = big.stat().st_size
    header = gguf_header.read_header(
        big
    ).data_offset  # the tensor table's end, rounded to its alignment
    assert size > 5 * 10**9 and big.stat().st_blocks * 512 < 2 * header  # 5.5 GB, a few MB on disk
    sent = Sent(page)
    page.goto(f"{server}/Calculator?lang=en&msrc=gguf")
    ready(page)
    before = sent.total()
    _choose(page, ready, big)
    read = page.get_by_text(f"{big.name}: its header")
    expect(read).to_be_visible(timeout=60_000)
    expect(read).to_contain_text(f"of {fmt_bytes(size)}")
    weights = gguf.geometry(
        big
    ).file_weights.bytes  # the tensor table, read here from the whole file
    expect(page.locator("[data-testid='stMetric']").nth(1)).to_contain_text(
        fmt_bytes(weights, decimal=False)
    )
    assert page.locator("[data-testid='stAlertContentError']").count() == 0
    assert page.locator("[data-testid='stException']").count() == 0
    uploaded = sent.total() - before
    # the header in base64 at most (the browser gzips it: a vocabulary shrinks), never the 5.5 GB behind it
    assert 0 < uploaded <= header * 4 // 3 + ENVELOPE, (uploaded, header)
    assert max(sent.bodies, default=0) < ENVELOPE  # no upload request: the websocket carried it


@pytest.mark.parametrize(
    "lang, words",
    [("en", "notes.gguf is not a GGUF file"), ("ja", "notes.gguf は GGUF ファイルではありません")],
)
def test_a_file_that_is_not_gguf_gets_one_sentence(server, page, ready, tmp_path, lang, words):
    notes = tmp_path / "notes.gguf"
    notes.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4096)  # a zip-like 1 MB
    sent = Sent(page)
    page.goto(f"{server}/Calculator?lang={lang}&msrc=gguf")
    ready(page)
    before = sent.total()
    _choose(page, ready, notes)
    error = page.locator("[data-testid='stAlertContentError']")
    expect(error).to_have_count(1, timeout=30_000)
    expect(error).to_contain_text(words)
    assert error.inner_text().count("\n") == 0
    assert page.locator("[data-testid='stException']").count() == 0
    assert sent.total() - before < ENVELOPE  # its first four bytes, not the file


def _gguf(*kvs: bytes, n_kv: int | None = None, n_tensors: int = 0, version: int = 3) -> bytes:
    """A GGUF's first bytes by hand: magic, version, counts, then the given key-values as they are."""
    n = len(kvs) if n_kv is None else n_kv
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n) + b"".join(kvs)


def _s(text: bytes, length: int | None = None) -> bytes:
    return struct.pack("<Q", len(text) if length is None else length) + text


HOSTILE = {  # a file the browser's walk stops on: the server says what the engine says of the whole file
    "cut.gguf": _gguf(_s(b"general.name") + struct.pack("<I", 8) + _s(b"x" * 1000, 10**6)),
    "type.gguf": _gguf(_s(b"general.name") + struct.pack("<I", 99) + b"\0" * 64),
    "count.gguf": _gguf(b"\0" * 64, n_kv=10**6),
    "key.gguf": _gguf(_s(b"", 2**40) + b"\0" * 64),
    "array.gguf": _gguf(_s(b"a") + struct.pack("<IIQ", 9, 4, 10**9) + b"\0" * 64),
    "nested.gguf": _gguf(
        _s(b"a") + struct.pack("<I", 9) + struct.pack("<IQ", 9, 1) * 5 + b"\0" * 64
    ),
    "v1.gguf": _gguf(b"\0" * 64, version=1),
    "dims.gguf": _gguf(n_tensors=1, n_kv=0) + _s(b"t") + struct.pack("<I", 7) + b"\0" * 64,
}


def test_where_the_browser_stops_the_server_says_what_the_engine_says(
    server, page, ready, tmp_path
):
    """Each rule the engine's reader holds a file to, broken: the browser's walk stops at the field that breaks it
    and sends the bytes up to there, and the page's sentence is the one the engine gives reading the whole file
    (never "the header goes on past the bytes given", which would mean the two walks disagree). A header past
    the limit is not sent: its own sentence, in Japanese too."""
    page.goto(f"{server}/Calculator?lang=en&msrc=gguf")
    ready(page)
    error = page.locator("[data-testid='stAlertContentError']")
    for name, data in HOSTILE.items():
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(KvError) as e:
            gguf.geometry(path, name)
        _choose(page, ready, path)
        expect(error).to_have_count(1, timeout=30_000)
        expect(error).to_contain_text(str(e.value)[:60], timeout=30_000)
        assert e.value.code != "gguf_header_short"
    big_string = _gguf(_s(b"general.name") + struct.pack("<I", 8) + _s(b"x" * 17_000_000))
    (tmp_path / "long.gguf").write_bytes(big_string)
    page.goto(f"{server}/Calculator?lang=ja&msrc=gguf")
    ready(page)
    sent = Sent(page)
    _choose(page, ready, tmp_path / "long.gguf")
    expect(error).to_have_count(1, timeout=30_000)
    expect(error).to_contain_text(
        f"long.gguf のヘッダー（メタデータとテンソルの一覧）は {HEADER_MB} MB を超えて",
        timeout=30_000,
    )
    assert sent.total() < ENVELOPE


def test_a_file_dropped_on_the_picker_is_read_as_a_chosen_one(server, page, ready, tmp_path):
    arch, keys = gguf_files.metadata(load_preset("llama-3.2-1b")["config"])
    path = gguf_files.write(tmp_path / "small.gguf", arch, keys, {})  # 2 kB: the drop carries it
    page.goto(f"{server}/Calculator?lang=en&msrc=gguf")
    ready(page)
    drop = page.evaluate_handle(
        "([name, bytes]) => { const t = new DataTransfer();"
        " t.items.add(new File([new Uint8Array(bytes)], name)); return t; }",
        [path.name, list(path.read_bytes())],
    )
    _mounted(page)
    page.locator(".kv-pick").dispatch_event("drop", {"dataTransfer": drop})
    expect(page.get_by_text(f"{path.name}: its header")).to_be_visible(timeout=30_000)
    ready(page)
    assert page.locator("[data-testid='stAlertContentError']").count() == 0
