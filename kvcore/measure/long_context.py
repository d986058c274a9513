"""The quality price at long context, in any runtime: one pass over the model's whole window per KV format,
every position scored (kvcore.measure.positions), and a fact placed early in the text asked at the end.

The token stream is the model's chat template opening a user turn, then the text with the facts inserted as
paragraphs of their own near its start (retrieval_text). Every run (the baseline first) is fed the same chunks;
each chunk's logits become per-position KL, NLL and top-1 against the baseline's. At each reported context
length L the pass pauses where the text must end for its question, the answer and the template's closing to fit
in L tokens: each run is asked each question there (the rest of the user turn: the question, the template's
end of turn and the assistant's opening), answers greedily, and its cache is cut back to the text (the runner's
`answer`), so the pass continues as if never asked. A runtime brings a Runner per format (mlx_quality,
llamacpp_quality); nothing here imports one.
Example: sweep({"fp32": a, "mlx-q4": b}, ids, 8192, 256, (1024, 8192), questions)["rows"][0]["kl_mean"] -> 0.0
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Protocol

import numpy as np

from kvcore.errors import KvError
from kvcore.measure import positions as pos
from kvcore.measure.progress import Ticker
from kvcore.measure.quality import log_softmax

ANSWER_TOKENS = 24  # greedy tokens per answer ("The secret code of the blue box is 4127." is 16)


@dataclass(frozen=True)
class Fact:
    """A sentence placed in the text as a paragraph of its own, after paragraph `after` (0: before the first),
    its question, and what a right answer contains."""

    sentence: str
    question: str
    answer: str
    after: int


FACTS = (  # what SmolLM2-135M-Instruct's unquantized run must answer at every length, or the check shows
    # nothing: of the facts tried, the one it named at 2,048 tokens; "Mr. Bennet's dog is named Rufus." and "The
    # key to the cellar is hidden under the red vase." it missed there, five others already at 1,024 (llama.cpp)
    Fact(
        "The secret code of the blue box is 4127.",
        "What is the secret code of the blue box?",
        "4127",
        2,
    ),
)


def retrieval_text(text: str, facts: tuple[Fact, ...] = FACTS) -> str:
    """The text with each fact inserted as a paragraph of its own (paragraphs: blank-line separated)."""
    paragraphs = text.split("\n\n")
    for fact in sorted(facts, key=lambda f: -f.after):
        if not 0 <= fact.after <= len(paragraphs):
            raise KvError(
                f"The text has {len(paragraphs)} paragraphs; a fact cannot follow paragraph "
                f"{fact.after}."
            )
        paragraphs.insert(fact.after, fact.sentence)
    return "\n\n".join(paragraphs)


SENTINEL = "\x00"  # stands for the user's message when the chat template is split around it


def chat_parts(chat_text: Callable[[str], str]) -> tuple[str, str]:
    """(the template's text before a user's message, the text after it up to the assistant's opening), from a
    function that renders one user turn."""
    head, sep, tail = chat_text(SENTINEL).partition(SENTINEL)
    if not sep:
        raise KvError("The chat template does not show the user's message; it cannot frame a text.")
    return head, tail


def question_text(fact: Fact, tail: str) -> str:
    """What follows the text in the user's turn: a blank line, the question, the template's closing."""
    return f"\n\n{fact.question}{tail}"


def is_right(fact: Fact, answer: str) -> bool:
    """A right answer names the fact's answer (case and surrounding words aside)."""
    return fact.answer.lower() in answer.lower()


class Runner(Protocol):
    """One KV format's cache in a runtime, fed a stream from its start."""

    def feed(self, tokens: list[int]) -> np.ndarray:
        """[n, vocab] logits of every position of `tokens`, after what the cache holds."""

    def answer(self, prompt: list[int], max_tokens: int) -> list[int]:
        """Greedy tokens after the cache and `prompt`; the cache is then cut back to what it held before."""


@dataclass(frozen=True)
class Question:
    fact: Fact
    suffix: list[
        int
    ]  # the rest of the user turn: "\n\n" + question + end of turn + assistant's opening
    at: int = 0  # about where the fact starts in the stream (fact_tokens)


def plan(
    tokens: int, chunk: int, lengths: tuple[int, ...], questions: list[Question], answer_tokens: int
) -> tuple[list[int], dict[int, int]]:
    """(chunk bounds, pauses): the chunks' first positions and the end, and {text tokens before the questions:
    the context length L they fill}, the text ending where the longest question and the answer still fit in L.

    Example: plan(1024, 512, (1024,), [q], 24) -> ([0, 512, 962, 1024], {962: 1024}) for a 38-token question."""
    longest = max((len(q.suffix) for q in questions), default=0)
    stops = {n - longest - answer_tokens: n for n in lengths} if questions else {}
    if any(at <= 0 for at in stops):
        raise KvError(
            f"The questions and answers do not fit in {min(lengths):,} tokens; score more tokens."
        )
    return sorted({*range(0, tokens, chunk), *stops, tokens}), stops


def sweep(
    runners: dict[str, Runner],
    ids: list[int],
    tokens: int,
    chunk: int,
    lengths: tuple[int, ...],
    questions: list[Question],
    decode: Callable[[list[int]], str],
    answer_tokens: int = ANSWER_TOKENS,
    sample_run: str | None = None,
    ticker: Ticker | None = None,
) -> dict:
    """Score ids[:tokens] (targets ids[1:tokens + 1]) through every runner (the first is the baseline), pausing
    to ask the questions at each length. Returns {"rows": summaries per run (the baseline's: KL 0, its own
    perplexity), "retrieval": rows, "sample": {positions, kl, rows} of `sample_run` against the baseline (or
    None)}."""
    if len(ids) < tokens + 1:
        raise ValueError(f"{len(ids)} ids cannot score {tokens} positions")
    if sample_run is not None and sample_run not in list(runners)[1:]:
        raise KvError(f"The sample names {sample_run!r}, which is not one of the runs scored.")
    t0 = time.perf_counter()
    names = list(runners)
    bounds, stops = plan(tokens, chunk, lengths, questions, answer_tokens)
    parts: dict[str, list] = {n: [] for n in names}
    wanted = set(pos.sample_positions(tokens)) if sample_run else set()
    sample: list[dict] = []
    sample_at: list[int] = []
    retrieval: list[dict] = []
    for start, end in zip(bounds, bounds[1:]):
        targets = ids[start + 1 : end + 1]
        base = log_softmax(runners[names[0]].feed(ids[start:end]))
        parts[names[0]].append(pos.per_position(base, base, targets))
        for name in names[1:]:
            lp = log_softmax(runners[name].feed(ids[start:end]))
            parts[name].append(pos.per_position(base, lp, targets))
            if name == sample_run:
                rows = [p - start for p in sorted(wanted) if start <= p < end]
                sample.extend(pos.sample_rows(base[rows], lp[rows]))
                sample_at.extend(start + r for r in rows)
            if ticker:
                ticker.tick(f"{name}: {end:,}/{tokens:,} tokens")
        if end in stops:
            retrieval.extend(_ask(runners, questions, end, stops[end], decode, answer_tokens))
            if ticker:
                ticker.tick(f"questions at {stops[end]:,} tokens")
    per = {name: pos.join(p) for name, p in parts.items()}
    rows = {name: pos.summarize(per[name], lengths) for name in per}
    kl = [float(per[sample_run]["kl"][p]) for p in sample_at] if sample_run else []
    return {
        "lengths": lengths,
        "seconds": time.perf_counter() - t0,
        "sample_run": sample_run,
        "rows": rows,
        "retrieval": retrieval,
        "sample": {"positions": sample_at, "kl": kl, "rows": sample} if sample_run else None,
    }


def _ask(runners, questions, text_tokens: int, context: int, decode, answer_tokens: int) -> list:
    """Each question through each runner, the text's first `text_tokens` tokens in its cache."""
    rows = []
    for q in questions:
        for name, runner in runners.items():
            out = runner.answer(q.suffix, answer_tokens)
            answer = decode(out).strip().split("\n\n")[0]  # its first paragraph: the model goes on
            rows.append(
                {
                    "run": name,
                    "context": context,
                    "text_tokens": text_tokens,
                    "prompt_tokens": text_tokens + len(q.suffix),
                    "fact_token": q.at,
                    "question": q.fact.question,
                    "expected": q.fact.answer,
                    "answer": answer,
                    "answer_tokens": len(out),
                    "correct": int(is_right(q.fact, answer)),
                }
            )
    return rows


def ticks(runs: int, bounds: list[int], stops: dict[int, int]) -> int:
    """How many ticks sweep() makes with plan()'s bounds and pauses (for a progress bar)."""
    return (runs - 1) * (len(bounds) - 1) + len(stops)


def sections(result: dict, names: dict[str, dict]) -> dict[str, list[dict]]:
    """sweep()'s result as a recording's sections: `long_context` (a row per run, scope and length) and
    `retrieval`; `names` maps each run to the fields that name it (kv_format, v_format, label, bits,
    group_size), its bytes per token from result["bytes_per_token"]."""
    rows = [
        {**names[run], **row, "bytes_per_token": result["bytes_per_token"][run]}
        for run, summaries in result["rows"].items()
        for row in summaries
    ]
    asked = []
    for row in result["retrieval"]:
        row = dict(row)
        asked.append({**names[row.pop("run")], **row})
    return {"long_context": rows, **({"retrieval": asked} if asked else {})}


def fact_tokens(encode: Callable[[str], list[int]], head: str, text: str, fact: Fact) -> int:
    """About where a fact starts in the stream: the tokens of the chat opening and of the text before it."""
    before = "\n\n".join(text.split("\n\n")[: fact.after])
    return len(encode(head)) + len(encode(before + "\n\n" if before else ""))


def method(result: dict, text_name: str, baseline: str, quantize: str) -> dict:
    """How a sweep was made (a recording's method.long_context), in words and numbers; `baseline` and
    `quantize` in the runtime's own words."""
    sample = result["sample"]
    return {
        "text": text_name,
        "stream": (
            f"the model's chat template opening a user turn ({result['head_tokens']} tokens), then the "
            f"text with {len(FACTS)} fact(s) inserted as paragraphs of their own "
            f"({result['stream_tokens']:,} tokens in all); positions counted from the stream's start"
        ),
        "tokens": result["tokens"],
        "chunk": result["chunk"],
        "passes": "one pass per run over the stream's first N tokens (targets: the next N); every "
        "reported length is a prefix of it",
        "lengths": list(result["lengths"]),
        "window": pos.WINDOW,
        "tail_percentile": pos.TAIL,
        "baseline": baseline,
        "quantize": quantize,
        "metrics": "per position: KL(baseline || run) in nats, -log p(next token), top-1 agreement "
        "with the baseline (kvcore.measure.positions); per prefix [0, L) and window [L - window, L): "
        "mean KL, its 99th percentile, top-1 agreement, perplexity = exp(mean -log p)",
        "retrieval": {
            "facts": [
                {"sentence": f.sentence, "question": f.question, "answer": f.answer} for f in FACTS
            ],
            "placement": "each fact a paragraph of its own after the text's paragraph `after` "
            f"({', '.join(str(f.after) for f in FACTS)})",
            "asked": "at each length L the pass pauses where the text ends for the question (the rest "
            "of the user turn and the assistant's opening) and the answer to fit in L tokens; each run "
            "answers greedily from its own cache, which is then cut back to the text, and the pass goes on",
            "answer_tokens": result["answer_tokens"],
            "right": "the answer (its first paragraph: the model often goes on after a blank line) "
            "names the expected text (case aside)",
        },
        **(
            {
                "sample": {
                    "file": "beside the recording: its name with .logits.npz",
                    "run": result["sample_run"],
                    "positions": sample["positions"],
                    "kl": sample["kl"],
                    "kept": f"per position the baseline's most likely tokens up to all but "
                    f"{pos.SAMPLE_MASS:g} of its probability (at most {pos.SAMPLE_MAX_TOKENS:,}) and "
                    f"the run's top {pos.SAMPLE_RUN_TOP}: the baseline's log-probabilities there "
                    "(float32) and the run's difference from them (float16); of the tokens left out, "
                    "the baseline's mass and their part of the KL (float64)",
                    "rest_mass_max": max(r["rest_mass"] for r in sample["rows"]),
                }
            }
            if sample
            else {}
        ),
        "seconds": round(result["seconds"], 1),
    }
