"""`python -m kvcore log FILE [--json]`: a runtime's log read back, line by line, beside kvcore's plan.

FILE is a log saved from llama.cpp (llama-cli, llama-server, llama-cpp-python), Ollama or mlx_lm, or `-` for
standard input. Each line the reader knows is printed with its figure as printed and kvcore's own figure for the
same settings (kvcore.inputs.log_reading); the lines it does not know are counted (listed with --json).
"""

from __future__ import annotations

import json
import sys

from kvcore.inputs.log_reading import NOTES, reading
from kvcore.inputs.logs import decode_log
from kvcore.inputs.textfile import read_file_bytes
from kvcore.limits import MAX_LOG_BYTES


def add(sub) -> None:
    p = sub.add_parser(
        "log", help="read a llama.cpp, Ollama or mlx_lm log: each size line beside kvcore's plan"
    )
    p.add_argument("file", help="the log file, or - for standard input")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def _text(path: str) -> str:
    if path == "-":
        return decode_log(sys.stdin.buffer.read(MAX_LOG_BYTES + 1), "standard input")
    return decode_log(read_file_bytes(path, MAX_LOG_BYTES), path)


def _mib(n: int | None) -> str:
    return "—" if n is None else f"{n / 1024**2:,.2f} MiB"


def run(a) -> int:
    result = reading(_text(a.file), "standard input" if a.file == "-" else a.file)
    if a.json:
        print(json.dumps(result.as_dict(), ensure_ascii=False, allow_nan=False))
        return 0
    print(f"runtime: {result.runtime or 'unknown'}   device: {result.device or 'not stated'}")
    known = {k: v for k, v in result.model.items() if v is not None}
    print("model: " + (", ".join(f"{k} = {v}" for k, v in known.items()) or "not stated"))
    print(
        "settings: " + (", ".join(f"{k} = {v}" for k, v in result.settings.items()) or "not stated")
    )
    print(f"{'line':>5}  {'kind':<15}{'printed':>16}{'kvcore':>16}  agrees")
    for r in result.rows:
        if r.printed is None:
            continue
        agrees = {True: "yes", False: "no", None: "—"}[r.agrees]
        print(f"{r.n:>5}  {r.kind:<15}{r.printed:>16}{_mib(r.derived_bytes):>16}  {agrees}")
        print(f"{'':>7}{r.explained}")
    for code in result.notes:
        print(f"note: {NOTES[code]}")
    if result.verdict:
        v = result.verdict
        word = {True: "over", False: "within", None: "not decided by"}[v["over"]]
        print(
            f"verdict: {_mib(v['total_bytes'])} ({v['from']}) is {word} the working-set limit, "
            f"{_mib(v['limit_bytes'])}"
        )
    print(f"unknown lines: {len(result.unknown_lines)} (listed with --json)")
    return 0
