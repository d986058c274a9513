"""A simulator of mlx_lm's cache allocation: capacity and `.nbytes` after any update sizes.

A port of the shape logic in `mlx_lm/models/cache.py` (mlx-lm 0.32.2) with no mlx:
`KVCache`/`QuantizedKVCache` grow in 256-token steps, trimming to `offset` first when it is not
a multiple of 256; `RotatingKVCache` grows by 256 up to `max_size`, and a multi-token update
keeps up to max_size + S - 1 tokens. Tests check it against the real classes.
Example: simulate("KVCache", [1, 256]).capacity -> 257; simulate("KVCache", [300, 300]) -> 812.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import KvError, quote
from kvcore.limits import (
    MAX_CONTEXT,  # one update holds at most the engine's context limit
    MAX_DIGITS,
    MAX_LIST_TEXT,
    MAX_UPDATES,
)
from kvcore.numbers import is_digits, whole_number

STEP = 256  # KVCache.step
CACHE_CLASSES = ("KVCache", "QuantizedKVCache", "RotatingKVCache")


@dataclass
class CacheState:
    """What a simulated cache holds: tokens seen (`offset`) and rows allocated (`capacity`)."""

    offset: int = 0
    capacity: int = 0
    idx: int = 0  # RotatingKVCache write position


def _grow_step(state: CacheState, n: int) -> None:
    """KVCache / QuantizedKVCache.update_and_fetch for an n-token update."""
    if state.capacity == 0 or state.offset + n > state.capacity:
        new_rows = (STEP + n - 1) // STEP * STEP
        if state.capacity and state.offset % STEP:
            state.capacity = state.offset  # trimmed to the used rows before the append
        state.capacity += new_rows
    state.offset += n


def _rotating_concat(state: CacheState, n: int, max_size: int, keep: int) -> None:
    """RotatingKVCache._update_concat (multi-token updates)."""
    if state.capacity == 0:
        state.capacity = n
    else:
        if state.idx != state.capacity and state.idx >= state.offset:
            state.capacity = state.idx  # _temporal_order slices off the unused end
        trim = state.capacity - max_size + 1
        if trim > 0:
            state.capacity = keep + max(0, state.capacity - trim - keep)
        state.capacity += n
    state.offset += n
    state.idx = state.capacity


def _rotating_in_place(state: CacheState, n: int, max_size: int, keep: int) -> None:
    """RotatingKVCache._update_in_place (single-token updates)."""
    prev = state.offset
    if state.capacity == 0 or (prev >= state.capacity and state.capacity < max_size):
        state.capacity += min(STEP, max_size - prev)
        state.idx = prev
    trim = state.capacity - max_size
    if trim > 0:
        state.capacity = keep + max(0, state.capacity - trim - keep)
        state.idx = max_size
    if state.idx == max_size:
        state.idx = keep
    state.offset += n
    state.idx += n


def _check(cache_class: str, updates: list[int], max_size: int | None) -> None:
    if cache_class not in CACHE_CLASSES:
        raise KvError(f"Unknown cache class {cache_class!r}; valid: {', '.join(CACHE_CLASSES)}.")
    if any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in updates):
        raise KvError("Every update must be a positive whole number of tokens.")
    if cache_class == "RotatingKVCache" and (max_size is None or max_size < 1):
        raise KvError("RotatingKVCache needs a positive max_size.")


def _apply(state: CacheState, cache_class: str, n: int, max_size: int | None, keep: int) -> None:
    if cache_class != "RotatingKVCache":
        _grow_step(state, n)
    elif n == 1:
        _rotating_in_place(state, n, max_size, keep)
    else:
        _rotating_concat(state, n, max_size, keep)


def trace(
    cache_class: str,
    updates: list[int],
    max_size: int | None = None,
    keep: int = 0,
    start: CacheState | None = None,
) -> list[CacheState]:
    """The state after each update of `updates` (token counts), for one cache layer (from `start`, default empty)."""
    _check(cache_class, updates, max_size)
    state = CacheState() if start is None else CacheState(start.offset, start.capacity, start.idx)
    out = []
    for n in updates:
        _apply(state, cache_class, n, max_size, keep)
        out.append(CacheState(state.offset, state.capacity, state.idx))
    return out


def simulate(
    cache_class: str, updates: list[int], max_size: int | None = None, keep: int = 0
) -> CacheState:
    """Capacity and offset after feeding `updates` (token counts per update) to one cache layer."""
    states = trace(cache_class, updates, max_size, keep)
    return states[-1] if states else CacheState()


class ChunkedTrace:
    """trace() of `updates` whose first `whole` are chunks of `step` tokens (mlx_lm's prefill), without walking every
    chunk of a long prompt: a KVCache (or QuantizedKVCache) fed chunks of a multiple of 256 tokens or of a divisor of
    256 holds its offset rounded up to 256 rows after each; a RotatingKVCache's rows and write position stop changing
    once its window is full (checked: the walk goes on where they do not). The rest is walked. Indexed as trace()'s
    list is (tests/test_mlx_lm_plan.py compares every state with the full walk).

    Example: ChunkedTrace("KVCache", [64] * 10**6 + [1], 64, 10**6)[-1 + 10**6].capacity -> 64_000_000.
    """

    def __init__(
        self,
        cache_class: str,
        updates: list[int],
        step: int,
        whole: int,
        max_size: int | None = None,
    ):
        if not 0 <= whole <= len(updates) or updates[:whole].count(step) != whole:
            raise KvError(f"The first {whole:,} updates are not all chunks of {step:,} tokens.")
        self.step, self.lead, self.head, self.steady = step, 0, [], None
        if cache_class == "RotatingKVCache":
            self.head = trace(
                cache_class, updates[: min(whole, max_size // step + 3)], max_size=max_size
            )
            self.lead = len(self.head)
            steady = len(self.head) >= 2 and self.lead < whole
            if steady and (self.head[-2].capacity, self.head[-2].idx) == (
                self.head[-1].capacity,
                self.head[-1].idx,
            ):
                self.lead, self.steady = whole, self.head[-1]
        elif step % STEP == 0 or STEP % step == 0:
            self.lead = whole
        start = self[self.lead - 1] if self.lead else None
        self.rest = trace(cache_class, updates[self.lead :], max_size=max_size, start=start)

    def __len__(self) -> int:
        return self.lead + len(self.rest)

    def __getitem__(self, i: int) -> CacheState:
        if i < 0:
            i += len(self)
        if i < len(self.head):
            return self.head[i]
        if i < self.lead:
            offset = (i + 1) * self.step
            if self.steady is not None:
                return CacheState(offset, self.steady.capacity, self.steady.idx)
            return CacheState(offset, -(-offset // STEP) * STEP)
        return self.rest[i - self.lead]

    def max_capacity(self) -> int:
        """The most rows it holds after any update."""
        computed = self[self.lead - 1].capacity if self.lead > len(self.head) else 0
        return max([computed, *(s.capacity for s in self.head), *(s.capacity for s in self.rest)])


def nbytes(capacity: int, row_bytes_k: int, row_bytes_v: int, kv_heads: int, batch: int = 1) -> int:
    """What `.nbytes` reports: the allocated rows (not the used ones) x bytes per row."""
    return batch * kv_heads * capacity * (row_bytes_k + row_bytes_v)


def parse_updates(text: str) -> list[int]:
    """'300, 300' -> [300, 300]; '2048+2047+1' and '500x8' work too. KvError on anything else.

    Bounded before work (kvcore.limits): the text's length, each number's digits and the count of updates are
    checked before the list is built, so '1x100000000' costs what '1x1' does.
    """
    if len(text) > MAX_LIST_TEXT:
        raise KvError(
            f"The updates are {len(text):,} characters long; at most {MAX_LIST_TEXT:,}, please.",
            "updates_long",
            n=len(text),
            limit=MAX_LIST_TEXT,
        )
    parts: list[tuple[int, int]] = []
    total = 0
    for part in text.replace("+", ",").replace(" ", "").split(","):
        if not part:
            continue
        part, _, times = part.partition("x") if "x" in part else (part, "", "1")
        if max(len(part), len(times)) > MAX_DIGITS and is_digits(part) and is_digits(times):
            raise KvError(
                f"An update in {quote(text)} has more than {MAX_DIGITS} digits; one update holds at most "
                f"{MAX_CONTEXT:,} tokens.",
                "updates_digits",
                text=quote(text),
                digits=MAX_DIGITS,
                limit=MAX_CONTEXT,
            )
        try:  # ASCII digits only: '²' is str.isdigit() but no number (kvcore.numbers)
            tokens = whole_number(part, "updates", 1, MAX_CONTEXT)
            count = whole_number(times, "updates", 1)
        except KvError:
            raise KvError(
                f"{quote(text)} is not a list of positive token counts such as '300, 300' or '500x8'.",
                "updates_bad",
                text=quote(text),
            ) from None
        total += count
        if total > MAX_UPDATES:  # checked before the list is built: '1x100000000' builds nothing
            raise KvError(
                f"At most {MAX_UPDATES:,} updates, please.", "updates_many", n=MAX_UPDATES
            )
        parts.append((tokens, count))
    out = [n for n, count in parts for _ in range(count)]
    if not out:
        raise KvError("Give at least one update, such as '1, 256'.", "updates_none")
    return out
