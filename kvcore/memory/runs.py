"""A list of token counts held as runs of equal values, so that a long prompt's chunks cost what a short one's do.

mlx_lm feeds a prompt in chunks of one size (kvcore.memory.formulas.prefill_chunks): a 10^8-token prompt at step 64
is 1.56 million chunks, and a list of them (with its running sums) is what a memory plan used to build each time.
Runs reads as that list does (length, index, slice, iteration, count) and gives the running sum before any update in
closed form.

Example: Runs([(64, 10**6), (63, 1), (1, 1)]) reads as [64] * 10**6 + [63, 1]; .offset(10**6) -> 64_000_000.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from itertools import accumulate, repeat


class Runs(Sequence):
    """Token counts as (value, count) runs: a read-only list that is never built."""

    def __init__(self, runs) -> None:
        self.runs = tuple((value, count) for value, count in runs if count > 0)
        self._ends = list(
            accumulate(count for _, count in self.runs)
        )  # updates up to each run's end
        self._sums = list(
            accumulate(value * count for value, count in self.runs)
        )  # tokens likewise

    def __len__(self) -> int:
        return self._ends[-1] if self._ends else 0

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise ValueError("Runs slices take no step.")
            return Runs(self._clipped(start, stop))
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.runs[bisect_right(self._ends, i)][0]

    def _clipped(self, start: int, stop: int) -> Iterator[tuple[int, int]]:
        begin = 0
        for (value, count), end in zip(self.runs, self._ends):
            yield value, max(0, min(end, stop) - max(begin, start))
            begin = end

    def __iter__(self) -> Iterator[int]:
        for value, count in self.runs:
            yield from repeat(value, count)

    def __add__(self, other) -> Runs:
        tail = other.runs if isinstance(other, Runs) else ((value, 1) for value in other)
        return Runs((*self.runs, *tail))

    def count(self, value) -> int:
        return sum(n for v, n in self.runs if v == value)

    def offset(self, i: int) -> int:
        """The sum of the first `i` updates (0 <= i <= len): a cache's offset before update i."""
        if not 0 <= i <= len(self):
            raise IndexError(i)
        j = bisect_right(self._ends, i)  # the run update i falls in
        before = self._sums[j - 1] if j else 0
        return before + (i - (self._ends[j - 1] if j else 0)) * (
            self.runs[j][0] if j < len(self.runs) else 0
        )

    def reaching(self, total: int) -> int:
        """The fewest leading updates whose sum is at least `total` (len + 1 when all of them fall short), as
        bisect_left over the running sums [0, u0, u0 + u1, ...] finds it."""
        if total <= 0:
            return 0
        j = bisect_left(self._sums, total)  # the run whose end first reaches it
        if j == len(self.runs):
            return len(self) + 1
        before, start = (self._sums[j - 1], self._ends[j - 1]) if j else (0, 0)
        value = self.runs[j][0]
        return start + -(-(total - before) // value)
