"""`python -m kvcore probe | kv | decode | mechanism | quality | record`: live measurement on the
real mlx_lm caches (record also on llama.cpp), one module per command.

Each command prints a table and shows a progress bar on the terminal. `record` saves one recording
(recordings/local/ or --out; --no-save prints only); the others save only when asked (--save or
--out). The destination is checked before anything is measured; read-only mode saves nothing.
Ctrl-C aborts and saves nothing. mlx is imported only when a command runs. Their shared options
are in live_args.py, what they do around a measurement (guard, bar, table, saving) in live_run.py.
"""

from __future__ import annotations

from . import cli_decode, cli_probe, cli_quality, cli_record

COMMANDS = (cli_probe, cli_decode, cli_quality, cli_record)  # in the order --help lists them


def add_live_commands(sub) -> None:
    for command in COMMANDS:
        command.add(sub)
