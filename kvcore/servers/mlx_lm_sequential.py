"""mlx_lm.server (mlx-lm 0.32.2) with `--kv-bits`: the sequential path, request by request.

`_is_batchable` is False once `--kv-bits` is given (server.py#L768-L773), so every request is served alone by
`_serve_single` (server.py#L1028-L1149); the rules, with their lines in mlx-lm 0.32.2
(https://github.com/ml-explore/mlx-lm/blob/v0.32.2/mlx_lm/):
1. Before the fetch the server logs its prompt cache (`_log_cache_stats`, server.py#L563-L572; #L1071).
2. `fetch_nearest_cache` (kvcore.servers.prompt_cache; server.py#L1073-L1075) hands out a `copy.deepcopy` of the
   entry, every layer's whole buffer (cache.py#L1652-L1672); a `longer` entry's copy is cut with `trim`, which
   moves the offset only, so the copy keeps the entry's capacity (cache.py#L323-L326, #L391-L394). No entry: fresh
   KVCaches (server.py#L1078-L1081). A prompt equal to an entry leaves nothing to process, and generate_step
   refuses an empty prompt (generate.py#L370-L373): refused here.
3. `stream_generate` processes the rest of the prompt (server.py#L1097-L1114): generate_step reports 0/total,
   then after each chunk of min(`--prefill-step-size`, tokens left - 1) the tokens done, then total/total once the
   last prompt token has given the first reply token (generate.py#L434-L475); the handler logs each report as
   `Prompt processing progress: done/total` (server.py#L1564). Nothing is stored mid-prompt (no segments).
4. After every chunk and every step, `maybe_quantize_kv_cache` turns each KVCache whose offset has reached
   `--quantized-kv-start` into a QuantizedKVCache(`--kv-group-size`, `--kv-bits`) (generate.py#L305-L310, #L425,
   #L449). `to_quantized` quantizes the whole buffer, so the capacity carries over (cache.py#L396-L404), and a
   QuantizedKVCache grows by KVCache's 256-row rule (cache.py#L261-L302; kvcore.memory.allocsim). A row then
   takes the `mlx-q<bits>` format's bytes (kvcore.memory.formats): the packed codes and one scale and one bias
   per group in the activation dtype. A copy of a quantized entry stays quantized.
5. Every reply token is fed before it is returned, the end token included (generate.py#L465-L480,
   #L735-L771); prompt + reply are stored as one assistant entry (server.py#L1132, #L1145-L1147), counted as
   `sum(c.nbytes)`: the whole buffers, capacity included (cache.py#L334-L336, #L416-L420). The stored prefixes
   of it go (insert_cache).
6. `--prompt-cache-bytes` is applied on the batched path only (server.py#L886-L889) and LRUPromptCache gets no
   byte limit (#L1914): on this path it changes nothing.
Memory: the process holds each entry as counted (whole buffers, computed). During a request the entry resumed
from stays stored beside its copy, the working cache; while it grows the old and new buffers are both alive,
and so are the full-precision and the quantized buffers while it is converted.
Not modelled: of several equally short `longer` entries the trie's walk picks one and the ledger the newest
(kvcore.servers.prompt_cache); on this path their capacities, and so the copy's bytes, may differ.
Example: a first request of 41 prompt tokens and 24 reply tokens under --kv-bits 8 --quantized-kv-start 64 ends
at offset 65 in 256 rows, quantized: SmolLM2-135M in fp32 stores 256 x 12,960 B.
"""

from __future__ import annotations

from kvcore.errors import KvError
from kvcore.memory.allocsim import CacheState
from kvcore.memory.formats import FORMATS
from kvcore.servers.mlx_lm_server import Row, Turn, growths, request_row, row_bytes
from kvcore.servers.prompt_cache import PromptCache
from kvcore.servers.sequences import Seq, extend

# the activation dtype, as a safetensors header or a preset names it -> the scales' dtype (kvcore.memory.formats)
SCALE_DTYPES = {"F32": "fp32", "F16": "fp16", "BF16": "bf16"} | {
    d: d for d in ("fp32", "fp16", "bf16")
}


def quantized_row_bytes(geometry, dtype: str, bits: int, group: int) -> int:
    """K and V bytes of one token over all layers in QuantizedKVCache(group, bits), scales in `dtype`."""
    fmt = FORMATS[f"mlx-q{bits}"]
    scale = SCALE_DTYPES[dtype]
    return sum(
        x.kv_heads * (fmt.row_bytes(x.k_dim, group, scale) + fmt.row_bytes(x.v_dim, group, scale))
        for x in geometry.layers
    )


def prompt_updates(rest: int, step: int) -> tuple[list[int], list[str]]:
    """generate_step's prefill: the chunks it feeds before the last prompt token, and the progress it logs."""
    chunks, done = [], 0
    lines = [f"Prompt processing progress: 0/{rest}"]
    while rest - done > 1:
        n = min(step, rest - done - 1)
        chunks.append(n)
        done += n
        lines.append(f"Prompt processing progress: {done}/{rest}")
    lines.append(f"Prompt processing progress: {rest}/{rest}")
    return chunks, lines


class SequentialLedger:
    """The server's state across a script on the sequential path: its prompt cache, one request at a time."""

    def __init__(self, options: dict, geometry, dtype: str):
        self.options = options
        # a KVCache row and a QuantizedKVCache row: K and V of one token over all layers
        self.row_bytes = row_bytes(geometry, dtype)
        self.start = options["--quantized-kv-start"]
        self.quantized_row = quantized_row_bytes(
            geometry, dtype, options["--kv-bits"], options["--kv-group-size"]
        )
        self.cache = PromptCache(options["--prompt-cache-size"])
        self.shapes: dict[Seq, tuple[int, bool]] = {}  # an entry's (capacity, quantized)

    def request(self, index: int, turn: Turn) -> Row:
        lines = self.cache.stat_lines()
        hit = self.cache.search(turn.prompt)
        if hit.kind == "exact":
            raise KvError(
                f"Request {index + 1}'s prompt is exactly a stored sequence: mlx_lm.server 0.32.2 then has no "
                "token left to process and generate_step refuses an empty prompt (generate.py#L370-L373)."
            )
        capacity, quantized = self.shapes[hit.entry.tokens] if hit.entry else (0, False)
        copy_bytes = hit.entry.nbytes if hit.entry else 0
        state = CacheState(hit.cached, capacity)
        peak = self.cache.held + copy_bytes

        def row() -> int:
            return self.quantized_row if quantized else self.row_bytes

        def feed(update: int) -> None:
            nonlocal state, quantized, peak
            events, after = growths(state, [update])
            for grown in events:  # the new buffer is written from the old one
                peak = max(peak, self.cache.held + (state.capacity + grown) * row())
                state = CacheState(state.offset, grown)
            state = after
            if not quantized and state.offset >= self.start:  # both buffers alive while converted
                peak = max(
                    peak, self.cache.held + state.capacity * (self.row_bytes + self.quantized_row)
                )
                quantized = True

        rest = len(turn.prompt) - hit.cached
        chunks, progress = prompt_updates(rest, self.options["--prefill-step-size"])
        lines += progress
        singles = 1 + len(turn.reply)  # the last prompt token, then every reply token
        # the singles up to the one that takes the offset to --quantized-kv-start, where it is converted
        before = max(0, min(singles, self.start - (hit.cached + rest - 1)))
        for update in [*chunks, -before, -(singles - before)]:
            if update:
                feed(update)
        active = state.capacity * row()
        peak = max(peak, self.cache.held + active)
        tokens = extend(turn.prompt, turn.reply)
        self.cache.insert(tokens, active, active, "assistant")
        self.shapes[tokens] = (state.capacity, quantized)
        self.shapes = {t: s for t, s in self.shapes.items() if t in self.cache.entries}
        return request_row(
            index, turn, self.cache, cached=hit.cached, reprocessed=rest, active=active,
            copies=copy_bytes, peak=peak, lines=lines,
        )  # fmt: skip
