"""A benchmark's measured table written into its section of a docs page, with its provenance, by
the script that measured it (no figure retyped by hand).

A section is the text between two marker comments on lines of their own; the script replaces what
lies between them and leaves the rest of the page as it is:

    <!-- bench_server: written by benchmarks/bench_server.py --markdown docs/benchmarks.md -->
    ...the table and its provenance line...
    <!-- bench_server: end -->

    .venv/bin/python benchmarks/bench_server.py --runs 3 --markdown docs/benchmarks.md

A page without the section's markers is refused in one sentence before anything is measured, so a
table never lands where no one reads it.
"""

from __future__ import annotations

import datetime
import os
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "streamlit",
    "altair",
    "pandas",
    "mlx",
    "mlx-lm",
    "llama-cpp-python",
    "vl-convert-python",
)


def add_option(ap, what: str = "its measured table", printed: bool = False) -> None:
    """The --markdown PATH option every benchmark that writes a docs table takes; `printed`: a table computed from
    the bundled data, printed in markdown by a bare --markdown (markdown_path() gives None then)."""
    if printed:
        ap.add_argument(
            "--markdown",
            nargs="?",
            const="-",
            metavar="PATH",
            help="the table in markdown: printed, or written into its section of PATH",
        )
        return
    ap.add_argument(
        "--markdown",
        metavar="PATH",
        help=f"also write {what}, with its provenance, into its section of this markdown page "
        "(docs/benchmarks.md), between its marker comments",
    )


def markdown_path(value: str | None) -> str | None:
    """--markdown's page, or None when it was not given or given bare (print only)."""
    return None if value in (None, "-") else value


def table(heads: list[str], rows: list[list], right: tuple[int, ...] = ()) -> str:
    """A markdown table; columns whose index is in `right` are right-aligned."""
    cells = [[str(c).replace("|", "\\|") for c in row] for row in rows]
    rule = ["---:" if i in right else "---" for i in range(len(heads))]
    lines = [heads, rule, *cells]
    return "\n".join("| " + " | ".join(line) + " |" for line in lines)


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> str:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "kvcore", "kvsite", "pages")
    return head + (" with uncommitted changes to the site or engine" if dirty else "")


def _command() -> str:
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(ROOT)
    except ValueError:
        pass
    return " ".join([".venv/bin/python", str(script), *sys.argv[1:]])


def provenance(started: datetime.datetime, load_at_start: tuple[float, ...]) -> str:
    """One line: the command, date, commit, machine, its load and the versions that matter."""
    versions = [f"Python {platform.python_version()}"]
    for name in PACKAGES:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return (
        f"*Measured by `{_command()}`, {started.day} {started:%B %Y, %H:%M}–"
        f"{datetime.datetime.now(datetime.UTC):%H:%M} UTC, commit {_commit()}; "
        f"{platform.system()} {platform.machine()}, {_cpu()}, {os.cpu_count()} cores, load average "
        f"{load_at_start[0]:.1f} at the start and {os.getloadavg()[0]:.1f} at the end; "
        + ", ".join(versions)
        + ".*"
    )


def computed(started: datetime.datetime) -> str:
    """One line for a table computed from the bundled data (no timing): command, date, commit."""
    return (
        f"*Written by `{_command()}`, {started.day} {started:%B %Y, %H:%M} UTC, commit {_commit()} "
        "(computed from the bundled data: no timing, the same on any machine).*"
    )


class Section:
    """Made before measuring (it notes the time and the load); write() the table once measured."""

    def __init__(self, path: str | None, name: str, timed: bool = True, script: str | None = None):
        self.path, self.name, self.timed = (Path(path) if path else None), name, timed
        self.script = script or name  # the benchmark that writes it: benchmarks/<script>.py
        self.started = datetime.datetime.now(datetime.UTC)
        self.load = os.getloadavg()
        if self.path is not None:
            self._split(self.path.read_text(encoding="utf-8"))  # refused before measuring

    def _split(self, text: str) -> tuple[str, str]:
        name = re.escape(self.name)
        begin = re.search(rf"^<!-- {name}: written by [^\n]*-->\n", text, flags=re.M)
        end = re.search(rf"^<!-- {name}: end -->$", text, flags=re.M)
        if not begin or not end or end.start() < begin.end():
            raise SystemExit(
                f"{self.path} has no section for {self.name}: add the lines '<!-- {self.name}: "
                f"written by benchmarks/{self.script}.py --markdown {self.path} -->' and "
                f"'<!-- {self.name}: end -->' where its table goes."
            )
        return text[: begin.end()], text[end.start() :]

    def write(self, body: str) -> None:
        """Replace the section's text by `body` and the provenance line (no path: nothing)."""
        if self.path is None:
            return
        head, tail = self._split(self.path.read_text(encoding="utf-8"))
        said = provenance(self.started, self.load) if self.timed else computed(self.started)
        text = body.rstrip("\n") + "\n\n" + said + "\n"
        self.path.write_text(head + text + tail, encoding="utf-8")
        print(f"wrote the {self.name} section of {self.path}")
