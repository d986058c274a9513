"""llama-server (llama.cpp 0c1e570, vendored by llama-cpp-python 0.3.36) request by request: which slot takes
it, what the slot and the host-RAM prompt cache resume and reprocess, what they print and hold.

The rules, with their lines at https://github.com/ggml-org/llama.cpp/blob/0c1e570/ (tools/server/ unless named):
1. Slots: `-np` left at auto (-1, common/arg.cpp#L1403) becomes 4 slots sharing one unified pool of `-c` cells
   (server.cpp#L156-L161); an explicit `-np N` gives each slot its own stream of `-c / N` cells unless `-kvu`
   (`-c` left at 0: the trained context per stream when split, common/fit.cpp#L195-L272).
   The pool is allocated once, whatever is in it (kvcore.runtimes.llamacpp_cache: one home for its bytes).
2. Choosing a slot (`get_available_slot`, server-context.cpp#L1528-L1641): the idle non-empty slot whose tokens
   share the largest fraction of the new prompt (f_sim = lcp / prompt, above `-sps` 0.1, C floats); else the
   least recently released one (ties: the last). Then, when chosen by LRU or when the slot would keep under half
   its tokens (f_keep < 0.5), the prompt cache is updated: the slot is saved, the entry that both keeps and
   matches more than the slot itself is loaded into it (and leaves the cache), and the cache is trimmed.
3. The prompt cache (`server_prompt_cache`, server-task.cpp#L1689-L1901): an entry is a slot's sequence state
   (`llama_state_seq_get_size_ext`: per stream a cell count, per cell its position and sequence, per layer K and V
   rows with their type and row size, src/llama-kv-cache.cpp#L2065-L2340); saving skips a prompt an entry already
   holds, removes entries it contains, then drops the oldest until `--cache-ram` MiB hold it; loading skips an
   entry that would keep under a quarter of itself; `update` logs `cache state: ...`.
4. On starting a task, every idle slot is saved to the prompt cache (`--cache-idle-slots`, on by default), and
   cleared when the pool is unified (server-context.cpp#L2417-L2433).
5. The prompt reuses the longest common prefix of the slot's tokens (`n_past`, #L3200), at least one token
   processed (#L3381-L3386); `timings.cache_n` is that prefix, `prompt_n` the rest. A slot keeps the prompt and
   every reply token but the last sampled, which is never decoded (`stop processing: n_tokens`, #L514-L520).
6. Context checkpoints are made only for models whose cache cannot drop a sequence's tail: SWA, recurrent or
   hybrid (#L3441-L3454); a full-attention model (SmolLM2, Llama) makes none, so they cost nothing here.
Not modelled (refused by name): `--cache-reuse` above 0 (KV shifting), sliding-window and recurrent layers,
several requests in flight at once, a speculative draft model.
Example: Ledger(parse_options(OPTIONS, []), geometry, "fp16").slots -> 4 slots of 8,192 cells in one pool.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from kvcore.errors import KvError
from kvcore.memory.formats import ggml_name, llamacpp_types
from kvcore.runtimes import llamacpp_cache
from kvcore.runtimes.llamacpp_plan import flash_attention
from kvcore.servers.mlx_lm_server import Row, Turn
from kvcore.servers.options import Option
from kvcore.servers.sequences import Seq, extend, lcp

NAME = "llama-server"
SOURCE = "https://github.com/ggml-org/llama.cpp/blob/0c1e570/tools/server/server-context.cpp"
# each line is printed as "<time since start> <level letter> <line>" (common/log.cpp, log prefix and timestamps on)
LOG_PREFIX = "%(elapsed)s %(level)s "
MIB = 1024 * 1024
SIMILARITY = 0.1  # -sps / --slot-prompt-similarity (common/common.h#L697)
AUTO_SLOTS = llamacpp_cache.SERVER_AUTO_SLOTS
# What the process holds beside the ledger's host-side bytes, measured on the bundled recording
# (recordings/measured-linux-cpu-llama-server-smollm2-135m.yaml, 54 requests; tests/test_server_memory.py): its RSS
# grows from the first request by at least those bytes (less a page's rounding) and at most RSS_FACTOR times them
# plus RSS_SLACK: an entry loaded into a slot or evicted is freed, and glibc keeps freed heap pages until it trims.
RSS_FACTOR, RSS_SLACK, RSS_ROUNDING = 2, 5 * MIB // 2, MIB // 4


def rss_within(growth: int, held: int) -> bool:
    """Whether a process's RSS growth (bytes) is what the ledger's host-side growth `held` leaves room for."""
    return held - RSS_ROUNDING <= growth <= RSS_FACTOR * held + RSS_SLACK


KV_TYPE = "f16"  # -ctk / -ctv default (common/common.h)


def _flag(text: str) -> str:
    if text not in ("on", "off", "auto"):
        raise ValueError(text)
    return text


def _kv_type(text: str) -> str:
    """-ctk / -ctv: one of the types llama-server takes (kv_cache_types, common/arg.cpp#L304-L323), by the name
    it prints (f16, q8_0, ...)."""
    if text not in {ggml_name(t) for t in llamacpp_types()}:
        raise ValueError(text)
    return text


# The server's own options (common/arg.cpp at 0c1e570) the ledger uses, with their defaults there.
OPTIONS = (
    Option("--parallel", int, -1, "common/arg.cpp#L2544-L2560", ("-np",), low=-1, high=256),
    Option("--ctx-size", int, 0, "common/arg.cpp#L1639-L1646", ("-c",)),
    Option("--kv-unified", bool, False, "common/arg.cpp#L1724-L1731", ("-kvu",)),
    Option(
        "--cache-ram", int, 8192, "common/arg.cpp#L1716-L1723", ("-cram",), low=-1, high=1 << 30
    ),
    Option("--ctx-checkpoints", int, 32, "common/arg.cpp#L1698-L1705", ("-ctxcp",)),
    Option("--cache-reuse", int, 0, "common/arg.cpp#L3582-L3589", modelled=False),
    Option("--flash-attn", _flag, "auto", "common/arg.cpp#L1754-L1762", ("-fa",)),
    Option("--cache-type-k", _kv_type, KV_TYPE, "common/arg.cpp#L2436-L2448", ("-ctk",)),
    Option("--cache-type-v", _kv_type, KV_TYPE, "common/arg.cpp#L2449-L2461", ("-ctv",)),
)

# The lines the ledger prints, as llama-server prints them after its time and level (the rest of its log, timings
# and sampler settings, is not the cache's). Where a line holds what only the process knows, a task's number, a
# release time in microseconds, an entry's address, the ledger prints a mark and `same_line` reads it as such.
CACHE_LINE = re.compile(
    r"^(slot get_availabl: |srv  get_availabl: updating|srv   prompt_save: |srv         alloc: "
    r"|srv          load: |srv        update: |slot process_sing: |slot prompt_clear: "
    r"|slot   operator\(\): .*\| (new prompt|cached n_tokens|need to evaluate|n_past was set)"
    r"|slot      release: )"
)
MARKS = (
    (re.compile(r"\| task \d+ \|"), "| task * |"),
    (re.compile(r"t_last = \d+"), "t_last = *"),
    (re.compile(r"prompt 0x[0-9a-f]+:"), "prompt *:"),
)


def cache_lines(log_lines: list[str]) -> list[str]:
    """The lines of a llama-server log (time and level left out) that the ledger prints, marks in place."""
    out = []
    for line in log_lines:
        if CACHE_LINE.match(line):
            for pattern, mark in MARKS:
                line = pattern.sub(mark, line)
            out.append(line)
    return out


def f32(x: float) -> float:
    """x as a C float (the server's similarities are floats: a quotient of two ints, rounded once)."""
    return struct.unpack("f", struct.pack("f", x))[0]


def state_bytes(cells: int, streams: int, layers: int, row: int) -> int:
    """llama_state_seq_get_size of a sequence of `cells` tokens: a magic number and the sequence id
    (src/llama-context.cpp#L3191-L3197), then (src/llama-kv-cache.cpp#L2065-L2340) the stream count, a cell count
    per stream, per cell its position, sequence count and sequence (12 bytes), the V layout and layer count, per
    layer K and V each with its type and row size (24 bytes), and `row` K+V bytes a cell."""
    head = 8 + 4 + 4 * streams
    return head if cells == 0 else head + 12 * cells + 8 + 24 * layers + row * cells


@dataclass
class Slot:
    id: int
    n_ctx: int
    tokens: Seq = ()
    t_last: int = (
        -1
    )  # the order it was last released in (the server prints the time in microseconds)

    def line(self, text: str, task: str = "-1", func: str = "get_availabl") -> str:
        return f"slot {func:>12.12}: id {self.id:2d} | task {task} | {text}"


@dataclass
class Entry:
    tokens: Seq
    size: int


def srv(func: str, text: str) -> str:
    return f"srv  {func:>12.12}: {text}"


def slot_layout(options: dict) -> tuple[int, bool]:
    """The slots llama-server makes and whether they share one pool (rule 1 above): -np left at auto gives
    AUTO_SLOTS in one unified pool; an explicit -np N gives N, unified only with -kvu."""
    n_parallel = options["--parallel"]
    if n_parallel == 0:
        raise KvError("llama-server's --parallel must be -1 (auto) or from 1 to 256.")
    return (AUTO_SLOTS, True) if n_parallel == -1 else (n_parallel, options["--kv-unified"])


class Ledger:
    """llama-server's slots and prompt cache across a script, one request at a time."""

    def __init__(self, options: dict, geometry, dtype: str):
        others = sorted({layer.kind for layer in geometry.layers} - {"full"})
        if others:
            raise KvError(
                f"{geometry.name} has {', '.join(others)} layers; the ledger models llama-server for "
                "full-attention models only (theirs make context checkpoints).",
                "server_layers",
                model=geometry.name,
                kinds=", ".join(others),
                server=NAME,
            )
        self.options = options
        k_type, v_type = options["--cache-type-k"], options["--cache-type-v"]
        flash_attention(
            options["--flash-attn"], v_type, k_type
        )  # a quantized V with -fa off: refused
        n_slots, unified = slot_layout(options)
        n_ctx = options["--ctx-size"]
        if not n_ctx:  # the trained context, per stream when split (common/fit.cpp#L195-L272)
            if not geometry.max_position_embeddings:
                raise KvError(f"{geometry.name} states no trained context: give -c.")
            n_ctx = geometry.max_position_embeddings * (1 if unified else n_slots)
        cache_options = llamacpp_cache.Options(sequences=n_slots, unified=unified)
        cells, self.streams = llamacpp_cache.context_cells(n_ctx, cache_options)
        self.unified = unified
        self.n_ctx = llamacpp_cache.pad(n_ctx)  # llama_n_ctx: the prompt cache's token limit
        self.kv_bytes = llamacpp_cache.kv_bytes(geometry, n_ctx, k_type, v_type, cache_options)
        self.layers = len(geometry.layers)
        self.row_bytes = sum(
            llamacpp_cache.row_bytes(k_type, k) + llamacpp_cache.row_bytes(v_type, v)
            for k, v in map(llamacpp_cache.kv_widths, geometry.layers)
        )
        self.slots = [Slot(i, cells) for i in range(n_slots)]
        ram = options["--cache-ram"]
        self.cache: list[Entry] | None = [] if ram != 0 else None
        self.limit = MIB * max(ram, 0)
        self.released = 0

    def size(self) -> int:
        return sum(e.size for e in self.cache or [])

    # -- the prompt cache (server-task.cpp#L1689-L1901)

    def save(self, slot: Slot, lines: list[str]) -> bool:
        """server_slot::prompt_save and server_prompt_cache::alloc."""
        if not len(slot.tokens):
            return False
        n = len(slot.tokens)
        size = state_bytes(n, self.streams, self.layers, self.row_bytes)
        lines.append(
            srv("prompt_save", f" - saving prompt with length {n}, total state size = "
                f"{size / MIB:.3f} MiB (draft: {0:.3f} MiB)")
        )  # fmt: skip
        if any(lcp(e.tokens, slot.tokens) == n for e in self.cache):
            lines.append(srv("alloc", " - prompt is already in the cache, skipping"))
            return False
        if self.limit and size > self.limit:
            lines.append(
                srv("alloc", f" - prompt state size {size / MIB:.3f} MiB exceeds cache size limit "
                    f"{self.limit / MIB:.3f} MiB, skipping")
            )  # fmt: skip
            return False
        for e in list(self.cache):
            if lcp(e.tokens, slot.tokens) == len(e.tokens):
                lines.append(
                    srv("alloc", f" - removing obsolete cached prompt with length {len(e.tokens)}")
                )
                self.cache.remove(e)
        while self.limit and self.cache and self.size() + size > self.limit:
            lines.append(
                srv("alloc", " - making room for prompt cache entry, removing oldest entry "
                    f"(size = {self.cache[0].size / MIB:.3f} MiB)")
            )  # fmt: skip
            self.cache.pop(0)
        self.cache.append(Entry(slot.tokens, size))
        return True

    def load(self, slot: Slot, prompt: Seq, lines: list[str]) -> None:
        """server_prompt_cache::load: the entry that keeps and matches more than the slot, into the slot."""
        common = lcp(slot.tokens, prompt)
        keep = f32(common / len(slot.tokens)) if len(slot.tokens) else -1.0
        sim = f32(common / len(prompt))
        lines.append(
            srv(
                "load", f" - looking for better prompt, base f_keep = {keep:.3f}, f_sim = {sim:.3f}"
            )
        )
        best = None
        for e in self.cache:
            common = lcp(e.tokens, prompt)
            keep_e, sim_e = f32(common / len(e.tokens)), f32(common / len(prompt))
            lines.append(
                srv("load", f"   - prompt with length {len(e.tokens):7d}, lcp = {common:7d}, "
                    f"f_keep = {keep_e:.3f}, f_sim = {sim_e:.3f}")
            )  # fmt: skip
            if keep_e < 0.25:
                continue
            if keep < keep_e and sim < sim_e:
                keep, sim, best = keep_e, sim_e, e
        if best is not None:
            lines.append(
                srv("load", f" - found better prompt with f_keep = {keep:.3f}, f_sim = {sim:.3f}")
            )
            slot.tokens = best.tokens
            self.cache.remove(best)

    def update(self, lines: list[str]) -> None:
        """server_prompt_cache::update: trimmed to its limits, then its state logged."""
        while self.limit and self.cache and self.size() > self.limit:
            lines.append(
                srv("update", " - cache size limit reached, removing oldest entry "
                    f"(size = {self.cache[0].size / MIB:.3f} MiB)")
            )  # fmt: skip
            self.cache.pop(0)
        tokens = sum(len(e.tokens) for e in self.cache)
        per_token = max(1.0, f32(f32(self.size()) / max(1, tokens)))  # float(size()) / n_tokens()
        estimate = max(self.n_ctx, int(f32(self.limit / per_token))) if self.limit else self.n_ctx
        while self.cache and sum(len(e.tokens) for e in self.cache) > estimate:
            lines.append(
                srv("update", f" - cache token limit ({self.n_ctx}, est: {estimate}) reached, "
                    f"removing oldest entry (size = {self.cache[0].size / MIB:.3f} MiB)")
            )  # fmt: skip
            self.cache.pop(0)
        lines.append(
            srv("update", f" - cache state: {len(self.cache)} prompts, {self.size() / MIB:.3f} MiB "
                f"(limits: {self.limit / MIB:.3f} MiB, {self.n_ctx} tokens, {estimate} est)")
        )  # fmt: skip
        for e in self.cache:
            lines.append(
                srv("update", f"   - prompt *: {len(e.tokens):7d} tokens, checkpoints: {0:2d}, "
                    f"{e.size / MIB:9.3f} MiB")
            )  # fmt: skip

    # -- a request

    def choose(self, prompt: Seq, lines: list[str]) -> tuple[Slot, bool]:
        """get_available_slot: (the slot, whether the prompt cache is updated)."""
        best, best_sim = None, 0.0
        for slot in self.slots:
            if not len(slot.tokens):
                lines.append(slot.line(" - skipping, slot is empty"))
                continue
            common = lcp(slot.tokens, prompt)
            sim = f32(common / len(prompt))
            lines.append(
                slot.line(
                    f" - checking sim = {sim:.3f} ({common}/{len(prompt)}) > {SIMILARITY:.3f}"
                )
            )
            if sim > best_sim and sim > f32(SIMILARITY):
                best, best_sim = slot, sim
        if best is not None:
            keep = f32(f32(best_sim * len(prompt)) / len(best.tokens))
            lines.append(
                best.line(f"selected slot by LCP similarity, f_sim_best = {best_sim:.3f} "
                          f"(> {SIMILARITY:.3f} thold), f_keep = {keep:.3f}")
            )  # fmt: skip
            return best, keep < 0.5
        best = self.slots[0]
        for slot in self.slots:
            if slot.t_last <= best.t_last:
                best = slot
        lines.append(
            best.line(f"selected slot by LRU, t_last = {'-1' if best.t_last < 0 else '*'}")
        )
        return best, True

    def request(self, index: int, turn: Turn) -> Row:
        lines: list[str] = []
        prompt = turn.prompt
        slot, update = self.choose(prompt, lines)
        peak = self.size()
        if update and self.cache is not None:
            lines.append(srv("get_availabl", "updating prompt cache"))
            self.save(slot, lines)
            peak = max(peak, self.size())
            self.load(slot, prompt, lines)
            self.update(lines)
        if self.cache is not None:  # --cache-idle-slots
            for idle in (s for s in self.slots if s is not slot):
                lines.append(idle.line("saving idle slot to prompt cache", func="process_sing"))
                if self.save(idle, lines):
                    peak = max(peak, self.size())
                    self.update(lines)
                if self.unified:
                    lines.append(
                        idle.line(
                            f"clearing prompt with {len(idle.tokens)} tokens", func="prompt_clear"
                        )
                    )
                    idle.tokens = ()
        lines.append(
            slot.line(f"new prompt, n_ctx_slot = {slot.n_ctx}, n_keep = 0, task.n_tokens = {len(prompt)}",
                      "*", "operator()")
        )  # fmt: skip
        cached = lcp(slot.tokens, prompt)
        if cached == len(prompt):
            lines.append(
                slot.line("need to evaluate at least 1 token for each active slot (n_past = "
                          f"{cached}, task.n_tokens() = {len(prompt)})", "*", "operator()")
            )  # fmt: skip
            cached -= 1
            lines.append(slot.line(f"n_past was set to {cached}", "*", "operator()"))
        lines.append(
            slot.line(
                f"cached n_tokens = {cached}, memory_seq_rm [{cached}, end)", "*", "operator()"
            )
        )
        slot.tokens = extend(prompt, turn.reply[: len(turn.reply) - 1])  # the last is never decoded
        lines.append(
            slot.line(
                f"stop processing: n_tokens = {len(slot.tokens)}, truncated = 0", "*", "release"
            )
        )
        self.released += 1
        slot.t_last = self.released
        live = {s.tokens for s in self.slots if len(s.tokens)}
        held = self.size()
        return Row(
            request=index + 1,
            user=turn.user,
            prompt_tokens=len(prompt),
            cached_tokens=cached,
            reprocessed_tokens=len(prompt) - cached,
            completion_tokens=len(turn.reply),
            active_kv_bytes=self.kv_bytes,
            prompt_cache_entries=len(self.cache or []),
            prompt_cache_bytes=held,
            prompt_cache_held_bytes=held,
            copies_bytes=sum(e.size for e in self.cache or [] if e.tokens in live),
            checkpoint_bytes=0,
            resident_bytes=self.kv_bytes + held,
            peak_bytes=self.kv_bytes + max(peak, held),
            log_lines=lines,
        )
