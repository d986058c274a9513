"""Hostile recording files, written by the tests: each class is refused in one sentence (English and Japanese)
before any data is built, with memory flat and nothing written. Cost is measured by work (tracemalloc's peak),
never by seconds."""

from __future__ import annotations

import copy
import tracemalloc

import pytest
from test_recordings import VALID

from kvcore.recordings import store as recordings
from kvcore.recordings.store import MAX_DEPTH, MAX_NODES, MAX_SCALAR, RecordingError
from kvsite import i18n


def _recording_with(method_yaml: str) -> str:
    """A valid recording whose free-form `method` mapping (nothing checks inside it) holds `method_yaml`."""
    data = copy.deepcopy(VALID)
    data["method"] = {"placeholder": 0}
    return recordings.dump_text(data).replace("  placeholder: 0\n", method_yaml)


def billion_laughs(levels: int = 10, width: int = 10, pad: int = 34_000) -> str:
    """~35 kB: anchors each listing `width` aliases of the one before: width**(levels-1) leaves once expanded
    (a billion here), in a valid recording, so that only what walks the data afterwards would notice."""
    lines = [f"  l0: &l0 [{'lol' * 3}]"]
    lines += [
        f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)
    ]
    lines.append(f"  note: {'x' * pad}")
    return _recording_with("\n".join(lines) + "\n")


def nested(levels: int, flow: bool) -> str:
    """`levels` lists inside one another, as flow ([[[...]]]) or block (- - - ...) YAML, under method.deep."""
    if flow:
        return _recording_with("  deep: " + "[" * levels + "1" + "]" * levels + "\n")
    return _recording_with(
        "  deep:\n"
        + "".join("  " * (i + 1) + "-\n" for i in range(levels - 1))
        + "  " * levels
        + "- 1\n"
    )


def many_values(n: int) -> str:
    return _recording_with("  values: [" + ", ".join(["0"] * n) + "]\n")


CASES = {  # file name -> (its text, the KvError code, words of the English sentence, words of the Japanese one)
    "laughs.yaml": (billion_laughs(), "rec_alias", "uses a YAML alias (*l0)", "エイリアス"),
    "merge.yaml": (
        _recording_with("  base: &b {warmup: 3}\n  copy:\n    <<: *b\n"),
        "rec_alias",
        "alias (*b)",
        "エイリアス",
    ),
    "deep-flow.yaml": (
        nested(500, flow=True),
        "rec_depth",
        f"nested deeper than {MAX_DEPTH} levels",
        "入れ子",
    ),
    "deep-flow-2000.yaml": (
        nested(2000, flow=True),
        "rec_depth",
        f"nested deeper than {MAX_DEPTH} levels",
        "入れ子",
    ),
    "deep-block.yaml": (
        nested(1000, flow=False),
        "rec_depth",
        f"nested deeper than {MAX_DEPTH} levels",
        "入れ子",
    ),
    "dashes.yaml": (
        _recording_with("  deep: " + "- " * 100_000 + "1\n").replace("deep: -", "deep:\n    -"),
        "rec_depth",
        "nested deeper",
        "入れ子",
    ),
    "values.yaml": (
        many_values(600_000),
        "rec_nodes",
        f"more than {MAX_NODES:,} values",
        "個を超えています",
    ),
    "scalar.yaml": (
        _recording_with(f"  note: {'x' * 1_900_000}\n"),
        "rec_scalar",
        f"longer than {MAX_SCALAR:,} characters",
        "文字を超えています",
    ),
    "key.yaml": (
        _recording_with(f"  {'k' * (MAX_SCALAR + 1)}: 1\n"),
        "rec_scalar",
        "longer than",
        "文字を超えています",
    ),
    "top-key.yaml": (
        recordings.dump_text({**VALID, "payload": [1, 2]}),
        "rec_top_key",
        "unknown top-level key 'payload'",
        "最上位のキー 'payload' は未知のキー",
    ),
    "digits.yaml": (
        _recording_with(f"  n: {'9' * 5000}\n"),
        "rec_yaml_value",
        "a value YAML cannot read",
        "読めない値",
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_hostile_file_is_refused_in_one_sentence_before_its_data_is_built(
    tmp_path, monkeypatch, name
):
    text, code, english, japanese = CASES[name]
    monkeypatch.setenv(recordings.DIR_ENV, str(tmp_path / "recordings"))  # where a save would go
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    raw = path.read_bytes()
    assert (
        len(raw) <= recordings.MAX_FILE_BYTES
    )  # every case passes the size check: the YAML itself is refused
    for read in (
        lambda: recordings.load(path),
        lambda: recordings.parse_bytes(raw, name),
    ):  # a bundled file, an upload
        tracemalloc.start()
        try:
            with pytest.raises(RecordingError) as caught:
                read()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        e = caught.value
        assert e.code == code, str(e)
        assert str(e).startswith(f"{name}: ") and english in str(e) and "Error" not in str(e), str(
            e
        )
        assert "\n" not in str(e) and str(e).count(". ") == 0, str(e)  # one sentence
        ja = i18n.error_text("ja", e)
        assert ja.startswith(f"{name}：") and japanese in ja and "⟨" not in ja, ja
        # memory flat: a few copies of the file's text at most (its bytes, the text decoded, at 2 bytes a character
        # when one is not Latin-1, encoded again for libyaml, one value), never the expanded graph (the billion
        # laughs: a billion leaves) nor a node per value of a 600,000-value list (~100 bytes each)
        assert peak < 8 * len(raw) + 1_000_000, (name, peak)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written


def test_the_billion_laughs_costs_no_more_than_reading_its_text():
    """The refusal comes at the first alias: the peak is that of a small file, whatever the file expands to."""
    text = billion_laughs()
    tracemalloc.start()
    try:
        with pytest.raises(RecordingError):
            recordings.parse_text(text, "laughs.yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(text.encode()) + 200_000, peak


@pytest.mark.parametrize("extra,ok", [(MAX_DEPTH - 2, True), (MAX_DEPTH - 1, False)])
def test_the_depth_limit_counts_levels_from_the_top(extra, ok):
    """method is level 2 under the top mapping: MAX_DEPTH - 2 lists inside it make MAX_DEPTH levels, accepted."""
    text = nested(extra, flow=True)
    if ok:
        assert recordings.parse_text(text).data["method"]["deep"]
    else:
        with pytest.raises(RecordingError, match="nested deeper"):
            recordings.parse_text(text)


def test_an_anchor_without_an_alias_and_a_long_but_allowed_value_still_load():
    rec = recordings.parse_text(_recording_with(f"  named: &n 1\n  command: {'x' * MAX_SCALAR}\n"))
    assert rec.data["method"]["named"] == 1 and len(rec.data["method"]["command"]) == MAX_SCALAR


def test_the_values_limit_is_exact():
    base = recordings.check_events(_recording_with(""))
    assert recordings.parse_text(many_values(MAX_NODES - base - 2)).data["method"][
        "values"
    ]  # +1 key, +1 list
    with pytest.raises(RecordingError, match="more than"):
        recordings.parse_text(many_values(MAX_NODES - base - 1))


def test_every_bundled_recording_is_well_inside_the_limits():
    for path in sorted(recordings.BUNDLED_DIR.glob("*.yaml")):
        assert (
            recordings.check_events(path.read_text(encoding="utf-8"), path.name) < MAX_NODES // 5
        ), path.name


# ---------------------------------------------------------------- saves invisible until whole (kill -9)

SAVE_STEPS = ("mkstemp", "write", "fsync", "link", "unlink")
# A child that saves VALID into a folder and stops at one step of recordings.save (after that step's call; "write":
# half the text written and flushed), says so, and waits to be killed.
CHILD = """
import json, os, sys, tempfile, time
from kvcore.recordings import store as recordings

folder, step, source = sys.argv[1], sys.argv[2], sys.argv[3]
data = json.loads(open(source, encoding="utf-8").read())

def stop(at):
    if at == step:
        print("at", at, flush=True)
        time.sleep(120)

def after(name, call):
    def wrapped(*args, **kwargs):
        result = call(*args, **kwargs)
        stop(name)
        return result
    return wrapped

class HalfWriter:
    def __init__(self, f):
        self.f = f
    def write(self, text):
        self.f.write(text[: len(text) // 2])
        self.f.flush()
        stop("write")
        return self.f.write(text[len(text) // 2 :])
    def __getattr__(self, name):
        return getattr(self.f, name)
    def __enter__(self):
        self.f.__enter__()
        return self
    def __exit__(self, *exc):
        return self.f.__exit__(*exc)

tempfile.mkstemp = after("mkstemp", tempfile.mkstemp)
os.fsync = after("fsync", os.fsync)
os.link = after("link", os.link)
os.unlink = after("unlink", os.unlink)
fdopen = os.fdopen
os.fdopen = lambda *a, **k: HalfWriter(fdopen(*a, **k))
print("saved", recordings.save(data, folder, stem="new-run"), flush=True)
"""


@pytest.mark.parametrize("step", SAVE_STEPS)
def test_a_save_killed_at_any_step_loses_nothing_and_shows_nothing_half_done(tmp_path, step):
    """A real process, killed with SIGKILL at each step of a save: the earlier run is still there, byte for byte;
    the folder holds no file the site loads but whole recordings (the new one whole, or not at all); the loader
    warns about nothing; and the next save still works."""
    import json
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from test_recordings import VALID

    root = Path(__file__).resolve().parents[1]
    folder = tmp_path / "local"
    earlier = recordings.save(VALID, folder, stem="earlier-run")
    before = earlier.read_bytes()
    source = tmp_path / "data.json"
    source.write_text(json.dumps(VALID), encoding="utf-8")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(folder), step, str(source)],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = child.stdout.readline()
        assert line.startswith(f"at {step}"), (line, child.stderr.read() if child.poll() else "")
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        child.wait(30)
    assert child.returncode == -signal.SIGKILL
    left = sorted(p.name for p in folder.iterdir())
    if step in ("mkstemp", "write", "fsync", "link"):
        assert any(n.startswith(recordings.TEMP_PREFIX) for n in left), (
            left
        )  # the kill left its temp file
    recs, errors = recordings.load_all([folder])
    assert errors == [], errors  # nothing warns on every page
    assert earlier.read_bytes() == before
    ids = sorted(r.id for r in recs)
    assert ids in (["earlier-run"], ["earlier-run", "new-run"]), ids
    for r in recs:
        assert r.data == recordings.load(earlier).data  # each whole
    assert (step in ("link", "unlink")) == ("new-run" in ids)
    again = recordings.save(VALID, folder, stem="after-run")
    assert recordings.load(again).data == VALID


def test_a_leftover_temporary_file_is_not_a_recording_and_a_stale_one_is_removed(tmp_path):
    """An empty temp file warned on every page; a whole one showed the same run twice."""
    import os
    import time

    from test_recordings import VALID

    folder = tmp_path / "local"
    recordings.save(VALID, folder, stem="run")
    empty = folder / f"{recordings.TEMP_PREFIX}abc123.yaml"
    empty.write_text("", encoding="utf-8")
    whole = folder / f"{recordings.TEMP_PREFIX}def456.yaml"
    whole.write_text(recordings.dump_text(VALID), encoding="utf-8")
    hidden = folder / ".run.yaml"
    hidden.write_text(recordings.dump_text(VALID), encoding="utf-8")
    recs, errors = recordings.load_all([folder])
    assert [r.id for r in recs] == ["run"] and errors == []
    old = time.time() - recordings.STALE_TEMP_S - 60
    os.utime(empty, (old, old))
    recordings.save(
        VALID, folder, stem="run"
    )  # the next save removes the stale one, not the fresh one
    assert not empty.exists() and whole.exists()
    assert not recordings.is_recording_name(".tmp-x.yaml") and recordings.is_recording_name(
        "a-b.yaml"
    )
    path = recordings.save(VALID, folder, stem="../../escape")
    assert path.parent == folder and recordings.is_recording_name(path.name)
