"""What every measurement shares: a progress callback, a stop check, and Interrupted, so that a stopped run
never becomes a recording.

Example: Ticker(3, progress, should_stop).tick("1,024 tokens") -> progress(1, 3, "1,024 tokens")
"""

from __future__ import annotations

from typing import Callable

from kvcore.errors import KvError

Progress = Callable[[int, int, str], None]  # (done, total, text)
StopCheck = Callable[[], bool]


class Interrupted(KvError):
    """The run was stopped (stop button or Ctrl-C): nothing is saved."""

    def __init__(self, message: str = "stopped before the end: nothing was saved."):
        super().__init__(message)


def _noop(*_):
    return None


def _never() -> bool:
    return False


class Ticker:
    """A run's progress and stop: `tick` reports a step done and raises Interrupted once `should_stop()` says so."""

    def __init__(self, total: int, progress: Progress | None, should_stop: StopCheck | None):
        self.done, self.total = 0, max(1, total)
        self.progress, self.should_stop = progress or _noop, should_stop or _never

    def check(self) -> None:
        if self.should_stop():
            raise Interrupted()

    def tick(self, text: str, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        self.progress(self.done, self.total, text)
        self.check()
