"""`python -m kvcore calc --server ...`: the calc request's model behind its runtime's server, users taking turns
(kvcore.views.as_server): what stays resident after each turn, the conversation's peak, the GPU side against the
memory the GPU may use and the host side with it against the RAM (`--ram`).

Example: python -m kvcore calc --model llama-3.1-8b --context 32768 --runtime llama.cpp --sequences 2 \
    --server llama-server --users 3 --turns 8 --cache-ram 4096 --ram 24
"""

from __future__ import annotations

from kvcore.errors import KvError
from kvcore.limits import (
    MAX_CHAPTER_TURN_TOKENS,
    MAX_CHAPTER_TURNS,
    MAX_CHAPTER_USERS,
    MAX_PROMPT_CACHE_ENTRIES,
)
from kvcore.servers import llama_server, mlx_lm_server
from kvcore.units import GIB, fmt_bytes
from kvcore.views.as_server import (
    MAX_CACHE_RAM_MIB,
    SERVER_OF,
    ServerAsk,
    runtime_for,
    server_for,
)

# the conversation's flags (any server) and each server's own, with the ServerAsk field each fills
CONVERSATION = (
    ("--users", "users", 1, MAX_CHAPTER_USERS, "users taking turns, in order"),
    ("--turns", "turns", 1, MAX_CHAPTER_TURNS, "turns each user takes"),
    ("--message-tokens", "message_tokens", 1, MAX_CHAPTER_TURN_TOKENS, "tokens of each message"),
    ("--reply-tokens", "reply_tokens", 1, MAX_CHAPTER_TURN_TOKENS, "tokens of each reply"),
)
OWN = {
    "--cache-ram": (llama_server.NAME, "cache_ram_mib", -1, MAX_CACHE_RAM_MIB),
    "--prompt-cache-size": (mlx_lm_server.NAME, "prompt_cache_size", 1, MAX_PROMPT_CACHE_ENTRIES),
}


def add(c, whole_number) -> None:
    """calc's server flags (`whole_number`: the CLI's bounded whole-number type)."""
    c.add_argument(
        "--server",
        choices=list(SERVER_OF.values()),
        help="adds the model behind its runtime's server (mlx_lm: mlx_lm.server, llama.cpp: llama-server, with "
        "calc's -c, -np, -kvu and KV types): users x turns -> what stays resident and the peak, GPU side and "
        "host side",
    )
    for flag, field, low, high, tip in CONVERSATION:
        kind = whole_number(flag.lstrip("-"), low, high)
        c.add_argument(flag, dest=field, type=kind, help=f"with --server: {tip}")
    for flag, (server, field, low, high) in OWN.items():
        kind = whole_number(flag.lstrip("-"), low, high)
        c.add_argument(flag, dest=field, type=kind, help=f"with --server {server}")


def ask(a) -> ServerAsk | None:
    """The server flags read and bounded (ServerAsk), before any work; None without --server."""
    given = [f for f, field, *_ in CONVERSATION if getattr(a, field) is not None]
    given += [f for f, (_, field, *_) in OWN.items() if getattr(a, field) is not None]
    if a.server is None:
        if given:
            raise KvError(f"{given[0]} needs --server (mlx_lm.server or llama-server).")
        return None
    if server_for(a.runtime) != a.server:
        runtime = runtime_for(a.server)
        raise KvError(f"{a.server} runs {runtime}: add --runtime {runtime}.")
    for flag, (server, _, _, _) in OWN.items():
        if flag in given and server != a.server:
            raise KvError(f"{flag} is {server}'s option, not {a.server}'s.")
    fields = {field: getattr(a, field) for _, field, *_ in CONVERSATION}
    fields |= {field: getattr(a, field) for _, field, *_ in OWN.values()}
    ram = int(a.ram * GIB) if a.ram is not None else None
    return ServerAsk(**{k: v for k, v in fields.items() if v is not None}, ram_bytes=ram)


def print_server(s: dict, ask: ServerAsk) -> None:
    """The server's lines of calc's text: the command, turn by turn, the resident and peak, both verdicts."""
    print(
        f"\nserver     {s['command']} (KV {s['kv_type']}): {ask.users} user(s) x {ask.turns} turn(s) of "
        f"{ask.message_tokens:,} + {ask.reply_tokens:,} tokens"
    )
    print(
        "turn  processed  cached   GPU side resident   host side resident    GPU peak   host peak"
    )
    for t in s["turns"]:
        print(
            f"{t['turn']:>4} {t['reprocessed_tokens']:>10,} {t['cached_tokens']:>7,} "
            f"{fmt_bytes(t['gpu_resident_bytes']):>19} {fmt_bytes(t['host_resident_bytes']):>20} "
            f"{fmt_bytes(t['gpu_peak_bytes']):>11} {fmt_bytes(t['host_peak_bytes']):>11}"
        )
    print(
        f"caches     {fmt_bytes(s['resident_bytes'])} resident after the last turn, {fmt_bytes(s['peak_bytes'])} "
        f"at the peak (the ledger's own figures); the server's line: {s['server_line']}"
    )
    print(
        f"GPU side   {fmt_bytes(s['gpu_resident_bytes'])} resident, {fmt_bytes(s['gpu_peak_bytes'])} at the peak: "
        f"weights {fmt_bytes(s['weights_bytes'])} + working memory {fmt_bytes(s['working_bytes'])} + the caches"
    )
    cap = s["host_cap_bytes"]
    if s["server"] == llama_server.NAME:
        bound = f"at most {fmt_bytes(cap)} (--cache-ram)" if cap else "no limit (--cache-ram -1)"
        print(
            f"host side  the prompt cache in RAM, outside the GPU's working set: {fmt_bytes(s['host_resident_bytes'])} "
            f"resident, {fmt_bytes(s['host_peak_bytes'])} at the peak; {bound}"
        )
    else:
        print("host side  none: mlx_lm.server keeps every cache as MLX arrays, on the GPU side")
    fit = s["fit"]
    if fit:
        print(
            f"GPU fit    {fit['status']}: {fmt_bytes(fit['need_bytes'])} at the peak of the "
            f"{fmt_bytes(fit['limit']['bytes'])} the GPU may use"
        )
    host = s["host_fit"]
    if host:
        print(
            f"RAM fit    {host['status']}: GPU side + host side {fmt_bytes(host['need_bytes'])} at the peak of "
            f"{fmt_bytes(host['ram_bytes'])} of RAM"
        )
    for note in s["notes"]:
        print(f"note       {note}")
