"""`python -m kvcore serve`: a conversation script through a server's ledger (kvcore.servers.ledger), per request
what the server resumes, reprocesses, keeps, prints and holds.

Example: python -m kvcore serve --server mlx_lm.server --model smollm2-135m --script talk.json
    --prompt-cache-size 4 --json
"""

from __future__ import annotations

import argparse
import json

from kvcore.inputs.textfile import read_text_file
from kvcore.limits import MAX_SCRIPT_BYTES
from kvcore.servers.ledger import SERVERS, server_ledger

COLUMNS = (
    ("request", "#"),
    ("user", "user"),
    ("prompt_tokens", "prompt"),
    ("cached_tokens", "cached"),
    ("reprocessed_tokens", "processed"),
    ("prompt_cache_entries", "entries"),
    ("prompt_cache_bytes", "counted B"),
    ("resident_bytes", "held B"),
    ("peak_bytes", "peak B"),
)


def add(sub) -> None:
    s = sub.add_parser(
        "serve", help="a conversation through a server: per request what it keeps and prints"
    )
    s.add_argument("--server", required=True, choices=list(SERVERS))
    s.add_argument(
        "--model",
        required=True,
        help="a preset name or a model folder (its tokenizer and chat template)",
    )
    s.add_argument("--script", required=True, help="the conversation, a JSON list of requests")
    s.add_argument("--json", action="store_true")
    for (
        module
    ) in SERVERS.values():  # every server's options, in its own spelling; each is checked there
        for o in module.OPTIONS:
            flags = (o.flag, *o.aliases)
            if o.kind is bool:
                s.add_argument(
                    *flags, dest=o.flag, action="store_const", const=True, default=argparse.SUPPRESS
                )
            else:
                s.add_argument(
                    *flags, dest=o.flag, default=argparse.SUPPRESS, help=argparse.SUPPRESS
                )
    s.set_defaults(run=run)


def run(a) -> int:
    given = [
        item
        for flag, value in vars(a).items()
        if flag.startswith("-")
        for item in ([flag] if value is True else [flag, value])
    ]
    script = read_text_file(a.script, MAX_SCRIPT_BYTES)
    result = server_ledger(a.server, a.model, script, given)
    if a.json:
        print(json.dumps(result, ensure_ascii=False, allow_nan=False))
        return 0
    print("".join(f"{label:>12}" for _, label in COLUMNS))
    for row in result["requests"]:
        print(
            "".join(
                f"{row[key]:>12,}" if key != "user" else f"{row[key]:>12}" for key, _ in COLUMNS
            )
        )
    for line in result["assumed"]:
        print(f"assumed: {line}")
    return 0
