"""What the largest script the servers' ledger accepts costs, as a ratio to a plain one timed in the same rounds.

The largest: 4,096 requests (kvcore.limits.MAX_SCRIPT_REQUESTS) from 1,024 users (MAX_SCRIPT_USERS), counts
only, prompts growing to 6,000 tokens and 1,000-token replies, through a prompt cache of 256 entries
(MAX_PROMPT_CACHE_ENTRIES) at the smallest prefill step (64 tokens: the most progress lines); the plain one: 8
turns of one user at the defaults. Each round times one call of each, alternating, so the shared machine's noise
falls on both; the result is the median of the paired ratios with the interquartile range, and each side's median
seconds.
The same for the Many conversations chapter's largest state (MAX_CHAPTER_USERS × MAX_CHAPTER_TURNS, the
longest message and reply, MAX_CHAPTER_TURN_TOKENS each, on Llama-3.1-8B: the ledger and its six levers, what
the page computes before its charts) against its default state (4 users × 8 turns of 512 + 256 tokens).

Run: .venv/bin/python benchmarks/bench_servers.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvcore.limits import (  # noqa: E402
    MAX_CHAPTER_TURN_TOKENS,
    MAX_CHAPTER_TURNS,
    MAX_CHAPTER_USERS,
    MAX_PROMPT_CACHE_ENTRIES,
    MAX_SCRIPT_REQUESTS,
    MAX_SCRIPT_USERS,
)
from kvcore.servers.ledger import server_ledger  # noqa: E402
from kvcore.views import servers as views  # noqa: E402

LARGEST = json.dumps(
    [
        {
            "user": f"u{i % MAX_SCRIPT_USERS}",
            "prompt_tokens": 1 + (i // MAX_SCRIPT_USERS) * 1500,
            "completion_tokens": 1000,
        }
        for i in range(MAX_SCRIPT_REQUESTS)
    ]
)
LARGEST_OPTIONS = [
    "--prompt-cache-size",
    str(MAX_PROMPT_CACHE_ENTRIES),
    "--prefill-step-size",
    "64",
]
PLAIN = json.dumps(
    [{"user": "a", "prompt_tokens": 40 + 60 * i, "completion_tokens": 30} for i in range(8)]
)


def _seconds(script: str, options: list[str]) -> float:
    started = time.perf_counter()
    server_ledger("mlx_lm.server", "smollm2-135m", script, options)
    return time.perf_counter() - started


CHAPTER_LARGEST = (
    MAX_CHAPTER_USERS,
    MAX_CHAPTER_TURNS,
    MAX_CHAPTER_TURN_TOKENS,
    MAX_CHAPTER_TURN_TOKENS,
)
CHAPTER_DEFAULT = (4, 8, 512, 256)


def _chapter_seconds(state: tuple[int, int, int, int]) -> float:
    started = time.perf_counter()
    script = views.conversation(*state)
    views.ledger("llama-3.1-8b", script)
    views.levers("llama-3.1-8b", script)
    return time.perf_counter() - started


def _report(name: str, pairs: list[tuple[float, float]], rounds: int) -> None:
    ratios = sorted(big / small for big, small in pairs)
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    print(
        f"{name}: median {statistics.median(ratios):,.0f}x (IQR {q1:,.0f}-{q3:,.0f}), "
        f"largest {statistics.median(b for b, _ in pairs):.2f} s, plain "
        f"{statistics.median(s for _, s in pairs) * 1000:.2f} ms, {rounds} rounds"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    pairs = [(_seconds(LARGEST, LARGEST_OPTIONS), _seconds(PLAIN, [])) for _ in range(a.rounds)]
    _report("largest / plain", pairs, a.rounds)
    chapter = [
        (_chapter_seconds(CHAPTER_LARGEST), _chapter_seconds(CHAPTER_DEFAULT))
        for _ in range(a.rounds)
    ]
    _report("chapter's largest / default state", chapter, a.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
