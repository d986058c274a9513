"""`kvcore quality` on a real model: each KV format's price in perplexity, KL divergence and top-1 agreement.

The text is tokenized with the model's own tokenizer; its first N+1 tokens are fed in chunks through one cache
per format, side by side, and every position's next-token log-probabilities are compared with the baseline's
(the unquantized cache mlx_lm makes, in the activation dtype) by kvcore.measure.quality. A quantized format uses
mlx_lm's own conversion (`maybe_quantize_kv_cache`, as `generate_step` does with kv_bits) before every
forward pass: with quantized_kv_start 0 the empty cache is converted before the first token, so every position
attends to quantized keys and values. A plain format (fp16, bf16) is stored in that dtype and read back into
the activation dtype. Greedy answers to a prompt through each cache show where the text first changes.
mlx is imported inside functions only.
Example: run_quality(model, ids, [parse_format("mlx-q4")]) -> {"formats": [{"kv_format": "fp32", ...}, ...], ...}
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kvcore.errors import KvError
from kvcore.measure.live_model import LiveModel
from kvcore.measure.progress import Progress, StopCheck, Ticker
from kvcore.measure.quality import add, chunk_sums, finish, first_divergence, log_softmax
from kvcore.memory.formats import mlx_cache, mlx_cache_formats

MLX_GROUPS = (32, 64, 128)  # what mx.quantize accepts (mlx 0.32.4)
DEFAULT_CHUNK = 256
DEFAULT_PROMPT = "What is the capital of Japan?"
# The questions the bundled recording asks through each cache, each with what a right answer says: questions the
# unquantized model answers right, so an answer that changes shows what the cache did, not a wrong baseline
DEMO_QUESTIONS = {
    "What is the capital of Japan?": "Tokyo",
    "What is the capital of France?": "Paris",
    "What language is spoken in Brazil?": "Portuguese",
    "What is the boiling point of water in Celsius?": "100",
}
QUANTIZE_RULE = (
    "mlx_lm's maybe_quantize_kv_cache before every forward pass (quantized_kv_start 0: converted "
    "before the first token, so every position reads quantized K/V); plain fp16/bf16 stored in that dtype, "
    "read back in the activation dtype"
)

QUANTIZE_RULE_PREFILL = (
    "mlx_lm's own maybe_quantize_kv_cache (kv_bits, kv_group_size, quantized_kv_start 0) before every "
    "chunk of the pass, the first included, so every scored position reads quantized K and V (its own "
    "chunk's too, quantized as mlx_lm's QuantizedKVCache stores them), as every decode step after a prefill "
    "does. mlx_lm's generate_step calls the same function after each prefill step (prefill_step_size "
    "tokens, default 2048), so there the first step attends in full precision and is quantized after it; "
    "here the chunks are that prefill step at --chunk tokens, with the conversion moved before the first. "
    "Plain fp16/bf16: stored in that dtype, read back in the activation dtype"
)


@dataclass(frozen=True)
class KvOption:
    """One cache to score: a plain dtype, or mlx_lm's QuantizedKVCache with bits, group size and start."""

    name: str  # as the reader typed it: fp16, mlx-q4, ...
    bits: int | None = None
    group_size: int = 64
    start: int = 0  # quantized_kv_start: tokens held unquantized before the conversion

    @property
    def label(self) -> str:
        if self.bits is None:
            return self.name
        extra = f", from token {self.start:,}" if self.start else ""
        return f"{self.name} (group {self.group_size}{extra})"


def parse_format(name: str, group_size: int = 64, start: int = 0, head_dim: int = 64) -> KvOption:
    """A format an mlx_lm cache class holds (kvcore.memory.formats: fp32 / fp16 / bf16 / mlx-q<bits>) -> a KvOption mlx_lm
    can apply to this head_dim, or one sentence saying why not."""
    name = name.strip()
    try:
        bits = mlx_cache(name)[1]
    except KvError:
        valid = ", ".join(mlx_cache_formats())
        raise KvError(
            f"Unknown KV format {name!r} for quality; valid: {valid} (mlx_lm's KVCache and "
            "QuantizedKVCache).",
            "kv_option",
            detail=f"unknown format {name!r}",
        ) from None
    if bits is None:
        return KvOption(name)
    if group_size not in MLX_GROUPS:
        raise KvError(
            f"mlx_lm quantizes the KV cache in groups of {', '.join(map(str, MLX_GROUPS))} values, not "
            f"{group_size}.",
            "kv_option",
            detail=f"group {group_size}",
        )
    if head_dim % group_size:
        raise KvError(
            f"{name} with group size {group_size} cannot be applied to this model: the group size must "
            f"divide head_dim {head_dim}.",
            "kv_option",
            detail=f"group {group_size}, head_dim {head_dim}",
        )
    _mlx_accepts(name, bits, group_size)
    return KvOption(name, bits, group_size, start)


def _mlx_accepts(name: str, bits: int, group_size: int) -> None:
    """Ask mlx itself whether it quantizes with these bits (0.32.4: 1-6 and 8, not 7)."""
    import mlx.core as mx

    try:
        mx.eval(mx.quantize(mx.zeros((1, group_size)), group_size=group_size, bits=bits))
    except (ValueError, RuntimeError) as e:
        reason = str(e).split("]")[-1].strip().rstrip(".")
        raise KvError(
            f"mlx cannot quantize the KV cache as {name}: {reason}.", "kv_option", detail=reason
        ) from None


def _stored_as(store: str, compute: str):
    """A KVCache that stores K/V in `store` and returns them in `compute` (a real fp16 cache on the fp32 CPU backend)."""
    from mlx_lm.models.cache import KVCache

    from kvcore.measure.caches import mx_dtype

    class StoredKVCache(KVCache):
        def update_and_fetch(self, keys, values):
            k, v = super().update_and_fetch(
                keys.astype(mx_dtype(store)), values.astype(mx_dtype(store))
            )
            return k.astype(mx_dtype(compute)), v.astype(mx_dtype(compute))

    return StoredKVCache()


def new_caches(model: LiveModel, option: KvOption) -> list:
    from mlx_lm.models.cache import make_prompt_cache

    if option.bits is None and option.name != model.dtype:
        return [_stored_as(option.name, model.dtype) for _ in range(model.geometry.count("full"))]
    return make_prompt_cache(model.module)


def _maybe_quantize(caches: list, option: KvOption) -> None:
    if option.bits is not None:
        from mlx_lm.generate import maybe_quantize_kv_cache

        maybe_quantize_kv_cache(caches, option.start, option.group_size, option.bits)


def cache_bytes_per_token(caches: list, tokens: int) -> float:
    """Bytes the caches hold per token, measured from the arrays they return (all layers, K and V, scales included)."""
    from kvcore.measure.caches import used_bytes

    return sum(used_bytes(c) for c in caches) / max(1, tokens)


def score(
    model: LiveModel,
    ids: list[int],
    options: list[KvOption],
    chunk: int = DEFAULT_CHUNK,
    ticker: Ticker | None = None,
    checkpoints: tuple[int, ...] = (),
) -> tuple[list[dict], dict]:
    """Feed ids[:-1] through the baseline cache and each option's, chunk by chunk; (rows, baseline row). Each
    checkpoint (a multiple of `chunk`) adds rows of the figures over the first that many positions (the price
    against context, from one pass)."""
    import mlx.core as mx

    baseline = KvOption(model.dtype)
    runs = [baseline, *[o for o in options if o != baseline]]
    caches = {o: new_caches(model, o) for o in runs}
    sums: dict[KvOption, dict | None] = {o: None for o in runs}
    seconds = {o: 0.0 for o in runs}
    early: list[dict] = []
    n = len(ids) - 1
    for start in range(0, n, chunk):
        x = mx.array([ids[start : min(n, start + chunk)]])
        targets = ids[start + 1 : min(n, start + chunk) + 1]
        base_lp = None
        for o in runs:
            t0 = time.perf_counter()
            _maybe_quantize(caches[o], o)
            logits = model.module(x, cache=caches[o])[0].astype(mx.float32)
            mx.eval(logits)
            seconds[o] += time.perf_counter() - t0
            lp = log_softmax(logits)
            base_lp = lp if base_lp is None else base_lp
            sums[o] = add(sums[o], chunk_sums(base_lp, lp, targets))
            if ticker:
                ticker.tick(f"{o.label}: {min(n, start + chunk):,}/{n:,} tokens")
        done = min(n, start + chunk)
        if done in checkpoints and done < n:
            early.extend(_rows(runs, caches, sums, seconds, done))
    rows = _rows(runs, caches, sums, seconds, n)
    return early + rows, rows[0]


def _rows(runs, caches, sums, seconds, n) -> list[dict]:
    rows = []
    for o in runs:
        _maybe_quantize(caches[o], o)
        row = {
            "kv_format": o.name,
            "label": o.label,
            "bits": o.bits,
            "group_size": o.group_size if o.bits else None,
            "quantized_kv_start": o.start if o.bits else None,
            **finish(sums[o]),
            "bytes_per_token": cache_bytes_per_token(caches[o], n),
            "seconds": seconds[o],
        }
        rows.append({k: v for k, v in row.items() if v is not None})
    return rows


def greedy(model: LiveModel, prompt: list[int], option: KvOption, max_tokens: int) -> list[int]:
    """Greedy tokens after `prompt` through `option`'s cache (converted as mlx_lm's generate_step converts it)."""
    import mlx.core as mx

    caches = new_caches(model, option)
    out: list[int] = []
    x = mx.array([prompt])
    for _ in range(max_tokens):
        _maybe_quantize(caches, option)
        token = int(mx.argmax(model.module(x, cache=caches)[0, -1]).item())
        if token in (model.tokenizer.eos_id, 0):
            break
        out.append(token)
        x = mx.array([[token]])
    return out


def answers(
    model: LiveModel,
    prompt_text: str,
    options: list[KvOption],
    max_tokens: int = 48,
    ticker: Ticker | None = None,
) -> list[dict]:
    """The same chat prompt answered greedily through each cache; where each answer first parts from the baseline's,
    and by how much the baseline preferred its own token there (margin, nats: a near tie flips at the slightest error)."""
    import mlx.core as mx

    tok = model.tokenizer
    prompt = tok.chat(prompt_text)
    baseline = KvOption(model.dtype)
    runs = [baseline, *[o for o in options if o != baseline]]
    base = None
    rows = []
    for o in runs:
        ids = greedy(model, prompt, o, max_tokens)
        base = ids if base is None else base
        split = first_divergence(base, ids)
        row = {
            "kv_format": o.name,
            "label": o.label,
            "prompt": prompt_text,
            "answer": tok.decode(ids),
            "tokens": len(ids),
        }
        if split is not None:
            row.update(first_divergence=split, agreed_text=tok.decode(ids[:split]))
            if split < len(base) and split < len(ids):
                lp = log_softmax(
                    model.module(mx.array([prompt + base[:split]]))[0, -1].astype(mx.float32)
                )
                row["margin"] = float(lp[base[split]] - lp[ids[split]])
        rows.append(row)
        if ticker:
            ticker.tick(f"answer: {o.label}")
    return rows


def run_quality(
    model: LiveModel,
    ids: list[int],
    options: list[KvOption],
    chunk: int = DEFAULT_CHUNK,
    prompt: str = DEFAULT_PROMPT,
    answer_tokens: int = 48,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
) -> dict:
    """Scores and answers for every option: {"formats": [...], "answers": [...], "baseline": name, "tokens": N}."""
    if model.tokenizer is None:
        raise KvError(
            f"{model.name} has random weights; quality needs a trained model with its tokenizer "
            "(--model smollm2-135m)."
        )
    runs = 1 + len([o for o in options if o != KvOption(model.dtype)])
    chunks = -(-(len(ids) - 1) // chunk)
    ticker = Ticker(runs * chunks + (runs if prompt else 0), progress, should_stop)
    rows, base = score(model, ids, options, chunk, ticker)
    greedy_rows = answers(model, prompt, options, answer_tokens, ticker) if prompt else []
    for row, answer in zip(rows[-len(greedy_rows) :] if greedy_rows else [], greedy_rows):
        if "first_divergence" in answer:
            row["first_divergence"] = answer["first_divergence"]
    return {
        "formats": rows,
        "answers": greedy_rows,
        "baseline": base["kv_format"],
        "tokens": base["tokens"],
        "chunk": chunk,
    }


class CacheRunner:
    """One option's caches fed a stream from its start (kvcore.measure.long_context.Runner): converted by
    mlx_lm's maybe_quantize_kv_cache before every forward pass, as _maybe_quantize does for score()."""

    def __init__(self, model: LiveModel, option: KvOption):
        self.model, self.option = model, option
        self.caches = new_caches(model, option)

    def _forward(self, tokens: list[int]):
        import mlx.core as mx

        _maybe_quantize(self.caches, self.option)
        return self.model.module(mx.array([tokens]), cache=self.caches)[0]

    def feed(self, tokens: list[int]):
        import mlx.core as mx
        import numpy as np

        logits = self._forward(tokens).astype(mx.float32)
        mx.eval(logits)
        return np.array(logits)

    def answer(self, prompt: list[int], max_tokens: int) -> list[int]:
        import mlx.core as mx

        held = self.caches[0].offset
        out: list[int] = []
        x = prompt
        for _ in range(max_tokens):
            token = int(mx.argmax(self._forward(x)[-1]).item())
            if token in (self.model.tokenizer.eos_id, 0):
                break
            out.append(token)
            x = [token]
        for c in self.caches:
            c.trim(c.offset - held)
        return out


def run_long_context(
    model: LiveModel,
    text: str,
    options: list[KvOption],
    tokens: int,
    chunk: int = DEFAULT_CHUNK,
    answer_tokens: int | None = None,
    sample: str | None = None,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
) -> dict:
    """kvcore.measure.long_context's sweep on mlx_lm's caches: the baseline (the activation dtype's KVCache) and
    each option over the model's chat opening + `text` with the facts; `sample` names the option (its label)
    whose logits against the baseline's are kept for a few positions."""
    from kvcore.measure import long_context as lc
    from kvcore.measure import positions

    tok = model.tokenizer
    head, tail = lc.chat_parts(tok.chat_text)
    ids = tok.encode(head) + tok.encode(lc.retrieval_text(text))
    if len(ids) < tokens + 1:
        raise KvError(
            f"The text holds {len(ids):,} tokens with the chat opening and the facts; --tokens "
            f"{tokens:,} needs {tokens + 1:,} (or give a longer text)."
        )
    questions = [
        lc.Question(
            f, tok.encode(lc.question_text(f, tail)), lc.fact_tokens(tok.encode, head, text, f)
        )
        for f in lc.FACTS
    ]
    baseline = KvOption(model.dtype)
    runs = [baseline, *[o for o in options if o != baseline]]
    answer_tokens = answer_tokens or lc.ANSWER_TOKENS
    lengths = positions.lengths_for(tokens)
    bounds, stops = lc.plan(tokens, chunk, lengths, questions, answer_tokens)
    ticker = Ticker(lc.ticks(len(runs), bounds, stops), progress, should_stop)
    runners = {o.label: CacheRunner(model, o) for o in runs}
    result = lc.sweep(
        runners, ids, tokens, chunk, lengths, questions, tok.decode, answer_tokens, sample, ticker
    )
    result.update(
        baseline=baseline.label,
        options={o.label: o for o in runs},
        tokens=tokens,
        chunk=chunk,
        stream_tokens=len(ids),
        head_tokens=len(tok.encode(head)),
        answer_tokens=answer_tokens,
        bytes_per_token={
            o.label: cache_bytes_per_token(r.caches, r.caches[0].offset)
            for o, r in zip(runs, runners.values())
        },
    )
    return result
