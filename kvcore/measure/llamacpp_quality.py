"""`kvcore quality --runtime llama.cpp --model FILE.gguf`: what llama.cpp's own quantized caches cost a real model.

The GGUF runs in llama-cpp-python (the real llama.cpp build): one context per KV format (`type_k` = `type_v`
= the format, as `-ctk X -ctv X`), side by side, plus a baseline context with llama.cpp's f16 cache. The text is
tokenized with the file's own tokenizer in llama.cpp; its first N+1 tokens are fed in the same chunks through
every context (a batch asking for every position's logits), and each chunk's logits go through kvcore.measure.quality
(`chunk_sums` / `add` / `finish`), the arithmetic the mlx_lm runs use. Flash attention is on in every context,
the baseline's too: llama.cpp refuses a quantized V cache without it ("quantized V cache requires flash_attn"),
so the formats differ by their cache alone. Greedy answers to a chat prompt (the file's own template) show
where the text first changes. The model and its contexts open in kvcore/measure/llamacpp_session.py (as `record
--runtime llama.cpp`'s do); llama_cpp is imported inside functions only.

Example: run(path, ["f16", "q8_0", "q4_0"], text, 256)["formats"][-1]["kl_vs_baseline"] -> 0.1 (nats)
"""

from __future__ import annotations

from kvcore.errors import KvError
from kvcore.inputs import gguf
from kvcore.measure.llamacpp_session import (
    LLAMA_CPP_COMMIT,
    Context,
    Model,
    model_block,
    predicted,
    run_provenance,
    runtime_block,
    system_blas,
    weights_types,
)
from kvcore.measure.progress import Progress, StopCheck, Ticker
from kvcore.measure.quality import add, chunk_sums, finish, first_divergence, log_softmax
from kvcore.recordings import store as recordings

BASELINE = "f16"  # llama.cpp's default cache type (-ctk/-ctv f16): the baseline every format is compared with
DEFAULT_FORMATS = ("f16", "q8_0", "q4_0")
FLASH_ATTN_NOTE = (
    "flash attention on in every context, the baseline's too (llama.cpp refuses a quantized V cache "
    "without it: 'quantized V cache requires flash_attn')"
)


def parse_formats(names: list[str]) -> list[str]:
    """The cache types as llama.cpp's runtime object knows them (its -ctk/-ctv types, in llama.cpp's spelling:
    f16, q8_0, ...), or one sentence naming the first it does not know."""
    from kvcore.memory.formats import aliases, ggml_name
    from kvcore.runtimes.registry import gguf_runtime

    runtime = gguf_runtime()
    out = []
    for name in names:
        ours = aliases().get(name, name)
        if ours not in runtime.kv_formats:
            valid = ", ".join(map(ggml_name, runtime.kv_formats))
            raise KvError(
                f"Unknown KV format {name!r} for {runtime.name}'s quality; valid: {valid} (its "
                "-ctk/-ctv cache types).",
                "llamacpp_format",
                format=name,
                valid=valid,
            )
        out.append(ggml_name(ours))
    return list(dict.fromkeys(out))


class _Context(Context):
    """A context fed a batch at a time (flash attention on), asking for every position's logits or the last."""

    def __init__(
        self,
        model: Model,
        kv_format: str,
        n_ctx: int,
        n_batch: int,
        threads: int,
        v_format: str | None = None,
    ):
        super().__init__(
            model,
            kv_format,
            n_ctx=n_ctx,
            n_batch=n_batch,
            threads=threads,
            flash_attn="on",
            v_format=v_format,
        )
        self.batch = self.lc.llama_batch_init(n_batch, 0, 1)
        self.pos = 0

    def close(self) -> None:
        self.lc.llama_batch_free(self.batch)
        super().close()

    def clear(self) -> None:
        super().clear()
        self.pos = 0

    def feed(self, tokens: list[int], every: bool = True):
        """Decode `tokens` after what the cache holds, n_batch at a time; [n, vocab] float32 logits of every
        position (or of the last only)."""
        import numpy as np

        out = []
        for at in range(0, len(tokens), self.n_batch):
            piece = tokens[at : at + self.n_batch]
            last = at + len(piece) == len(tokens)
            rows = self._decode(piece, every, last)
            if rows is not None:
                out.append(rows)
        return np.concatenate(out)

    def _decode(self, tokens: list[int], every: bool, last: bool):
        import numpy as np

        b = self.batch
        b.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            b.token[i], b.pos[i], b.n_seq_id[i] = token, self.pos + i, 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if every or (last and i == len(tokens) - 1) else 0
        self.decode(b)
        self.pos += len(tokens)
        rows = len(tokens) if every else int(last)
        if not rows:
            return None
        logits = self.lc.llama_get_logits(self.ctx)
        return np.ctypeslib.as_array(logits, shape=(rows, self.n_vocab)).copy()


def score(contexts: dict[str, _Context], ids: list[int], chunk: int, ticker: Ticker) -> dict:
    """Feed ids[:-1] through the baseline context and each format's, chunk by chunk; each format's sums."""
    n = len(ids) - 1
    sums: dict[str, dict | None] = {name: None for name in contexts}
    for start in range(0, n, chunk):
        end = min(n, start + chunk)
        targets = ids[start + 1 : end + 1]
        base_lp = log_softmax(contexts[BASELINE].feed(ids[start:end]))
        ticker.tick(f"baseline: {end:,}/{n:,} tokens")
        for name, ctx in contexts.items():
            if name == BASELINE:
                continue
            lp = log_softmax(ctx.feed(ids[start:end]))
            sums[name] = add(sums[name], chunk_sums(base_lp, lp, targets))
            ticker.tick(f"{name.split(':')[-1]}: {end:,}/{n:,} tokens")
    return sums


def greedy(model: Model, ctx: _Context, prompt: list[int], max_tokens: int) -> list[int]:
    """Greedy tokens after `prompt` through `ctx`'s cache (cleared first)."""
    ctx.clear()
    logits = ctx.feed(prompt, every=False)
    out: list[int] = []
    for _ in range(max_tokens):
        token = int(logits[-1].argmax())
        if model.is_end(token):
            break
        out.append(token)
        logits = ctx.feed([token], every=False)
    return out


def answers(
    model: Model, contexts: dict[str, _Context], question: str, max_tokens: int, ticker
) -> list[dict]:
    """The same chat prompt answered greedily through the baseline's cache (the first row, labelled as the baseline)
    and each format's; where each answer first parts from the baseline's, and by how much the baseline preferred its
    own token there (margin, nats)."""
    prompt = model.chat(question)
    base = greedy(model, contexts[BASELINE], prompt, max_tokens)
    rows = [_answer(model, BASELINE, f"{BASELINE} (baseline)", question, base)]
    ticker.tick("answer: baseline")
    for name, ctx in contexts.items():
        if name == BASELINE:
            continue
        ids = greedy(model, ctx, prompt, max_tokens)
        row = _answer(model, ctx.kv_format, ctx.kv_format, question, ids)
        split = first_divergence(base, ids)
        if split is not None:
            row.update(first_divergence=split, agreed_text=model.decode_text(ids[:split]))
            if split < len(base) and split < len(ids):
                ref = contexts[BASELINE]
                ref.clear()
                lp = log_softmax(ref.feed(prompt + base[:split], every=False))[-1]
                row["margin"] = float(lp[base[split]] - lp[ids[split]])
        rows.append(row)
        ticker.tick(f"answer: {ctx.kv_format}")
    return rows


def _answer(model: Model, kv_format: str, label: str, question: str, ids: list[int]) -> dict:
    return {
        "kv_format": kv_format,
        "label": label,
        "prompt": question,
        "answer": model.decode_text(ids),
        "tokens": len(ids),
    }


def run(
    path: str,
    formats: list[str],
    text: str,
    tokens: int,
    chunk: int = 256,
    prompt: str = "",
    answer_tokens: int = 48,
    threads: int = 2,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
) -> dict:
    """Scores (and answers) for every format of llama.cpp's cache on the GGUF at `path`:
    {"formats": [...], "answers": [...], "baseline": "f16", "tokens": N, "chunk": C, "llama_cpp": {...}}."""
    formats = parse_formats(formats)
    model = Model(path)
    contexts: dict[str, _Context] = {}
    try:
        ids = model.tokenize(text)
        if len(ids) < tokens + 1:
            raise KvError(
                f"The text holds {len(ids):,} tokens; --tokens {tokens:,} needs {tokens + 1:,} (or give a "
                "longer text)."
            )
        ids = ids[: tokens + 1]
        question = model.chat(prompt) if prompt else []
        n_ctx = max(tokens, len(question) + answer_tokens) + 1
        # the baseline is a context of its own: a listed f16 is a second, independent run of the same cache
        n_batch = min(chunk, 2048)
        for name in [BASELINE, *[f"run:{f}" for f in formats]]:
            contexts[name] = _Context(model, name.split(":")[-1], n_ctx, n_batch, threads)
        chunks = -(-tokens // chunk)
        ticker = Ticker((1 + len(formats)) * (chunks + (1 if prompt else 0)), progress, should_stop)
        sums = score(contexts, ids, chunk, ticker)
        geometry = gguf.geometry(path)
        ours = {f: predicted(geometry, f, n_ctx, n_batch) for f in formats}
        rows = [
            _row(contexts[f"run:{f}"], sums[f"run:{f}"], ours[f]["bytes_per_token"])
            for f in formats
        ]
        greedy_rows = answers(model, contexts, prompt, answer_tokens, ticker) if prompt else []
        for row, answer in zip(rows, greedy_rows[1:]):  # the same formats, in order
            if "first_divergence" in answer:
                row["first_divergence"] = answer["first_divergence"]
        return {
            "formats": rows,
            "answers": greedy_rows,
            "baseline": BASELINE,
            "tokens": tokens,
            "chunk": chunk,
            "answer_tokens": answer_tokens if prompt else None,
            "llama_cpp": {
                "n_ctx": n_ctx,
                "n_batch": n_batch,
                "n_ubatch": min(512, n_batch),
                "threads": threads,
                "allocation_lines": {
                    ctx.kv_format: ctx.cache_lines
                    for name, ctx in contexts.items()
                    if name != BASELINE
                },
                "cross_check": all(
                    contexts[f"run:{f}"].cache_lines == ours[f]["lines"] for f in formats
                ),
                "log": model.log,
            },
        }
    finally:
        for ctx in contexts.values():
            ctx.close()
        model.close()


def _row(ctx: _Context, sums: dict, per_token: int) -> dict:
    """One format's figures; a ggml block format names its bits and block size (values per scale)."""
    from kvcore.memory.formats import get_format

    fmt = get_format(ctx.kv_format)
    row = {"kv_format": ctx.kv_format, "label": ctx.kv_format}
    if fmt.kind == "block":
        row.update(bits=fmt.bits, group_size=fmt.block_values)
    return {**row, **finish(sums), "bytes_per_token": per_token}


def recording(
    path: str,
    result: dict,
    command: str,
    text_name: str,
    title: str | None = None,
    label: str | None = None,
) -> dict:
    """The run as a measured recording (sections quality and answers), with llama.cpp's provenance, its
    allocation lines per format against kvcore's, and the method in words."""
    geometry = gguf.geometry(path)
    run = result["llama_cpp"]
    prov = run_provenance(command, run["log"])
    info, blas = system_blas()
    quantize = (
        f"llama.cpp's own cache types: type_k = type_v = the format (-ctk X -ctv X), K and V stored in "
        f"it from the first token; the baseline is a separate context with llama.cpp's {BASELINE} cache "
        f"(a listed {BASELINE} is a second, independent run); {FLASH_ATTN_NOTE}"
    )
    method = {
        "quality": {
            "text": text_name,
            "tokens": result["tokens"],
            "chunk": result["chunk"],
            "tokenizer": "llama.cpp's own (llama_tokenize of the file's vocabulary, no BOS added)",
            "baseline": f"llama.cpp's {BASELINE} KV cache (-ctk {BASELINE} -ctv {BASELINE})",
            "quantize": quantize,
            "flash_attn": "on",
            "logits": "every position's logits from llama_decode (batch.logits set for every token), "
            "float32, one chunk per llama_decode call",
            "metrics": "perplexity of the run; mean KL(baseline || run) in nats; share of positions with "
            "the baseline's top-1 token (kvcore.measure.quality, the mlx_lm runs' arithmetic)",
            "weights": f"the GGUF's own tensors ({weights_types(geometry)}) in llama.cpp's kernels",
            "n_ctx": run["n_ctx"],
            "n_batch": run["n_batch"],
            "n_ubatch": run["n_ubatch"],
            "threads": run["threads"],
            "swa_full": False,
            "blas": blas,
            "system_info": info,
        },
        "allocation_lines": [line for lines in run["allocation_lines"].values() for line in lines],
        "cross_checks": [
            {
                "what": "llama.cpp's cache lines vs calc --runtime llama.cpp, every format",
                "agree": run["cross_check"],
            }
        ],
    }
    if result["answers"]:
        method["answers"] = {
            "max_tokens": result.get("answer_tokens"),
            "decoding": "greedy",
            "template": "the file's tokenizer.chat_template (jinja2, sandboxed)",
            "quantize": quantize,
        }
    sections = {"quality": result["formats"]}
    if result["answers"]:
        sections["answers"] = result["answers"]
    data = {
        "schema": recordings.SCHEMA_VERSION,
        "kind": "measured",
        "title": title or f"llama.cpp's KV cache types: quality — {geometry.name}",
        "label": label
        or f"llama.cpp {LLAMA_CPP_COMMIT} quality, {geometry.name}, {prov['machine']['os']}",
        "runtime": runtime_block(),
        "provenance": prov,
        "model": model_block(geometry, BASELINE),
        "method": method,
        "sections": sections,
    }
    return recordings.validate(data)


def parse_pairs(names: list[str]) -> list[tuple[str, str]]:
    """K/V cache-type pairs: "q8_0" (K and V both, -ctk q8_0 -ctv q8_0) or "q8_0/q4_0" (K, then V), each type
    one llama.cpp's runtime object knows, or one sentence naming the first it does not.

    Example: parse_pairs(["q8_0", "f16/q4_0"]) -> [("q8_0", "q8_0"), ("f16", "q4_0")]."""
    pairs = []
    for name in names:
        k, _, v = name.partition("/")
        k, v = parse_formats([k])[0], parse_formats([v or k])[0]
        pairs.append((k, v))
    return list(dict.fromkeys(pairs))


def pair_name(k: str, v: str) -> str:
    """A K/V pair as the recordings name it: "q4_0" when K and V are one type, else "K/V"."""
    return k if k == v else f"{k}/{v}"


class _Runner:
    """A context fed a stream from its start (kvcore.measure.long_context.Runner)."""

    def __init__(self, model: Model, ctx: _Context):
        self.model, self.ctx = model, ctx

    def feed(self, tokens: list[int]):
        return self.ctx.feed(tokens)

    def answer(self, prompt: list[int], max_tokens: int) -> list[int]:
        held = self.ctx.pos
        logits = self.ctx.feed(prompt, every=False)
        out: list[int] = []
        for _ in range(max_tokens):
            token = int(logits[-1].argmax())
            if self.model.is_end(token):
                break
            out.append(token)
            logits = self.ctx.feed([token], every=False)
        self.ctx.cut(held)
        self.ctx.pos = held
        return out


def run_long_context(
    path: str,
    pairs: list[tuple[str, str]],
    text: str,
    tokens: int,
    chunk: int = 256,
    threads: int = 2,
    answer_tokens: int | None = None,
    sample: str | None = None,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
) -> dict:
    """kvcore.measure.long_context's sweep on llama.cpp's caches of the GGUF at `path`: the f16 baseline and
    each K/V pair over the file's chat opening + `text` with the facts (flash attention on everywhere);
    `sample` names the pair whose logits against the baseline's are kept for a few positions."""
    from kvcore.measure import long_context as lc
    from kvcore.measure import positions

    model = Model(path)
    contexts: dict[str, _Context] = {}
    try:
        head, tail = lc.chat_parts(model.chat_text)
        head_ids = model.tokenize(head, special=True)
        ids = head_ids + model.tokenize(lc.retrieval_text(text))
        if len(ids) < tokens + 1:
            raise KvError(
                f"The text holds {len(ids):,} tokens with the chat opening and the facts; --tokens "
                f"{tokens:,} needs {tokens + 1:,} (or give a longer text)."
            )
        questions = [
            lc.Question(
                f,
                model.tokenize(lc.question_text(f, tail), special=True),
                lc.fact_tokens(lambda t: model.tokenize(t, special=True), head, text, f),
            )
            for f in lc.FACTS
        ]
        answer_tokens = answer_tokens or lc.ANSWER_TOKENS
        n_batch = min(chunk, 2048)
        names = [pair_name(k, v) for k, v in pairs]
        runs = [(f"{BASELINE} (baseline)", BASELINE, BASELINE)]
        runs += [(name, k, v) for name, (k, v) in zip(names, pairs)]
        for name, k, v in runs:
            contexts[name] = _Context(model, k, tokens + 1, n_batch, threads, v)
        lengths = positions.lengths_for(tokens)
        bounds, stops = lc.plan(tokens, chunk, lengths, questions, answer_tokens)
        ticker = Ticker(lc.ticks(len(runs), bounds, stops), progress, should_stop)
        runners = {name: _Runner(model, ctx) for name, ctx in contexts.items()}
        result = lc.sweep(
            runners,
            ids,
            tokens,
            chunk,
            lengths,
            questions,
            model.decode_text,
            answer_tokens,
            sample,
            ticker,
        )
        geometry = gguf.geometry(path)
        result.update(
            baseline=runs[0][0],
            pairs={name: (k, v) for name, k, v in runs},
            tokens=tokens,
            chunk=chunk,
            stream_tokens=len(ids),
            head_tokens=len(head_ids),
            answer_tokens=answer_tokens,
            llama_cpp={
                "n_ctx": tokens + 1,
                "n_batch": n_batch,
                "n_ubatch": min(512, n_batch),
                "threads": threads,
                "allocation_lines": [line for c in contexts.values() for line in c.cache_lines],
                "log": model.log,
            },
            bytes_per_token={
                name: _pair_bytes(geometry, k, v, tokens + 1, n_batch) for name, k, v in runs
            },
        )
        return result
    finally:
        for ctx in contexts.values():
            ctx.close()
        model.close()


def _pair_bytes(geometry, k: str, v: str, n_ctx: int, n_batch: int) -> float:
    """Bytes per token of a K/V pair: half of each type's K+V bytes per token, kvcore's llama.cpp rules."""
    return (
        predicted(geometry, k, n_ctx, n_batch)["bytes_per_token"]
        + predicted(geometry, v, n_ctx, n_batch)["bytes_per_token"]
    ) / 2


def long_context_recording(
    path: str,
    result: dict,
    command: str,
    text_name: str,
    title: str | None = None,
    label: str | None = None,
) -> dict:
    """A long-context sweep as a measured recording (sections long_context and retrieval), with llama.cpp's
    provenance and the method in words."""
    from kvcore.measure import long_context as lc
    from kvcore.measure.recording import section_rows
    from kvcore.memory.formats import get_format

    geometry = gguf.geometry(path)
    run = result["llama_cpp"]
    info, blas = system_blas()
    names = {}
    for name, (k, v) in result["pairs"].items():
        fmt = get_format(k)
        names[name] = {
            "kv_format": k,
            **({"v_format": v} if v != k else {}),
            "label": name,
            **({"bits": fmt.bits, "group_size": fmt.block_values} if fmt.kind == "block" else {}),
        }
    how = lc.method(
        result,
        text_name,
        f"llama.cpp's {BASELINE} KV cache (-ctk {BASELINE} -ctv {BASELINE}), a context of its own",
        "llama.cpp's own cache types, K as type_k and V as type_v (-ctk K -ctv V), stored in them from "
        f"the first token; every context fed the same chunks (one llama_decode each, every position's "
        f"logits); the questions' prompt and answer tokens are dropped from the cache afterwards "
        f"(llama_memory_seq_rm); {FLASH_ATTN_NOTE}",
    )
    how.update(
        tokenizer="llama.cpp's own (llama_tokenize of the file's vocabulary; the chat template's "
        "control tokens parsed)",
        weights=f"the GGUF's own tensors ({weights_types(geometry)}) in llama.cpp's kernels",
        flash_attn="on",
        n_ctx=run["n_ctx"],
        n_batch=run["n_batch"],
        n_ubatch=run["n_ubatch"],
        threads=run["threads"],
        blas=blas,
        system_info=info,
    )
    prov = run_provenance(command, run["log"])
    data = {
        "schema": recordings.SCHEMA_VERSION,
        "kind": "measured",
        "title": title
        or f"{geometry.name}: the quality price by position, to {result['tokens']:,} tokens "
        "(llama.cpp)",
        "label": label
        or f"llama.cpp {LLAMA_CPP_COMMIT} long context, {geometry.name}, {prov['machine']['os']}",
        "runtime": runtime_block(),
        "provenance": prov,
        "model": model_block(geometry, BASELINE),
        "method": {"long_context": how, "allocation_lines": run["allocation_lines"]},
        "sections": {k: section_rows(k, rows) for k, rows in lc.sections(result, names).items()},
    }
    return recordings.validate(data)
