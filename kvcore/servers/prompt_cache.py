"""mlx_lm.server's prompt cache, `LRUPromptCache` (mlx-lm 0.32.2, mlx_lm/models/cache.py#L1500-L1741), entry by
entry: which stored cache a prompt resumes from, what an insertion removes, and what the server counts.

- search (#L1554-L1596): the stored sequences form a trie; `exact` is an entry equal to the prompt, `shorter` the
  longest entry of two tokens or more that the prompt starts with, `common_prefix` the longest prefix the prompt
  shares with any entry and `longer` the shortest entry through that point (of several as short, the trie's
  depth-first walk picks one; here the newest: in the batched path they count the same bytes).
- fetch_nearest_cache (#L1652-L1672): exact -> that entry, nothing left to process; else `longer` when it shares
  more than `shorter` covers (a trimmable cache, copied and cut to min(prompt - 1, common prefix)); else `shorter`.
  A fetch never moves an entry in the LRU order.
- insert_cache (#L1674-L1715): an entry's size is `sum(c.nbytes for c in prompt_cache)`; inserting a trimmable
  cache (KVCache) removes every stored proper prefix of its tokens; then one eviction if there are more than
  `max_size` entries (the server never sets max_bytes: `LRUPromptCache(cli_args.prompt_cache_size)`,
  server.py#L1914).
- eviction order, CacheOrder.pop (#L1627-L1635): the oldest assistant entry while there are at least as many
  assistant entries as user entries, else the oldest user entry while at least as many as system entries, else
  the oldest system entry.
- trim_to (#L1717-L1732): evictions until the counted bytes are at most n_bytes.
Each entry also carries `held`, the bytes the process holds for it, which the server does not count
(kvcore.servers.mlx_lm_server says when the two differ).
Example: c = PromptCache(10); c.insert((1, 2, 3), 30, "assistant"); c.search((1, 2, 3, 4)).cached -> 3
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.servers.sequences import Seq, group, lcp

TYPES = (
    "assistant",
    "user",
    "system",
)  # CacheOrder's ordering, and the order stats_by_type lists them


@dataclass
class Entry:
    tokens: Seq
    nbytes: int  # as the server counts it: sum(c.nbytes)
    held: int  # as the process holds it
    cache_type: str
    order: int  # insertion order (ties between equally short `longer` entries)


@dataclass(frozen=True)
class Hit:
    """What fetch_nearest_cache returns: the entry copied (or None) and the prompt tokens it covers."""

    entry: Entry | None
    cached: int
    kind: str  # exact, shorter, longer, none


class PromptCache:
    def __init__(self, max_size: int):
        self.max_size = max_size
        self.entries: dict[Seq, Entry] = {}
        self.groups: dict[str | None, dict[Seq, Entry]] = {}
        self._by_type = {t: 0 for t in TYPES}  # counted bytes (LRUPromptCache._n_bytes_by_type)
        self._held = 0
        self.lrus: dict[str, list[Seq]] = {t: [] for t in TYPES}
        self._count = 0

    def __len__(self) -> int:
        return sum(len(lru) for lru in self.lrus.values())

    @property
    def nbytes(self) -> int:
        return sum(self._by_type.values())

    @property
    def held(self) -> int:
        return self._held

    def set_held(self, tokens: Seq, held: int) -> None:
        entry = self.entries[tokens]
        self._held += held - entry.held
        entry.held = held

    def stat_lines(self) -> list[str]:
        """ResponseGenerator._log_cache_stats (server.py#L563-L572), as logged before each request's fetch."""
        lines = [f"Prompt Cache: {len(self)} sequences, {self.nbytes / 1e9:.2f} GB"]
        for t in TYPES:
            n_bytes = self._by_type[t]
            lines.append(f"- {t}: {len(self.lrus[t])} sequences, {n_bytes / 1e9:.2f} GB")
        return lines

    def search(self, prompt: Seq) -> Hit:
        """fetch_nearest_cache's choice (every cache here is trimmable: KVCache)."""
        if not self.entries:
            return Hit(None, 0, "none")
        shares = [(lcp(e.tokens, prompt), e) for e in self._group(prompt)]
        common = max((s for s, _ in shares), default=0)
        if len(prompt) and any(s == len(e.tokens) == len(prompt) for s, e in shares):
            return Hit(self.entries[prompt], len(prompt), "exact")
        prefixes = [e for s, e in shares if s == len(e.tokens) >= 2]
        shorter = max(prefixes, key=lambda e: len(e.tokens), default=None)
        short_length = len(shorter.tokens) if shorter else 0
        if common > short_length:
            through = [e for s, e in shares if s == common]
            longer = min(through, key=lambda e: (len(e.tokens), -e.order))
            return Hit(longer, min(len(prompt) - 1, common), "longer")
        if shorter is not None:
            return Hit(shorter, short_length, "shorter")
        return Hit(None, 0, "none")

    def _group(self, tokens: Seq) -> list[Entry]:
        """The entries that may share a prefix with `tokens` (kvcore.servers.sequences.group)."""
        return list(self.groups.get(group(tokens), {}).values())

    def _remove(self, tokens: Seq) -> Entry:
        entry = self.entries.pop(tokens)
        del self.groups[group(tokens)][tokens]
        self._by_type[entry.cache_type] -= entry.nbytes
        self._held -= entry.held
        for t in TYPES:  # CacheOrder.remove: the first type whose list holds it
            if tokens in self.lrus[t]:
                self.lrus[t].remove(tokens)
                break
        return entry

    def pop(self) -> Entry:
        """CacheOrder.pop: the entry evicted next."""
        for a, b in zip(TYPES, TYPES[1:]):
            if self.lrus[a] and len(self.lrus[a]) >= len(self.lrus[b]):
                return self._remove(self.lrus[a][0])
        return self._remove(self.lrus[TYPES[-1]][0])

    def insert(self, tokens: Seq, nbytes: int, held: int, cache_type: str) -> list[Entry]:
        """insert_cache; returns the entries it removed (prefixes and evictions)."""
        removed = []
        if tokens in self.entries:
            removed.append(self._remove(tokens))
        self._count += 1
        self.entries[tokens] = Entry(tokens, nbytes, held, cache_type, self._count)
        self.groups.setdefault(group(tokens), {})[tokens] = self.entries[tokens]
        self._by_type[cache_type] += nbytes
        self._held += held
        self.lrus[cache_type].append(tokens)
        for other in [e.tokens for e in self._group(tokens) if len(e.tokens) < len(tokens)]:
            if lcp(other, tokens) == len(other):
                removed.append(self._remove(other))
        if len(self) > self.max_size:
            removed.append(self.pop())
        return removed

    def trim_to(self, n_bytes: int) -> list[Entry]:
        removed = []
        while self.nbytes > max(0, n_bytes):
            removed.append(self.pop())
        return removed
