"""Quality by position: where in a long text a quantized cache's price is paid.

One causal pass over N tokens gives every position's next-token log-probabilities, so the figures at 1K, 2K,
4K and 8K tokens are prefixes of one run, and a window of positions (the 512 tokens before 8,192 against the 512
before 1,024) shows whether the error of a token grows with what it attends to. Per position, against the
baseline run of the same runtime (kvcore.measure.quality's arithmetic, kept per position instead of summed):

    kl     KL(p_baseline || p_run) = sum_v p_b(v) (log p_b(v) - log p_run(v)), nats
    nll    -log p_run(next token)
    agree  1 when the run's most likely next token is the baseline's

Summaries (a `long_context` row each): mean KL, its 99th percentile (the tail a mean hides), top-1 agreement
and perplexity = exp(mean nll), over positions [start, end). Pure numpy, no runtime.
Example: summarize(per_position(lp, lp, targets), (1024,), 512)[0]["kl_mean"] -> 0.0
"""

from __future__ import annotations

import math

import numpy as np

WINDOW = (
    512  # positions per window: the same count at every depth, so the p99 compares like with like
)
TAIL = 99  # the percentile of per-position KL reported beside the mean
SAMPLE_MASS = 1e-4  # a saved sample keeps the baseline's most likely tokens up to all but this mass
SAMPLE_MAX_TOKENS = 4096  # ... and at most this many tokens a position (the vocabulary is 49,152)
SAMPLE_RUN_TOP = 64  # ... and the run's own most likely tokens (its top-1 among them)


def lengths_for(tokens: int) -> tuple[int, ...]:
    """The context lengths reported for a pass of `tokens` positions: 1,024 doubling up to it, and `tokens`.

    Example: lengths_for(8192) -> (1024, 2048, 4096, 8192); lengths_for(256) -> (256,)."""
    out = []
    n = 1024
    while n < tokens:
        out.append(n)
        n *= 2
    return (*out, tokens)


def per_position(base_lp: np.ndarray, lp: np.ndarray, targets) -> dict[str, np.ndarray]:
    """[n, vocab] log-probabilities of the baseline and of a run, the [n] next tokens -> {"kl", "nll", "agree"},
    each [n]."""
    base = np.asarray(base_lp, dtype=np.float64)
    run = np.asarray(lp, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.int64)
    if base.shape != run.shape or base.ndim != 2 or targets.shape != (run.shape[0],):
        raise ValueError(
            f"shapes do not match: baseline {base.shape}, run {run.shape}, targets {targets.shape}"
        )
    return {
        "kl": np.maximum(0.0, (np.exp(base) * (base - run)).sum(axis=-1)),
        "nll": -run[np.arange(len(targets)), targets],
        "agree": (base.argmax(axis=-1) == run.argmax(axis=-1)).astype(np.float64),
    }


def join(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Chunks' per-position arrays, in order, as one."""
    return {k: np.concatenate([p[k] for p in parts]) for k in ("kl", "nll", "agree")}


def figures(pos: dict[str, np.ndarray], start: int, end: int) -> dict:
    """The figures over positions [start, end)."""
    if not 0 <= start < end <= len(pos["kl"]):
        raise ValueError(f"positions {start}..{end} are not within 0..{len(pos['kl'])}")
    kl = pos["kl"][start:end]
    return {
        "start": start,
        "end": end,
        "tokens": end - start,
        "kl_mean": float(kl.mean()),
        "kl_p99": float(np.percentile(kl, TAIL)),
        "top1_agreement": float(pos["agree"][start:end].mean()),
        "perplexity": math.exp(float(pos["nll"][start:end].mean())),
    }


def summarize(pos: dict[str, np.ndarray], lengths: tuple[int, ...], window: int = WINDOW) -> list:
    """Rows at each length: the prefix [0, L) (scope "prefix") and the window [L - window, L) (scope "window",
    only when L holds more than one window)."""
    rows = []
    for n in lengths:
        rows.append({"scope": "prefix", **figures(pos, 0, n)})
    for n in lengths:
        if n > window:
            rows.append({"scope": "window", **figures(pos, n - window, n)})
    return rows


def sample_positions(tokens: int, count: int = 16, window: int = WINDOW) -> list[int]:
    """`count` positions to save logits of: half spread over the first window that ends at 1,024 tokens (or the
    first window), half over the last window.

    Example: sample_positions(8192)[:2] -> [512, 576]."""
    first_end = min(1024, tokens)
    first = np.linspace(max(0, first_end - window), first_end, count // 2, endpoint=False)
    last = np.linspace(max(0, tokens - window), tokens, count - count // 2, endpoint=False)
    return sorted({int(p) for p in (*first, *last)})


def sample_rows(base_lp: np.ndarray, lp: np.ndarray) -> list[dict]:
    """What a saved sample keeps of one position's [vocab] log-probabilities in both runs: the baseline's most
    likely tokens up to all but SAMPLE_MASS of its probability (at most SAMPLE_MAX_TOKENS) and the run's top
    SAMPLE_RUN_TOP; there the baseline's log-probabilities (float32) and the run's difference from them
    (baseline - run, float16); of the tokens left out, the baseline's mass and their part of the KL."""
    out = []
    for b, r in zip(np.asarray(base_lp, np.float64), np.asarray(lp, np.float64)):
        order = np.argsort(-b)
        kept = int(np.searchsorted(np.cumsum(np.exp(b[order])), 1 - SAMPLE_MASS)) + 1
        ids = np.union1d(order[: min(kept, SAMPLE_MAX_TOKENS)], np.argsort(-r)[:SAMPLE_RUN_TOP])
        rest = np.ones(len(b), dtype=bool)
        rest[ids] = False
        out.append(
            {
                "ids": ids.astype(np.uint16 if len(b) <= 2**16 else np.uint32),
                "base": b[ids].astype(np.float32),
                "diff": (b[ids] - r[ids]).astype(np.float16),
                "rest_mass": float(np.exp(b[rest]).sum()),
                "rest_kl": float((np.exp(b[rest]) * (b[rest] - r[rest])).sum()),
            }
        )
    return out


def save_sample(path, rows: list[dict], positions: list[int], kl: list[float]) -> None:
    """A sample as one compressed .npz: positions, the recorded KL at each, the kept tokens of every position
    flattened (ids, base, diff; offsets[i]:offsets[i + 1] are position i's), and what was left out."""
    sizes = np.array([len(r["ids"]) for r in rows])
    np.savez_compressed(
        path,
        positions=np.array(positions, dtype=np.int64),
        kl=np.array(kl, dtype=np.float64),
        offsets=np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
        ids=np.concatenate([r["ids"] for r in rows]),
        base=np.concatenate([r["base"] for r in rows]),
        diff=np.concatenate([r["diff"] for r in rows]),
        rest_mass=np.array([r["rest_mass"] for r in rows]),
        rest_kl=np.array([r["rest_kl"] for r in rows]),
    )
