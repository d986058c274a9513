"""ggml's graph allocator replayed over the tensors of llama.cpp's worst micro-batch, for the dense families.

The compute buffer is the high-water mark of one buffer that `ggml_gallocr` (ggml/src/ggml-alloc.c at llama.cpp
0c1e570) packs the graph's tensors into, and the mark depends on where each tensor lands, not only on which are
alive at once: Phi-3-mini at `-c 4096 -ub 2048 -fa on` holds 304 MiB at its widest moment, yet llama.cpp prints
362.55 MiB, because the logits (250.5 MiB) find no hole below the final norm's output and land above it. This
module replays the allocator over the graph's sequence of tensors (a few layers: after the first the layout repeats):

* the allocator -- `ggml_dyn_tallocr_alloc` (ggml-alloc.c:202): best fit among the free blocks but the last, else
  the last block, which grows the buffer; sizes padded to the CPU buffer's 32-byte alignment; a freed tensor's
  bytes merge with a neighbouring free block (`ggml_dyn_tallocr_free_bytes`, line 312);
* the order -- `ggml_gallocr_alloc_graph_impl` (line 718): the graph's inputs first, in the order the graph meets
  them (tokens, `inp_embd`, positions, the cache's row indices -- without flash attention V is stored transposed
  and indexed per value, `n_tokens x n_embd_v_gqa` int64 (src/llama-kv-cache.cpp `build_input_v_idxs`) -- the
  masks, `out_ids`; `inp_embd`,
  src/llama-graph.cpp:2388, is never read on the token path and so never freed), then each node after its
  parents, a parent freed when its last child has run and no view of it is left (line 790-820);
* in place -- a node whose op may run in place (`ggml_op_can_inplace`, line 22: add, mul, scale, rms_norm, rope,
  soft_max, unary) takes over a parent of the same layout that has no other child (`ggml_gallocr_allocate_node`,
  line 623): the norms, the residual adds. Never a view: only non-views are marked the allocator's own (line
  628) and a parent not its own is passed over (line 640), so rope of the reshaped Q and K is a new tensor.

The tensors of one layer, f32 (4 bytes) x n_tokens each (src/models/llama.cpp, phi3.cpp, qwen.cpp, qwen2.cpp,
qwen3.cpp; src/llama-graph.cpp `build_attn_mha` line 2616, `build_ffn` line 1762):
  norm, its weight product (in place), Q K V (`wq`, `wk`, `wv`; fused: one `wqkv` of q + 2 kv wide, which Q's and
  K's rope read through strided views and so copy, while V is written to the cache from it), the attention output
  (flash attention: `n_head x head_dim_v` per token; without it `kq` of `n_kv x n_head`, soft_max in place, `kqv`
  and its contiguous copy), the output projection, the residual add (in place), the feed-forward norm, gate and up
  (`n_ff` each; Phi-3: one fused up of `2 n_ff`) and their GLU product (a new tensor), down, the residual add. The
  last layer first keeps only the output rows (`get_rows` of the attention output and the residual, line 174 of
  llama.cpp); then the final norm and the logits (`n_vocab` per token, a graph output: never freed). A quantized
  cache's rotations and V's copy before a transposed store: gqa_attention; DeepSeek's MLA block: mla_attention.
  With several sequences the graph's tokens are rounded up to a multiple of them (src/llama-context.cpp:2528):
  -np 3 -ub 2048 builds 2,049 rows, of which the last layer keeps the 2,048 outputs.
"""

from __future__ import annotations

ALIGN = 32  # the CPU buffer's alignment (ggml-cpu: TENSOR_ALIGNMENT)
FLOAT = 4
# llama.cpp's architectures whose layer is the dense one above: (Q/K/V in one projection, gate and up in one,
# the last residual add reads the residual first, K projected before V): src/models/<arch>.cpp
DENSE = {
    "llama": (False, False, False, False),
    "mistral": (False, False, False, False),
    "qwen2": (False, False, False, False),
    "qwen3": (False, False, False, False),
    "phi3": (True, True, True, False),  # phi3.cpp: wqkv, ffn_up of 2 n_ff, add(residual, cur)
    "qwen": (True, False, False, False),  # qwen.cpp: wqkv (+ bias, in place)
    "deepseek_v3": (False, False, False, False),  # deepseek2.cpp: mla_attention
    # gemma3.cpp: Q, K, V in that order; its scaled embeddings, Q/K norms (of a reshape: new, like rope's),
    # post-attention and post-feed-forward norms all run in place; one mask and row indices per cache
    "gemma3_text": (False, False, False, True),
}


def _pad(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class _T:
    """One tensor of the graph: its bytes, parents, whether its op may run in place, the tensor it views."""

    __slots__ = ("size", "srcs", "inplace", "view", "output", "children", "views", "own", "off")

    def __init__(self, size, srcs=(), inplace=False, view=None, output=False):
        self.size, self.srcs, self.inplace, self.view, self.output = (
            size,
            srcs,
            inplace,
            view,
            output,
        )
        self.children = self.views = 0
        self.own = False  # allocated by the allocator and not yet freed
        self.off = -1


Tensor = _T  # the replay's tensor, for the routed-expert graphs (llamacpp_graph_moe)


class _Allocator:
    """ggml_dyn_tallocr: free blocks sorted by offset, the last one open-ended; `top` is the buffer's size."""

    def __init__(self):
        self.blocks = [[0, 1 << 62]]
        self.top = 0

    def alloc(self, size: int) -> int:
        size = _pad(size)
        best, best_size = -1, 1 << 62
        for i in range(len(self.blocks) - 1):
            s = self.blocks[i][1]
            if size <= s <= best_size:
                best, best_size = i, s
        block = self.blocks[best]  # -1: the last block
        off = block[0]
        block[0] += size
        block[1] -= size
        if block[1] == 0:
            del self.blocks[best]
        self.top = max(self.top, off + size)
        return off

    def free(self, off: int, size: int) -> None:
        size = _pad(size)
        blocks = self.blocks
        for i, b in enumerate(blocks):
            if b[0] + b[1] == off:
                b[1] += size
                if i + 1 < len(blocks) and b[0] + b[1] == blocks[i + 1][0]:
                    b[1] += blocks[i + 1][1]
                    del blocks[i + 1]
                return
            if off + size == b[0]:
                b[0] = off
                b[1] += size
                if i > 0 and blocks[i - 1][0] + blocks[i - 1][1] == off:
                    blocks[i - 1][1] += b[1]
                    del blocks[i]
                return
        i = 0
        while i < len(blocks) and blocks[i][0] < off:
            i += 1
        blocks.insert(i, [off, size])


def _allocate(a: _Allocator, t: _T) -> None:
    """ggml_gallocr_allocate_node: in place over a parent of the same layout with no other child, else new."""
    if t.own or t.view is not None or t.off >= 0 or not t.size:
        return
    if t.inplace:
        for p in t.srcs:
            if p.output or p.children != 1 or p.views:
                continue
            if p.own and p.view is None and p.size == t.size:
                t.off, t.own, p.own = p.off, True, False
                return
    t.off, t.own = a.alloc(t.size), True


def peak_bytes(inputs: list[_T], nodes: list[_T]) -> int:
    """ggml_gallocr_alloc_graph_impl over `nodes` (in graph order) after `inputs`: the buffer's size in bytes."""
    a = _Allocator()
    for t in inputs:
        _allocate(a, t)
    for n in nodes:
        if n.view is not None:
            n.view.views += 1
        for s in n.srcs:
            s.children += 1
    for n in nodes:
        _allocate(a, n)
        for p in n.srcs:
            p.children -= 1
            if p.children or p.views:
                continue
            if p.view is not None:
                v = p.view
                v.views -= 1
                if not v.views and not v.children and v.own:
                    a.free(v.off, v.size)
                    v.own = False
            elif p.own and not p.output:
                a.free(p.off, p.size)
                p.own = False
    return a.top


def dense_compute_bytes(
    fused: tuple[bool, bool, bool],
    n_tokens: int,
    n_embd: int,
    n_vocab: int,
    n_ff: int,
    layers: list[tuple[int, int, int, int]],
    masks: list[int],
    flash_attn: bool,
    mla: tuple[int, int, int, int, int, int] | None = None,
    rotated: tuple[bool, bool] = (False, False),
    n_outputs: int = 0,
) -> int:
    """The compute buffer of a dense family's graph (see the module), replayed.

    Args:
        fused: the architecture's row of DENSE.
        layers: per simulated layer (q width = n_head x head_dim_k, k and v widths of its K/V heads, the
            index of its mask in `masks`, n_kv x n_head for its scores without flash attention, and the bytes a
            backend adds to its flash-attention output (Metal's temporary room, else 0)):
            (q_width, kv_width, mask index, scores per token, extra bytes).
        masks: the bytes of each attention mask (f16 with flash attention, else f32).
        mla: absorbed MLA's widths instead of Q/K/V (n_head, q_lora_rank, nope, rope, kv_lora_rank, v_head):
            see mla_attention.
        rotated: whether K and V are rotated before a quantized cache stores them (see gqa_attention).
        n_outputs: the rows the last layer keeps (default n_tokens; fewer where n_tokens was rounded up to a
            multiple of the sequences, src/llama-context.cpp:2528).
    Returns:
        bytes, the buffer's high-water mark.
    """
    qkv_fused, up_fused, residual_first, k_first = fused
    row = FLOAT * n_tokens
    n_outputs = n_outputs or n_tokens
    tokens, pos, out_ids = _T(4 * n_tokens), _T(4 * n_tokens), _T(4 * n_outputs)
    # V's row indices: one per token, or without flash attention (V stored transposed) one per value
    v_width = 1 if flash_attn else max(kv_w for _, kv_w, *_ in layers)
    mask_t = [_T(m) for m in masks]
    idx = [(_T(8 * n_tokens), _T(8 * n_tokens * v_width)) for _ in masks]
    inputs = [tokens, _T(row * n_embd), pos]
    for j in dict.fromkeys(
        m for _, _, m, *_ in layers
    ):  # each cache's inputs, as the layers first read them
        inputs += [idx[j][0], *([] if mla else [idx[j][1]]), mask_t[j]]
    inputs.append(out_ids)
    nodes: list[_T] = []

    def add(size, *srcs, inplace=False, view=None, output=False):
        t = _T(size, srcs, inplace, view, output)
        nodes.append(t)
        return t

    def reshape(t):  # a view of the same layout (reshape, the 2d/3d views of contiguous rows)
        return add(t.size, t, view=t.view or t)

    x = add(row * n_embd, tokens)  # get_rows of the token embeddings
    for i, (q_w, kv_w, m, scores, fa_extra) in enumerate(layers):
        cur = add(row * n_embd, x, inplace=True)  # rms_norm
        cur = add(row * n_embd, cur, inplace=True)  # x its weight
        attention = mla_attention if mla else gqa_attention
        shape = (*mla, fa_extra) if mla else (qkv_fused, q_w, kv_w, fa_extra, *rotated, k_first)
        out = attention(
            add, reshape, row, cur, (pos, *idx[m], mask_t[m]), scores, shape, flash_attn
        )
        cur = add(row * n_embd, reshape(out))  # wo
        if i == len(layers) - 1:  # only the output rows go on (get_rows with out_ids)
            row = FLOAT * n_outputs
            cur = add(row * n_embd, cur, out_ids)
            x = add(row * n_embd, x, out_ids)
        ffn_inp = add(row * n_embd, cur, x, inplace=True)
        cur = add(row * n_embd, ffn_inp, inplace=True)
        cur = add(row * n_embd, cur, inplace=True)
        if up_fused:
            up = add(row * 2 * n_ff, cur)
            glu = add(row * n_ff, up)
        else:
            gate = add(row * n_ff, cur)
            up = add(row * n_ff, cur)
            glu = add(row * n_ff, gate, up)
        down = add(row * n_embd, glu)
        x = add(
            row * n_embd, *((ffn_inp, down) if residual_first else (down, ffn_inp)), inplace=True
        )
    cur = add(row * n_embd, x, inplace=True)
    cur = add(row * n_embd, cur, inplace=True)
    add(row * n_vocab, cur, output=True)
    return peak_bytes(inputs, nodes)


def gqa_attention(add, reshape, row, cur, inputs, scores, shape, flash_attn):
    """One attention block of Q, K and V heads (llama.cpp, qwen.cpp, phi3.cpp; build_attn_mha): its output.

    shape: (Q/K/V in one projection, q width, k and v width, a backend's bytes beside the output, K rotated,
    V rotated, K projected before V). A quantized cache stores K (and Q is read) or V rotated, where the head is a multiple of 64 wide
    (src/llama-kv-cache.cpp:321-338): `llama_mul_mat_hadamard` (src/llama-impl.h:57) multiplies each by the
    rotation into a new tensor (a strided view is made contiguous first), and a rotated V's output is turned
    back (src/llama-graph.cpp:2883-2930). Without flash attention V is stored transposed from contiguous rows:
    a strided V (one fused projection) is copied first (src/llama-kv-cache.cpp:1398-1404)."""
    pos, k_idx, v_idx, mask = inputs
    qkv_fused, q_w, kv_w, fa_extra, k_rot, v_rot, k_first = shape

    def rotate(t, width, strided=False):
        if strided:
            t = add(row * width, t)  # cont_2d
        return add(row * width, add(0, t, view=t.view or t))

    if qkv_fused:
        qkv = add(row * (q_w + 2 * kv_w), cur)
        q = add(row * q_w, add(0, qkv, view=qkv), pos)  # rope of a strided view: a copy
        q = add(row * q_w, q, inplace=True)  # Phi-3's scale; a no-op in layout for Qwen
        q = rotate(q, q_w) if k_rot else q
        v = add(0, qkv, view=qkv)
        v = rotate(v, kv_w, strided=True) if v_rot else v
        k = add(row * kv_w, add(0, qkv, view=qkv), pos)
        k = rotate(k, kv_w) if k_rot else k
        v_strided = not v_rot
    else:
        q = add(row * q_w, cur)
        q = add(row * q_w, reshape(q), pos, inplace=True)  # rope of the reshaped Q: new (line 640)
        q = rotate(q, q_w) if k_rot else q
        if not k_first:
            v = add(row * kv_w, cur)
        k = add(row * kv_w, cur)
        k = add(row * kv_w, reshape(k), pos, inplace=True)
        if k_first:
            v = add(row * kv_w, cur)
        v = rotate(v, kv_w) if v_rot else v
        k = rotate(k, kv_w) if k_rot else k
        v_strided = False
    add(0, reshape(k), k_idx)  # set_rows into the cache (the cache's own buffer)
    if v_strided and not flash_attn:
        v = add(row * kv_w, v)  # cont_2d: V is stored transposed from contiguous rows
    add(0, reshape(v) if v.view is None else v, v_idx)
    qp = add(0, q, view=q.view or q)  # permute
    if flash_attn:
        out = add(row * q_w + fa_extra, qp, mask)
    else:
        kq = add(row * scores, qp)
        kq = add(row * scores, kq, mask, inplace=True)  # soft_max_ext
        kqv = add(row * q_w, kq)
        out = add(row * q_w, add(0, kqv, view=kqv))  # cont of the permuted heads
    return rotate(out, q_w) if v_rot else out


def mla_attention(add, reshape, row, cur, inputs, scores, shape, flash_attn):
    """Absorbed MLA (src/models/deepseek2.cpp:496-592 at 0c1e570; build_attn_mha's v_mla): its output.

    shape: (n_head, q_lora_rank (0: one wq), nope, rope, kv_lora_rank, v_head, a backend's bytes beside the
    attention's output). Q is projected per head
    (nope + rope), its nope part absorbed into the latent (`wk_b`: n_head x kv_lora_rank) and concatenated with
    its roped part; K is the normed latent beside its roped key, the only row the cache stores; the attention
    reads the latent as V and `wv_b` decompresses its output to v_head per head, then a contiguous copy.
    Example: DeepSeek-V3, 512 tokens, flash attention: Q's 144 MiB lands above the absorbed 128 MiB and the
    48 MiB of the projection it was cut from: 412.01 MiB printed at -c 4096."""
    pos, k_idx, _, mask = inputs
    heads, q_lora, nope, rope, latent, v_head, fa_extra = shape
    if q_lora:  # wq_a, its norm (in place) and wq_b
        cur = add(row * q_lora, cur)
        cur = add(row * q_lora, add(row * q_lora, cur, inplace=True), inplace=True)
    q = reshape(add(row * heads * (nope + rope), cur))
    q_nope, q_pe = add(0, q, view=q.view), add(0, q, view=q.view)
    absorbed = add(row * heads * latent, add(0, q_nope, view=q.view))  # wk_b x permuted q_nope
    q_pe = add(row * heads * rope, q_pe, pos)  # rope of a strided view: a copy
    q = add(row * heads * (latent + rope), add(0, absorbed, view=absorbed), q_pe)  # concat
    kv = add(row * (latent + rope), cur)  # wkv_a_mqa
    kv_cmpr, k_pe = add(0, kv, view=kv), add(0, kv, view=kv)
    kv_cmpr = add(row * latent, add(row * latent, kv_cmpr), inplace=True)  # its norm: a copy
    k_pe = add(row * rope, k_pe, pos)
    k = add(row * (latent + rope), reshape(kv_cmpr), k_pe)  # concat
    add(0, reshape(k), k_idx)  # set_rows into the cache
    qp = add(0, q, view=q)
    if flash_attn:
        out = add(row * heads * latent + fa_extra, qp, mask)
    else:
        kq = add(row * scores, qp)
        out = add(row * heads * latent, add(row * scores, kq, mask, inplace=True))
    out = add(row * heads * v_head, add(0, out, view=out))  # wv_b
    return add(row * heads * v_head, add(0, out, view=out))  # cont


REPLAYED_LAYERS = (
    3  # the first layer sets the layout, the last adds the output rows: the rest repeat
)


def replayable(geometry) -> bool:
    """True where the replay knows the family's layers: a DENSE family with a dense MLP, every layer full attention
    (MLA: with its widths known)."""
    kinds = {layer.kind for layer in geometry.layers}
    known = kinds <= {"full", "sliding"} or (kinds == {"mla"} and bool(geometry.mla_widths))
    return geometry.model_type in DENSE and bool(geometry.ffn_width) and known


def replayed_bytes(
    geometry,
    n_tokens: int,
    caches: list,
    flash_attn: bool,
    room=None,
    quantized: tuple[bool, bool] = (False, False),
    sequences: int = 1,
) -> int:
    """A DENSE family's compute buffer for its attention `caches` (kvcore.runtimes.llamacpp_cache), replayed over
    its first REPLAYED_LAYERS layers; `room(layer, cache)`: bytes a backend adds to a flash-attention output;
    `quantized`: whether the K and V caches are block-quantized; the graph's tokens are rounded up to a
    multiple of `sequences` (src/llama-context.cpp:2528), its outputs stay n_tokens."""
    heads = geometry.num_attention_heads
    cache_of = {i: j for j, c in enumerate(caches) for i in c.layers}
    # the first layer of each cache (every mask is read, then freed), the last layer (its output rows), and the
    # ones after the first up to REPLAYED_LAYERS
    picked = sorted({min(c.layers) for c in caches} | {len(geometry.layers) - 1})
    rest = [i for i in range(len(geometry.layers)) if i not in picked]
    layers = []
    for i in sorted(picked + rest[: max(0, REPLAYED_LAYERS - len(picked))]):
        layer = geometry.layers[i]
        j = cache_of[layer.index]
        c = caches[j]
        extra = room(layer, c) if room else 0
        layers.append(
            (heads * layer.k_dim, layer.kv_heads * layer.k_dim, j, c.cells * heads, extra)
        )
    n_outputs, n_tokens = n_tokens, -(-n_tokens // sequences) * sequences
    masks = [(2 if flash_attn else FLOAT) * c.cells * n_tokens for c in caches]
    first = geometry.layers[0]
    rotated = (quantized[0] and first.k_dim % 64 == 0, quantized[1] and first.v_dim % 64 == 0)
    mla = None
    if geometry.mla_widths:
        q_lora, nope, v_head = geometry.mla_widths
        first = geometry.layers[0]
        mla = (heads, q_lora, nope, first.v_dim, first.k_dim, v_head)
    return dense_compute_bytes(
        DENSE[geometry.model_type],
        n_tokens,
        geometry.hidden_size,
        geometry.vocab_size,
        geometry.ffn_width,
        layers,
        masks,
        flash_attn,
        mla,
        rotated,
        n_outputs,
    )
