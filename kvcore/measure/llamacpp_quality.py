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
from kvcore.measure.llamacpp_session import (  # noqa: F401 (BASELINE, parse_formats: quality's names)
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
from kvcore.measure.quality import add, chunk_sums, finish, first_divergence, log_softmax
from kvcore.recordings import store as recordings

DEFAULT_FORMATS = ("f16", "q8_0", "q4_0")


def score(contexts: dict[str, BatchContext], ids: list[int], chunk: int, ticker: Ticker) -> dict:
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


def greedy(model: Model, ctx: BatchContext, prompt: list[int], max_tokens: int) -> list[int]:
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
    model: Model, contexts: dict[str, BatchContext], question: str, max_tokens: int, ticker
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
    contexts: dict[str, BatchContext] = {}
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
            contexts[name] = BatchContext(model, name.split(":")[-1], n_ctx, n_batch, threads)
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


def _row(ctx: BatchContext, sums: dict, per_token: int) -> dict:
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
