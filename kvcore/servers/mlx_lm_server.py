"""mlx_lm.server (mlx-lm 0.32.2) request by request: what it resumes, processes, stores, prints and holds.

A model whose every cache is a KVCache is batchable (server.py#L460-L463), so each request takes the batched path
(`ResponseGenerator._generate`, server.py#L775-L1026); the rules, with their lines in mlx-lm 0.32.2
(https://github.com/ml-explore/mlx-lm/blob/v0.32.2/mlx_lm/):
1. Before the fetch the server logs its prompt cache (`_log_cache_stats`, server.py#L563-L572; #L842).
2. The prompt is split into segments: the leading system messages (up to the first token where the template
   renders them differently from the same messages with an empty user turn), the rest (server.py#L700-L753);
   `fetch_nearest_cache` (kvcore.servers.prompt_cache) covers the first `cached` tokens (#L843-L853).
3. With `--prompt-cache-bytes`, entries are evicted until the counted bytes are at most that limit minus the
   request's copy (`trim_to`, server.py#L886-L889); `LRUPromptCache` itself gets no byte limit (#L1914).
4. The batch cache: the copy is merged into a BatchKVCache of exactly `cached` rows (cache.py#L1057-L1086), then
   grows in 256-row steps as a KVCache does (#L910-L933; kvcore.memory.allocsim). The last prompt token is its own
   segment (generate.py#L1701-L1703); the rest is processed a segment at a time in chunks of `--prefill-step-size`
   (#L1866-L1884), each chunk logged as `Prompt processing progress: done/total` (server.py#L1564), then
   `total/total` when generation starts (generate.py#L1852).
5. At the end of every segment but the last, the cache so far is stored as that segment's type, system or user
   (server.py#L948-L969); the reply's every token is fed before it is returned, the end token included
   (generate.py#L1384-L1500), and the whole sequence, prompt + reply, is stored as assistant (server.py#L996-L1008).
6. What is stored is cut from the batch cache with `mx.contiguous(keys[..., :used])` (BatchKVCache.extract,
   cache.py#L1047-L1054): the server counts the used rows (`KVCache.nbytes`, #L417-L421), but the cut is lazy,
   so until a later request resumes from the entry it keeps the whole batch buffer alive, 256-row steps included
   (tests/test_servers.py shows it on mlx). An entry resumed from is computed then and holds only its rows.
With `--kv-bits` every request takes the sequential path instead: kvcore.servers.mlx_lm_sequential
(kvcore.servers.ledger.make_ledger picks). Not modelled (refused by name): --draft-model, sliding-window and other non-KVCache layers, several
requests in flight at once (the script's requests run one after another).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import KvError, quote
from kvcore.limits import MAX_PROMPT_CACHE_ENTRIES, MIN_PREFILL_STEP
from kvcore.memory.allocsim import STEP, CacheState, trace
from kvcore.memory.formats import FORMATS
from kvcore.model.geometry import Geometry
from kvcore.servers.options import Option
from kvcore.servers.prompt_cache import PromptCache
from kvcore.servers.sequences import Seq, extend

SOURCE = "https://github.com/ml-explore/mlx-lm/blob/v0.32.2/mlx_lm/server.py"
NAME = "mlx_lm.server"
# each line is logged as "<asctime> - INFO - <line>" (logging.basicConfig, server.py#L2082-L2085)
LOG_PREFIX = "%(asctime)s - INFO - "
DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2, "fp32": 4, "fp16": 2, "bf16": 2}


def _size(text: str) -> int:
    """mlx_lm.utils._parse_size (utils.py#L86-L95): digits with an optional M, G, MB or GB (10^6, 10^9)."""
    split = len(text) - len(text.lstrip("0123456789."))
    units = {"M": 10**6, "G": 10**9, "MB": 10**6, "GB": 10**9, "": 1}
    unit = text[split:].strip().upper()
    if not text[:split] or unit not in units or text[:split].count(".") > 1:
        raise ValueError(text)
    from decimal import Decimal

    return int(Decimal(text[:split]) * units[unit])


# The bits the ledger knows a format for (kvcore.memory.formats' mlx-q<bits>, each one mx.quantize accepts).
KV_BITS = tuple(f.bits for f in FORMATS.values() if f.mlx_cache == "QuantizedKVCache")
GROUP_SIZES = (32, 64, 128)  # the group sizes mx.quantize accepts (mlx 0.32.4)


def _one_of(flag: str, allowed: tuple[int, ...], why: str):
    """An option taking a whole number among `allowed` (`why` says whose list it is), refused by name otherwise."""

    def parse(text: str) -> int:
        if int(text) not in allowed:
            raise KvError(
                f"mlx_lm.server's {flag} takes {', '.join(map(str, sorted(allowed)))} here ({why}), "
                f"not {quote(text)}."
            )
        return int(text)

    return parse


_kv_bits = _one_of("--kv-bits", KV_BITS, "the bits of kvcore's mlx-q formats")
_kv_group_size = _one_of("--kv-group-size", GROUP_SIZES, "what mx.quantize accepts")


# The server's own options (server.py#L1922-L2080): those the ledger uses, with their defaults at 0.32.2.
OPTIONS = (
    Option("--prompt-cache-size", int, 10, "server.py#L2042-L2047", high=MAX_PROMPT_CACHE_ENTRIES),
    Option("--prompt-cache-bytes", _size, None, "server.py#L2048-L2052", low=0),
    Option("--prefill-step-size", int, 2048, "server.py#L2036-L2041", low=MIN_PREFILL_STEP),
    # the sequential path (kvcore.servers.mlx_lm_sequential); 5000: DEFAULT_QUANTIZED_KV_START, generate.py#L49
    Option("--kv-bits", _kv_bits, None, "server.py#L2053-L2060"),
    Option("--kv-group-size", _kv_group_size, 64, "server.py#L2061-L2066"),
    Option("--quantized-kv-start", int, 5000, "server.py#L2067-L2073"),
    Option("--draft-model", str, None, "server.py#L1952-L1957", modelled=False),
    Option("--max-tokens", int, 512, "server.py#L2012-L2017", low=1),
    Option("--decode-concurrency", int, 32, "server.py#L2024-L2029", low=1),
    Option("--prompt-concurrency", int, 8, "server.py#L2030-L2035", low=1),
)


def sequential(options: dict) -> bool:
    """Whether the server serves requests one at a time, the sequential path: --kv-bits disables batching
    (`_is_batchable`, server.py#L768-L773; kvcore.servers.mlx_lm_sequential models that path)."""
    return options.get("--kv-bits") is not None


def row_bytes(geometry: Geometry, dtype: str) -> int:
    """K and V bytes of one token over all layers: every layer a KVCache in the activation dtype."""
    others = sorted({layer.kind for layer in geometry.layers} - {"full"})
    if others:
        raise KvError(
            f"{geometry.name} has {', '.join(others)} layers; the ledger models KVCache (full attention) "
            "layers only.",
            "server_layers",
            model=geometry.name,
            kinds=", ".join(others),
            server=NAME,
        )
    return sum(x.kv_heads * (x.k_dim + x.v_dim) for x in geometry.layers) * DTYPE_BYTES[dtype]


@dataclass(frozen=True)
class Turn:
    """One request as the ledger needs it: the prompt's tokens, where its system segment ends, the reply's tokens."""

    user: str
    prompt: Seq
    system_end: int
    reply: Seq


@dataclass
class Row:
    request: int
    user: str
    prompt_tokens: int
    cached_tokens: int
    reprocessed_tokens: int
    completion_tokens: int
    active_kv_bytes: int
    prompt_cache_entries: int
    prompt_cache_bytes: int
    prompt_cache_held_bytes: int
    copies_bytes: int
    checkpoint_bytes: int
    resident_bytes: int
    peak_bytes: int
    log_lines: list[str]


def request_row(
    index: int,
    turn: Turn,
    cache: PromptCache,
    *,
    cached: int,
    reprocessed: int,
    active: int,
    copies: int,
    peak: int,
    lines: list[str],
) -> Row:
    """Request `index`'s row as both of mlx_lm.server's paths count it (the batched one here, the sequential one in
    kvcore.servers.mlx_lm_sequential): the prompt cache as it stands after the request (its entries, the bytes
    it counts and those it holds, which are what stays resident), no checkpoints."""
    return Row(
        request=index + 1,
        user=turn.user,
        prompt_tokens=len(turn.prompt),
        cached_tokens=cached,
        reprocessed_tokens=reprocessed,
        completion_tokens=len(turn.reply),
        active_kv_bytes=active,
        prompt_cache_entries=len(cache),
        prompt_cache_bytes=cache.nbytes,
        prompt_cache_held_bytes=cache.held,
        copies_bytes=copies,
        checkpoint_bytes=0,
        resident_bytes=cache.held,
        peak_bytes=peak,
        log_lines=lines,
    )


def growths(state: CacheState, updates: list[int]) -> tuple[list[int], CacheState]:
    """The capacities a KVCache grows to over `updates` (kvcore.memory.allocsim's rule), and its last state; -k
    stands for k single-token updates, counted without walking them: from a full buffer each adds 256 rows."""
    events = []
    for n in updates:
        if n > 0:
            for s in trace("KVCache", [n], start=state):
                if s.capacity != state.capacity:
                    events.append(s.capacity)
                state = s
            continue
        end = state.offset - n
        capacity = state.capacity
        while end > capacity:  # the buffer fills to its end, then a single token adds a step
            capacity += STEP
            events.append(capacity)
        state = CacheState(end, capacity)
    return events, state


class Ledger:
    """The server's state across a script: its prompt cache, one request at a time."""

    def __init__(self, options: dict, geometry, dtype: str):
        self.options = options
        self.row_bytes = row_bytes(geometry, dtype)  # K and V bytes of one token over all layers
        self.cache = PromptCache(options["--prompt-cache-size"])

    @staticmethod
    def segments(turn: Turn, cached: int) -> list[tuple[int, int, str | None]]:
        """(start, end, type stored at its end) of each segment processed after the cached tokens; the last
        token is its own segment, moved straight to generation."""
        bounds = [(0, turn.system_end, "system")] if turn.system_end else []
        bounds.append((turn.system_end, len(turn.prompt), "user"))
        left = [(max(a, cached), b, t) for a, b, t in bounds if b > cached]
        types = [t for _, _, t in left]
        spans = [(a, b) for a, b, _ in left]
        a, b = spans[-1]
        if b - a != 1:
            spans[-1:] = [(a, b - 1), (b - 1, b)]
        last = len(spans) - 1
        return [
            (a, b, types[i] if i < min(len(types), last) else None)
            for i, (a, b) in enumerate(spans)
        ]

    def request(self, index: int, turn: Turn) -> Row:
        lines = self.cache.stat_lines()
        hit = self.cache.search(turn.prompt)
        if hit.kind == "exact":
            raise KvError(
                f"Request {index + 1}'s prompt is exactly a stored sequence: mlx_lm.server 0.32.2 then has no "
                "token left to process and its batched path fails (server.py#L853, generate.py#L1697)."
            )
        if self.options["--prompt-cache-bytes"] is not None:
            copy_bytes = hit.entry.nbytes if hit.entry else 0
            self.cache.trim_to(self.options["--prompt-cache-bytes"] - copy_bytes)
        source_bytes = (
            hit.entry.nbytes if hit.entry else 0
        )  # computed now: the cut holds its own rows
        kept = hit.entry is not None and hit.entry.tokens in self.cache.entries
        if kept:
            self.cache.set_held(hit.entry.tokens, source_bytes)
        ghost = (
            0 if kept else source_bytes
        )  # an evicted source lives on in its copy until the cache grows
        total = len(turn.prompt) - hit.cached
        state = CacheState(hit.cached, hit.cached)
        own = 0  # rows the batch cache holds itself: a merged copy is a view of the entry until it grows
        cuts: list[
            tuple[Seq, int]
        ] = []  # entries stored mid-request and the batch rows their cut keeps
        peak = self.cache.held + ghost
        done = 0

        def grow(updates: list[int]) -> None:
            nonlocal state, own, peak, ghost
            events, state = growths(state, updates)
            for capacity in events:  # a new buffer; the old one is read while it is written
                alive = [t for t, rows in cuts if rows == own and t in self.cache.entries]
                for t in alive:
                    self.cache.set_held(t, own * self.row_bytes)
                old = 0 if alive else own * self.row_bytes
                peak = max(peak, self.cache.held + ghost + old + capacity * self.row_bytes)
                own, ghost = capacity, 0

        segments = self.segments(turn, hit.cached)
        step = self.options["--prefill-step-size"]
        for start, end, stored in segments[:-1]:
            for a in range(start, end, step):
                grow([min(step, end - a)])
                done += min(step, end - a)
                lines.append(f"Prompt processing progress: {done}/{total}")
            if stored is not None:
                tokens = turn.prompt[:end]
                self.cache.insert(tokens, end * self.row_bytes, 0, stored)
                cuts.append((tokens, own))
        lines.append(f"Prompt processing progress: {total}/{total}")
        grow([-(1 + len(turn.reply))])  # the last prompt token, then every reply token
        active = own * self.row_bytes
        cut_held = sum(self.cache.entries[t].held for t, _ in cuts if t in self.cache.entries)
        peak = max(peak, self.cache.held + active)
        tokens = extend(turn.prompt, turn.reply)
        self.cache.insert(tokens, len(tokens) * self.row_bytes, 0, "assistant")
        if tokens in self.cache.entries:  # (--prompt-cache-size 0 evicts it at once)
            self.cache.set_held(tokens, active)  # the lazy cut keeps the batch buffer
        return request_row(
            index, turn, self.cache, cached=hit.cached, reprocessed=total, active=active,
            copies=source_bytes + cut_held, peak=peak, lines=lines,
        )  # fmt: skip
