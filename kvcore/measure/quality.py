"""What a smaller KV cache costs in quality: perplexity, KL divergence from the unquantized run, top-1 agreement.

Pure numpy, no mlx: any runtime that gives next-token log-probabilities (mlx_lm here; llama.cpp too) uses the
same arithmetic. Positions come in chunks, so a long text never needs all its log-probabilities at once:
`chunk_sums` turns one chunk into sums, `add` combines them, `finish` turns the sums into the figures.

    perplexity      exp(mean over positions of -log p(next token)), of the run itself
    kl_vs_baseline  mean over positions of KL(p_baseline || p_run) = sum_v p_b(v) (log p_b(v) - log p_run(v)), nats
    top1_agreement  share of positions whose most likely next token is the baseline's

Example: finish(chunk_sums(lp, lp, targets)) -> {"tokens": N, "perplexity": ..., "kl_vs_baseline": 0.0, "top1_agreement": 1.0}
"""

from __future__ import annotations

import math

import numpy as np

SUM_KEYS = ("tokens", "nll", "kl", "agree")


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities over the last axis, in float64 (max subtracted first, so large logits do not overflow)."""
    x = np.asarray(logits, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def chunk_sums(base_logprobs: np.ndarray, logprobs: np.ndarray, targets: np.ndarray) -> dict:
    """Sums over one chunk of positions: [n, vocab] log-probabilities of the baseline run and of this run, and the
    [n] next tokens. Returns {"tokens", "nll", "kl", "agree"} (nll of this run's own targets)."""
    base = np.asarray(base_logprobs, dtype=np.float64)
    lp = np.asarray(logprobs, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.int64)
    if base.shape != lp.shape or base.ndim != 2 or targets.shape != (lp.shape[0],):
        raise ValueError(
            f"shapes do not match: baseline {base.shape}, run {lp.shape}, targets {targets.shape}"
        )
    nll = -lp[np.arange(len(targets)), targets].sum()
    kl = (np.exp(base) * (base - lp)).sum()
    agree = int((base.argmax(axis=-1) == lp.argmax(axis=-1)).sum())
    return {"tokens": int(len(targets)), "nll": float(nll), "kl": float(kl), "agree": agree}


def add(a: dict | None, b: dict) -> dict:
    """Two chunks' sums together (a may be None: the first chunk)."""
    return dict(b) if a is None else {k: a[k] + b[k] for k in SUM_KEYS}


def finish(sums: dict) -> dict:
    """The figures from the sums of every chunk."""
    n = sums["tokens"]
    if n <= 0:
        raise ValueError("no positions were scored")
    return {
        "tokens": n,
        "perplexity": math.exp(sums["nll"] / n),
        "kl_vs_baseline": max(0.0, sums["kl"] / n),
        "top1_agreement": sums["agree"] / n,
    }


def perplexity(logprobs: np.ndarray, targets: np.ndarray) -> float:
    """exp(mean -log p(target)) of one run's [n, vocab] log-probabilities."""
    lp = np.asarray(logprobs, dtype=np.float64)
    return math.exp(-lp[np.arange(len(targets)), np.asarray(targets)].mean())


def first_divergence(reference: list[int], other: list[int]) -> int | None:
    """The index of the first token where two greedy continuations differ (None when one is a prefix of the other
    and both are as long, i.e. they agree throughout)."""
    for i, (a, b) in enumerate(zip(reference, other)):
        if a != b:
            return i
    return None if len(reference) == len(other) else min(len(reference), len(other))
