"""llama.cpp's whole memory plan: every buffer it allocates for a model and a context, named as its log names it.

What `llama-cli`/`llama-server` print when they load a model and create a context, part by part, with the rule
behind each number and its source line in ggml-org/llama.cpp at commit 0c1e570 (the llama.cpp inside
llama-cpp-python 0.3.36):

    load_tensors:   CPU_Mapped model buffer size =  1252.41 MiB   the weights: the file's tensor table
    llama_context:        CPU  output buffer size =     0.49 MiB   logits for one token per sequence
    llama_kv_cache:        CPU KV buffer size =  1024.00 MiB      the caches (kvcore.runtimes.llamacpp_cache)
    sched_reserve:        CPU compute buffer size =  2134.01 MiB  the worst micro-batch's graph

(Llama-3.2-1B, Q8_0 weights, `-c 32768 -ub 512 -fa off`; with `-fa on` the compute buffer is 258.50 MiB.)

The rules:

* Model buffer -- `src/llama-model.cpp:1930` logs each weight buffer; its bytes are the tensor table's
  (`llama_model_size()`, `src/llama-model.cpp:3283`), mapped from the file by default (`CPU_Mapped`; `--no-mmap`:
  `CPU`). The CPU backend's default extra buffer types add a `CPU_REPACK` copy of the Q4_0/Q4_K/IQ4_NL tensors it
  repacks; GPU backends (Metal) do not: this plan is without it.
* Output buffer -- `src/llama-context.cpp:2141` `logits.size = n_vocab*n_outputs_max`, floats, where
  `n_outputs_max = max(n_outputs, n_seq_max)` (line 2120) and the context reserves `n_seq_max` outputs (line 377);
  logged at line 381. Embeddings (`--embeddings`) would add `n_embd` floats per output: not planned here.
* Not planned: `--fit` (common/fit.cpp in llama-server and llama-cli, not in the library: with `-c 0` it lowers the
  context, down to `--fit-ctx`, until its projection leaves `--fit-target` MiB free on each device); this plan is
  for the `-c` given, and the library the tests build has no fit to hold a model of it to.
* KV buffers -- kvcore.runtimes.llamacpp_cache (cells, streams, sliding-window and recurrent caches, to the byte), logged at
  `src/llama-kv-cache.cpp:291`. A hybrid model's recurrent state is its own buffer, `CPU RS buffer`
  (`src/llama-memory-recurrent.cpp`), whose size line counts the model's n_layer (48 for Qwen3-Next) though
  only the recurrent layers (36) hold R and S rows: the plan says both.
* Compute buffer -- `sched_reserve` (`src/llama-context.cpp:640-745`) builds the graph of the worst micro-batch,
  `n_tokens = min(n_ctx, n_ubatch)` tokens of `n_seq_max` sequences with every token an output (line 670), over
  the whole cache (`init_full`), and ggml's graph allocator (`ggml/src/ggml-alloc.c`) sizes one buffer for it:
  the high-water mark of the tensors alive at once, freed after their last use and reused in place where an op
  allows (`ggml_op_can_inplace`, line 22: soft_max, rope, add, mul, scale, unary; not the GLU ops). The dense
  families, Gemma-3 and DeepSeek's MLA (llamacpp_graph.DENSE) are replayed through that allocator
  (kvcore.runtimes.llamacpp_graph, under 1 ms a plan; routed experts add their moment below), and so are
  gpt-oss and Qwen3-Next with their routed experts, sinks, sliding windows and gated delta-net layers
  (kvcore.runtimes.llamacpp_graph_moe: their final hidden state is a graph output, never freed, held below
  the logits); the others (Qwen3-MoE, Gemma-2) take the largest of the moments below. The inputs
  are allocated first (line 740-770): the masks, and `inp_embd` (`src/llama-graph.cpp:2388`, n_embd floats a
  token, allocated though the token path reads `token_embd` instead). Its log line: line 740. The peak is the
  largest of three moments of the graph (f32 activations, 4 bytes):
    - the logits: `4 x n_tokens x (n_vocab + 2 n_embd)` (the output projection, beside the final norm and the
      last residual);
    - one attention layer: the masks (`src/llama-graph.cpp` `build_attn_inp_kq_mask`: `n_kv x n_tokens`, f16 with
      flash attention, else f32; one per cache, the sliding-window one too), the layer's activations
      (`4 x n_tokens x (3 n_embd + 2 q_width + k_width + v_width)`: the residual, the normed input and the
      attention output; Q twice, K, V), and without flash attention the scores `kq = mul_mat(k, q)` of every head
      (`build_attn_mha`: `4 x n_kv x n_tokens x n_head`, soft_max in place), where `n_kv` is the cells of one
      stream (a split cache, `-np N` without `-kvu`, attends to its own `n_ctx/N` cells) of the largest cache;
    - the feed-forward block (ffn_bytes): the masks and `4 x n_tokens x (4 n_embd + width)`, where width is
      `3 n_ff` for a dense layer (`build_ffn`, src/llama-graph.cpp:1762: up and gate, n_ff wide, and
      `ggml_swiglu_split` of the two, line 1858, a new tensor while both are alive; Phi-3's fused up is 2 n_ff
      wide beside its n_ff product, the same) and for routed experts (`build_moe_ffn`, line 2007)
      `k x max(3 n_ff_exp, n_embd + n_ff_exp)` with k = n_expert_used: up, gate and their product per expert
      (lines 2180-2250), or the product beside the experts' n_embd outputs (`down_exps`, line 2318) before they
      are summed. The four n_embd rows: `inp_embd`, the residual `ffn_inp`, and two the allocator leaves free
      below them where the layer's normed input and attention output lay (too small for an n_ff-wide tensor).
      This is the moment a small vocabulary leaves on top: Mistral-7B-v0.3 (n_vocab 32,768, n_ff 14,336) with
      flash attention, 512 tokens: 4 MiB of mask at 4,096 cells + 116 MiB = the 120.01 MiB llama.cpp prints.
  Where tensors land (the replay's reason) and family tensors (MLA, recurrent scans, two masks) move the figure.
  tests/test_llamacpp_plan.py holds the rule to the real build over its grid and states the tolerance:
  max(COMPUTE_FLOOR, COMPUTE_TOLERANCE x the printed figure).
* Flash attention -- `-fa auto` (the default, `src/llama-context.cpp:230`) is on wherever the device runs the
  fused op (`resolve_fused_ops`, line 557): on the CPU and Metal backends, so auto plans as on. A quantized V cache
  without flash attention is refused at context creation (line 460: "quantized V cache was requested, but this
  requires Flash Attention").

The Metal build (`Options(backend="metal")`, `calc --backend metal`) differs where its source says so:

* Names -- its device and buffers are `MTL0` (`ggml/src/ggml-metal/ggml-metal.cpp:307`, GGML_METAL_NAME + the
  device's number): `MTL0_Mapped model buffer`, `MTL0 KV buffer`, `MTL0 compute buffer`; the logits stay in the
  host's `CPU output buffer`.
* Weights -- the input layer stays on the CPU (`src/llama-model.cpp:1605`, `dev_input = cpu_dev`): its
  `CPU_Mapped` line is the token embedding mapped again from the same file pages, not more memory; the
  `MTL0_Mapped` line maps the span of the file that holds the offloaded tensors (line 1863, `get_mapping_range`),
  the whole tensor data where the embedding lies between them: planned as the file's tensors.
* Compute buffer -- ggml's allocator asks the Metal buffer type for each tensor's size
  (`ggml_backend_metal_buffer_type_get_alloc_size`, ggml-metal.cpp:220-255), which adds room for fleeting data.
  Every `FLASH_ATTN_EXT` node's output is sized with (`ggml/src/ggml-metal/ggml-metal-ops.cpp`):
    - kv_f16 (line 3190, "always reserve the temp buffer"): f16 copies of the K and V views it reads,
      `2 x n_kv x head_dim x n_head_kv x n_stream` each (MLA: V is a view of K, K only), padded to 16;
    - pad (line 3064): `64 x (nb11 x n_head_kv x n_stream + nb21 x n_head_kv x n_stream + 2 x n_tokens)`, the
      row strides of K and V as stored (f16 rows when a quantized cache is dequantized: line 2961, 32+ queries);
    - blk (line 3122): one byte per (8 queries x 64 keys) block of the mask (vec kernel below 20 queries: 1 x 32);
    - tmp (line 3161): `4 x min(n_tokens, 32) x n_head x n_stream x 32 x (head_dim_v + 2)` floats;
    - idx (line 3215): 0 here (sparse index lists only where the graph sets n_kv_max: DeepSeek's top-k).
  The output lives from the attention to the output projection, so the extras of one layer add to its moment:
  Metal's figure is max(logits, mask + activations + scores + the largest layer's extras). `MUL_MAT_ID` (MoE)
  adds `4 x n_expert x (n_tokens + 1) + 8 + 1024` bytes to its output (line 2650-2673), under 1 MiB at 128
  experts and 512 tokens: inside the tolerance, not planned. A Metal build prints the host's compute buffer
  beside MTL0's (`CPU compute buffer`: the inputs the host fills, the token embeddings' rows): listed, not planned.
* Flash attention -- `-fa auto` is resolved by whether the device runs the op for every layer
  (`resolve_fused_ops`, src/llama-context.cpp:507-563); Metal's `supports_op` (ggml-metal-device.m:1727-1771)
  takes head sizes 32, 40, 48, 64, 72, 80, 96, 112, 128, 192, 256, 320, 512 and 576 only, K at least as wide as
  V (72 only with V 72), the same type for K and V, and the types f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1:
  elsewhere auto turns flash attention off. A quantized V cache turns auto into on before that
  (src/llama-context.cpp:3838-3843, "enabling flash_attn since it is required for quantized V cache"): it is
  refused only with `-fa off`; where Metal lacks the kernel it then runs on the CPU (graph splits).
  Checked against the corpus's Metal logs (tests/test_llamacpp_metal.py): every printed KV figure exact, the
  compute buffers within 1.0 % (three logs, all at short contexts where the logits dominate: the extras above
  are read from the source and not yet held to a printed long-context figure).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import KvError
from kvcore.memory.formats import get_format
from kvcore.runtimes import llamacpp_cache as llamacpp
from kvcore.runtimes import llamacpp_graph, llamacpp_graph_moe
from kvcore.runtimes.base import Part
from kvcore.runtimes.llamacpp_metal import (  # noqa: F401 (metal_fa_extra_bytes: the plan's API)
    metal_fa_extra_bytes,
    metal_runs_flash_attention,
)

SOURCE = "https://github.com/ggml-org/llama.cpp/blob/0c1e570"
FLOAT = 4  # bytes of an f32 activation, logit
FLASH_ATTN = ("on", "off", "auto")
BACKENDS = ("cpu", "metal")  # the CPU build the tests run, and Apple's GPU (ggml-metal)
DEVICE = {"cpu": "CPU", "metal": "MTL0"}  # how each names its buffers in the log
# The measured spread of the compute-buffer rule against the real build (tests/test_llamacpp_plan.py: 15 presets x
# 10 settings, 134 contexts compared, the rest refused by both): |plan - llama.cpp| <= max(COMPUTE_FLOOR,
# COMPUTE_TOLERANCE x llama.cpp). The replay (llamacpp_graph) fitted on graph dumps (GGML_SCHED_DEBUG=2) of Phi-3,
# Mistral-7B-v0.3, Qwen-7B-Chat, DeepSeek-V3 and Gemma-3-27B; only checked on Llama-3.2-1B, Llama-3.1-8B,
# SmolLM2-135M/1.7B, Qwen2.5-7B and Qwen3-8B: Gemma-3 +2.0 % (+42 MiB on 2132.51 printed, -c 32768 -np 4 -kvu
# -ub 2048 -fa on: the worst of the grid), DeepSeek-V3 +0.7 % (-fa off -np 4), the dense ones within 0.1 %.
# The routed-expert replay (llamacpp_graph_moe) written from the dumps of gpt-oss-20b and Qwen3-Next-80B-A3B at
# -c 4096 -ub 2048 -fa on, then checked over the grid: gpt-oss-20b within 0.06 MiB in all nine contexts,
# Qwen3-Next within 0.3 MiB in eight and -0.9 % (-2.7 MiB on 316.75) at -c 32768 -np 4 -ub 512 -fa off (with
# the moments they were -6.6 % and -10.6 %), its file as the converter writes it now (attn_qkv and attn_gate
# where the grid's has ssm_in) the same in all nine. The moments, shaped on Mistral and Llama-3.2-1B, only checked on
# the rest: Qwen3-30B-A3B +1.4 % (+31 MiB), Gemma-2-2B -0.9 %. Every context within 2.0 %: the tolerance is the
# 5 % the plan is held to, the rest room for families outside the grid.
COMPUTE_TOLERANCE = 0.05
COMPUTE_FLOOR = 32 * 2**20  # bytes: below it a few tensors' placement decides, whatever the share


@dataclass(frozen=True)
class Plan:
    """Everything llama.cpp holds for one model and context; `flash_attn` is what it runs with (auto resolved)."""

    parts: tuple[Part, ...]
    flash_attn: bool
    n_tokens: int  # the worst-case micro-batch the compute buffer is sized for
    tolerance: str  # how close the compute buffer is (the measured spread)
    backend: str = "cpu"  # BACKENDS
    unplanned: tuple[
        str, ...
    ] = ()  # lines the backend prints that the plan does not size, each with why

    def _sum(self, kind: str) -> int:
        return sum(p.bytes for p in self.parts if p.kind == kind)

    @property
    def weights_bytes(self) -> int:
        return self._sum("weights")

    @property
    def kv_bytes(self) -> int:
        return self._sum("kv")

    @property
    def output_bytes(self) -> int:
        return self._sum("output")

    @property
    def compute_bytes(self) -> int:
        return self._sum("compute")

    @property
    def total_bytes(self) -> int:
        return sum(p.bytes for p in self.parts)

    def log_lines(self) -> list[str]:
        return [p.log_line for p in self.parts]

    def as_dict(self) -> dict:
        return {
            "weights_bytes": self.weights_bytes,
            "kv_bytes": self.kv_bytes,
            "output_bytes": self.output_bytes,
            "compute_bytes": self.compute_bytes,
            "in_flight_bytes": 0,  # no part of it is an upper estimate (mlx_lm's Metal plan has one)
            "total_bytes": self.total_bytes,
            "flash_attn": self.flash_attn,
            "n_tokens": self.n_tokens,
            "compute_tolerance": self.tolerance,
            "compute_tolerance_share": COMPUTE_TOLERANCE,
            "compute_tolerance_floor_bytes": COMPUTE_FLOOR,
            "backend": self.backend,
            "unplanned": list(self.unplanned),
            "parts": [p.as_dict() for p in self.parts],
            "log_lines": self.log_lines(),
        }


METAL_UNPLANNED = (
    "CPU_Mapped model buffer: the token embedding, kept on the CPU (the input layer) and mapped from the same "
    "file pages as the MTL0 buffer: not more memory",
    "CPU compute buffer: the inputs the host fills (token embeddings' rows, positions, masks), a few MiB: "
    "not planned",
)


def compute_allowance(printed_bytes: float) -> float:
    """How far the planned compute buffer may be from a printed one: max(COMPUTE_FLOOR, COMPUTE_TOLERANCE x it)."""
    return max(COMPUTE_FLOOR, COMPUTE_TOLERANCE * printed_bytes)


def _mib(n_bytes: int) -> float:
    """bytes / 1024.0 / 1024.0 as llama.cpp's buffer lines compute it (a size_t divided in double)."""
    return n_bytes / 1024.0 / 1024.0


def check_backend(backend: str) -> str:
    """The backend's name as the plan takes it, or a KvError naming it."""
    if backend not in BACKENDS:
        raise KvError(
            f"llama.cpp's plan knows the backends {', '.join(BACKENDS)}, not {backend!r}.",
            "llamacpp_backend",
            value=str(backend),
        )
    return backend


def flash_attention(
    value: str | bool, v_type: str, k_type: str = "f16", geometry=None, backend: str = "cpu"
) -> bool:
    """-fa on|off|auto as llama.cpp resolves it: a quantized V cache turns auto into on; otherwise auto is on
    where the backend runs the op (the CPU always; Metal: metal_runs_flash_attention). A quantized V cache with
    -fa off is refused, as llama.cpp refuses it."""
    if isinstance(value, bool):
        value = "on" if value else "off"
    if value not in FLASH_ATTN:
        raise KvError(
            f"llama.cpp's flash attention is on, off or auto, not {value!r}.",
            "llamacpp_flash_attn",
            value=value,
        )
    quantized_v = get_format(v_type).kind == "block"
    if value == "auto" and not quantized_v and check_backend(backend) == "metal":
        return geometry is None or metal_runs_flash_attention(geometry, k_type, v_type)
    on = value != "off"
    if not on and quantized_v:
        raise KvError(
            f"llama.cpp refuses a quantized V cache ({get_format(v_type).name}) without flash attention: "
            "turn flash attention on or keep V in f16.",
            "llamacpp_quantized_v_needs_fa",
            v=get_format(v_type).name,
        )
    return on


def compute_bytes(
    geometry,
    n_ctx: int,
    caches: list,
    options: llamacpp.Options,
    flash_attn: bool,
    k_type: str = "f16",
    v_type: str = "f16",
) -> int:
    """The compute buffer ggml's allocator sizes for the worst micro-batch (see the module's rule), on the backend
    `options.backend` names (Metal: each flash-attention node's extra room)."""
    n_tokens = llamacpp.micro_batch(n_ctx, options)
    e = geometry.hidden_size
    logits = FLOAT * n_tokens * (geometry.vocab_size + 2 * e)
    attention = [c for c in caches if c.name != "recurrent"]
    if not attention:
        return logits
    mask = sum((2 if flash_attn else FLOAT) * c.cells * n_tokens for c in attention)
    heads = geometry.num_attention_heads
    quantized = tuple(get_format(t).kind == "block" for t in (k_type, v_type))
    if llamacpp_graph_moe.replayable(geometry) and check_backend(options.backend) == "cpu":
        return llamacpp_graph_moe.replayed_bytes(
            geometry, n_tokens, attention, flash_attn, options.sequences, quantized
        )
    if llamacpp_graph.replayable(geometry):
        room = None  # Metal's extra room beside each flash-attention output
        if flash_attn and check_backend(options.backend) == "metal":
            args = (n_tokens, heads, k_type, v_type)
            room = lambda layer, c: metal_fa_extra_bytes(layer, c.cells, c.streams, *args)  # noqa: E731
        replayed = llamacpp_graph.replayed_bytes(
            geometry, n_tokens, attention, flash_attn, room, quantized, options.sequences
        )
        if not geometry.experts_used:
            return replayed
        return max(replayed, mask + ffn_bytes(geometry, n_tokens))  # routed experts: their moment
    fa_out = 1 if flash_attn else 0  # flash attention's f32 output per head, beside its inputs
    widths = []
    for layer in geometry.layers:
        if layer.kind in ("full", "sliding"):
            q, out = heads * layer.k_dim, heads * layer.v_dim
            widths.append(2 * q + layer.kv_heads * (layer.k_dim + layer.v_dim) + fa_out * out)
        elif (
            layer.kind == "mla"
        ):  # absorbed MLA: Q per head over latent + rope, the latent output per head
            latent = layer.k_dim + layer.v_dim
            widths.append(2 * heads * latent + latent + heads * layer.k_dim)
    activations = FLOAT * n_tokens * (3 * e + max(widths, default=0))
    scores = 0 if flash_attn else FLOAT * max(c.cells for c in attention) * n_tokens * heads
    extra = 0
    if flash_attn and check_backend(options.backend) == "metal":
        extra = max(
            metal_fa_extra_bytes(
                geometry.layers[i], c.cells, c.streams, n_tokens, heads, k_type, v_type
            )
            for c in attention
            for i in c.layers
        )
    return max(logits, mask + activations + scores + extra, mask + ffn_bytes(geometry, n_tokens))


def ffn_bytes(geometry, n_tokens: int) -> int:
    """The feed-forward moment beside the masks (see the module): four n_embd rows and the widest MLP or routed
    experts' tensors, f32. Example: Mistral-7B-v0.3 (n_embd 4,096, n_ff 14,336) at 512 tokens: 116 MiB."""
    e, k = geometry.hidden_size, geometry.experts_used
    mlp = 3 * geometry.ffn_width  # build_ffn: up, gate and their product (swiglu_split)
    moe = k * max(
        3 * geometry.expert_width, e + geometry.expert_width
    )  # build_moe_ffn, per routed expert
    if not (mlp or moe):
        return 0
    return FLOAT * n_tokens * (4 * e + max(mlp, moe))


def plan(
    geometry,
    n_ctx: int,
    k_type: str = "f16",
    v_type: str = "f16",
    options: llamacpp.Options = llamacpp.Options(),
    flash_attn: str | bool = "auto",
    weights_bytes: int | None = None,
    mmap: bool = True,
) -> Plan:
    """llama.cpp's memory plan for `geometry` at `-c n_ctx` (the runtime must be llama.cpp's: kvcore.runtimes.registry).

    `weights_bytes`: the weights as stored (a GGUF's tensor table; default the geometry's file_weights).
    Example: plan(llama_3_2_1b, 32768, flash_attn="off").compute_bytes -> about 2,134 MiB.
    """
    backend = check_backend(options.backend)
    device = DEVICE[backend]
    fa = flash_attention(flash_attn, v_type, k_type, geometry, backend)
    if weights_bytes is None:
        if geometry.file_weights is None:
            raise KvError(
                f"llama.cpp's plan needs the weights' bytes for {geometry.name}: give a GGUF file or a weights format."
            )
        weights_bytes = geometry.file_weights.bytes
    caches = llamacpp.caches(geometry, n_ctx, k_type, v_type, options)
    buffer = f"{device}_Mapped" if mmap else device
    from_file = geometry.file_weights is not None and weights_bytes == geometry.file_weights.bytes
    parts = [
        Part(
            f"{buffer} model buffer",
            "weights",
            weights_bytes,
            "the file's tensors, as stored (the tensor table's bytes: llama_model_size)"
            if from_file
            else "the weights in the chosen format (parameters x bytes per value; a GGUF file gives them exactly)",
            f"{SOURCE}/src/llama-model.cpp#L1930",
            f"load_tensors: {buffer:>12s} model buffer size = {_mib(weights_bytes):8.2f} MiB",
        )
    ]
    # in llama.cpp's order: the output buffer (llama-context.cpp:377), the caches, the compute buffer
    output = FLOAT * geometry.vocab_size * options.sequences
    parts.append(
        Part(
            "CPU output buffer",
            "output",
            output,
            f"logits: n_vocab {geometry.vocab_size:,} x {options.sequences} output(s) (one per sequence) x 4 bytes",
            f"{SOURCE}/src/llama-context.cpp#L2141",
            f"llama_context: {'CPU':>10s}  output buffer size = {_mib(output):8.2f} MiB",
        )
    )
    for cache in caches:
        parts.append(_cache_part(cache, device))
    n_tokens = llamacpp.micro_batch(n_ctx, options)
    compute = compute_bytes(geometry, n_ctx, caches, options, fa, k_type, v_type)
    metal = (
        "; on Metal, beside each flash-attention node, f16 copies of K and V and its pad, blk and tmp "
        "(ggml-metal-ops.cpp)"
        if backend == "metal" and fa
        else ""
    )
    parts.append(
        Part(
            f"{device} compute buffer",
            "compute",
            compute,
            f"the graph of one micro-batch of {n_tokens:,} tokens: the larger of the logits "
            f"(n_tokens x (n_vocab + 2 n_embd) floats) and one attention layer (masks, activations"
            f"{'' if fa else ', the scores of every head: n_kv x n_tokens x n_head floats'}); "
            f"flash attention {'on' if fa else 'off'}{metal}",
            f"{SOURCE}/src/llama-context.cpp#L740",
            f"sched_reserve: {device:>10s} compute buffer size = {_mib(compute):8.2f} MiB",
        )
    )
    tolerance = f"within max({COMPUTE_FLOOR // 2**20} MiB, {COMPUTE_TOLERANCE:.0%}) of what the real build prints"
    unplanned = METAL_UNPLANNED if backend == "metal" else ()
    return Plan(tuple(parts), fa, n_tokens, tolerance, backend, unplanned)


def _cache_part(cache: llamacpp.Cache, device: str = "CPU") -> Part:
    """A cache's buffer as llama.cpp names it: `CPU KV buffer` (llama_kv_cache), or for a hybrid model's recurrent
    state `CPU RS buffer` (llama_memory_recurrent prints "CPU RS buffer size"), whose size line counts the model's
    n_layer while only the recurrent layers hold R (conv) and S (state) rows."""
    if cache.name == "recurrent":
        return Part(
            f"{device} RS buffer",
            "kv",
            cache.bytes,
            f"{cache.cells:,} cell(s), one per sequence, x {len(cache.layers)} recurrent layers x R (conv) "
            f"and S (state) rows in f32 (llama.cpp's line counts the model's {cache.model_layers} layers)",
            f"{SOURCE}/src/llama-memory-recurrent.cpp",
            cache.log_line(),
        )
    return Part(
        f"{device} KV buffer ({cache.name})",
        "kv",
        cache.bytes,
        f"{cache.cells:,} cells x {cache.streams} stream(s) x {len(cache.layers)} layers x K and V rows",
        f"{SOURCE}/src/llama-kv-cache.cpp#L291",
        cache.log_line(),
    )


def log_mib(line: str) -> float:
    """The MiB figure of a buffer line llama.cpp printed ("... size =  2134.01 MiB")."""
    return float(line.rsplit("=", 1)[1].split()[0])
