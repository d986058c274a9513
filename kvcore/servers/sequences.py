"""Token sequences as a server's prompt cache compares them: a request's tokens, or (counts-only scripts) the first
n tokens of one user's stream, which shares nothing with another user's.

Example: lcp((1, 2, 3), (1, 2, 4)) -> 2; lcp(Stream("a", 10), Stream("a", 4)) -> 4; lcp(Stream("a", 3), Stream("b", 3)) -> 0
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Stream:
    """The first `n` tokens of user `user`'s conversation (a counts-only script: the tokens are not known)."""

    user: str
    n: int

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, s: slice) -> Stream:
        start, stop, _ = s.indices(self.n)
        if start:
            raise ValueError("a stream is cut from its start only")
        return Stream(self.user, stop)


Seq = tuple | Stream


def lcp(a: Seq, b: Seq) -> int:
    """The longest common prefix of two sequences, in tokens (tuples compared in C, halving the span)."""
    if isinstance(a, Stream) or isinstance(b, Stream):
        same = isinstance(a, Stream) and isinstance(b, Stream) and a.user == b.user
        return min(a.n, b.n) if same else 0
    low, high = 0, min(len(a), len(b))
    while low < high:  # a[:low] == b[:low] holds; find the largest such low
        mid = (low + high + 1) // 2
        if a[low:mid] == b[low:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def group(a: Seq) -> str | None:
    """Sequences of different groups share no prefix: a stream's user, None for real tokens."""
    return a.user if isinstance(a, Stream) else None


def extend(a: Seq, tokens: Seq | int) -> Seq:
    """`a` followed by `tokens` (a count for a stream)."""
    if isinstance(a, Stream):
        return Stream(a.user, a.n + (tokens if isinstance(tokens, int) else len(tokens)))
    return a + tuple(tokens)
