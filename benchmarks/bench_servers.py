"""What the largest script the servers' ledger accepts costs, as a ratio to a plain one timed in the same rounds.

For each server the ledger models (mlx_lm.server, llama-server), the largest: 4,096 requests (kvcore.limits.MAX_SCRIPT_REQUESTS) from 1,024 users (MAX_SCRIPT_USERS), counts
only, prompts growing to 6,000 tokens and 1,000-token replies, through a prompt cache of 256 entries
(MAX_PROMPT_CACHE_ENTRIES) at the smallest prefill step (64 tokens: the most progress lines) for mlx_lm.server,
4 split slots (-np 4: the most slot comparisons; its heaviest setting here) for llama-server; the plain one: 8
turns of one user at the defaults. Each round times one call of each, alternating, so the shared machine's noise
falls on both; the result is the median of the paired ratios with the interquartile range, and each side's median
seconds.
The same for the Many conversations chapter's largest state (MAX_CHAPTER_USERS × MAX_CHAPTER_TURNS, the
longest message and reply, MAX_CHAPTER_TURN_TOKENS each, on Llama-3.1-8B: the ledger and its levers, what
the page computes before its charts), through each server, against its default state (4 users × 8 turns of
512 + 256 tokens). And the Calculator's "as a server" at its largest (the same bounds, the reader's model
Llama-3.1-8B at 131,072 tokens behind each runtime's server: kvcore.views.as_server) against its default (2 users ×
8 turns of 256 + 256 tokens).

Run: .venv/bin/python benchmarks/bench_servers.py --rounds 5 [--markdown docs/benchmarks.md]
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

from benchmarks.doc_tables import Section, add_option, table  # noqa: E402
from kvcore.capacity.request import ModelSource, Request  # noqa: E402
from kvcore.inputs.presets import preset_geometry  # noqa: E402
from kvcore.limits import (  # noqa: E402
    MAX_CHAPTER_TURN_TOKENS,
    MAX_CHAPTER_TURNS,
    MAX_CHAPTER_USERS,
    MAX_PROMPT_CACHE_ENTRIES,
    MAX_SCRIPT_REQUESTS,
    MAX_SCRIPT_USERS,
)
from kvcore.servers.ledger import server_ledger  # noqa: E402
from kvcore.views import as_server  # noqa: E402
from kvcore.views import llama_server as llama_views  # noqa: E402
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
LARGEST_OPTIONS = {
    "mlx_lm.server": [
        "--prompt-cache-size",
        str(MAX_PROMPT_CACHE_ENTRIES),
        "--prefill-step-size",
        "64",
    ],
    "llama-server": ["-np", "4"],
}
PLAIN = json.dumps(
    [{"user": "a", "prompt_tokens": 40 + 60 * i, "completion_tokens": 30} for i in range(8)]
)


def _seconds(server: str, script: str, options: list[str]) -> float:
    started = time.perf_counter()
    server_ledger(server, "smollm2-135m", script, options)
    return time.perf_counter() - started


CHAPTER_LARGEST = (
    MAX_CHAPTER_USERS,
    MAX_CHAPTER_TURNS,
    MAX_CHAPTER_TURN_TOKENS,
    MAX_CHAPTER_TURN_TOKENS,
)
CHAPTER_DEFAULT = (4, 8, 512, 256)


def _chapter_seconds(state: tuple[int, int, int, int], server: str = "mlx_lm.server") -> float:
    started = time.perf_counter()
    script = views.conversation(*state)
    if server == llama_views.NAME:
        seconds = lambda rows: views.reprocessed_seconds(  # noqa: E731
            "llama-3.1-8b", rows, runtime="llama.cpp", kv_dtype=llama_views.DTYPE
        )
        llama_views.ledger("llama-3.1-8b", script)
        llama_views.levers("llama-3.1-8b", script, seconds)
    else:
        views.ledger("llama-3.1-8b", script)
        views.levers("llama-3.1-8b", script)
    return time.perf_counter() - started


CALC_LARGEST = as_server.ServerAsk(
    MAX_CHAPTER_USERS, MAX_CHAPTER_TURNS, MAX_CHAPTER_TURN_TOKENS, MAX_CHAPTER_TURN_TOKENS
)
CALC_DEFAULT = as_server.ServerAsk(2, 8, 256, 256)


def _calc_seconds(runtime: str, ask) -> float:
    """The Calculator's "as a server" answer for Llama-3.1-8B at 131,072 tokens on a 128 GB Mac."""
    request = Request(ModelSource("llama-3.1-8b"), 131072, runtime=runtime, memory_bytes=96 * 2**30)
    started = time.perf_counter()
    as_server.as_server(request, ask, preset_geometry("llama-3.1-8b", runtime))
    return time.perf_counter() - started


def _summary(pairs: list[tuple[float, float]]) -> tuple[float, float, float, float, float]:
    """(median ratio, q1, q3, the largest's median seconds, the plain one's) of (largest, plain) pairs."""
    ratios = sorted(big / small for big, small in pairs)
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    big = statistics.median(b for b, _ in pairs)
    return statistics.median(ratios), q1, q3, big, statistics.median(s for _, s in pairs)


def _paired(largest, plain, rounds: int) -> list[tuple[float, float]]:
    """Each round one call of each, which goes first alternating."""
    pairs = []
    for i in range(rounds):
        if i % 2:
            small = plain()
            pairs.append((largest(), small))
        else:
            pairs.append((largest(), plain()))
    return pairs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    add_option(p)
    a = p.parse_args()
    section = Section(a.markdown, "bench_servers")
    rows = []
    for server, options in LARGEST_OPTIONS.items():
        pairs = _paired(
            lambda: _seconds(server, LARGEST, options),
            lambda: _seconds(server, PLAIN, []),
            a.rounds,
        )
        rows.append((f"{server}: script (4,096 requests vs 8), `{' '.join(options)}`", pairs))
    for server in ("mlx_lm.server", llama_views.NAME):
        chapter = _paired(
            lambda: _chapter_seconds(CHAPTER_LARGEST, server),
            lambda: _chapter_seconds(CHAPTER_DEFAULT, server),
            a.rounds,
        )
        rows.append((f"chapter state, {server} (12 × 16 × 4,096 tokens vs 4 × 8 × 768)", chapter))
    for runtime in as_server.SERVER_OF:
        pairs = _paired(
            lambda: _calc_seconds(runtime, CALC_LARGEST),
            lambda: _calc_seconds(runtime, CALC_DEFAULT),
            a.rounds,
        )
        rows.append((f"Calculator as {as_server.SERVER_OF[runtime]} (12 × 16 vs 2 × 8)", pairs))
    cells = []
    for name, pairs in rows:
        median, q1, q3, big, small = _summary(pairs)
        print(
            f"{name}: median {median:,.0f}x (IQR {q1:,.0f}-{q3:,.0f}), {big:.2f} s vs {small * 1000:.2f} ms"
        )
        cells.append(
            [
                name,
                f"**×{median:,.0f}** ({q1:,.0f}–{q3:,.0f})",
                f"{big:.2f} s",
                f"{small * 1000:.1f} ms",
            ]
        )
    section.write(
        table(["largest vs plain", "ratio (IQR)", "largest", "plain"], cells, right=(1, 2, 3))
        + f"\n\n{a.rounds} rounds, alternating which goes first; wall-clock medians."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
