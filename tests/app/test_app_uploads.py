"""A reader's own recording, uploaded on the Recordings page: checked by the bundled files' loader, offered in
every chapter's source picker for that session only, never written; each malformed file gets one sentence in
the page's language."""

from __future__ import annotations

import re

import pytest
import yaml
from app_helpers import measured_recording, page, texts

from harness.inputs import memory_upload
from kvcore.recordings import store as recordings

JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")


def mac_run() -> bytes:
    data = measured_recording()
    data["provenance"]["machine"]["chip"] = "Apple M9 Upload Test"
    data["title"] = "an uploaded run"
    return yaml.safe_dump(data, sort_keys=False).encode("utf-8")


def upload(at, name: str, content: bytes):
    at.file_uploader(key="rec_upload").set_value((name, content, "application/x-yaml"))
    return at.run()


def test_an_uploaded_run_appears_in_every_chapters_picker_for_this_session_and_nothing_is_written(
    rec_dir, monkeypatch
):
    monkeypatch.setenv(recordings.READ_ONLY_ENV, "1")
    before = sorted((p.name, p.stat().st_mtime_ns) for p in rec_dir.rglob("*"))
    at = upload(page("pages/9_Recordings.py", "en"), "my-mac.yaml", mac_run())
    assert not at.exception
    mine = yaml.safe_load(mac_run())  # the run's own label and title are what the reader is told
    # shown as text (kvsite.layout.plain escapes its marks): what the reader sees, backslashes dropped
    assert [re.sub(r"\\(.)", r"\1", s.value) for s in at.success] == [
        f"Added for this session: Measured (CPU demonstration) (uploaded, this session only): "
        f"{mine['label']} ({mine['title']}). Pick it in any chapter's data-source picker."
    ]
    for path, section in [
        ("pages/4_Decode_slowdown.py", "decode"),
        ("pages/2_Nbytes_trap.py", "trap"),
        ("pages/1_Mechanism.py", "mechanism"),
    ]:
        at.switch_page(path).run()
        picker = at.selectbox(key="src__w")
        mine = [i for i, o in enumerate(picker.options) if "Apple M9 Upload Test" in o]
        assert [picker.options[i] for i in mine] == [
            "CPU demo · Apple M9 Upload Test · cpu-demo (uploaded)"
        ], section
        picker.select_index(mine[0]).run()
        assert not at.exception
        assert "Apple M9 Upload Test" in texts(at), (
            section
        )  # the badge names the uploaded run's chip
    other_reader = page("pages/4_Decode_slowdown.py", "en")
    assert not any(
        "Apple M9 Upload Test" in o for o in other_reader.selectbox(key="src__w").options
    )
    assert sorted((p.name, p.stat().st_mtime_ns) for p in rec_dir.rglob("*")) == before


def test_the_same_file_twice_is_one_run(rec_dir):
    at = upload(page("pages/9_Recordings.py", "en"), "a.yaml", mac_run())
    at = upload(at, "b.yaml", mac_run())
    assert len(at.session_state["kv_uploads"]) == 1
    assert (
        sum("(uploaded, this session only)" in o for o in at.selectbox(key="rec__w").options) == 1
    )


def test_a_session_keeps_its_last_uploads_only(rec_dir):
    from kvsite.inputs.uploads import MAX_KEPT

    at = page("pages/9_Recordings.py", "en")
    for n in range(MAX_KEPT + 2):
        at = upload(
            at,
            f"run{n}.yaml",
            mac_run().replace(b"Apple M9 Upload Test", f"Apple M9 Upload {n}".encode()),
        )
    kept = [n for n in range(MAX_KEPT + 2) if f"upload-run{n}" in at.session_state["kv_uploads"]]
    assert kept == list(range(2, MAX_KEPT + 2))


def test_a_session_keeps_a_bounded_number_of_bytes(rec_dir):
    """Five files near the size limit would hold ~10 MB per session: the oldest go once the total passes the bound."""
    from kvsite.inputs.uploads import MAX_SESSION_BYTES

    at = page("pages/9_Recordings.py", "en")
    padding = (
        b"# " + b"x" * (recordings.MAX_FILE_BYTES * 3 // 4) + b"\n"
    )  # a comment: bytes, no values
    for n in range(4):
        at = upload(
            at,
            f"big{n}.yaml",
            padding + mac_run().replace(b"Apple M9 Upload Test", f"Apple M9 Upload {n}".encode()),
        )
        assert not at.exception and at.success
    kept = [n for n in range(4) if f"upload-big{n}" in at.session_state["kv_uploads"]]
    assert kept == [2, 3] and 2 * len(padding) <= MAX_SESSION_BYTES < 3 * len(padding)


NESTED = ("a: " + "[" * 2000 + "]" * 2000).encode()
LAUGHS = mac_run().replace(
    b"method:\n",
    b"method:\n  l0: &l0 [lol, lol]\n"
    + b"".join(
        f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n".encode() for i in range(1, 10)
    ),
)  # 10**9 leaves expanded


@pytest.mark.parametrize(
    "name,content,ja",
    [
        ("big.yaml", b"# " + b"x" * recordings.MAX_FILE_BYTES, "2 MB を超えています"),
        (
            "photo.yaml",
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe",
            "UTF-8 のテキストではありません",
        ),
        ("broken.yaml", b"schema: 1\nkind: [measured\n", "行目が YAML として読めません"),
        ("nested.yaml", NESTED, "入れ子が 12 段を超えています"),
        ("laughs.yaml", LAUGHS, "YAML のエイリアス（*l0）を使っています"),
        ("values.yaml", b"a: [" + b"0, " * 40_000 + b"0]", "値が 30,000 個を超えています"),
        (
            "long.yaml",
            mac_run().replace(b"title: an uploaded run", b"title: " + b"x" * 30_000),
            "文字を超えています",
        ),
        ("top.yaml", mac_run() + b"extra: 1\n", "最上位のキー 'extra' は未知のキーです"),
        (
            "date.yaml",
            mac_run().replace(b"title: an uploaded run", b"title: 2026-13-45"),
            "読めない値があります",
        ),
        ("list.yaml", b"- 1\n- 2\n", "記録ファイルではありません"),
        (
            "v2.yaml",
            mac_run().replace(b"schema: 1", b"schema: 2"),
            "'schema' は 1 でなければなりません",
        ),
        (
            "kind.yaml",
            mac_run().replace(b"kind: measured", b"kind: guessed"),
            "'kind' は 'measured' か 'published'",
        ),
        (
            "nochip.yaml",
            mac_run().replace(b"chip: Apple M9 Upload Test", b"chip: ''"),
            "provenance.machine.chip は空でない",
        ),
        (
            "section.yaml",
            mac_run().replace(b"  mechanism:", b"  speedup:"),
            "'speedup' は未知のセクションです",
        ),
        (
            "negative.yaml",
            mac_run().replace(b"tokens_per_s: 34.7", b"tokens_per_s: -34.7"),
            "sections.decode[0].tokens_per_s は負の値",
        ),
        (
            "text.yaml",
            mac_run().replace(b"tokens_per_s: 34.7", b"tokens_per_s: fast"),
            "sections.decode[0].tokens_per_s は数値でなければ",
        ),
        (
            "field.yaml",
            mac_run().replace(b"tokens_per_s: 34.7", b"tokens_per_s: 34.7\n    speed: 1"),
            "未知のフィールド 'speed'",
        ),
    ],
)
def test_a_malformed_upload_gets_one_sentence_in_the_pages_language_and_adds_nothing(
    rec_dir, name, content, ja
):
    at = upload(page("pages/9_Recordings.py", "ja"), name, content)
    assert not at.exception
    [error] = [re.sub(r"\\(.)", r"\1", e.value) for e in at.error]  # as the reader reads it
    assert error.startswith(f"{name}：") and ja in error and "⟨" not in error, error
    assert not at.success and not any(
        "Apple M9 Upload Test" in o for o in at.selectbox(key="rec__w").options
    )
    english = upload(page("pages/9_Recordings.py", "en"), name, content)
    [sentence] = [e.value for e in english.error]
    assert sentence.startswith(f"{name}: ") and not JAPANESE.search(sentence), sentence


def test_an_uploaded_memory_figure_of_0_00001_leaves_the_recordings_page_working(rec_dir):
    """A figure of 0.00001 (repr '1e-05') raised an IndexError in published_memory._decimals: the Recordings
    page failed for the rest of the session. Its figures are computed when their expander opens."""
    tiny = memory_upload(2, value=0.00001, layers=16)
    tiny["sections"]["memory"][1]["value"] = 1e-300
    at = upload(page("pages/9_Recordings.py", "en"), "tiny.yaml", yaml.safe_dump(tiny).encode())
    assert not at.exception and not at.error and at.success
    at.session_state["rec_memory"] = True  # the reader opens the figures
    at.run()
    assert not at.exception and not at.error
    # an upload's words are text (kvsite.layout.plain): what the reader sees, backslashes dropped
    [table] = [
        re.sub(r"\\(.)", r"\1", m.value) for m in at.markdown if "| 100,000,000 |" in m.value
    ]
    assert "| 0.00001 GB |" in table and "| 0.000000 GB |" in table
    at.switch_page("pages/4_Decode_slowdown.py").run()
    assert not at.exception and not at.error


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_an_upload_of_3000_memory_figures_is_refused_in_one_sentence(rec_dir, lang):
    big = yaml.safe_dump(memory_upload(3000)).encode()
    at = upload(page("pages/9_Recordings.py", lang), "many.yaml", big)
    assert not at.exception
    [error] = [e.value for e in at.error]
    assert "3,000" in error and "32" in error and "\n" not in error
    assert (JAPANESE.search(error) is not None) == (lang == "ja")
    assert "kv_uploads" not in at.session_state or not at.session_state["kv_uploads"]
