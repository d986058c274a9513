"""Published prompt-processing and batched-decode runs (reference: prefill_batching.md) bundled as recordings: each
loads through the one schema (recordings.ROW_FIELDS: prefill, batch), names its source (URL, author, date, grade,
command or settings, how `context` is read) and keeps only the points the source states, as it prints them."""

from __future__ import annotations

import pytest

from kvcore.recordings import store as recordings
from kvcore.recordings.store import RecordingError

BUNDLED, ERRORS = recordings.load_all([recordings.BUNDLED_DIR])
BY_ID = {r.id: r for r in BUNDLED}
RUNS = [r for r in BUNDLED if r.kind == "published" and (r.has("prefill") or r.has("batch"))]


def test_every_published_prefill_and_batch_run_loads():
    assert ERRORS == []
    assert {r.id for r in RUNS} >= {
        "published-mlx-vlm-2153-m3-ultra-batch",
        "published-llamacpp-16894-batched-bench",
        "published-mlx-lm-468-granite-4.0-tiny-batch",
        "published-mlx-lm-478-qwen3-next-80b-batch",
        "published-llamacpp-25893-m4-max-deepseek4-pp-tg",
    }


@pytest.mark.parametrize("rec", RUNS, ids=lambda r: r.id)
def test_each_names_its_source(rec):
    c = rec.data["citation"]
    assert c["url"].startswith("https://github.com/"), c["url"]
    for key in ("author", "date", "grade", "settings", "context_rule"):
        assert str(c.get(key, "")).strip(), key
    assert c["grade"] in recordings.GRADES
    assert rec.data["runtime"]["name"] and rec.data["runtime"]["version"]
    if not rec.data["hardware"].get("chip_stated"):
        assert (
            "not stated" in rec.data["hardware"]["chip"]
        )  # an inferred chip is never given as the chip
    if rec.data["model"].get("unusual") or rec.data["model"].get("hybrid"):
        assert rec.data["model"]["architecture_note"]


@pytest.mark.parametrize("rec", RUNS, ids=lambda r: r.id)
def test_only_stated_points_one_row_each(rec):
    keys = [(r.get("series"), r["batch"], r["context"]) for r in rec.rows("batch")]
    assert len(keys) == len(set(keys))  # one row per stated (model, batch, context)
    keys = [
        (r.get("series"), r.get("batch", 1), r["prompt_tokens"], r.get("depth", 0))
        for r in rec.rows("prefill")
    ]
    assert len(keys) == len(set(keys))
    for r in rec.rows("batch") + rec.rows("prefill"):
        for v in r.values():
            if isinstance(v, float):
                assert round(v, 3) == v  # as printed in the source (3 decimals at most)


def test_the_quoted_numbers_are_the_sources():
    vlm = BY_ID["published-mlx-vlm-2153-m3-ultra-batch"].rows("batch")
    small = {
        (r["batch"], r["context"]): r["tokens_per_s_total"]
        for r in vlm
        if r["series"] == "K2-Horizon 0.9B"
    }
    assert [small[(b, 512)] for b in (1, 2, 4)] == [168.3, 348.3, 671.6]
    assert [small[(b, 16384)] for b in (1, 2, 4)] == [119.8, 182.9, 279.3]
    assert not any(
        r["series"] == "K2-Horizon 3.7B" and r["batch"] == 4 and r["context"] == 16384 for r in vlm
    )  # "101.x": not a point
    bench = BY_ID["published-llamacpp-16894-batched-bench"].rows("batch")
    assert [
        r["tokens_per_s_total"]
        for r in bench
        if r["series"].startswith("qwen2") and r["context"] == 512
    ] == [79.04, 136.37, 224.52]
    granite = BY_ID["published-mlx-lm-468-granite-4.0-tiny-batch"]
    assert [r["tokens_per_s_total"] for r in granite.rows("batch")] == [133.149, 809.770]
    assert "-p 128 -g 128" in granite.data["citation"]["command"]
    pp = BY_ID["published-llamacpp-25893-m4-max-deepseek4-pp-tg"].rows("prefill")
    assert [(r["depth"], r["tokens_per_s"], r.get("tg_tokens_per_s")) for r in pp] == [
        (0, 301.51, 10.42),
        (10000, 238.83, 10.36),
        (20000, 200.27, 10.05),
        (30000, 175.17, None),
    ]


def _rec(section: str, row: dict) -> dict:
    return {
        "schema": 1,
        "kind": "published",
        "title": "t",
        "citation": {"source": "s"},
        "model": {"name": "m"},
        "sections": {section: [row]},
    }


@pytest.mark.parametrize(
    "section, row, message",
    [
        (
            "batch",
            {"batch": 0, "context": 512, "tokens_per_s_total": 1.0},
            "whole number of at least 1",
        ),
        (
            "batch",
            {"batch": 2.5, "context": 512, "tokens_per_s_total": 1.0},
            "whole number of at least 1",
        ),
        ("batch", {"batch": 2, "context": 512}, "missing 'tokens_per_s_total'"),
        (
            "batch",
            {"batch": 2, "context": 512, "tokens_per_s_total": 1.0, "tok_s": 3},
            "unknown field",
        ),
        ("prefill", {"prompt_tokens": 0, "tokens_per_s": 1.0}, "whole number of at least 1"),
        ("prefill", {"prompt_tokens": 512, "tokens_per_s": -1.0}, "must not be negative"),
        ("prefill", {"prompt_tokens": 512, "tokens_per_s": 1.0, "series": 3}, "must be text"),
    ],
)
def test_a_bad_row_is_refused_with_its_field(section, row, message):
    with pytest.raises(RecordingError, match=message) as e:
        recordings.validate(_rec(section, row))
    assert e.value.code in ("rec_count", "rec_missing", "rec_field", "rec_negative", "rec_not_text")


GOOD_ROWS = [
    (
        "batch",
        {"batch": 4, "context": 2048, "tokens_per_s_total": 582.4, "series": "K2-Horizon 0.9B"},
    ),
    (
        "prefill",
        {"prompt_tokens": 2048, "tokens_per_s": 301.51, "depth": 0, "tg_tokens_per_s": 10.42},
    ),
]


@pytest.mark.parametrize("section, row", GOOD_ROWS, ids=[s for s, _ in GOOD_ROWS])
def test_a_good_row_of_each_new_section_is_kept_as_written(section, row):
    """Every field of a good row (optional ones too) passes and is read back as written; the same
    recording with one of its fields misspelt is refused, so the check reads this row."""
    kept = recordings.Recording(None, recordings.validate(_rec(section, dict(row))))
    assert kept.rows(section) == [row]
    optional = list(row)[-1]
    misspelt = {f"{optional}_x" if k == optional else k: v for k, v in row.items()}
    with pytest.raises(RecordingError, match=f"unknown field.*{optional}_x"):
        recordings.validate(_rec(section, misspelt))
