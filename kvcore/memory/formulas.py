"""KV-cache and weight bytes: the formulas every page, test and CLI call.

Theory (Article A): bytes = 2 x layers x kv_heads x head_dim x context x dtype_bytes.
Generalised per layer: tokens_held(layer, T) x kv_heads x (row_bytes(K) + row_bytes(V)),
with tokens_held = T (full, MLA), min(T, window) (sliding); linear layers hold a fixed state.
Example: Llama-3.2-1B fp16 -> 16 x 8 x (128 + 128) = 32,768 bytes per token.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from kvcore.errors import KvError, quote
from kvcore.limits import MAX_CONTEXT, MAX_SEQUENCES
from kvcore.memory import weight_formats as gguf_weights
from kvcore.memory.allocsim import ChunkedTrace, simulate
from kvcore.memory.formats import DTYPE_BYTES, KvSpec, get_format
from kvcore.memory.runs import Runs
from kvcore.memory.weight_formats import GGUF_FORMATS

if TYPE_CHECKING:  # the geometry's types only: kvcore.model.geometry reads configs under a runtime (kvcore.runtimes.registry)
    from kvcore.model.geometry import Geometry, Layer

PREFILL_STEP = 2048  # mlx_lm generate_step's default prefill_step_size


def check_context(context: int, sequences: int = 1) -> None:
    """Refuse a context or sequence count that is not a positive whole number in range."""
    for label, value, limit in (
        ("context", context, MAX_CONTEXT),
        ("sequences", sequences, MAX_SEQUENCES),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
            raise KvError(
                f"{label} must be a whole number from 1 to {limit:,}, not {quote(value)}."
            )


def tokens_held(layer: Layer, context: int) -> int:
    """Tokens a layer keeps after single-token decode steps (steady state)."""
    if layer.kind == "sliding":
        return min(context, layer.window)
    if layer.kind == "linear":
        return 0
    return context


def bytes_per_token(layer: Layer, spec: KvSpec) -> int:
    """Bytes one cached token costs in this layer: kv_heads x (K row + V row); 0 for linear layers."""
    if layer.kind == "linear":
        return 0
    k, v = get_format(spec.k_format), get_format(spec.v_format)
    g, s = spec.group_size, spec.activation_dtype
    return layer.kv_heads * (k.row_bytes(layer.k_dim, g, s) + v.row_bytes(layer.v_dim, g, s))


def state_bytes(layer: Layer, spec: KvSpec) -> int:
    """A linear-attention layer's fixed state: conv state (activation dtype) + recurrent state (fp32)."""
    return layer.conv_values * DTYPE_BYTES[spec.activation_dtype] + layer.state_values * 4


def layer_kv_bytes(layer: Layer, context: int, spec: KvSpec) -> int:
    """Steady-state bytes one sequence keeps in this layer at `context` tokens."""
    return tokens_held(layer, context) * bytes_per_token(layer, spec) + state_bytes(layer, spec)


def per_layer_kv(
    geometry: Geometry, context: int, spec: KvSpec = KvSpec(), sequences: int = 1
) -> list[dict]:
    """One row per layer: its kind, the tokens it holds and its KV bytes (all sequences)."""
    return [
        {
            "layer": layer.index,
            "kind": layer.kind,
            "tokens_held": tokens_held(layer, context),
            "kv_bytes": sequences * layer_kv_bytes(layer, context, spec),
        }
        for layer in geometry.layers
    ]


def kv_bytes(geometry: Geometry, context: int, spec: KvSpec = KvSpec(), sequences: int = 1) -> int:
    """Total steady-state KV bytes: sum over layers, times concurrent sequences."""
    check_context(context, sequences)
    return sequences * sum(layer_kv_bytes(layer, context, spec) for layer in geometry.layers)


def max_context_within(
    geometry: Geometry, budget_bytes: float, spec: KvSpec = KvSpec(), sequences: int = 1
) -> int:
    """The largest context whose KV bytes stay within `budget_bytes` (0: not one token; MAX_CONTEXT: any).

    KV is non-decreasing in context (linear, or flat once every window is full), so a binary
    search is exact for sliding-window and hybrid models too.
    """
    if kv_bytes(geometry, 1, spec, sequences) > budget_bytes:
        return 0
    if kv_bytes(geometry, MAX_CONTEXT, spec, sequences) <= budget_bytes:
        return MAX_CONTEXT
    lo, hi = 1, MAX_CONTEXT  # kv(lo) fits, kv(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (
            (mid, hi) if kv_bytes(geometry, mid, spec, sequences) <= budget_bytes else (lo, mid)
        )
    return lo


def kv_bytes_per_token(geometry: Geometry, spec: KvSpec = KvSpec()) -> int:
    """Bytes one more token adds while no window is full (full, MLA and sliding layers)."""
    return sum(bytes_per_token(layer, spec) for layer in geometry.layers)


def kv_bytes_per_token_at(geometry: Geometry, context: int, spec: KvSpec = KvSpec()) -> int:
    """Bytes one more token adds to a sequence already `context` tokens long: a sliding layer whose window is
    full adds nothing (it drops its oldest token), so past the window only full and MLA layers grow.

    Example: Gemma-3 at 100,000 tokens -> only its 1-in-6 global layers' bytes per token.
    """
    return sum(
        bytes_per_token(layer, spec)
        for layer in geometry.layers
        if layer.kind != "sliding" or context < layer.window
    )


def prefill_peak_tokens(layer: Layer, context: int, prefill_step: int = PREFILL_STEP) -> int:
    """Tokens a layer holds at most during mlx_lm's chunked prefill of `context` tokens.

    A RotatingKVCache fed a chunk of S tokens keeps up to window + S - 1 (every token of the
    chunk sees a full window); the next single-token step trims it back to the window.
    """
    if layer.kind != "sliding" or context <= layer.window:
        return tokens_held(layer, context)
    return _rotating_peak(layer.window, context, prefill_step)


@lru_cache(maxsize=256)
def _rotating_peak(window: int, context: int, prefill_step: int) -> int:
    """The most rows a RotatingKVCache of `window` holds in the chunked prefill (one walk per window, not per
    layer)."""
    chunks = prefill_runs(context, prefill_step)
    whole = (context - 1) // prefill_step
    return ChunkedTrace("RotatingKVCache", chunks, prefill_step, whole, window).max_capacity()


def prefill_chunks(context: int, prefill_step: int = PREFILL_STEP) -> list[int]:
    """The update sizes mlx_lm's generate_step uses for a `context`-token prompt.

    Example: 4096 -> [2048, 2047, 1] (chunks while more than one token is left, then the last).
    """
    return list(prefill_runs(context, prefill_step))


def prefill_runs(context: int, prefill_step: int = PREFILL_STEP) -> Runs:
    """prefill_chunks() as runs of equal chunks (kvcore.memory.runs), never built as a list.

    Example: 10**8 tokens at step 64 -> Runs([(64, 1_562_499), (63, 1), (1, 1)]).
    """
    if context < 1:
        return Runs(())
    whole, rest = divmod(context - 1, prefill_step)  # chunks while more than one token is left
    return Runs([(prefill_step, whole), (rest, 1 if rest else 0), (1, 1)])


def kv_prefill_peak_bytes(
    geometry: Geometry,
    context: int,
    spec: KvSpec = KvSpec(),
    sequences: int = 1,
    prefill_step: int = PREFILL_STEP,
) -> int:
    """KV bytes right after the prefill in chunks of `prefill_step` (sliding layers may hold more than their window
    then)."""
    check_context(context, sequences)
    total = 0
    for layer in geometry.layers:
        total += prefill_peak_tokens(layer, context, prefill_step) * bytes_per_token(
            layer, spec
        ) + state_bytes(layer, spec)
    return sequences * total


# ---------------------------------------------------------------- weights

WEIGHT_FORMATS = (
    "fp32",
    "fp16",
    "bf16",
    "fp8",
    "mlx-q8",
    "mlx-q6",
    "mlx-q5",
    "mlx-q4",
    "mlx-q3",
    "mlx-q2",
)
# llama.cpp GGUF files as users download them (q8_0, q6_k, q5_k_m, q4_k_m, q4_0, mxfp4): their block types and
# mixes in kvcore.memory.weight_formats. Kept apart from WEIGHT_FORMATS (the pages' mlx-centred choices); weights_bytes accepts both.
GGUF_WEIGHT_FORMATS = {
    name: f.base.lower() for name, f in GGUF_FORMATS.items()
}  # name -> its base ggml type
FILE_WEIGHTS = "gguf-file"  # the weights exactly as a GGUF file stores them (its tensor table: Geometry.file_weights)
DOWNLOAD_WEIGHT_FORMATS = WEIGHT_FORMATS + tuple(
    GGUF_WEIGHT_FORMATS
)  # what a reader can choose: mlx's and GGUF's
ALL_WEIGHT_FORMATS = DOWNLOAD_WEIGHT_FORMATS + (FILE_WEIGHTS,)
# a live run's random weights, like the article: the live commands' --weights-format and the site's choice
LIVE_WEIGHTS_FORMAT = "mlx-q4"


def weight_bits(weights_format: str) -> int:
    if weights_format not in ALL_WEIGHT_FORMATS:
        raise KvError(
            f"Unknown weights format {quote(weights_format)}; valid formats: {', '.join(ALL_WEIGHT_FORMATS)}."
        )
    if weights_format in GGUF_WEIGHT_FORMATS:
        return round(GGUF_FORMATS[weights_format].bits_per_weight)
    return get_format(weights_format).bits  # a plain dtype's bits, or mlx-q<bits>'s codes


def weights_bytes(
    geometry: Geometry, weights_format: str = "bf16", group_size: int = 64, active: bool = False
) -> int:
    """Weight bytes as mlx_lm stores them: quantized matrices at bits/8 + one fp16 scale and bias
    per group; MoE routers, and the matrices a family keeps at 8 bits (Params.matrix_8bit), at 8 bits
    in groups of 64 (mlx_lm's quant_predicate); norms and biases in fp16.

    active=True counts only what one decode step reads (MoE: the routed experts).

    GGUF formats (llama.cpp, kvcore.memory.weight_formats): every matrix in whole ggml blocks of the type llama-quant.cpp
    gives it (Q8_0: 34 bytes per 32 values, ggml `block_q8_0`; Q4_K_M a mix of Q4_K and Q6_K); llama-quant.cpp
    quantizes only tensors with 2+ dimensions whose name ends in "weight" and never norms or the MoE router
    (`ffn_gate_inp.weight`), and convert_hf_to_gguf.py writes those 1-D tensors as F32: 4 bytes per value.
    Example: a 1,024 x 1,024 matrix in gguf-q8_0 = 32,768 blocks x 34 B = 1,114,112 B.
    gguf-file: the bytes of the model file's own tensors (kvcore.inputs.gguf), whatever types they are.
    """
    if weights_format == FILE_WEIGHTS:
        if geometry.file_weights is None:
            raise KvError(
                f"The weights format {FILE_WEIGHTS!r} is a GGUF file's own; {geometry.name} was not read from one.",
                "weights_file",
                format=FILE_WEIGHTS,
                model=geometry.name,
            )
        return geometry.file_weights.active_bytes if active else geometry.file_weights.bytes
    bits = weight_bits(weights_format)
    p = geometry.active_params if active else geometry.params
    if weights_format in GGUF_WEIGHT_FORMATS:
        return gguf_weights.weights_bytes(geometry, weights_format, active)
    if weights_format in DTYPE_BYTES:
        return p.total * DTYPE_BYTES[weights_format]
    scale_bias = 2 * DTYPE_BYTES["fp16"]  # one scale + one bias per group
    low = p.matrix - p.matrix_8bit  # at the format's bits
    matrix = low * bits // 8 + low // group_size * scale_bias
    eight = p.router + p.matrix_8bit  # 8 bits, group 64
    return matrix + eight + eight // 64 * scale_bias + p.vector * 2


# ---------------------------------------------------------------- the worked formula


def layer_groups(geometry: Geometry) -> list[tuple[Layer, int]]:
    """Layers alike in everything the cache depends on, as (one of them, how many), in the order they first appear:
    one term of the formula each. Example: Gemma-3-4B -> [(sliding layer, 29), (full layer, 5)]."""
    groups: dict[tuple, tuple[Layer, int]] = {}
    for layer in geometry.layers:
        key = (
            layer.kind,
            layer.kv_heads,
            layer.k_dim,
            layer.v_dim,
            layer.window,
            layer.conv_values,
            layer.state_values,
        )
        first, n = groups.get(key, (layer, 0))
        groups[key] = (first, n + 1)
    return list(groups.values())


def formula_text(
    geometry: Geometry, context: int, spec: KvSpec = KvSpec(), sequences: int = 1
) -> str:
    """The KV formula with this model's numbers substituted, one term per kind of layer."""
    terms = []
    for layer, n in layer_groups(geometry):
        kind, heads, k_dim, v_dim, window = (
            layer.kind,
            layer.kv_heads,
            layer.k_dim,
            layer.v_dim,
            layer.window,
        )
        if kind == "linear":
            terms.append(f"{n} linear layers x {state_bytes(layer, spec):,} B fixed state")
            continue
        held = tokens_held(layer, context)
        held_text = f"min({context:,}, {window:,})" if kind == "sliding" else f"{held:,}"
        per = bytes_per_token(layer, spec)
        if kind == "mla":
            row = f"({k_dim} + {v_dim} latent values)"
        elif spec.k_format == spec.v_format and k_dim == v_dim:
            row = f"2 x {heads} KV heads x {k_dim} dims"
        else:
            row = f"{heads} KV heads x (K {k_dim} + V {v_dim} dims)"
        terms.append(f"{n} {kind} layers x {row} [{per:,} B/token/layer] x {held_text} tokens")
    seq = f"{sequences} sequences x " if sequences > 1 else ""
    total = kv_bytes(geometry, context, spec, sequences)
    return (
        f"{seq}("
        + " + ".join(terms)
        + f") = {total:,} bytes ({spec.k_format} K, {spec.v_format} V)"
    )


def formula_terms(
    geometry: Geometry, context: int, spec: KvSpec = KvSpec(), sequences: int = 1
) -> dict:
    """The KV formula as Article A writes it, `2 × layers × KV heads × head_dim × bytes × tokens`, one term per
    kind of layer, as data for a page to print in its language (kvcore.memory.formulas.formula_text is the CLI's English).

    Bytes per value include a format's scales and padding (row bytes / head_dim), so each term multiplies out exactly.
    Returns {"terms": [{kind, layers, kv_heads, k_dim, v_dim, k_bytes, v_bytes, same, tokens, window, state_bytes,
    bytes}], "sequences", "context", "total", "per_token"} with per_token the bytes one more token adds to every layer.
    Example (Llama-3.2-1B, fp16, 32,768): one term 2 × 16 × 8 × 64 × 2 × 32,768 = 1,073,741,824.
    """
    k_fmt, v_fmt = get_format(spec.k_format), get_format(spec.v_format)
    terms = []
    for layer, n in layer_groups(geometry):
        kind, heads, k_dim, v_dim, window = (
            layer.kind,
            layer.kv_heads,
            layer.k_dim,
            layer.v_dim,
            layer.window,
        )
        term = {
            "kind": kind,
            "layers": n,
            "kv_heads": heads,
            "k_dim": k_dim,
            "v_dim": v_dim,
            "window": window,
            "tokens": tokens_held(layer, context),
            "state_bytes": state_bytes(layer, spec),
        }
        if kind != "linear":
            term["k_bytes"] = k_fmt.row_bytes(k_dim, spec.group_size, spec.activation_dtype) / k_dim
            term["v_bytes"] = v_fmt.row_bytes(v_dim, spec.group_size, spec.activation_dtype) / v_dim
            term["same"] = k_dim == v_dim and term["k_bytes"] == term["v_bytes"] and kind != "mla"
        term["bytes"] = n * layer_kv_bytes(layer, context, spec)
        terms.append(term)
    per_token = sum(
        bytes_per_token(layer, spec)
        for layer in geometry.layers
        if tokens_held(layer, context) == context
    )
    return {
        "terms": terms,
        "sequences": sequences,
        "context": context,
        "per_token": per_token,
        "total": kv_bytes(geometry, context, spec, sequences),
    }


def allocated_bytes(geometry: Geometry, context: int, spec: KvSpec) -> int:
    """What the caches' `.nbytes` report after mlx_lm's chunked prefill of `context` tokens (allocsim)."""
    chunks = prefill_chunks(context)
    total = 0
    for layer in geometry.layers:
        if layer.kind == "linear":
            total += state_bytes(layer, spec)
            continue
        if layer.kind == "sliding" and context > layer.window:
            cap = simulate("RotatingKVCache", chunks, max_size=layer.window).capacity
        else:
            cap = simulate("KVCache", chunks).capacity
        total += cap * bytes_per_token(layer, spec)
    return total


def crossover_context(
    geometry: Geometry, weights_format: str, spec: KvSpec, sequences: int = 1
) -> int | None:
    """The smallest context whose KV bytes exceed the weights' bytes (None beyond MAX_CONTEXT)."""
    within = max_context_within(geometry, weights_bytes(geometry, weights_format), spec, sequences)
    return None if within == MAX_CONTEXT else within + 1
