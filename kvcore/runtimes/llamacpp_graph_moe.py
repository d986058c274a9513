"""ggml's graph allocator replayed over the graphs of two routed-expert families: gpt-oss and Qwen3-Next.

The allocator and the tensor rules are kvcore.runtimes.llamacpp_graph's (ggml/src/ggml-alloc.c at llama.cpp
0c1e570); this module writes the two graphs' tensors in the order llama.cpp builds them (checked node by node
against GGML_SCHED_DEBUG=2 dumps of the real build). In both, the logits (4 x n_tokens x n_vocab bytes) are the
largest tensor, and the buffer's size is where they land: above the highest tensor still held when they are
allocated, which only a replay of the layers finds. Two things hold tensors there that the dense families'
graphs do not:

* `t_h_nextn` -- the hidden state a multi-token-prediction head would read is marked a graph output
  (`llm_graph_result::set_outputs`, src/llama-graph.cpp:1378), so the allocator never frees it: gpt-oss's last
  layer output (src/models/openai-moe.cpp:155) and Qwen3-Next's final norm (src/models/qwen3next.cpp:207), both
  taken before the output rows are picked (`get_rows`, line 158 and 210), stay below the logits. Example:
  gpt-oss-20b at `-c 4096 -ub 2048 -fa on`: the last layer's output is allocated at 137.6 MiB, above the routed
  experts' tensors of that layer, and held, so the 1,571 MiB of logits start at 160.1 MiB: 1731.09 MiB printed
  (the logits-and-two-rows moment said 1616).
* Routed experts -- `build_moe_ffn` (src/llama-graph.cpp:1963): the router's logits (n_expert per token) and
  probabilities (a bias added, or soft_max, in place), their argsort (n_expert int32 per token), the k chosen
  weights (get_rows, then soft_max of a reshape: a new tensor, or Qwen's sum_rows, clamp and division), then per
  token and chosen expert gate and up (`mul_mat_id`, n_ff_exp wide each; gpt-oss adds a bias to each, `add_id`,
  in place), their GLU product (a new tensor), down (n_embd wide), weighted (in place), and the k slices summed
  (the first add of two views is new, the rest in place). Qwen3-Next's shared expert follows (gate, up, GLU,
  down, n_ff_shexp wide; its sigmoid gate in place).

The layers:

* gpt-oss (src/models/openai-moe.cpp) -- the attention is llamacpp_graph.gqa_attention's (Q, K and V projected in
  that order, roped into new tensors; the sinks change no tensor's size), its output's bias added in place;
  sliding-window and full layers alternate, each reading its cache's mask.
* Qwen3-Next (src/models/qwen3next.cpp) -- three gated delta-net layers to one full-attention layer. A delta-net
  layer (`build_layer_attn_linear`, line 395): the conv state's rows fetched, the projection of q, k and v
  (`attn_qkv`; older files project z too in one `ssm_in`, and q, k and v are copied out flat and concatenated:
  `build_qkvz`, line 300), the conv state's rows prepended (`build_conv_state`, line 465), `ssm_conv` and its silu (in place), the state's rows fetched, q and
  k l2-normed (new, then scaled in place) and repeated to the value heads, the beta/alpha projection (2 x n_v_heads,
  small), the fused `gated_delta_net` (its output and the new state in one tensor), the gated norm (z projected by
  `attn_gate` there, or copied out of `ssm_in`; its silu new), `ssm_out`. A full-attention layer (`build_layer_attn`, line 236): Q and its gate in one
  projection (2 x n_head x head_dim), V, K, Q and K normed (new: views of the projections), roped in place, the
  gate copied out and its sigmoid multiplied in. The post-attention norm feeds the experts.

The Metal plan keeps the moments for these families: the one Metal log of the corpus (gpt-oss-20b at `-c 4096`,
llama.cpp pull request 17609, a build other than 0c1e570) prints 404.00 MiB, exactly the logits and two n_embd
rows, where this build's CPU graph holds a third (`t_h_nextn`) below them.
"""

from __future__ import annotations

from kvcore.runtimes.llamacpp_graph import FLOAT, Tensor, gqa_attention, peak_bytes

FAMILIES = ("gpt_oss", "qwen3_next")


def replayable(geometry) -> bool:
    """True where this module knows the family's graph and the geometry carries the widths it needs."""
    if geometry.model_type not in FAMILIES or not (geometry.experts and geometry.experts_used):
        return False
    return geometry.model_type == "gpt_oss" or bool(geometry.linear_widths)


class _Graph:
    """The graph under construction: its inputs (allocated first) and nodes, in order."""

    def __init__(self):
        self.inputs: list[Tensor] = []
        self.nodes: list[Tensor] = []

    def add(self, size, *srcs, inplace=False, view=None, output=False):
        t = Tensor(size, srcs, inplace, view, output)
        self.nodes.append(t)
        return t

    def reshape(self, t):
        return self.add(t.size, t, view=t.view or t)

    def view(self, t):
        return self.add(0, t, view=t.view or t)


def moe_ffn(g: _Graph, row: int, cur: Tensor, geometry, biased: bool) -> Tensor:
    """build_moe_ffn's tensors (see the module) for `row` bytes a value of each token: the experts' summed output."""
    e, k, n_exp, n_ff = (
        geometry.hidden_size,
        geometry.experts_used,
        geometry.experts,
        geometry.expert_width,
    )
    logits = g.add(row * n_exp, cur)
    probs = g.add(row * n_exp, logits, inplace=True)  # + bias (gpt-oss) or soft_max: in place
    order = g.add(row * n_exp, probs)  # argsort, int32
    topk = g.view(order)
    weights = g.add(row * k, g.reshape(probs), topk)  # get_rows
    if biased:  # soft_max of the chosen (a reshape: new)
        weights = g.add(row * k, g.reshape(weights))
    else:  # normalized: sum_rows, clamp, division
        total = g.add(row, g.reshape(weights))
        total = g.add(row, total, inplace=True)
        weights = g.add(row * k, g.reshape(weights), total)
    x = g.reshape(cur)
    gate = g.add(row * k * n_ff, x, topk)
    if biased:
        gate = g.add(row * k * n_ff, gate, topk, inplace=True)  # add_id
    up = g.add(row * k * n_ff, x, topk)
    if biased:
        up = g.add(row * k * n_ff, up, topk, inplace=True)
    glu = g.add(row * k * n_ff, gate, up)
    down = g.add(row * k * e, glu, topk)
    if biased:
        down = g.add(row * k * e, down, topk, inplace=True)
    weighted = g.add(row * k * e, down, weights, inplace=True)
    out = g.add(row * e, g.view(weighted), g.view(weighted))
    for _ in range(k - 2):
        out = g.add(row * e, out, g.view(weighted), inplace=True)
    return out


def delta_net_attention(
    g: _Graph, row: int, cur: Tensor, geometry, layer, sequences: int
) -> Tensor:
    """build_layer_attn_linear's tensors (see the module): the layer's output projection, n_embd wide (a
    reshape of it)."""
    key, value, v_heads, projected = geometry.linear_widths
    conv = 2 * key + value
    conv_rows = g.add(FLOAT * layer.conv_values * sequences)  # get_rows of the conv state
    legacy = projected > conv  # ssm_in: q, k, v and z in one projection, copied out
    qkv = mixed = g.add(row * projected, cur)  # ssm_in, or attn_qkv
    if legacy:
        q = g.add(row * key, g.view(mixed))  # cont
        k = g.add(row * key, g.view(mixed))
        qk = g.add(row * 2 * key, q, k)  # concat
        v = g.add(row * value, g.view(mixed))
        qkv = g.add(row * conv, qk, v)
    conv_input = g.add(row * conv + conv_rows.size, conv_rows, g.view(qkv))  # concat
    state = g.add(FLOAT * layer.state_values * sequences)  # get_rows of the state
    conv_out = g.add(row * conv, conv_input)  # ssm_conv
    conv_out = g.add(row * conv, conv_out, inplace=True)  # silu
    repeated = []  # q, then k: l2 norm of a view (new), its scale in place, repeated to the value heads
    for _ in range(2):
        t = g.add(row * key, g.view(conv_out))
        t = g.add(row * key, t, inplace=True)
        repeated.append(g.add(row * value, g.reshape(t)))
    ba = g.add(row * 2 * v_heads, cur)
    alpha = g.add(row * v_heads, g.view(ba))  # cont, + bias, softplus, x A: in place
    for _ in range(3):
        alpha = g.add(row * v_heads, alpha, inplace=True)
    beta = g.add(row * v_heads, g.view(ba))
    beta = g.add(row * v_heads, beta, inplace=True)  # sigmoid
    v_conv = g.view(conv_out)
    out = g.add(
        row * value + state.size, *repeated, v_conv, g.reshape(alpha), g.reshape(beta), state
    )
    normed = g.add(row * value, g.view(out))  # rms_norm of the output's view: new
    normed = g.add(row * value, normed, inplace=True)
    z = g.add(row * value, g.view(mixed) if legacy else cur)  # cont, or attn_gate's projection
    z = g.add(row * value, g.reshape(z))  # silu of a reshape: new
    gated = g.add(row * value, normed, z, inplace=True)
    return g.reshape(g.add(row * geometry.hidden_size, g.reshape(gated)))  # ssm_out


def gated_attention(
    g: _Graph, row: int, cur: Tensor, e: int, layer, heads: int, inputs, flash_attn, scores, rot
):
    """build_layer_attn's tensors (see the module): the output projection, n_embd wide. `rot`: K and V rotated
    before a quantized cache stores them (llamacpp_graph.gqa_attention)."""
    pos, k_idx, v_idx, mask = inputs
    q_w, kv_w = heads * layer.k_dim, layer.kv_heads * layer.k_dim

    def rotate(t, width):
        return g.add(row * width, g.view(t))

    full = g.add(row * 2 * q_w, cur)
    q = g.add(row * q_w, g.view(full))  # rms_norm of a view: new
    q = g.add(row * q_w, q, inplace=True)
    q = g.add(row * q_w, q, pos, inplace=True)  # rope, in place
    q = rotate(q, q_w) if rot[0] else q
    v = g.add(row * kv_w, cur)
    v = rotate(v, kv_w) if rot[1] else v
    k = g.add(row * kv_w, cur)
    k = g.add(row * kv_w, g.reshape(k))
    k = g.add(row * kv_w, k, inplace=True)
    k = g.add(row * kv_w, k, pos, inplace=True)
    k = rotate(k, kv_w) if rot[0] else k
    g.add(0, g.reshape(k), k_idx)
    g.add(0, g.reshape(v), v_idx)
    qp = g.view(q)
    if flash_attn:
        out = g.add(row * q_w, qp, mask)
    else:
        kq = g.add(row * scores, qp)
        kq = g.add(row * scores, kq, mask, inplace=True)
        kqv = g.add(row * q_w, kq)
        out = g.add(row * q_w, g.view(kqv))
    out = rotate(out, q_w) if rot[1] else out
    gate = g.add(row * q_w, g.view(full))  # cont
    gate = g.add(row * q_w, gate, inplace=True)  # sigmoid
    gated = g.add(row * q_w, g.reshape(out), gate, inplace=True)
    return g.add(row * e, gated)


def replayed_bytes(
    geometry,
    n_tokens: int,
    caches: list,
    flash_attn: bool,
    sequences: int = 1,
    quantized: tuple[bool, bool] = (False, False),
) -> int:
    """The compute buffer of a gpt-oss or Qwen3-Next graph for its attention `caches`, replayed over the first
    and last layer of each kind and cache (every mask is freed after the last layer that reads it; the layers
    between repeat the layout); `quantized`: whether the K and V caches
    are block-quantized (then rotated where the head is a multiple of 64 wide, src/llama-kv-cache.cpp:321-338)."""
    e, heads = geometry.hidden_size, geometry.num_attention_heads
    n_outputs, n_tokens = n_tokens, -(-n_tokens // sequences) * sequences
    row = FLOAT * n_tokens
    g = _Graph()
    tokens, pos, out_ids = Tensor(4 * n_tokens), Tensor(4 * n_tokens), Tensor(4 * n_outputs)
    masks = [Tensor((2 if flash_attn else FLOAT) * c.cells * n_tokens) for c in caches]
    kv_w = max((lay.kv_heads * lay.v_dim for lay in geometry.layers if lay.kv_heads), default=0)
    idx = [
        (Tensor(8 * n_tokens), Tensor(8 * n_tokens * (1 if flash_attn else kv_w))) for _ in caches
    ]
    cache_of = {i: j for j, c in enumerate(caches) for i in c.layers}
    layers = geometry.layers
    firsts, lasts = {}, {}
    for layer in layers:
        firsts.setdefault((layer.kind, cache_of.get(layer.index)), layer.index)
        lasts[(layer.kind, cache_of.get(layer.index))] = layer.index
    picked = sorted(set(firsts.values()) | set(lasts.values()))
    g.inputs = [tokens, Tensor(row * e), pos]
    for i in picked:
        j = cache_of.get(i)
        if j is not None and masks[j] not in g.inputs:
            g.inputs += [idx[j][0], idx[j][1], masks[j]]
    g.inputs.append(out_ids)
    head = next(lay for lay in layers if lay.kv_heads)
    rot = (quantized[0] and head.k_dim % 64 == 0, quantized[1] and head.v_dim % 64 == 0)
    x = g.add(row * e, tokens)  # get_rows of the token embeddings
    qwen = geometry.model_type == "qwen3_next"
    for i in picked:
        layer = layers[i]
        cur = g.add(row * e, x, inplace=True)  # rms_norm
        cur = g.add(row * e, cur, inplace=True)
        j = cache_of.get(i)
        if layer.kind == "linear":
            out = delta_net_attention(g, row, cur, geometry, layer, sequences)
        elif qwen:
            inputs = (pos, *idx[j], masks[j])
            out = gated_attention(
                g, row, cur, e, layer, heads, inputs, flash_attn, caches[j].cells * heads, rot
            )
        else:
            shape = (False, heads * layer.k_dim, layer.kv_heads * layer.k_dim, 0, *rot, True)
            inputs = (pos, *idx[j], masks[j])
            att = gqa_attention(
                g.add, g.reshape, row, cur, inputs, caches[j].cells * heads, shape, flash_attn
            )
            out = g.add(row * e, g.add(row * e, g.reshape(att)), inplace=True)  # wo, + its bias
        residual = g.add(row * e, out, x, inplace=True)
        cur = g.add(row * e, residual, inplace=True)  # the post-attention norm
        cur = g.add(row * e, cur, inplace=True)
        ffn = moe_ffn(g, row, cur, geometry, biased=not qwen)
        if qwen:
            shared = geometry.shared_expert_width
            s_gate, s_up = g.add(row * shared, cur), g.add(row * shared, cur)
            s_out = g.add(row * e, g.add(row * shared, s_gate, s_up))
            s_gate = g.add(row, g.add(row, cur), inplace=True)  # the shared expert's gate, sigmoid
            s_out = g.add(row * e, s_out, s_gate, inplace=True)
            ffn = g.add(row * e, ffn, s_out, inplace=True)
        last = i == picked[-1] and not qwen  # gpt-oss: the last layer's output is t_h_nextn
        x = g.add(row * e, ffn, residual, inplace=True, output=last)
    row_out = FLOAT * n_outputs
    if qwen:  # the final norm (t_h_nextn), then the output rows
        cur = g.add(row * e, g.add(row * e, x, inplace=True), inplace=True, output=True)
        cur = g.add(row_out * e, cur, out_ids)
    else:
        cur = g.add(row_out * e, x, out_ids)
        cur = g.add(row_out * e, g.add(row_out * e, cur, inplace=True), inplace=True)
    g.add(row_out * geometry.vocab_size, cur, output=True)
    return peak_bytes(g.inputs, g.nodes)
