"""Quality by position (kvcore.measure.positions, long_context): the per-position figures and their summaries,
where a sweep pauses for its questions, the schema of the long_context and retrieval sections, and the bundled
long-context recordings: every figure of one point recomputed from the logits saved beside them, and the
retrieval baseline right at every length."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvcore.measure import long_context as lc
from kvcore.measure import positions as pos
from kvcore.measure.quality import log_softmax
from kvcore.recordings import store as recordings
from kvcore.recordings.check import validate
from kvcore.recordings.schema import RecordingError

LONG = sorted(recordings.BUNDLED_DIR.glob("measured-*long-context.yaml"))


def _logprobs(seed: int, n: int = 64, vocab: int = 300, scale: float = 3.0) -> np.ndarray:
    return log_softmax(np.random.default_rng(seed).normal(0, scale, (n, vocab)))


def test_a_run_against_itself_costs_nothing_and_its_perplexity_is_its_own():
    lp = _logprobs(0)
    targets = np.arange(64) % 300
    row = pos.figures(pos.per_position(lp, lp, targets), 0, 64)
    assert row["kl_mean"] == 0 and row["kl_p99"] == 0 and row["top1_agreement"] == 1
    assert row["perplexity"] == pytest.approx(math.exp(-lp[np.arange(64), targets].mean()))


def test_the_tail_percentile_sees_the_few_positions_a_mean_dilutes():
    base = _logprobs(1, n=200)
    run = base.copy()
    run[[50, 100, 150]] = _logprobs(2, n=3)  # 3 positions of 200 far off (1.5 %), the rest exact
    per = pos.per_position(base, run, np.zeros(200, dtype=int))
    row = pos.figures(per, 0, 200)
    assert row["kl_mean"] == pytest.approx(per["kl"][[50, 100, 150]].sum() / 200)
    assert row["kl_p99"] > 20 * row["kl_mean"] and row["top1_agreement"] >= 197 / 200


def test_prefix_rows_cover_the_first_positions_and_windows_the_last_512_before_each_length():
    per = pos.per_position(_logprobs(3, 2048), _logprobs(4, 2048), np.zeros(2048, dtype=int))
    rows = pos.summarize(per, pos.lengths_for(2048))
    assert [(r["scope"], r["start"], r["end"]) for r in rows] == [
        ("prefix", 0, 1024),
        ("prefix", 0, 2048),
        ("window", 512, 1024),
        ("window", 1536, 2048),
    ]
    assert rows[2]["kl_mean"] == pytest.approx(per["kl"][512:1024].mean())
    assert pos.lengths_for(8192) == (1024, 2048, 4096, 8192) and pos.lengths_for(256) == (256,)


def test_a_sweep_pauses_where_the_question_and_answer_still_fit_each_length():
    fact = lc.FACTS[0]
    bounds, stops = lc.plan(2048, 256, (1024, 2048), [lc.Question(fact, [0] * 20)], 24)
    assert stops == {
        980: 1024,
        2004: 2048,
    }  # 980 text tokens + 20 of question + 24 of answer = 1,024
    assert 980 in bounds and 2004 in bounds and bounds[-1] == 2048
    with pytest.raises(Exception, match="do not fit in 32 tokens"):
        lc.plan(32, 16, (32,), [lc.Question(fact, [0] * 20)], 24)


def test_the_facts_are_paragraphs_of_their_own_and_a_right_answer_names_them():
    facts = tuple(lc.Fact(f"Fact {n}.", f"Which is fact {n}?", str(n), n) for n in (2, 3, 4))
    paragraphs = lc.retrieval_text("One.\n\nTwo.\n\nThree.\n\nFour.\n\nFive.", facts).split("\n\n")
    assert [paragraphs.index(f.sentence) for f in facts] == [2, 4, 6]
    assert paragraphs[:3] == ["One.", "Two.", "Fact 2."]
    assert lc.retrieval_text("One.", lc.FACTS[:0]) == "One."
    assert lc.is_right(lc.FACTS[0], "The secret code of the blue box is 4127.")
    assert not lc.is_right(lc.FACTS[0], "The secret code of the blue box is 4217.")


class _Fixed:
    """A runner over fixed logits (one row per stream position): the driver's bookkeeping without a model."""

    def __init__(self, logits: np.ndarray):
        self.logits, self.at, self.asked = logits, 0, []

    def feed(self, tokens):
        out = self.logits[self.at : self.at + len(tokens)]
        self.at += len(tokens)
        return out

    def answer(self, prompt, max_tokens):
        self.asked.append(self.at)
        return [7, 8]


def test_a_sweep_scores_every_position_once_and_asks_at_each_pause():
    base, run = np.random.default_rng(5).normal(0, 2, (2, 300, 50))
    a, b = _Fixed(base), _Fixed(run)
    ids = [i % 50 for i in range(301)]
    q = lc.Question(lc.FACTS[0], [1] * 10, at=3)
    out = lc.sweep({"base": a, "run": b}, ids, 300, 64, (200, 300), [q], str, 6, "run")
    assert a.at == b.at == 300 and a.asked == b.asked == [184, 284]
    direct = pos.per_position(log_softmax(base), log_softmax(run), ids[1:])
    window = [r for r in out["rows"]["run"] if r["scope"] == "prefix" and r["end"] == 300][0]
    assert window["kl_mean"] == pytest.approx(direct["kl"].mean())
    assert [r["context"] for r in out["retrieval"]] == [200, 200, 300, 300]
    assert out["sample"]["kl"] == pytest.approx(direct["kl"][out["sample"]["positions"]])


def _rows(**change) -> dict:
    row = {
        "kv_format": "q4_0",
        "scope": "window",
        "start": 512,
        "end": 1024,
        "tokens": 512,
        "kl_mean": 0.1,
        "kl_p99": 0.9,
        "top1_agreement": 0.8,
        "perplexity": 20.0,
    }
    asked = {
        "kv_format": "q4_0",
        "context": 1024,
        "prompt_tokens": 1000,
        "question": "What is the secret code of the blue box?",
        "expected": "4127",
        "answer": "The secret code of the blue box is 4127.",
        "correct": 1,
    }
    for key, value in change.items():
        section, _, field = key.partition("__")
        (row if section == "row" else asked)[field] = value
    return {"long_context": [row], "retrieval": [asked]}


@pytest.mark.parametrize(
    "change, words",
    [
        ({"row__scope": "middle"}, "scope must be one of prefix, window, not 'middle'"),
        ({"row__tokens": 500}, "so tokens must be 512, not 500"),
        ({"row__top1_agreement": 1.2}, "top1_agreement must be at most 1"),
        ({"asked__correct": 0}, "correct must be 1: the answer"),
        ({"asked__answer": "I do not know."}, "correct must be 0: the answer 'I do not know.'"),
        ({"asked__correct": 0.5}, "must be a whole number"),
    ],
)
def test_a_long_context_or_retrieval_row_that_contradicts_itself_is_refused(change, words):
    data = recordings.load(LONG[0]).data if LONG else None
    if data is None:
        pytest.skip("no bundled long-context recording")
    bad = {**data, "sections": _rows(**change)}
    with pytest.raises(RecordingError, match=words.replace("(", r"\(").replace(")", r"\)")):
        validate(bad, "run.yaml")
    assert validate({**data, "sections": _rows()}, "run.yaml")


@pytest.mark.parametrize("path", LONG, ids=[p.stem for p in LONG])
def test_one_point_recomputed_from_the_saved_logits_agrees_with_the_recording(path):
    """The sample beside the recording: per position the baseline's most likely tokens (all but 1e-4 of its
    probability, at most 4,096 of 49,152) with its log-probabilities and the run's difference from them. KL
    recomputed here from them, plus the part of the tokens left out as the measurement states it, equals
    the recorded KL at each position (the difference is stored in float16); over the sample the part
    recomputed here is all but a few percent of the recorded KL (on a near-zero position the left-out tail
    can be most of it)."""
    sample = path.with_suffix(".logits.npz")
    rec = recordings.load(path).data
    stated = rec["method"]["long_context"]["sample"]
    with np.load(sample) as z:
        assert list(z["positions"]) == stated["positions"] and len(stated["kl"]) >= 8
        heads = []
        for i, kl in enumerate(stated["kl"]):
            lo, hi = z["offsets"][i], z["offsets"][i + 1]
            base = z["base"][lo:hi].astype(np.float64)
            diff = z["diff"][lo:hi].astype(np.float64)  # baseline - run, float16
            heads.append(float((np.exp(base) * diff).sum()))
            assert heads[-1] + z["rest_kl"][i] == pytest.approx(kl, rel=2e-3, abs=1e-4)
            assert np.exp(base).sum() + z["rest_mass"][i] == pytest.approx(1, abs=1e-5)
        # over the sample, what is recomputed here carries all but a few percent of the recorded KL
        assert sum(heads) == pytest.approx(sum(stated["kl"]), rel=0.05)
        assert float(np.mean(heads) + np.mean(z["rest_kl"])) == pytest.approx(
            float(np.mean(stated["kl"])), rel=1e-3
        )
    assert sample.stat().st_size < 1_000_000


@pytest.mark.parametrize("path", LONG, ids=[p.stem for p in LONG])
def test_the_fact_is_asked_at_every_length_and_the_baseline_names_it_to_2048_tokens(path):
    """The fact of kvcore.measure.long_context is asked at every recorded length, and the unquantized run names
    it at 1,024 and 2,048 tokens: there the check shows what a cache costs. SmolLM2-135M's unquantized run
    misses it from 4,096 on in both runtimes (and so did every other fact tried: a pass key, a number asked
    for alone, a question announced first): baseline_reach says where, and the page says it (tests/app)."""
    from kvcore.views.savings import baseline_reach

    rec = recordings.load(path)
    rows = rec.rows("retrieval")
    base = rows[0]["label"]
    lengths = sorted({r["end"] for r in rec.rows("long_context") if r["scope"] == "prefix"})
    facts = rec.data["method"]["long_context"]["retrieval"]["facts"]
    assert [f["sentence"] for f in facts] == [f.sentence for f in lc.FACTS]
    asked = [r for r in rows if r["label"] == base]
    assert sorted(r["context"] for r in asked) == lengths and len(lengths) >= 2
    assert all(r["correct"] for r in asked if r["context"] <= 2048)
    reach = baseline_reach(rec)
    if lengths[-1] > 2048:
        assert reach == (2048, 4096)
    else:
        assert reach is None


def test_the_bundled_sweeps_cover_every_accepted_format_at_every_length_they_reach():
    """mlx_lm's sweep: its fp32 baseline and mlx-q8/mlx-q4 at groups 32 and 64 (128 does not divide head_dim
    64) at 1,024 and 2,048 tokens, per prefix and per window (its 8,192-token sweep, over two hours of this
    2-core machine, is the documented command in docs/cli.md, not run to its end here). A llama.cpp sweep, when
    one is bundled: the f16 baseline and every K/V pair of f16, q8_0 and q4_0 (flash attention on, as llama.cpp
    needs for a quantized V) to SmolLM2-135M's trained window, 8,192 tokens."""
    from itertools import product

    from kvcore.views.savings import quality_runtime

    recs = {quality_runtime(r): r for r in map(recordings.load, LONG)}
    assert "mlx_lm" in recs and set(recs) <= {"mlx_lm", "llama.cpp"}
    caches = {
        "mlx_lm": {("fp32", None), *product(("mlx-q8", "mlx-q4"), (32, 64))},
        "llama.cpp": set(product(("f16", "q8_0", "q4_0"), repeat=2)),
    }
    reach = {"mlx_lm": [1024, 2048], "llama.cpp": [1024, 2048, 4096, 8192]}
    for runtime, rec in recs.items():
        rows = rec.rows("long_context")
        second = "group_size" if runtime == "mlx_lm" else "v_format"
        runs = {r["label"]: (r["kv_format"], r.get(second, r["kv_format"])) for r in rows}
        if runtime == "mlx_lm":
            runs = {label: (k, g if g != k else None) for label, (k, g) in runs.items()}
        assert set(runs.values()) == caches[runtime], runtime
        for label in runs:
            for scope in ("prefix", "window"):
                ends = [r["end"] for r in rows if r["label"] == label and r["scope"] == scope]
                assert ends == reach[runtime], (runtime, label, scope)
