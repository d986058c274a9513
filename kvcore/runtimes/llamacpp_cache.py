"""llama.cpp's KV cache: the cells and bytes it allocates, read from its source.

llama.cpp preallocates the whole cache when the context is created, so its size depends on the
settings (`-c`, `-np`, `--kv-unified`, `-ub`, `--swa-full`, `-ctk`/`-ctv`), not on how many tokens
are in use. Example (gpt-oss-20b, `-c 131072`, f16, `-ub 512`):

    non-SWA cache: 131072 cells x 12 full layers  -> 3072.00 MiB
    SWA cache:     PAD256(min(131072, 128 + 512)) = 768 cells x 12 sliding layers -> 18.00 MiB

The rules, each from ggml-org/llama.cpp (file @ commit):

* Cells per stream -- `src/llama-context.cpp` (as vendored upstream in ollama/ollama@04db8a0bdd748e572513db1c02c0262ecdc37209,
  `llama/llama.cpp/src/llama-context.cpp`; the rule dates from llama.cpp PR #17046, Nov 2025):
  `n_ctx = GGML_PAD(n_ctx, 256)`; unified: `n_ctx_seq = n_ctx`; otherwise
  `n_ctx_seq = GGML_PAD(n_ctx / n_seq_max, 256)` (which can round *up*: -c 32768 -np 10 -> 3328 cells each).
  `src/llama-model.cpp` `create_memory` passes `n_ctx_seq` as the cache's `kv_size`.
* Micro-batch -- same file: `n_batch = causal ? min(n_ctx, n_batch) : n_batch` (the requested n_ctx,
  before padding) and `n_ubatch = min(n_batch, n_ubatch == 0 ? n_batch : n_ubatch)`.
* Streams -- `src/llama-kv-cache.cpp` @ 3514e9f6e795d3b3cd88d6614f6c07e7ce6f916f:
  `n_stream(unified ? 1 : n_seq_max)`; each layer holds `ggml_new_tensor_3d(type_k, n_embd_k_gqa, kv_size, n_stream)`
  (and the same for V); layers without KV and layers the iSWA filter rejects are skipped. Its log line:
  `"%s: size = %7.2f MiB (%6u cells, %3d layers, %2u/%u seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB\\n"`.
* The SWA cache -- `src/llama-kv-cache-iswa.cpp` @ 02c28f533ebba3e4ea944fc4a0719a012b3e7097:
  `size_swa = GGML_PAD(min(size_base, n_swa*(unified ? n_seq_max : 1) + n_ubatch), 256)`; `--swa-full`: `size_swa = size_base`.
* Decode read length -- `llama_kv_cache::get_n_kv` (same llama-kv-cache.cpp):
  `min(cells, max(256, GGML_PAD(used_max_p1, 256)))`.
* Bytes per row -- `ggml_row_size(type, n) = type_size * n / block_size` (asserts n % block_size == 0);
  block sizes in kvcore.memory.formats (ggml-common.h).
* llama-server without `-np` -- `tools/server/server.cpp` @ aa6192d38defc9a5d9fb2987413f71b18f214270:
  `if (params.n_parallel == 1 && params.kv_unified == false && !params.has_speculative())` it sets
  `n_parallel = 4` and `kv_unified = true` (so there an explicit `-np 1` becomes 4 slots too); later builds
  do it only when `n_parallel` is left at its auto value -1 ("n_parallel is set to auto, using n_parallel = 4
  and kv_unified = true"). An explicit `-np N` keeps `kv_unified = false` unless `--kv-unified` is given.
* Defaults -- `common/common.h` (`common_params`): `n_batch = 2048`, `n_ubatch = 512`; `kv_unified = false`.
  `src/llama-cparams.h`: `LLAMA_MAX_SEQ 256`.

Which layers are sliding (iSWA) under llama.cpp is the family table's `llama.cpp` window rule
(kvcore.model.families.FAMILIES): Gemma 2 (`set_swa_pattern(2)`), Gemma 3 (pattern 6) and gpt-oss are iSWA;
Phi-3's window is disabled ("Phi SWA is currently disabled", PR #13676); Llama/Mistral have none.
MLA layers (DeepSeek V2/V3) are stored as one KV head of K = kv_lora_rank + rope dims and no V tensor
(`src/llama-kv-cache.cpp` @ 0c1e570: `const bool has_v = !is_mla;` -- attention reads V as a view of the
latent; the V line logs 0.00 MiB). Older builds (@ 3514e9f6) also stored V = kv_lora_rank.
Recurrent layers (Qwen3-Next's gated delta net) live in a separate fp32 cache of one cell per sequence
(`llama_memory_recurrent`, hybrid memory, `src/llama-memory-recurrent.cpp`): R = (d_conv - 1) x (d_inner +
2 n_group d_state) and S = d_state x d_inner values per layer, its log line counting the model's n_layer.

Checked against a real llama.cpp: llama-cpp-python 0.3.36 (vendored llama.cpp 0c1e570), every family and
option over the grid in tests/test_llamacpp_build.py (tiny GGUFs, no_alloc); see the README.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvcore.errors import KvError, quote
from kvcore.memory.formats import get_format, ggml_name, llamacpp_types

if TYPE_CHECKING:  # the geometry's types only: kvcore.model.geometry reads configs under a runtime (kvcore.runtimes.registry)
    from kvcore.model.geometry import Geometry, Layer

NAME = "llama.cpp"  # the runtime whose caches these are (kvcore.runtimes.llamacpp), as a geometry names it
PAD = 256  # GGML_PAD(…, 256) of n_ctx, n_ctx_seq, the SWA cache and n_kv
LLAMA_MAX_SEQ = 256  # src/llama-cparams.h
DEFAULT_BATCH = 2048  # common_params.n_batch (-b)
DEFAULT_UBATCH = 512  # common_params.n_ubatch (-ub)
SERVER_AUTO_SLOTS = 4  # llama-server without -np: 4 slots, unified cache
MAX_UBATCH = 1 << 20
MIB = 1024 * 1024


@dataclass(frozen=True)
class Options:
    """The llama.cpp settings that decide the cache: -np, --kv-unified, -b, -ub, --swa-full."""

    sequences: int = 1  # n_seq_max (-np, the server's slots)
    unified: bool = False  # --kv-unified: one stream shared by every sequence
    batch: int = DEFAULT_BATCH  # -b (logical batch)
    ubatch: int = DEFAULT_UBATCH  # -ub (micro-batch)
    swa_full: bool = False  # --swa-full: the SWA cache as large as the full one
    backend: str = (
        "cpu"  # the build it runs on: "cpu" or "metal" (kvcore.runtimes.llamacpp_plan.BACKENDS)
    )

    def __post_init__(self):
        if (
            isinstance(self.sequences, bool)
            or not isinstance(self.sequences, int)
            or not 1 <= self.sequences <= LLAMA_MAX_SEQ
        ):
            raise KvError(
                f"llama.cpp runs 1 to {LLAMA_MAX_SEQ} sequences (-np), not {quote(self.sequences)}.",
                "llamacpp_seq_max",
                limit=LLAMA_MAX_SEQ,
                value=quote(self.sequences),
            )
        for value in (self.batch, self.ubatch):
            if (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 1 <= value <= MAX_UBATCH
            ):
                raise KvError(
                    f"llama.cpp's batch and micro-batch must be whole numbers from 1 to {MAX_UBATCH:,}, not {quote(value)}.",
                    "llamacpp_ubatch",
                    limit=MAX_UBATCH,
                    value=quote(value),
                )


def server_defaults(**changes) -> Options:
    """What llama-server runs with no -np: 4 slots sharing one unified cache."""
    return Options(**{"sequences": SERVER_AUTO_SLOTS, "unified": True, **changes})


def pad(n: int, to: int = PAD) -> int:
    """GGML_PAD: n rounded up to a multiple of `to`. Example: pad(640) -> 768."""
    return (n + to - 1) // to * to


def context_cells(n_ctx: int, options: Options) -> tuple[int, int]:
    """(cells per stream, streams) of the full-attention cache for `-c n_ctx`.

    Example: context_cells(4096, Options(sequences=10)) -> (512, 10): 4096 / 10 = 409 -> 512 per stream.
    """
    n_ctx = pad(n_ctx)
    if options.unified:
        return n_ctx, 1
    return pad(n_ctx // options.sequences), options.sequences


def micro_batch(n_ctx: int, options: Options) -> int:
    """n_ubatch as llama.cpp clamps it: min(min(n_ctx, n_batch), n_ubatch) for a causal model."""
    return min(min(n_ctx, options.batch), options.ubatch)


def swa_cells(base_cells: int, n_swa: int, n_ctx: int, options: Options) -> int:
    """Cells of the sliding-window cache: PAD256(min(base, n_swa x (unified ? n_seq : 1) + n_ubatch)), or base with --swa-full.

    Example: gpt-oss-20b at -c 131072, -ub 512 -> PAD256(min(131072, 128 + 512)) = 768.
    """
    if options.swa_full:
        return base_cells
    return pad(
        min(
            base_cells,
            n_swa * (options.sequences if options.unified else 1) + micro_batch(n_ctx, options),
        )
    )


def read_cells(used: int, cells: int) -> int:
    """Cells one attention step reads (get_n_kv): `used` padded to 256, at least 256, at most the cache.

    `used` is llama.cpp's used_max_p1, the highest occupied cell + 1: one sequence's tokens so far in its
    own stream; in a unified cache, the furthest any sequence has pushed the shared array.

    Example: read_cells(700, 4096) -> 768.
    """
    return min(cells, max(PAD, pad(used)))


def row_bytes(type_name: str, width: int) -> int:
    """ggml_row_size: bytes of one row of `width` values in a llama.cpp K/V type (the width must fill whole blocks,
    as ggml asserts: kvcore.memory.formats refuses a row that does not)."""
    fmt = get_format(type_name)
    if not fmt.llamacpp:
        valid = ", ".join(map(ggml_name, llamacpp_types()))
        raise KvError(
            f"{quote(type_name)} is not a llama.cpp KV cache type; valid types: {valid}.",
            "llamacpp_format",
            format=quote(type_name),
            valid=valid,
        )
    return fmt.row_bytes(width)


def kv_widths(layer: Layer) -> tuple[int, int]:
    """(n_embd_k_gqa, n_embd_v_gqa) llama.cpp stores per cell for this layer (0, 0 for a recurrent layer)."""
    if (
        layer.kind == "mla"
    ):  # one head: K = latent + rope; no V tensor (attention reads V as a view of K's latent):
        return (
            layer.k_dim + layer.v_dim,
            0,
        )  # src/llama-kv-cache.cpp @ 0c1e570: `const bool has_v = !is_mla;`
    if layer.kind == "linear":
        return 0, 0
    return layer.kv_heads * layer.k_dim, layer.kv_heads * layer.v_dim


@dataclass(frozen=True)
class Cache:
    """One llama.cpp cache as it logs itself: cells per stream, layers, streams, K and V bytes (all streams)."""

    name: str  # "kv", "non-swa", "swa" or "recurrent"
    cells: int
    layers: tuple[int, ...]  # layer indices
    n_seq_max: int
    streams: int
    k_type: str
    v_type: str
    k_bytes: int
    v_bytes: int
    model_layers: int = (
        0  # the model's layer count (what the recurrent cache's log line prints as "layers")
    )

    @property
    def bytes(self) -> int:
        return self.k_bytes + self.v_bytes

    @property
    def spans_context(self) -> bool:
        """True for the cache whose cells grow with -c (the full-attention one), not the SWA or recurrent one."""
        return self.name in ("kv", "non-swa")

    def log_line(self) -> str:
        """The line llama.cpp prints for this cache (llama-kv-cache.cpp's format string, float MiB as C computes them)."""
        if (
            self.name == "recurrent"
        ):  # src/llama-memory-recurrent.cpp @ 0c1e570; "layers" counts the model's n_layer
            return (
                f"llama_memory_recurrent: size = {_mib(self.bytes):7.2f} MiB ({self.cells:6d} cells, "
                f"{self.model_layers:3d} layers, {self.n_seq_max:2d} seqs {0:2d} rs_seq), R (f32): {_mib(self.k_bytes):7.2f} MiB, "
                f"S (f32): {_mib(self.v_bytes):7.2f} MiB, P (f32): {0.0:7.2f} MiB"
            )
        return (
            f"llama_kv_cache: size = {_mib(self.bytes):7.2f} MiB ({self.cells:6d} cells, {len(self.layers):3d} layers, "
            f"{self.n_seq_max:2d}/{self.streams} seqs), K ({ggml_name(self.k_type)}): {_mib(self.k_bytes):7.2f} MiB, "
            f"V ({ggml_name(self.v_type)}): {_mib(self.v_bytes):7.2f} MiB"
        )

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "cells": self.cells,
            "layers": len(self.layers),
            "streams": self.streams,
            "k_bytes": self.k_bytes,
            "v_bytes": self.v_bytes,
        }


def _mib(n_bytes: int) -> float:
    """(float) bytes / (1024.0f * 1024.0f) as llama.cpp computes it: the byte count rounded to a C float first."""
    return struct.unpack("f", struct.pack("f", float(n_bytes)))[0] / MIB


def _cache(
    name: str,
    layers: list[Layer],
    cells: int,
    streams: int,
    options: Options,
    k_type: str,
    v_type: str,
) -> Cache:
    k = v = 0
    for layer in layers:
        k_width, v_width = kv_widths(layer)
        k += row_bytes(k_type, k_width) * cells * streams
        v += row_bytes(v_type, v_width) * cells * streams
    return Cache(
        name,
        cells,
        tuple(layer.index for layer in layers),
        options.sequences,
        streams,
        get_format(k_type).name,
        get_format(v_type).name,
        k,
        v,
    )


def caches(
    geometry: Geometry,
    n_ctx: int,
    k_type: str = "f16",
    v_type: str = "f16",
    options: Options = Options(),
) -> list[Cache]:
    """The caches llama.cpp allocates for this model at `-c n_ctx`: one `kv` cache, or `non-swa` + `swa` (iSWA),
    plus a `recurrent` state cache for linear-attention layers (kvcore.runtimes.registry checks the geometry is llama.cpp's)."""
    if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 1:
        raise KvError(f"context must be a whole number from 1, not {quote(n_ctx)}.")
    if k_type != v_type and any(
        layer.kind == "mla" for layer in geometry.layers
    ):  # src/llama-context.cpp:3835 @ 0c1e570
        raise KvError(
            f"llama.cpp refuses different K ({k_type}) and V ({v_type}) cache types for an MLA model "
            f"({geometry.name}): give one type for both.",
            "llamacpp_mla_types",
            k=k_type,
            v=v_type,
            model=geometry.name,
        )
    cells, streams = context_cells(n_ctx, options)
    full = [layer for layer in geometry.layers if layer.kind in ("full", "mla")]
    sliding = [layer for layer in geometry.layers if layer.kind == "sliding"]
    linear = [layer for layer in geometry.layers if layer.kind == "linear"]
    out = []
    if sliding:
        n_swa = sliding[0].window
        out.append(_cache("non-swa", full, cells, streams, options, k_type, v_type))
        out.append(
            _cache(
                "swa",
                sliding,
                swa_cells(cells, n_swa, n_ctx, options),
                streams,
                options,
                k_type,
                v_type,
            )
        )
    elif full:
        out.append(_cache("kv", full, cells, streams, options, k_type, v_type))
    if linear:  # llama_memory_recurrent: fp32 R (conv) and S (state) rows, one cell per sequence
        cells_rs = max(1, options.sequences)
        r = sum(layer.conv_values for layer in linear) * 4 * cells_rs
        s = sum(layer.state_values for layer in linear) * 4 * cells_rs
        out.append(
            Cache(
                "recurrent",
                cells_rs,
                tuple(layer.index for layer in linear),
                options.sequences,
                1,
                "fp32",
                "fp32",
                r,
                s,
                geometry.num_layers,
            )
        )
    return out


def kv_bytes(
    geometry: Geometry,
    n_ctx: int,
    k_type: str = "f16",
    v_type: str = "f16",
    options: Options = Options(),
) -> int:
    """Everything llama.cpp's caches hold for this model at `-c n_ctx`, over all streams."""
    return sum(c.bytes for c in caches(geometry, n_ctx, k_type, v_type, options))


def per_layer(geometry: Geometry, cache_list: list[Cache], k_type: str, v_type: str) -> list[dict]:
    """One row per layer: its kind, the cells it holds per stream and its bytes (all streams)."""
    rows = {}
    for cache in cache_list:
        for index in cache.layers:
            layer = geometry.layers[index]
            if cache.name == "recurrent":
                held, size = 0, (layer.conv_values + layer.state_values) * 4 * cache.cells
            else:
                k_width, v_width = kv_widths(layer)
                held = cache.cells
                size = (
                    (row_bytes(k_type, k_width) + row_bytes(v_type, v_width))
                    * cache.cells
                    * cache.streams
                )
            rows[index] = {
                "layer": index,
                "kind": layer.kind,
                "tokens_held": held,
                "kv_bytes": size,
            }
    return [
        rows.get(
            layer.index, {"layer": layer.index, "kind": layer.kind, "tokens_held": 0, "kv_bytes": 0}
        )
        for layer in geometry.layers
    ]


def cells_text(cache_list: list[Cache]) -> str:
    """A one-line account of the caches, e.g. "non-swa 131,072 cells x 12 layers + swa 768 cells x 12 layers"."""
    parts = []
    for c in cache_list:
        streams = f" x {c.streams} streams" if c.streams > 1 else ""
        layers = f"{len(c.layers)} layers"
        if (
            c.name == "recurrent"
        ):  # its state is in the recurrent layers; llama.cpp's line counts them all
            layers = f"{len(c.layers)} recurrent layers (of the {c.model_layers} llama.cpp's line counts)"
        parts.append(f"{c.name} {c.cells:,} cells x {layers}{streams} [{c.bytes:,} B]")
    return " + ".join(parts) + f" = {sum(c.bytes for c in cache_list):,} bytes"
