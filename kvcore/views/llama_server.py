"""The Many conversations chapter's numbers for llama-server (kvcore.servers.llama_server): a recorded conversation
replayed from the token ids the server reported (its counts where the recording has none), each request's peak
stacked by part, and llama-server's options as levers.

The parts of a request's peak add up to the ledger's `peak_bytes`; bottom to top, with where each lives on a Mac:
- cache: prompt-cache entries no slot holds (host RAM: `server_prompt_cache` keeps each saved slot state in a
  `std::vector<uint8_t>`, tools/server/server-task.cpp at 0c1e570, limited by `--cache-ram`);
- cache_copies: entries whose tokens a slot holds too (split slots are saved into the cache, not cleared) (host);
- cache_transient: entries alive during the request only, before the cache is trimmed to its limits (host);
- checkpoints: context checkpoints (host; a full-attention model makes none);
- slots: the slot pool, `-c` cells allocated once when the server starts, one unified pool or a stream per slot
  (GPU side: llama.cpp's Metal backend allocates it as one Metal buffer, inside the GPU working set).
`server_line` is the prompt cache after the request, what the server's `cache state: N prompts, X MiB` line
prints (the last such line it printed; a request that does not touch the cache prints none).
Example: parts(replay(rows, "smollm2-135m")["requests"])[["request", "part", "bytes"]] -> five rows a request.
"""

from __future__ import annotations

import json

import pandas as pd

from kvcore.errors import KvError
from kvcore.limits import MAX_CONTEXT
from kvcore.numbers import whole_number
from kvcore.servers import llama_server
from kvcore.servers.ledger import load_model, run, run_turns
from kvcore.servers.mlx_lm_server import Turn
from kvcore.servers.options import parse_options
from kvcore.servers.script import parse_script
from kvcore.views.servers import part_rows, replaying

NAME = llama_server.NAME
PARTS = ("cache", "cache_copies", "cache_transient", "checkpoints", "slots")  # bottom to top
GPU_PARTS = ("slots",)  # the rest is host RAM
DTYPE = "fp16"  # the slots' K and V: f16 (-ctk/-ctv default), whatever the weights


def options_of(argv: tuple[str, ...] | list[str]) -> dict:
    return parse_options(llama_server.OPTIONS, list(argv), NAME)


def ledger(model: str, script: list[dict], argv: tuple[str, ...] = ()) -> dict:
    """llama-server's ledger of a counts-only `script` for a bundled preset, its options in `argv`."""
    options = options_of(argv)
    geometry, _, _ = load_model(model)
    return run(llama_server, options, geometry, DTYPE, parse_script(json.dumps(script)))


def _ids(text, what: str, row: dict) -> tuple[int, ...]:
    words = text.split() if isinstance(text, str) else None
    said = f"Request {row.get('request')}'s {what} (token ids)"
    if not words or len(words) > MAX_CONTEXT:
        raise KvError(f"{said} must be whole numbers separated by spaces.")
    return tuple(whole_number(w, said, 0, 2**31 - 1) for w in words)


def has_ids(rows: list[dict]) -> bool:
    """Whether every row carries the token ids the server reported (prompt_ids and reply_ids)."""
    return all("prompt_ids" in r and "reply_ids" in r for r in rows)


def turns(rows: list[dict]) -> list[Turn]:
    """A recorded conversation's requests as the server's own tokens: the prompt as it tokenized it, the reply
    as it sampled it (what its slot holds); each checked against the counts the server reported."""
    out = []
    for r in rows:
        prompt, reply = _ids(r["prompt_ids"], "prompt_ids", r), _ids(r["reply_ids"], "reply_ids", r)
        if (len(prompt), len(reply)) != (r["prompt_tokens"], r["completion_tokens"]):
            raise KvError(f"Request {r['request']}'s token ids are not as many as its counts.")
        out.append(Turn(r["user"], prompt, 0, reply))
    return out


def replay(rows: list[dict], model: str) -> dict:
    """The ledger of a recorded llama-server conversation, held to what the server said: every request's
    cached tokens (timings.cache_n) and cache lines equal the recording's, else KvError. From the token ids it
    reported; a recording without them is replayed from its counts (which cannot stand for users whose prompts
    share the chat template's opening)."""
    argv = tuple(rows[0].get("options", "").split())
    if has_ids(rows):
        geometry, _, _ = load_model(model)
        result = run_turns(llama_server, options_of(argv), geometry, DTYPE, turns(rows))
    else:
        script = [{k: r[k] for k in ("user", "prompt_tokens", "completion_tokens")} for r in rows]
        result = ledger(model, script, argv)
    for row, got in zip(rows, result["requests"]):
        printed = llama_server.cache_lines(row["log"].split("\n"))
        if got["cached_tokens"] != row["cached_tokens"] or got["log_lines"] != printed:
            raise KvError(
                f"Request {row['request']} of {row['conversation']!r} is not what the ledger replays: "
                f"the server resumed {row['cached_tokens']:,} tokens, the ledger {got['cached_tokens']:,}."
            )
    return result


def replayable(rows: list[dict], model: str) -> list[str]:
    """The recorded conversations the ledger replays exactly (see replay), in recorded order."""
    return replaying(rows, lambda conv: replay(conv, model))


def printed_line(row: dict) -> str | None:
    """The last `cache state: ...` line a ledger row (or a recorded row's log) holds, or None."""
    lines = row["log_lines"] if "log_lines" in row else row["log"].split("\n")
    states = [x for x in lines if "cache state:" in x]
    return states[-1] if states else None


def parts(requests: list[dict]) -> pd.DataFrame:
    """Each request's peak, part by part (PARTS; they add up to peak_bytes), with the prompt cache the server
    counts (`server_line`) and the tokens it reprocessed: the columns of kvcore.views.servers.parts."""
    out = []
    for r in requests:
        held = r["prompt_cache_bytes"]
        values = (
            held - r["copies_bytes"],
            r["copies_bytes"],
            r["peak_bytes"] - r["resident_bytes"],
            r["checkpoint_bytes"],
            r["active_kv_bytes"],
        )
        if min(values) < 0 or sum(values) != r["peak_bytes"]:
            raise KvError(f"Request {r['request']}'s parts do not add up to its peak.")
        out += part_rows(r, PARTS, values, held)
    return pd.DataFrame(out)


def split(requests: list[dict]) -> dict:
    """The last request's GPU-side bytes (the slot pool) and the host RAM at its highest over the requests."""
    return {
        "gpu_bytes": requests[-1]["active_kv_bytes"],
        "host_peak_bytes": max(r["peak_bytes"] - r["active_kv_bytes"] for r in requests),
        "host_bytes": requests[-1]["resident_bytes"] - requests[-1]["active_kv_bytes"],
    }


def levers(model: str, script: list[dict], seconds) -> list[dict]:
    """llama-server's options that decide what it keeps, each tried on `script`: the flags, the slot pool (GPU),
    the prompt cache after the last request and at its highest (host RAM), the tokens served from cache and
    those processed again, and `seconds(rows)`, the time that takes. The default first (-np auto: 4 slots
    in one unified pool, --cache-ram 8192); then one slot; a slot per user, split and unified; the prompt cache
    off (with the default slots and with one); at half of what the default held at its highest; and K and V in
    q8_0 (`-ctk q8_0 -ctv q8_0`: the pool and the saved prompts alike; a quantized V turns `-fa auto` on,
    kvcore.runtimes.llamacpp_plan.flash_attention). The seconds are `seconds(rows)`, whatever cache format it
    counts."""
    users = len({r["user"] for r in script})
    base = ledger(model, script)
    held = max(r["prompt_cache_bytes"] for r in base["requests"])
    tries: list[tuple[str, ...]] = [(), ("-np", "1")]
    if users > 1:
        tries += [("-np", str(users)), ("-np", str(users), "-kvu")]
    tries += [("--cache-ram", "0"), ("-np", "1", "--cache-ram", "0")]
    half = held // 2 // llama_server.MIB
    if half >= 1:
        tries += [("--cache-ram", str(half))]
    tries += [("-ctk", "q8_0", "-ctv", "q8_0")]
    out = []
    for argv in tries:
        rows = (base if not argv else ledger(model, script, argv))["requests"]
        out.append(
            {
                "flags": " ".join(argv),
                "gpu_bytes": rows[-1]["active_kv_bytes"],
                "host_bytes": rows[-1]["prompt_cache_bytes"],
                "host_peak_bytes": max(r["peak_bytes"] - r["active_kv_bytes"] for r in rows),
                "resident_bytes": rows[-1]["resident_bytes"],
                "peak_bytes": max(r["peak_bytes"] for r in rows),
                "cached_tokens": sum(r["cached_tokens"] for r in rows),
                "reprocessed_tokens": sum(r["reprocessed_tokens"] for r in rows),
                "reprocessed_s": seconds(rows),
            }
        )
    return out
