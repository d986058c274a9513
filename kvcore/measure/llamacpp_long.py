"""`kvcore quality --by-position --runtime llama.cpp`: the quality price at long context in llama.cpp's own caches.

kvcore.measure.long_context's sweep over a GGUF in llama-cpp-python: a context per K/V pair (`type_k`, `type_v`: -ctk
and -ctv, apart or alike) beside the f16 baseline's, flash attention on in every one (llama.cpp refuses a quantized
V without it), every position's logits from one llama_decode per chunk (llamacpp_session.BatchContext). After each
question the answer's and the question's positions are removed from the cache (llama_memory_seq_rm) and the pass
goes on. llama_cpp is imported inside functions only.

Example: run_long_context(path, [("q8_0", "q4_0")], text, 8192)["rows"]["q8_0/q4_0"][0]["kl_mean"] -> 0.05
"""

from __future__ import annotations

from kvcore.errors import KvError
from kvcore.inputs import gguf
from kvcore.measure.llamacpp_session import (
    BASELINE,
    FLASH_ATTN_NOTE,
    LLAMA_CPP_COMMIT,
    BatchContext,
    Model,
    model_block,
    parse_formats,
    predicted,
    run_provenance,
    runtime_block,
    system_blas,
    weights_types,
)
from kvcore.measure.progress import Progress, StopCheck, Ticker
from kvcore.recordings import store as recordings


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

    def __init__(self, model: Model, ctx: BatchContext):
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
    contexts: dict[str, BatchContext] = {}
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
            contexts[name] = BatchContext(model, k, tokens + 1, n_batch, threads, v)
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
