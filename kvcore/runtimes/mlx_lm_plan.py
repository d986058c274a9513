"""mlx_lm's whole memory plan: what `mlx_lm.generate` holds at its "Peak memory" line, part by part.

mlx_lm preallocates nothing: its caches grow as tokens arrive and mlx frees every intermediate array after its last
use, so the peak is the largest moment of `generate_step` (mlx-lm 0.32.2, mlx_lm/generate.py), not a sum of
buffers. A prompt of T tokens is fed in chunks of `prefill_step_size` (default 2048; the last prompt token alone,
kvcore.memory.formulas.prefill_chunks), each chunk's caches evaluated before the next
(generate.py#L437-L463); each generated token is one more step (#L465-L482). The plan walks those steps with the
cache simulator (kvcore.memory.allocsim) and keeps the step whose memory is highest:

* weights -- the parameters as stored (every array mlx holds for the model).
* KV cache -- the caches as allocated after that step: KVCache grows in 256-token steps (models/cache.py#L347-L369),
  QuantizedKVCache likewise with its packed values, scales and biases (#L261-L302).
* growth copy -- a step that passes a cache's capacity makes a block of zeros for the new rows and concatenates the
  old buffer with it (#L355-L362): the old buffer, the zeros and the grown buffer coexist until the copy is done;
  counted as one layer's old K and V plus its zeros (mlx evaluates the layers one after the other).
* attention scores -- where attention is not fused, a chunk of S tokens at offset o materialises
  `n_heads x S x (o + S)` scores in the activation dtype (mlx's scaled_dot_product_attention fallback, and
  mlx_lm's quantized_scaled_dot_product_attention, models/base.py#L64-L107, on every backend), and the causal
  mask beside them: `S x (o + S)` booleans. Measured, not assumed, for a quantized cache on the CPU backend (mlx
  0.32, 3 December 2026): one quantized_scaled_dot_product_attention call held 1.03-1.27x the scores (9/3, 32/8 and
  16/16 heads, 256-2,048 queries, 1,024-4,096 keys, 8 and 4 bits; the share falls as the scores grow), the excess
  being query-sized copies (the scaled queries, their GQA reshape, the output) that `activations` counts, and
  mlx_lm's whole prefill of 4,096 tokens in 2,048-token chunks (SmolLM2-135M geometry, random weights) peaked
  within 0.3 MiB of this plan with 8- and 4-bit caches: where and softmax reuse the scores' buffer
  (tests/test_mlx_lm_plan.py holds a 4-bit case whose scores are two thirds of the transient memory).
* activations -- one layer's other arrays for the chunk: counted per token as 7 hidden-width, 4 query-width and 2
  MLP-width values in the activation dtype (the residual and normed input, Q, its scaled copy and the attention
  output, the MLP's gate and up projections; on the CPU backend mlx schedules a few arrays ahead of their use:
  the counts are what this machine's runs hold, tests/test_mlx_lm_plan.py).
* quantized-cache conversion -- with `kv_bits`, a cache whose offset reaches `quantized_kv_start` (default 5000) is
  converted with `to_quantized` after that step (generate.py#L305-L310, models/cache.py#L396-L404): the full-precision
  and the quantized caches coexist for that step.
* logits -- the prefill chunks' logits are never computed (generate_step evaluates only the caches, #L450); the last
  prompt token and each generated token compute one row of `n_vocab` values (#L414).

* in-flight command buffers (Metal only) -- arrays kept until the GPU finishes the command buffers that used
  them: an upper estimate from mlx's source (kvcore.runtimes.mlx_metal).

Backends: on the CPU backend every attention is unfused (mlx `ScaledDotProductAttention::use_fallback` returns true
for the CPU: mlx/backend/metal/scaled_dot_product_attention.cpp), and that is what the tests measure
(mx.get_peak_memory() around mlx_lm's own generate_step, fp32 activations). On Metal the fused kernel runs a prefill
chunk without materialising the scores or the mask when the head dimension is 64, 72, 80, 96 or 128 (K and V alike)
and the cache is not quantized; the Metal plan assumes that from the source and has not been measured here (this
project has no Mac: the published Mac peaks are what it is held to).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import takewhile

from kvcore.errors import KvError
from kvcore.memory.allocsim import STEP, ChunkedTrace
from kvcore.memory.formats import DTYPE_BYTES, KvSpec, get_format
from kvcore.memory.formulas import PREFILL_STEP, bytes_per_token, prefill_runs, state_bytes
from kvcore.memory.runs import Runs
from kvcore.runtimes.base import Part
from kvcore.runtimes.mlx_metal import (
    MLX_SOURCE,
    command_buffer_mib,
    fused,
    in_flight_cap,
    in_flight_part,
)

VERSION = "v0.32.2"
SOURCE = f"https://github.com/ml-explore/mlx-lm/blob/{VERSION}/mlx_lm"
QUANTIZED_KV_START = 5000  # generate.py DEFAULT_QUANTIZED_KV_START
BACKENDS = ("metal", "cpu")
# activations per token of a prefill chunk: hidden-, query- and MLP-width values of one layer (module docstring)
HIDDEN_ROWS, QUERY_ROWS, MLP_ROWS = 7, 4, 2
# The measured spread of the plan against mx.get_peak_memory() on this machine's CPU backend
# (tests/test_mlx_lm_plan.py, scripts/mlx_peak_sweep.py): |plan - peak| <= TRANSIENT_TOLERANCE x the plan's
# transient parts (everything above weights and KV).
TRANSIENT_TOLERANCE = 0.25


@dataclass(frozen=True)
class Moment:
    """One step of generate_step: the update it feeds each cache and what it holds while it runs."""

    step: str  # "prefill" | "token"
    tokens: int  # tokens this step feeds
    offset: int  # tokens in the cache before it
    kv_bytes: int  # caches as allocated after it
    parts: tuple[Part, ...]  # its transient parts

    @property
    def transient_bytes(self) -> int:
        return sum(p.bytes for p in self.parts)

    @property
    def bytes(self) -> int:
        return self.kv_bytes + self.transient_bytes


def _mlp_width(geometry) -> int:
    """The MLP's hidden width one token runs through (dense part, and the routed experts' active share), from the
    feed-forward parameters per layer (gate, up and down: 3 x hidden x width)."""
    e = geometry.hidden_size
    if not geometry.layer_ffn:
        raise KvError(
            f"mlx_lm's memory plan needs {geometry.name}'s feed-forward sizes, which its config does not give."
        )
    routed = sum(r for _, r in geometry.layer_ffn)
    dense_total = geometry.params.matrix - routed
    share = (geometry.active_params.matrix - dense_total) / routed if routed else 0.0
    return max(int((ffn - r + r * share) / (3 * e)) for ffn, r in geometry.layer_ffn)


def _check(geometry, spec: KvSpec, backend: str, prefill_step: int) -> None:
    if backend not in BACKENDS:
        raise KvError(f"mlx_lm's plan is for the {' or '.join(BACKENDS)} backend, not {backend!r}.")
    if isinstance(prefill_step, bool) or not isinstance(prefill_step, int) or prefill_step < 1:
        raise KvError(f"prefill_step_size must be a positive whole number, not {prefill_step!r}.")
    odd = sorted({layer.kind for layer in geometry.layers} - {"full", "sliding"})
    if odd:
        raise KvError(
            f"mlx_lm's memory plan covers attention layers with KV caches; {geometry.name} has "
            f"{', '.join(odd)} layers, whose transient memory it has not been measured for."
        )


def moments(
    geometry,
    prompt: int,
    spec: KvSpec = KvSpec(),
    generated: int = 0,
    backend: str = "metal",
    prefill_step: int = PREFILL_STEP,
    quantized_kv_start: int = QUANTIZED_KV_START,
    every: bool = True,
    chip: str | None = None,
) -> list[Moment]:
    """The steps of generate_step for a `prompt`-token prompt and `generated` tokens, with what each holds.

    The cache is KVCache in the activation dtype until its offset reaches `quantized_kv_start`, when `spec` names a
    quantized format (mlx_lm's kv_bits), and QuantizedKVCache after that; sliding-window layers are held at their
    window (RotatingKVCache). `every=False` keeps only the steps that can hold the peak: the last two prefill
    chunks of each size and the last one of each size that grows a cache (an earlier chunk of its kind holds less:
    fewer keys, a smaller cache, a smaller old buffer), the conversion step and the single-token steps."""
    _check(geometry, spec, backend, prefill_step)
    if backend == "metal":
        command_buffer_mib(chip)  # a chip it cannot read is refused before the walk
    act = DTYPE_BYTES[spec.activation_dtype]
    quantized = get_format(spec.k_format).kind != "plain"
    full = KvSpec(
        spec.activation_dtype, spec.activation_dtype, spec.group_size, spec.activation_dtype
    )
    chunks = prefill_runs(
        prompt, prefill_step
    )  # a long prompt's chunks as runs, never a list of them
    updates = chunks + Runs([(1, generated)])
    e, heads = geometry.hidden_size, geometry.num_attention_heads
    mlp = _mlp_width(geometry)
    q = max(heads * layer.k_dim for layer in geometry.layers)
    width = HIDDEN_ROWS * e + QUERY_ROWS * q + MLP_ROWS * mlp
    # layers alike in their cache (kind, window, row sizes): one trace each
    groups: dict[tuple, list] = {}
    for layer in geometry.layers:
        rotating = layer.kind == "sliding" and layer.window < prompt + generated
        key = (
            rotating,
            layer.window if rotating else None,
            layer.kv_heads,
            layer.k_dim,
            layer.v_dim,
        )
        groups.setdefault(key, []).append(layer)
    # the first update whose cache reaches quantized_kv_start is followed by the conversion
    convert_at = max(1, updates.reaching(quantized_kv_start)) - 1 if quantized else None
    if convert_at is not None and convert_at >= len(updates):
        convert_at = None
    # a long prompt's chunks are not walked one by one where their states follow from the step
    # (kvcore.memory.allocsim.ChunkedTrace: whole chunks of a KVCache, a full sliding window)
    whole = (prompt - 1) // prefill_step if prompt > 1 else 0  # the chunks of a full prefill step
    traces = []
    for (rotating, window, *_), layers in groups.items():
        cache_class = "RotatingKVCache" if rotating else "KVCache"
        traces.append((layers, ChunkedTrace(cache_class, updates, prefill_step, whole, window)))

    def grows(i: int) -> bool:
        return i > 0 and any(st[i].capacity > st[i - 1].capacity for _, st in traces)

    # the steps that can hold the peak: per chunk size its last two chunks and the last one that grows a cache (a
    # step that is not a multiple of 256 grows the caches only every few chunks, and a growth copy can hold more than
    # a later chunk), every chunk that grows a sliding-window cache while it fills (the first few), the single-token
    # steps and the conversion
    big, seen = set(), {}
    # a full-attention cache that grows again does so within STEP // step + 1 chunks: the last ones are enough
    for i in range(len(chunks) - 1, max(-1, len(chunks) - STEP // prefill_step - 7), -1):
        n = chunks[i]
        if n == 1:
            continue
        count, grew = seen.get(n, (0, False))
        if count < 2 or (not grew and grows(i)):
            big.add(i)
        seen[n] = (count + 1, grew or grows(i))
    fill = max((w for (r, w, *_) in groups if r), default=0)
    big.update(
        i for i in range(min(len(chunks), fill // prefill_step + 4)) if chunks[i] > 1 and grows(i)
    )
    singles = list(takewhile(lambda i: updates[i] == 1, range(len(updates) - 1, -1, -1)))
    keep = (
        range(len(updates))
        if every
        else sorted({*big, *singles, *([convert_at] if convert_at is not None else [])})
    )
    out = []
    for i in keep:
        n, offset = updates[i], updates.offset(i)  # the cache's offset before update i
        converted = convert_at is not None and i > convert_at
        now = spec if converted else full  # the cache this step runs on

        def cache_bytes(cap, layers, s=None):
            # the layers of a group are alike in their cache (the key above): one layer's bytes, times their count
            one = layers[0]
            return len(layers) * (cap * bytes_per_token(one, s or now) + state_bytes(one, s or now))

        kv = sum(cache_bytes(st[i].capacity, layers) for layers, st in traces)
        parts = []
        grown = [
            cache_bytes(st[i - 1].capacity + st[i].capacity - st[i - 1].offset, layers[:1])
            for layers, st in traces
            if i and st[i].capacity > st[i - 1].capacity and st[i - 1].capacity
        ]
        if grown:
            passing = sum(
                len(layers)
                for layers, st in traces
                if i and st[i].capacity > st[i - 1].capacity and st[i - 1].capacity
            )
            parts.append(
                Part(
                    "growth copy",
                    "growth",
                    max(grown),
                    f"{passing} cache(s) pass their capacity: one layer's old K and V and the zeros of its "
                    f"new rows beside its grown buffer (grown in {STEP}-token steps)",
                    f"{SOURCE}/models/cache.py#L347-L369",
                )
            )
        attn = [
            min(st[i].offset, st[i].capacity)
            for layers, st in traces
            for layer in layers[:1]
            if not (backend == "metal" and fused(layer, converted, n))
        ]
        if attn:
            k = max(attn)
            parts.append(
                Part(
                    "attention scores",
                    "scores",
                    heads * n * k * act,
                    f"{heads} heads x {n:,} tokens x {k:,} keys x {act} bytes (attention not fused)",
                    f"{MLX_SOURCE}/fast.cpp#L613",
                )
            )
            if n > 1:
                parts.append(
                    Part(
                        "causal mask",
                        "mask",
                        n * k,
                        f"{n:,} tokens x {k:,} keys, one byte each",
                        f"{SOURCE}/models/base.py#L24-L42",
                    )
                )
        parts.append(
            Part(
                "activations",
                "activations",
                n * width * act,
                f"{n:,} tokens x ({HIDDEN_ROWS} x {e:,} + {QUERY_ROWS} x {q:,} + {MLP_ROWS} x {mlp:,}) values"
                f" x {act} bytes (one layer's arrays)",
                f"{SOURCE}/models/llama.py#L74-L102",
            )
        )
        if backend == "metal":  # arrays held until the GPU finishes their command buffers
            parts.append(in_flight_part(n * width * act * len(geometry.layers), n, chip))
        if i >= len(chunks) - 1:
            parts.append(
                Part(
                    "logits",
                    "logits",
                    geometry.vocab_size * act,
                    f"one row of {geometry.vocab_size:,} logits x {act} bytes (prefill chunks compute none)",
                    f"{SOURCE}/generate.py#L414",
                )
            )
        if i == convert_at:
            qkv = sum(cache_bytes(st[i].capacity, layers, spec) for layers, st in traces)
            parts.append(
                Part(
                    "quantized-cache conversion",
                    "conversion",
                    qkv,
                    f"to_quantized at offset {offset + n:,} (quantized_kv_start {quantized_kv_start:,}): the "
                    f"{spec.k_format} caches beside the full-precision ones",
                    f"{SOURCE}/generate.py#L305-L310",
                )
            )
        out.append(Moment("prefill" if n > 1 else "token", n, offset, kv, tuple(parts)))
    return out


def covers(geometry) -> bool:
    """True when the plan knows every layer of `geometry` (attention layers with KV caches, feed-forward sizes)."""
    return bool(geometry.layer_ffn) and all(
        layer.kind in ("full", "sliding") for layer in geometry.layers
    )


def plan(
    geometry,
    prompt: int,
    spec: KvSpec = KvSpec(),
    weights_bytes: int = 0,
    generated: int = 0,
    backend: str = "metal",
    prefill_step: int = PREFILL_STEP,
    quantized_kv_start: int = QUANTIZED_KV_START,
    sequences: int = 1,
    chip: str | None = None,
) -> dict:
    """The peak of generate_step for a `prompt`-token prompt and `generated` tokens: weights, the caches as
    allocated and the transient parts of the step whose memory is highest, as a dict (the shape of
    kvcore.runtimes.llamacpp_plan's, read by kvcore.capacity.memory_fit: compute_bytes is the transient total).
    `sequences` prompts of that length run as one batch: every array but the weights has the batch dimension."""
    steps = moments(
        geometry,
        prompt,
        spec,
        generated,
        backend,
        prefill_step,
        quantized_kv_start,
        every=False,
        chip=chip,
    )
    peak = max(steps, key=lambda m: m.bytes)
    if (
        sequences > 1
    ):  # every array but the weights has the batch dimension; the in-flight bound is per buffer
        cap = in_flight_cap(chip)
        peak = Moment(
            peak.step,
            peak.tokens,
            peak.offset,
            peak.kv_bytes * sequences,
            tuple(
                Part(
                    p.name,
                    p.kind,
                    min(p.bytes * sequences, cap) if p.kind == "inflight" else p.bytes * sequences,
                    f"{sequences} sequences x ({p.rule})",
                    p.source,
                )
                for p in peak.parts
            ),
        )
    where = (
        f"the prefill chunk of {peak.tokens:,} tokens at offset {peak.offset:,}"
        if peak.step == "prefill"
        else f"the step of one token at offset {peak.offset:,}"
    )
    parts = [
        Part(
            "weights",
            "weights",
            weights_bytes,
            "the parameters as stored (mlx holds every array of the model)",
            f"{SOURCE}/utils.py",
        ),
        Part(
            "KV cache",
            "kv",
            peak.kv_bytes,
            f"the caches as allocated after {where} (KVCache grows in {STEP}-token steps)",
            f"{SOURCE}/models/cache.py#L339-L420",
        ),
        *peak.parts,
    ]
    transient = peak.transient_bytes
    total = weights_bytes + peak.kv_bytes + transient
    return {
        "runtime": "mlx_lm",
        "text_prefix": "mlx_",  # the site's texts for these part kinds: calc.plan_rule_mlx_<kind>
        "backend": backend,
        "weights_bytes": weights_bytes,
        "kv_bytes": peak.kv_bytes,
        "output_bytes": 0,
        "compute_bytes": transient,
        "in_flight_bytes": sum(p.bytes for p in peak.parts if p.kind == "inflight"),
        "total_bytes": total,
        "peak_step": peak.step,
        "peak_offset": peak.offset,
        "n_tokens": peak.tokens,
        "prefill_step": prefill_step,
        "compute_tolerance": f"within {TRANSIENT_TOLERANCE:.0%} of the transient parts, measured on the CPU backend",
        "compute_tolerance_share": TRANSIENT_TOLERANCE,
        "parts": [p.as_dict() for p in parts],
        "log_lines": [f"Peak memory: {total / 1e9:.3f} GB"],
    }
