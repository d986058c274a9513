"""The Many conversations chapter's numbers: mlx_lm.server's ledger (kvcore.servers) over a recorded conversation
and over users × turns a reader picks, each request's peak stacked by part, and the server's options as levers.

The parts of a request's peak add up to the ledger's `peak_bytes` (kvcore.servers.mlx_lm_server):
- active: the cache this request filled, its batch buffer in 256-row steps, kept after it as the newest entry;
- counted: the other stored entries as the server counts them (their `.nbytes`, what its own line adds up);
- uncounted: what those entries hold beyond that count (a lazy cut keeps its whole batch buffer);
- transient: alive only during the request (the copy of the entry it resumed from, an old buffer while it grows).
`server_line` is what the server's `Prompt Cache: N sequences, X GB` counts after the request (all entries).
Example: parts(ledger_rows)[["request", "part", "bytes"]] -> four rows per request.
"""

from __future__ import annotations

import json
from functools import lru_cache

import pandas as pd

from kvcore.errors import KvError
from kvcore.inputs.preset_files import preset_names
from kvcore.limits import (
    MAX_CHAPTER_TURN_TOKENS,
    MAX_CHAPTER_TURNS,
    MAX_CHAPTER_USERS,
    MAX_CONTEXT,
)
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.servers import llama_server, mlx_lm_server
from kvcore.servers.ledger import load_model, run
from kvcore.servers.options import parse_options
from kvcore.servers.script import parse_script

PARTS = ("active", "counted", "uncounted", "transient")  # bottom to top
DEFAULT_MODEL = "llama-3.1-8b"
LEVER_CHIP = (
    "M4 Max (40-core GPU)"  # the Mac the levers' seconds are for (the time model's calibrated chip)
)


def _check(name: str, value: int, high: int, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise KvError(f"The {name} must be a whole number from {low:,} to {high:,}.")
    return value


def ledger(
    model: str, script: list[dict], argv: tuple[str, ...] = (), dtype: str | None = None
) -> dict:
    """mlx_lm.server's ledger of a counts-only `script` for a bundled preset (`dtype`: the activations' dtype
    when it is not the preset's, e.g. a recording's fp32)."""
    options = parse_options(mlx_lm_server.OPTIONS, list(argv), mlx_lm_server.NAME)
    geometry, preset_dtype, _ = load_model(model)
    requests = parse_script(json.dumps(script))
    return run(mlx_lm_server, options, geometry, dtype or preset_dtype, requests)


DRAWN = (mlx_lm_server.NAME, llama_server.NAME)  # kvcore.views.llama_server draws llama-server's


def drawn(rows: list[dict]) -> bool:
    """Whether the chapter draws a recording's server rows: all of one server whose ledger it stacks by part."""
    return (
        bool(rows)
        and rows[0].get("server") in DRAWN
        and all(r.get("server") == rows[0]["server"] for r in rows)
    )


def recorded_script(rows: list[dict]) -> list[dict]:
    """A recorded conversation's requests as counts (what the server reported of each: usage's tokens)."""
    return [
        {
            "user": r["user"],
            "prompt_tokens": r["prompt_tokens"],
            "completion_tokens": r["completion_tokens"],
        }
        for r in rows
    ]


def replay(rows: list[dict], model: str, dtype: str) -> dict:
    """The ledger of a recorded conversation from its counts, held to what the server said: every request's
    cached tokens and printed lines equal the recording's, else KvError (counts cannot stand for the tokens:
    users whose prompts share a prefix, a reply the template re-renders)."""
    result = ledger(model, recorded_script(rows), tuple(rows[0].get("options", "").split()), dtype)
    for row, got in zip(rows, result["requests"]):
        if got["cached_tokens"] != row["cached_tokens"] or got["log_lines"] != row["log"].split(
            "\n"
        ):
            raise KvError(
                f"Request {row['request']} of {row['conversation']!r} is not what its counts replay: "
                f"the server resumed {row['cached_tokens']:,} tokens, the counts {got['cached_tokens']:,}."
            )
    return result


def replaying(rows: list[dict], replays) -> list[str]:
    """The recorded conversations in `rows` that `replays` (a conversation's rows -> its ledger, else KvError)
    reproduces exactly, in recorded order: what the chapter offers of a recording, for either server."""
    out = []
    for name in dict.fromkeys(r["conversation"] for r in rows):
        try:
            replays([r for r in rows if r["conversation"] == name])
        except KvError:
            continue
        out.append(name)
    return out


def replayable(rows: list[dict], model: str, dtype: str) -> list[str]:
    """The recorded conversations whose counts replay them exactly (see replay), in recorded order, on either of
    mlx_lm.server's paths (--kv-bits: the sequential one, kvcore.servers.mlx_lm_sequential)."""
    return replaying(rows, lambda conv: replay(conv, model, dtype))


def parts(requests: list[dict], per_token: int, options: dict | None = None) -> pd.DataFrame:
    """Each request's peak, part by part (PARTS; they add up to peak_bytes), with the server's own count
    (`server_line`) and the tokens it reprocessed: columns request, user, part, bytes, server_line,
    reprocessed_tokens, peak_bytes. `options`: the ledger's parsed options. The newest entry is counted by its
    used rows on the batched path (prompt and reply tokens), and on the sequential path (--kv-bits) it is the
    request's whole cache as stored, capacity and quantization included (kvcore.servers.mlx_lm_sequential, rule 5),
    so nothing of it lies beyond the count there."""
    whole = options is not None and mlx_lm_server.sequential(options)
    out = []
    for r in requests:
        newest = (
            r["active_kv_bytes"]
            if whole
            else (r["prompt_tokens"] + r["completion_tokens"]) * per_token
        )
        counted = r["prompt_cache_bytes"] - newest
        uncounted = r["prompt_cache_held_bytes"] - r["active_kv_bytes"] - counted
        transient = r["peak_bytes"] - r["prompt_cache_held_bytes"]
        values = (r["active_kv_bytes"], counted, uncounted, transient)
        if min(values) < 0:  # the newest entry evicted at once: not a state the chapter offers
            raise KvError(f"Request {r['request']} keeps no entry of its own to stack.")
        out += part_rows(r, PARTS, values, r["prompt_cache_bytes"])
    return pd.DataFrame(out)


def part_rows(r: dict, names: tuple[str, ...], values: tuple[int, ...], line: int) -> list[dict]:
    """A ledger row's parts as the chapter's chart rows (each server's `parts` says what its parts are): request,
    user, part, bytes, server_line (what the server counts), reprocessed_tokens, peak_bytes."""
    return [
        {
            "request": r["request"],
            "user": r["user"],
            "part": part,
            "bytes": value,
            "server_line": line,
            "reprocessed_tokens": r["reprocessed_tokens"],
            "peak_bytes": r["peak_bytes"],
        }
        for part, value in zip(names, values)
    ]


def conversation(users: int, turns: int, message_tokens: int, reply_tokens: int) -> list[dict]:
    """`users` users taking turns in order (a1 b1 ... a2 b2 ...), each turn adding a message of
    `message_tokens` to that user's history, each reply `reply_tokens` long: a counts-only script."""
    _check("number of users", users, MAX_CHAPTER_USERS)
    _check("number of turns", turns, MAX_CHAPTER_TURNS)
    _check("message length", message_tokens, MAX_CHAPTER_TURN_TOKENS)
    _check("reply length", reply_tokens, MAX_CHAPTER_TURN_TOKENS)
    return [
        {
            "user": f"user {u + 1}",
            "prompt_tokens": t * message_tokens + (t - 1) * reply_tokens,
            "completion_tokens": reply_tokens,
        }
        for t in range(1, turns + 1)
        for u in range(users)
    ]


def context_of(model: str) -> int:
    """The tokens a bundled preset's model may hold (its max_position_embeddings; MAX_CONTEXT when it states none)."""
    geometry, _, _ = load_model(model)
    return geometry.max_position_embeddings or MAX_CONTEXT


@lru_cache(maxsize=1)
def server_models() -> tuple[str, ...]:
    """The bundled presets the ledger can take: every layer a KVCache, weights in a float dtype."""
    out = []
    for name in preset_names():
        try:
            ledger(name, [{"user": "a", "prompt_tokens": 2, "completion_tokens": 1}])
        except KvError:
            continue
        out.append(name)
    return tuple(out)


def reprocessed_seconds(
    model: str,
    rows: list[dict],
    chip: str = LEVER_CHIP,
    runtime: str = MLX_LM.name,
    kv_dtype: str | None = None,
) -> float:
    """The seconds `chip` spends processing the prompts' tokens again, request by request: each request's
    reprocessed tokens as one prefill after the tokens it resumed (kvcore.timing.estimate.prefill_step, the
    time model with `runtime`'s calibrated shares of the chip's peaks: mlx_lm for mlx_lm.server, llama.cpp for
    llama-server; weights in the model's dtype, the cache in `kv_dtype`, else the model's)."""
    from kvcore.fits.shares import efficiency
    from kvcore.memory.formats import KvSpec
    from kvcore.timing.estimate import prefill_step

    geometry, dtype, _ = load_model(model)
    eff = efficiency(chip, runtime)
    kv = kv_dtype or dtype
    spec = KvSpec(kv, kv, activation_dtype=dtype)
    return sum(
        prefill_step(
            geometry, r["reprocessed_tokens"], chip, eff, spec, dtype, r["cached_tokens"]
        ).time_s
        for r in rows
        if r["reprocessed_tokens"]
    )


def levers(model: str, script: list[dict]) -> list[dict]:
    """mlx_lm.server's options that decide what it keeps, each tried on `script`: the flags, what stays after the
    last request, the highest peak, the tokens served from cache and those processed again, and the seconds
    that takes on LEVER_CHIP. The default first; then fewer entries than users (evictions), a byte limit of half
    and a quarter of the default's count, and the KV format: `--kv-bits 8` (entries and the active cache in 8 bits
    once a request's cache passes `--quantized-kv-start`, 5,000 tokens by default; the option also turns batching
    off, kvcore.servers.mlx_lm_sequential), and with that start at 0. The seconds count the cache in the model's
    format."""
    users = len({r["user"] for r in script})
    base = ledger(model, script)
    counted = max(r["prompt_cache_bytes"] for r in base["requests"])
    tries: list[tuple[str, ...]] = [()]
    sizes = sorted({1, max(1, users - 1), users} - {10})
    tries += [("--prompt-cache-size", str(n)) for n in sizes]
    tries += [("--prompt-cache-bytes", str(max(1, counted // k))) for k in (2, 4)]
    tries += [("--kv-bits", "8"), ("--kv-bits", "8", "--quantized-kv-start", "0")]
    out = []
    for argv in tries:
        rows = (base if not argv else ledger(model, script, argv))["requests"]
        out.append(
            {
                "flags": " ".join(argv),
                "resident_bytes": rows[-1]["resident_bytes"],
                "peak_bytes": max(r["peak_bytes"] for r in rows),
                "cached_tokens": sum(r["cached_tokens"] for r in rows),
                "reprocessed_tokens": sum(r["reprocessed_tokens"] for r in rows),
                "reprocessed_s": reprocessed_seconds(model, rows),
            }
        )
    return out


@lru_cache(maxsize=1)
def mac_memories() -> tuple[int, ...]:
    """Every memory size a unified-memory chip of kvcore/timing/hardware.yaml (a Mac's) ships with, in GB."""
    from kvcore.timing.hardware import chips

    return tuple(sorted({m for c in chips() if c.unified for m in c.memory_gb}))
