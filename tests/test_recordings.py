"""Recordings: a broken file is always one named RecordingError; saving is atomic and never overwrites."""

import copy
import os
import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvcore.errors import CODES
from kvcore.recordings import store as recordings
from kvcore.recordings.store import RecordingError
from kvsite import i18n

VALID = {
    "schema": 1,
    "kind": "measured",
    "title": "Test run",
    "label": "Measured — test",
    "provenance": {
        "machine": {"os": "Linux 6.1 (x86_64)", "chip": "Test CPU", "memory_gb": 24.0},
        "backend": "mlx cpu",
        "device": "Device(cpu, 0)",
        "versions": {"python": "3.11.9", "mlx": "0.32.4", "mlx_lm": "0.32.2", "kvcore": "0.1.0"},
        "date": "2026-01-01T00:00:00Z",
        "command": "python -m kvcore record --model cpu-demo",
    },
    "model": {
        "name": "cpu-demo",
        "source": "random weights",
        "weights_format": "fp32",
        "kv_format": "fp32",
    },
    "method": {"fill": "synthetic", "warmup": 3, "steps": 16, "repeats": 3},
    "sections": {
        "decode": [
            {
                "context": 256,
                "tokens_per_s": 34.7,
                "ms_per_token": 28.8,
                "spread_ms": 0.5,
                "repeats": 3,
                "kv_format": "fp32",
            }
        ],
        "trap": [
            {
                "tokens": 257,
                "allocated_mib": 16.0,
                "used_mib": 8.03125,
                "theory_mib": 8.03125,
                "capacity": 512,
                "cache": "KVCache",
                "pattern": "token by token",
            }
        ],
        "growth": [
            {
                "context": 1024,
                "allocated_mib": 32.0,
                "used_mib": 32.0,
                "theory_mib": 32.0,
                "peak_mib": 65.0,
            }
        ],
        "mechanism": [{"new_tokens": 1, "with_cache_s": 0.1, "without_cache_s": 0.1}],
    },
}
VALID_TEXT = recordings.dump_text(VALID)
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _load_text(tmp_path, text: str | bytes, name: str = "fuzz.yaml"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return recordings.load(path)


def _assert_named_error(tmp_path, content, name: str = "fuzz.yaml") -> None:
    try:
        _load_text(tmp_path, content, name)
    except RecordingError as e:
        assert str(e).startswith(name + ":")
        assert e.code in CODES and e.params["label"] == name, (
            e
        )  # a reader's upload can cause it: said in Japanese
        ja = i18n.error_text("ja", e)
        assert ja.startswith(name + "：") and "⟨" not in ja, ja
    # a fuzzed file may happen to be valid; any other exception fails the test


@FUZZ
@given(st.binary(max_size=2000))
def test_random_bytes_give_a_named_error(tmp_path, data):
    _assert_named_error(tmp_path, data)


@FUZZ
@given(st.text(max_size=2000))
def test_random_text_gives_a_named_error(tmp_path, text):
    _assert_named_error(tmp_path, text.encode("utf-8", "replace"))


@FUZZ
@given(st.integers(min_value=0, max_value=len(VALID_TEXT) - 1))
def test_truncated_valid_yaml_gives_a_named_error(tmp_path, cut):
    _assert_named_error(tmp_path, VALID_TEXT[:cut])


ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
PATHS = [
    ("schema",),
    ("kind",),
    ("title",),
    ("provenance",),
    ("provenance", "machine"),
    ("provenance", "versions", "mlx"),
    ("provenance", "command"),
    ("model",),
    ("model", "name"),
    ("method",),
    ("sections",),
    ("sections", "decode"),
    ("sections", "decode", 0),
    ("sections", "decode", 0, "tokens_per_s"),
    ("sections", "trap", 0, "cache"),
    ("sections", "growth", 0, "context"),
    ("sections", "mechanism", 0, "with_cache_s"),
]


def _set(data, path, value):
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def _delete(data, path):
    target = data
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]


@FUZZ
@given(st.sampled_from(PATHS), ANY)
def test_wrong_types_give_a_named_error(tmp_path, path, value):
    data = copy.deepcopy(VALID)
    _set(data, path, value)
    _assert_named_error(tmp_path, yaml.safe_dump(data, allow_unicode=True))


@pytest.mark.parametrize("path", PATHS)
def test_missing_fields_give_a_named_error(tmp_path, path):
    data = copy.deepcopy(VALID)
    _delete(data, path)
    if path in (("sections", "decode"), ("sections", "trap", 0, "cache")):  # optional: still valid
        recordings.validate(data)
        return
    with pytest.raises(RecordingError, match=r"^missing\.yaml: "):
        _load_text(tmp_path, yaml.safe_dump(data, allow_unicode=True), "missing.yaml")


@pytest.mark.parametrize(
    "value", [1e300, 10**400, -1, float("inf"), float("nan"), "12", True, None, [1], {"a": 1}]
)
def test_bad_numbers_are_refused(tmp_path, value):
    data = copy.deepcopy(VALID)
    data["sections"]["decode"][0]["tokens_per_s"] = value
    text = (
        VALID_TEXT.replace("tokens_per_s: 34.7", f"tokens_per_s: {value}")
        if value == 10**400
        else yaml.safe_dump(data)
    )
    with pytest.raises(RecordingError, match=r"^n\.yaml: .*tokens_per_s"):
        _load_text(tmp_path, text, "n.yaml")


@pytest.mark.parametrize(
    "text",
    [
        "[" * 5000 + "]" * 5000,
        "a: " + "{b: " * 3000 + "1" + "}" * 3000,
        "date: 99999-99-99",
        "x: !!python/object:os.system ls",
        "&a [*a]",
        "\x00\x01",
        "schema: 1\nkind: measured\n" * 2,
        "- 1\n- 2",
        "",
        "~",
    ],
)
def test_hostile_yaml_gives_a_named_error(tmp_path, text):
    with pytest.raises(RecordingError, match=r"^h\.yaml: "):
        _load_text(tmp_path, text, "h.yaml")


def test_an_oversized_file_is_refused(tmp_path):
    with pytest.raises(RecordingError, match="big.yaml: is larger than"):
        _load_text(tmp_path, "# " + "x" * (recordings.MAX_FILE_BYTES + 10), "big.yaml")


def test_a_valid_recording_round_trips_exactly(tmp_path):
    path = recordings.save(copy.deepcopy(VALID), tmp_path)
    assert recordings.load(path).data == VALID


def test_a_decode_rows_per_pass_spread_round_trips_and_older_rows_without_it_still_load(tmp_path):
    data = copy.deepcopy(VALID)
    assert not {"q1_ms", "q3_ms", "pass_ms"} & set(
        data["sections"]["decode"][0]
    )  # an older row: still valid
    recordings.validate(copy.deepcopy(data))
    data["sections"]["decode"].append(
        {
            "context": 512,
            "tokens_per_s": 30.0,
            "ms_per_token": 33.3,
            "min_ms": 31.0,
            "max_ms": 40.0,
            "q1_ms": 32.0,
            "q3_ms": 35.5,
            "pass_ms": [31.0, 33.3, 40, 32.0, 35.5],
            "repeats": 5,
        }
    )
    assert recordings.load(recordings.save(copy.deepcopy(data), tmp_path)).data == data


@pytest.mark.parametrize(
    "value", [[], ["1"], [-1.0], 3.5, "1, 2", [1.0, None], [True], [[1.0]], [1e300]]
)
def test_a_bad_pass_list_is_refused_with_its_place(tmp_path, value):
    data = copy.deepcopy(VALID)
    data["sections"]["decode"][0]["pass_ms"] = value
    with pytest.raises(RecordingError, match=r"^p\.yaml: sections\.decode\[0\]\.pass_ms"):
        _load_text(tmp_path, yaml.safe_dump(data), "p.yaml")


def test_save_never_overwrites(tmp_path):
    first = recordings.save(copy.deepcopy(VALID), tmp_path, stem="run")
    second = recordings.save(copy.deepcopy(VALID), tmp_path, stem="run")
    assert first != second and first.name == "run.yaml" and second.name == "run-2.yaml"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "run-2.yaml",
        "run.yaml",
    ]  # no temporary files left


def test_read_only_mode_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv(recordings.READ_ONLY_ENV, "1")
    assert not recordings.writable(tmp_path)
    with pytest.raises(RecordingError, match="read-only"):
        recordings.save(copy.deepcopy(VALID), tmp_path / "new")
    assert not (tmp_path / "new").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_an_unwritable_folder_gives_a_recording_error(tmp_path):
    folder = tmp_path / "locked"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(RecordingError, match="cannot save"):
            recordings.save(copy.deepcopy(VALID), folder)
    finally:
        folder.chmod(0o700)


def test_a_folder_that_is_a_file_gives_a_recording_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(RecordingError, match="cannot save"):
        recordings.save(copy.deepcopy(VALID), blocker / "sub")


def test_an_invalid_recording_is_not_saved(tmp_path):
    data = copy.deepcopy(VALID)
    del data["provenance"]
    with pytest.raises(RecordingError):
        recordings.save(data, tmp_path)
    assert not list(tmp_path.iterdir())


def test_load_all_skips_a_broken_file_and_loads_the_rest(tmp_path):
    recordings.save(copy.deepcopy(VALID), tmp_path, stem="good")
    (tmp_path / "broken.yaml").write_text("schema: 1\nkind: [", encoding="utf-8")
    loaded, errors = recordings.load_all([tmp_path])
    assert [r.id for r in loaded] == ["good"]
    assert len(errors) == 1 and errors[0].startswith("broken.yaml: ")


def test_every_bundled_spread_is_of_the_pass_medians_it_lists():
    """q1_ms/q3_ms are the quartiles of a row's pass_ms (kvcore.measure.timing.pass_spread), in every runtime's runs:
    llama.cpp's record once wrote quartiles over every timed step under the same names."""
    from kvcore.measure.timing import quartiles

    rows = [
        (path.name, row)
        for path in sorted(recordings.BUNDLED_DIR.glob("measured-*.yaml"))
        for section in yaml.safe_load(path.read_text(encoding="utf-8"))["sections"].values()
        for row in section
        if isinstance(row, dict) and "pass_ms" in row and "q1_ms" in row
    ]
    assert len({name for name, _ in rows}) >= 3  # the mlx_lm, llama.cpp and prefill/batch runs
    for name, row in rows:
        q1, _, q3 = quartiles(row["pass_ms"])
        assert (row["q1_ms"], row["q3_ms"]) == pytest.approx((q1, q3), rel=1e-3, abs=1e-4), name


@pytest.mark.parametrize(
    "path", sorted(recordings.BUNDLED_DIR.glob("*.yaml")), ids=lambda p: p.name
)
def test_bundled_recordings_validate(path):
    rec = recordings.load(path)
    assert rec.bundled
    if rec.kind == "measured":
        # the command as typed (after the environment variables that chose the BLAS and its threads, if any): kvcore's
        # record command, its quality command, or a recording script in this repository
        command = rec.data["provenance"]["command"]
        script = re.fullmatch(r"python (scripts/\S+\.py)( .*)?", command)
        kvcore = r"([A-Z_]+=\S+ )*python -m kvcore (record|quality) .*"
        assert re.fullmatch(kvcore, command, re.S) or (
            script and (recordings.BUNDLED_DIR.parent / script[1]).is_file()
        )
        if rec.data["provenance"]["backend"] == "mlx cpu":
            assert "not Apple Silicon" in rec.label


def test_a_methods_fields_are_grouped_by_section_in_recorded_order():
    from kvcore.recordings.provenance import method_groups

    method = {
        "fill": "synthetic",
        "warmup": 3,
        "decode": {"steps": 16, "repeats": 5},
        "backend": {"device": "cpu"},
        "cross_checks": [
            {"check": "generate_step", "context": 2048, "ratio": 0.99},
            {"context": 4096},
        ],
    }
    assert method_groups(method) == [
        ("", [("fill", "synthetic"), ("warmup", 3)]),
        ("decode", [("steps", 16), ("repeats", 5)]),
        ("backend", [("device", "cpu")]),
        (
            "cross_checks",
            [("generate_step", {"context": 2048, "ratio": 0.99}), ("2", {"context": 4096})],
        ),
    ]
    assert method_groups({}) == [] and method_groups("real prefill") == [
        ("", [("note", "real prefill")])
    ]


def test_provenance_of_a_bundled_measured_run_carries_every_field_the_card_shows():
    from kvcore.recordings.provenance import badge_fields, method_groups

    recs, _ = recordings.load_all()
    p = badge_fields(next(r for r in recs if r.id == "measured-linux-cpu-demo-mlx-cpu"))
    assert [g for g, _ in method_groups(p["method"])] == [
        "trap",
        "growth",
        "decode",
        "mechanism",
        "backend",
        "cross_checks",
    ]
    assert (
        p["memory_gb"] == 25.3 and p["command"].startswith("python -m kvcore record") and p["date"]
    )
    assert p["weights_format"] == "fp32" and p["kv_format"] == "fp32" and not p["citation"]
    published = badge_fields(next(r for r in recs if r.id == "published-article-a-m5-pro"))
    assert (
        published["citation"]
        and published["note"]
        and published["vendor"] == "Apple"
        and method_groups(published["method"]) == []
    )


def test_a_rows_fields_are_stated_once_and_written_out_from_there():
    """ROW_FIELDS is the one statement; validation (SECTIONS, TEXT_FIELDS, ...) and schema_rows() come from it."""
    lines = dict(line.split(": ", 1) for line in recordings.schema_rows().splitlines())
    assert set(lines) == set(recordings.ROW_FIELDS)
    for section, text in lines.items():
        named = {word.strip('"[], ') for word in text.replace("[,", ",").split(",")}
        assert named == recordings.known_fields(section), section


# ---------------------------------------------------------------- formats a recording names (issue 15)


@pytest.mark.parametrize(
    "key, wrong", [("kv_format", "fp61"), ("weights_format", "mlx-q44"), ("kv_format", "q8-0")]
)
def test_a_misspelled_format_is_refused_in_one_sentence(tmp_path, key, wrong):
    data = copy.deepcopy(VALID)
    data["model"][key] = wrong
    with pytest.raises(RecordingError) as e:
        _load_text(tmp_path, recordings.dump_text(data), "typo.yaml")
    text = str(e.value)
    assert text.startswith(f"typo.yaml: model.{key} '{wrong}' is not") and "write 'unknown'" in text
    assert text.count(". ") == 0 and len(text.splitlines()) == 1  # one sentence
    assert e.value.code == "rec_format" and wrong in i18n.error_text("ja", e.value)


@pytest.mark.parametrize(
    "key, value",
    [
        ("kv_format", "unknown"),
        ("weights_format", "various"),
        ("kv_format", "f16"),
        ("weights_format", "IQ2_XXS (llama.cpp GGUF)"),
        ("weights_format", "gguf-q8_0"),
    ],
)
def test_a_format_the_source_does_not_state_or_spells_as_llama_cpp_does_is_kept(
    tmp_path, key, value
):
    data = copy.deepcopy(VALID)
    data["model"][key] = value
    assert _load_text(tmp_path, recordings.dump_text(data)).data["model"][key] == value


# ---------------------------------------------------------------- mlx_lm's peak, measured (issue 27)

PEAK_ROW = {
    "prompt_tokens": 257,
    "generated": 1,
    "prefill_step": 2048,
    "kv_format": "fp32",
    "peak_mib": 24.5,
    "peak_runs_mib": [24.5, 24.6],
    "repeats": 2,
    "allocated_mib": 22.5,
    "used_mib": 11.3,
}


def _with_peak(**row) -> dict:
    data = copy.deepcopy(VALID)
    data["sections"]["peak"] = [{**copy.deepcopy(PEAK_ROW), **row}]
    return data


def test_a_peak_row_round_trips_and_a_quantized_one_names_its_start(tmp_path):
    data = _with_peak()
    data["sections"]["peak"].append(
        {**copy.deepcopy(PEAK_ROW), "kv_format": "mlx-q8", "quantized_kv_start": 0}
    )
    rec = _load_text(tmp_path, recordings.dump_text(data), "peak.yaml")
    assert rec.rows("peak") == data["sections"]["peak"]


@pytest.mark.parametrize(
    "change, where",
    [
        ({"kv_format": "fp61"}, "sections.peak[0].kv_format 'fp61' is not a KV cache format"),
        ({"generated": 0.5}, "sections.peak[0].generated must be a whole number"),
        ({"quantized_kv_start": 1.5}, "sections.peak[0].quantized_kv_start must be a whole"),
        (
            {"prompt_tokens": 0},
            "sections.peak[0].prompt_tokens must be a whole number of at least 1",
        ),
        (
            {"prefill_step": 512.5},
            "sections.peak[0].prefill_step must be a whole number of at least",
        ),
        ({"peak_mib": "24"}, "sections.peak[0].peak_mib must be a number"),
        ({"peak_runs_mib": []}, "sections.peak[0].peak_runs_mib must be a non-empty list"),
        (
            {"plan_mib": 23.0},
            "sections.peak[0] has an unknown field 'plan_mib'",
        ),  # never the plan's
        ({"kv_format": None}, "sections.peak[0].kv_format must be text"),
    ],
)
def test_a_malformed_peak_row_is_refused_in_one_sentence(tmp_path, change, where):
    data = _with_peak(**change)
    with pytest.raises(RecordingError) as e:
        _load_text(tmp_path, recordings.dump_text(data), "peak.yaml")
    text = str(e.value)
    assert text.startswith(f"peak.yaml: {where}"), text
    assert len(text.splitlines()) == 1 and e.value.code in CODES
    ja = i18n.error_text("ja", e.value)
    assert ja.startswith("peak.yaml：") and "⟨" not in ja, ja


def test_a_peak_row_without_its_format_is_refused(tmp_path):
    data = _with_peak()
    del data["sections"]["peak"][0]["kv_format"]
    with pytest.raises(
        RecordingError, match=r"^p\.yaml: sections\.peak\[0\] is missing 'kv_format'$"
    ):
        _load_text(tmp_path, recordings.dump_text(data), "p.yaml")
