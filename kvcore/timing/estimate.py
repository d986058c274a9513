"""The time model: from the prompt to the last token, for one sequence or many (a roofline).

Every step costs FLOPs and reads bytes; it takes whichever is longer, and the model says which:

    time = max(FLOPs / (peak FLOP/s x compute share), bytes / (peak bandwidth x bandwidth share))

* FLOPs per token = 2 x active matrix parameters (one multiply-add per weight; Kaplan et al. 2020,
  arXiv 2001.08361, Table 1: C_fwd = 2N + 2 n_layer n_ctx d_attn) + attention over the tokens a layer
  holds: 2 x heads x (K dims + V dims) x held (QK^T and AV). Over a prompt of T tokens the attention
  term sums to ~T^2/2 x that: prefill grows O(T^2) (Article A's Part 2).
* Prefill reads the weights once per micro-batch (llama.cpp's -ub, mlx_lm's prefill step) and the
  cache so far; it does hundreds of FLOPs per byte, above every chip's ridge point: compute-bound.
* Decode step for B sequences: B x FLOPs per token; bytes = the active weights once (shared by all B)
  + every sequence's KV as the runtime reads it (`kv_read_bytes`): ~2 FLOPs per weight byte at B = 1,
  far below the ridge: memory-bound, until B grows or the KV reads take over.
* The shares of peak (compute, bandwidth) are fitted on published runs (kvcore.fits.shares), never
  tuned to one point; the chips' peaks and their sources are in kvcore/timing/hardware.yaml.

Example (M2 Ultra, 27.2 TFLOPS, 800 GB/s): ridge = 34 FLOPs/byte; Llama-2-7B Q4_0 decode at B = 1 does
~13.5 GFLOPs over ~3.8 GB read, 3.5 FLOPs/byte: memory-bound.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from kvcore.errors import KvError
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import (
    bytes_per_token,
    kv_bytes,
    state_bytes,
    tokens_held,
    weights_bytes,
)
from kvcore.model.geometry import Geometry, Layer
from kvcore.runtimes import llamacpp_cache as llamacpp
from kvcore.runtimes.registry import runtime_of
from kvcore.timing.hardware import Chip, get_chip

COMPUTE, MEMORY = "compute", "memory"


@dataclass(frozen=True)
class Efficiency:
    """The share of a chip's peaks a runtime reaches: compute (prefill) and bandwidth (decode)."""

    compute: float
    bandwidth: float
    source: str  # what they were fitted on, or "assumption"
    overhead_s: float = 0.0  # fixed time per decode step (kernel launches, sampling), fitted with the bandwidth share


@dataclass(frozen=True)
class Step:
    """One roofline step: its work, its two times, the one that holds."""

    flops: float
    bytes: float
    compute_s: (
        float  # flops / (peak FLOP/s x compute share); inf when the chip has no compute figure
    )
    memory_s: float  # bytes / (peak bandwidth x bandwidth share)
    tokens: int  # tokens the step produces or processes
    overhead_s: float = 0.0  # fixed time on top (decode steps: Efficiency.overhead_s)
    position: int = (
        0  # decode: the tokens each sequence's attention runs over (llama.cpp: the cells it reads)
    )

    @property
    def time_s(self) -> float:
        roof = (
            max(self.compute_s, self.memory_s) if math.isfinite(self.compute_s) else self.memory_s
        )
        return roof + self.overhead_s

    @property
    def bound(self) -> str:
        """ "compute" or "memory": which of the two times sets the step's length."""
        return (
            COMPUTE if math.isfinite(self.compute_s) and self.compute_s >= self.memory_s else MEMORY
        )

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOPs per byte read (the roofline's x axis)."""
        return self.flops / self.bytes

    def as_dict(self) -> dict:
        """The step's figures for --json; a time the chip's figures cannot give (no FP16 compute: inf) is None."""
        d = asdict(self)
        d.update(time_s=self.time_s, bound=self.bound, intensity_flops_per_byte=self.intensity)
        return {
            k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in d.items()
        }


# ---------------------------------------------------------------- FLOPs


def matrix_flops_per_token(geometry: Geometry) -> float:
    """2 x the active matrix parameters a token multiplies through (the embedding lookup is free; a tied
    embedding is still the output head, so it counts once)."""
    p = geometry.active_params
    lookup = 0 if geometry.tie_word_embeddings else geometry.vocab_size * geometry.hidden_size
    return 2.0 * (p.matrix + p.router - lookup)


def layer_attention_flops(layer: Layer, heads: int, held: int) -> float:
    """FLOPs one token's attention costs in one layer that holds `held` tokens: QK^T + AV, 2 per multiply-add.

    MLA (absorbed, as llama.cpp and mlx_lm run it): scores over latent + rope dims, values over the latent;
    a linear (recurrent) layer updates a fixed state: ~4 FLOPs per state value, independent of position.
    """
    if layer.kind == "linear":
        return 4.0 * layer.state_values
    if layer.kind == "mla":
        return 2.0 * heads * held * ((layer.k_dim + layer.v_dim) + layer.k_dim)
    return 2.0 * heads * held * (layer.k_dim + layer.v_dim)


def attention_flops(geometry: Geometry, position: int) -> float:
    """Attention FLOPs of the token at `position` (1-based: it attends to `position` tokens, itself included)."""
    return sum(
        layer_attention_flops(layer, geometry.num_attention_heads, tokens_held(layer, position))
        for layer in geometry.layers
    )


def flops_per_token(geometry: Geometry, position: int) -> float:
    """All FLOPs of the token at `position`: the matrices plus its attention."""
    return matrix_flops_per_token(geometry) + attention_flops(geometry, position)


def prefill_flops(geometry: Geometry, prompt: int, start: int = 0) -> float:
    """FLOPs to process tokens start+1 .. start+prompt (a prompt after `start` cached tokens).

    The attention sum is exact per kind of layer: full layers sum held = t (an arithmetic series, the
    O(T^2) term); sliding layers cap held at their window.
    """
    check_tokens("prompt", prompt)
    total = matrix_flops_per_token(geometry) * prompt
    lo, hi = start + 1, start + prompt
    for layer in geometry.layers:
        per_held = layer_attention_flops(layer, geometry.num_attention_heads, 1)
        if layer.kind == "linear":
            total += per_held * prompt
            continue
        total += per_held * _sum_held(layer, lo, hi)
    return total


def _sum_held(layer: Layer, lo: int, hi: int) -> int:
    """sum over t = lo..hi of tokens_held(layer, t): t for a full layer, min(t, window) for a sliding one."""

    def series(a: int, b: int) -> int:  # a + ... + b
        return (a + b) * (b - a + 1) // 2 if b >= a else 0

    window = layer.window if layer.kind == "sliding" and layer.window else None
    if window is None:
        return series(lo, hi)
    return series(lo, min(hi, window)) + max(0, hi - max(lo - 1, window)) * window


def _sum_held_every(layer: Layer, first: int, step: int, count: int) -> int:
    """sum over i = 0..count-1 of tokens_held(layer, first + i x step): an arithmetic series, cut at a sliding
    layer's window (terms past it hold the window); 0 for a linear layer."""
    if layer.kind == "linear" or count <= 0:
        return 0
    window = layer.window if layer.kind == "sliding" else None
    below = count if window is None else max(0, min(count, (window - first) // step + 1))
    return below * first + step * below * (below - 1) // 2 + (count - below) * (window or 0)


def check_tokens(label: str, n) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise KvError(f"{label} must be a whole number of tokens from 1, not {n!r}.")


# ---------------------------------------------------------------- bytes


def kv_read_bytes(
    geometry: Geometry,
    context: int,
    spec: KvSpec = KvSpec(),
    sequences: int = 1,
    llama: llamacpp.Options | None = None,
) -> int:
    """KV bytes one decode step reads for `sequences` sequences, as the geometry's runtime reads them.

    mlx_lm / reference: every sequence reads the tokens its layers hold at `context`.
    llama.cpp (`context` is -c, `llama` its options): each step reads get_n_kv cells per stream, the used
    cells padded to 256 (llamacpp.read_cells). Separate streams (-np N): each slot holds -c / N cells and
    reads its own. One unified stream (--kv-unified): the slots share -c cells; one attention pass over the
    used cells serves every slot in the step, so the step reads them once, not once per slot.
    """
    return runtime_of(geometry).decode_read(geometry, context, spec, sequences, llama).kv_bytes


def decode_bytes(
    geometry: Geometry,
    context: int,
    spec: KvSpec = KvSpec(),
    weights_format: str = "mlx-q4",
    sequences: int = 1,
    llama: llamacpp.Options | None = None,
) -> int:
    """Bytes one decode step reads: the active weights once (shared by every sequence) + the KV read."""
    return weights_bytes(geometry, weights_format, active=True) + kv_read_bytes(
        geometry, context, spec, sequences, llama
    )


# ---------------------------------------------------------------- steps and phases


def _times(chip: Chip, eff: Efficiency, flops: float, n_bytes: float) -> tuple[float, float]:
    compute_s = flops / (chip.peak_flops * eff.compute) if chip.peak_flops else math.inf
    return compute_s, n_bytes / (chip.bandwidth_gbps * eff.bandwidth * 1e9)


def decode_step(
    geometry: Geometry,
    context: int,
    chip: Chip | str,
    eff: Efficiency,
    spec: KvSpec = KvSpec(),
    weights_format: str = "mlx-q4",
    sequences: int = 1,
    llama: llamacpp.Options | None = None,
) -> Step:
    """One decode step producing one token for each of `sequences` sequences at `context`.

    llama.cpp: `context` is -c and each slot's position is its share of it (separate streams: -c / N each;
    unified: the slots together fill the -c cells), so per-slot speed = 1 / step time, total = slots / step.
    """
    chip = get_chip(chip) if isinstance(chip, str) else chip
    check_tokens("context", context)
    sequences = getattr(
        llama, "sequences", sequences
    )  # a runtime's options that carry the sequences (-np) win
    position = runtime_of(geometry).decode_position(context, sequences, llama)
    flops = sequences * flops_per_token(geometry, position)
    n_bytes = decode_bytes(geometry, context, spec, weights_format, sequences, llama)
    return Step(
        flops,
        n_bytes,
        *_times(chip, eff, flops, n_bytes),
        tokens=sequences,
        overhead_s=eff.overhead_s,
        position=position,
    )


def micro_batch(geometry: Geometry, prompt: int, llama: llamacpp.Options | None = None) -> int:
    """Tokens one prefill step processes: llama.cpp's -ub (as it clamps it), mlx_lm's prefill step."""
    return runtime_of(geometry).prefill_chunk(prompt, llama)


def prefill_step(
    geometry: Geometry,
    prompt: int,
    chip: Chip | str,
    eff: Efficiency,
    spec: KvSpec = KvSpec(),
    weights_format: str = "mlx-q4",
    start: int = 0,
    llama: llamacpp.Options | None = None,
) -> Step:
    """The whole prompt (tokens start+1 .. start+prompt of one sequence) as one roofline step.

    Bytes: the weights once per micro-batch (all of them: a batch of tokens routes through most experts of
    a MoE) plus, per micro-batch, the cache written so far.
    """
    chip = get_chip(chip) if isinstance(chip, str) else chip
    flops = prefill_flops(geometry, prompt, start)
    chunk = micro_batch(geometry, prompt, llama)
    chunks = math.ceil(prompt / chunk)
    n_bytes = chunks * weights_bytes(geometry, weights_format) + prefill_kv_reads(
        geometry, prompt, chunk, spec, start
    )
    return Step(flops, n_bytes, *_times(chip, eff, flops, n_bytes), tokens=prompt)


def prefill_kv_reads(
    geometry: Geometry, prompt: int, chunk: int, spec: KvSpec = KvSpec(), start: int = 0
) -> int:
    """The cache bytes a chunked prefill reads: sum over its chunks of kv_bytes after the chunk, in closed form per
    layer (the chunks ending at start + chunk, start + 2 chunk, ... are one arithmetic run; the last ends at
    start + prompt), so a prompt of 10^8 one-token chunks costs what one of a single chunk does.

    Example: full layers, prompt 5, chunk 2 -> kv_bytes at 2 + 4 + 5 tokens.
    """
    check_tokens("chunk", chunk)
    chunks = math.ceil(prompt / chunk)
    total = kv_bytes(geometry, start + prompt, spec)  # the last chunk, and the check of its length
    for layer in geometry.layers:
        held = _sum_held_every(layer, start + chunk, chunk, chunks - 1)
        total += held * bytes_per_token(layer, spec) + (chunks - 1) * state_bytes(layer, spec)
    return total


def estimate(
    geometry: Geometry,
    prompt: int,
    chip: Chip | str,
    eff: Efficiency,
    spec: KvSpec = KvSpec(),
    weights_format: str = "mlx-q4",
    context: int | None = None,
    sequences: int = 1,
    llama: llamacpp.Options | None = None,
) -> dict:
    """What `calc --prompt --chip` adds: time to first token and decode speed at the context.

    Returns prefill_s (the prompt of one sequence: time to first token), decode_tokens_per_s (per sequence,
    at `context`, default the prompt), decode_tokens_per_s_total (all sequences), the bounds, arithmetic
    intensities, the chip's ridge point and the efficiencies used.
    """
    chip = get_chip(chip) if isinstance(chip, str) else chip
    context = context or prompt
    pre = prefill_step(geometry, prompt, chip, eff, spec, weights_format, llama=llama)
    dec = decode_step(geometry, context, chip, eff, spec, weights_format, sequences, llama)
    return {
        "chip": chip.chip,
        "prompt": prompt,
        "prefill_s": pre.time_s if chip.peak_flops else None,
        "prefill_bound": pre.bound if chip.peak_flops else None,
        "prefill_intensity": pre.intensity,
        "decode_context": dec.position,  # per sequence (llama.cpp separate slots: -c / slots; unified: the shared -c)
        "decode_shared_cache": runtime_of(geometry).shares_cache(dec.tokens, llama),
        "decode_sequences": dec.tokens,
        "decode_tokens_per_s": 1.0 / dec.time_s,
        "decode_tokens_per_s_total": dec.tokens / dec.time_s,
        "decode_bound": dec.bound if chip.peak_flops else MEMORY,
        "decode_intensity": dec.intensity,
        "decode_bytes_per_step": dec.bytes,
        "ridge_flops_per_byte": chip.ridge_flops_per_byte,
        "peak_tflops": chip.fp16_tflops,
        "peak_gbps": chip.bandwidth_gbps,
        "compute_efficiency": eff.compute,
        "bandwidth_efficiency": eff.bandwidth,
        "decode_overhead_s": eff.overhead_s,
        "efficiency_source": eff.source,
        "prefill": pre.as_dict(),
        "decode": dec.as_dict(),
    }
