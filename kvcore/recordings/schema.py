"""What a recording may hold: the schema below and ROW_FIELDS (what a row of each section holds);
kvcore.recordings.check.validate() refuses anything else in one sentence (RecordingError, with its code).

Schema (version 1):
    schema: 1
    kind: measured | published
    title: str
    label: str                  # how the UI names it, e.g. "CPU demonstration (Linux) — not Apple Silicon"
    short_label: str            # optional: a name short enough for a phone's legend, e.g. "M3 Max · Llama-3.3-70B · mlx-lm"
    citation: {source: str, url: str, note: str}           # published only (url/note optional)
        # optional for published runs: author, date, grade (A, A-, B, C), command (quoted verbatim),
        # settings (what the source states besides the command), context_rule (how `context` is read)
    runtime: {name: str, version: str}                     # published only, optional: the engine that ran
    hardware: {chip, vendor, backend, memory_gb, chip_stated: bool, chip_note}   # published only, optional
    provenance: {machine: {os, chip, memory_gb}, backend, device,
                 versions: {python, mlx, mlx_lm, kvcore}, date, command}   # measured only
    model: {name: str, source: str, weights_format: str, kv_format: str, ...}
        # optional: quantization (as the source names it), preset_note, hybrid / unusual (bool) with
        # architecture_note: a model whose KV is not plain attention over every layer
    method: {...}               # fill, warmup, steps, repeats, ... (free-form mapping)
    sections:                   # at least one; each a list of rows: ROW_FIELDS below is the one statement of
                                # what a row holds (schema_rows() writes it out; validation reads it too)
"""

from __future__ import annotations

from kvcore.errors import KvError

SCHEMA_VERSION = 1
MAX_NUMBER = 1e15
TOP_LEVEL = (
    "schema",
    "kind",
    "title",
    "label",
    "short_label",
    "citation",
    "runtime",
    "hardware",
    "provenance",
    "model",
    "method",
    "sections",
)  # the schema's top-level keys (above); any other is refused

# What a row of each section holds: required numbers, optional numbers, texts (required ones listed again under
# required_texts) and lists of numbers. The validation below and kvcore.measure.suite read it; schema_rows() writes it.
ROW_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "decode": {
        "required": ("context", "tokens_per_s"),
        "numbers": (
            "ms_per_token",
            "spread_ms",
            "repeats",
            "min_ms",
            "max_ms",
            "q1_ms",
            "q3_ms",
            "depth",
            "prompt_tokens",
            "generation_tokens",
            "tokens_per_s_min",
            "tokens_per_s_max",
        ),
        "texts": ("kv_format",),
        "lists": ("pass_ms",),
    },  # pass_ms: ms per pass, in pass order (the spread)
    "trap": {
        "required": ("tokens", "allocated_mib", "used_mib", "theory_mib"),
        "numbers": ("capacity",),
        "texts": ("cache", "pattern"),
    },
    "growth": {
        "required": ("context", "allocated_mib", "used_mib", "theory_mib"),
        "numbers": ("active_mib", "peak_mib"),
    },
    "mechanism": {
        "required": ("new_tokens", "with_cache_s", "without_cache_s"),
        "numbers": ("with_cache_step_ms", "without_cache_step_ms"),
        "texts": ("token", "prompt"),
    },  # a real model's run: token, the new token's text; prompt (first row): the text it continued
    # a real model's next-token log-probabilities through a KV format vs the unquantized cache (kvcore.measure.quality);
    # tokens: positions scored; rows of one format at several token counts show the price against context
    "quality": {
        "required": ("tokens", "perplexity", "kl_vs_baseline", "top1_agreement"),
        "numbers": (
            "bits",
            "group_size",
            "quantized_kv_start",
            "bytes_per_token",
            "seconds",
            "first_divergence",
        ),
        "texts": ("kv_format", "label"),
        "required_texts": ("kv_format",),
    },
    # quality by position at long context (kvcore.measure.positions): over positions [start, end) of one pass,
    # scope "prefix" (the first `end` positions: the figures at that context length) or "window" (the last
    # positions before `end`: the price of a token that deep); kl_p99: the 99th percentile of per-position KL;
    # a llama.cpp cache with V stored apart from K names its v_format
    "long_context": {
        "required": ("start", "end", "tokens", "kl_mean", "kl_p99", "top1_agreement", "perplexity"),
        "numbers": ("bits", "group_size", "bytes_per_token"),
        "texts": ("kv_format", "v_format", "label", "scope"),
        "required_texts": ("kv_format", "scope"),
    },
    # a fact placed early in a long text, asked at the end within `context` tokens (prompt_tokens of text and
    # question, then the answer): correct is 1 when the answer names `expected`
    "retrieval": {
        "required": ("context", "prompt_tokens", "correct"),
        "numbers": ("text_tokens", "fact_token", "answer_tokens", "bits", "group_size"),
        "texts": ("kv_format", "v_format", "label", "question", "expected", "answer"),
        "required_texts": ("kv_format", "question", "expected", "answer"),
    },
    # the same chat prompt answered greedily through each cache; first_divergence: the first token that differs;
    # margin: how many nats the baseline preferred its own token there
    "answers": {
        "required": ("tokens",),
        "numbers": ("first_divergence", "margin"),
        "texts": ("kv_format", "label", "prompt", "answer", "agreed_text"),
        "required_texts": ("kv_format", "prompt", "answer"),
    },
    # a real server driven over HTTP through a scripted conversation (scripts/record_servers.py), one row a request:
    # conversation names the run (its server options in `options`), messages the request's messages as JSON, reply
    # the text it returned; cached_tokens the server's own count (usage), log the lines it printed for the request
    # (newline-separated, each line's time prefix left out); rss_mib / peak_rss_mib the process's VmRSS / VmHWM
    # after the response; llama-server's rows add its response's timings.cache_n / prompt_n and `slots`, /slots
    # after the response as JSON (each slot's id, n_ctx and the tokens it holds), and prompt_ids / reply_ids, the
    # token ids of the prompt as the server tokenized it and of the reply as sampled (space-separated)
    "server": {
        "required": ("request", "prompt_tokens", "cached_tokens", "completion_tokens"),
        "numbers": ("rss_mib", "peak_rss_mib", "cache_n", "prompt_n"),
        "texts": (
            "conversation",
            "server",
            "options",
            "user",
            "messages",
            "reply",
            "log",
            "slots",
            "prompt_ids",
            "reply_ids",
        ),
        "required_texts": ("conversation", "server", "user", "log"),
    },
    "benchmark": {
        "required": ("tokens_per_s",),
        "numbers": ("peak_memory_gb", "prompt_tokens", "generation_tokens"),
        "texts": ("name",),
        "required_texts": ("name",),
    },
    # prompt processing: tokens_per_s = prompt_tokens / prefill time (of all `batch` sequences, when given); a
    # llama-bench pp/tg pair keeps its tg beside it (tg_tokens_per_s, over generation_tokens at the same depth)
    "prefill": {
        "required": ("prompt_tokens", "tokens_per_s"),
        "numbers": (
            "depth",
            "batch",
            "prefill_s",
            "repeats",
            "min_s",
            "max_s",
            "q1_s",
            "q3_s",
            "spread_s",
            "tg_tokens_per_s",
            "generation_tokens",
            "peak_memory_gb",
        ),
        "texts": ("series",),
        "lists": ("pass_s",),
    },  # series: which model, when one source has several
    # batched decode: `batch` sequences at `context` tokens each; tokens_per_s_total counts every sequence's tokens,
    # tokens_per_s (when given) is one sequence's
    "batch": {
        "required": ("batch", "context", "tokens_per_s_total"),
        "numbers": (
            "tokens_per_s",
            "ms_per_step",
            "repeats",
            "min_ms",
            "max_ms",
            "q1_ms",
            "q3_ms",
            "spread_ms",
            "prompt_tokens",
            "generation_tokens",
            "peak_memory_gb",
        ),
        "texts": ("series",),
        "lists": ("pass_ms",),
    },
    # a published memory figure as its source prints it: `value` in `unit` (MEMORY_UNITS) for one `part` the runtime
    # holds (MEMORY_PARTS: mlx_lm's "Peak memory", a llama.cpp buffer line's KV, model, compute or output buffer) at
    # `context` tokens; `line`: the source's line, verbatim; kvcore.views.published_memory compares it with kvcore
    "memory": {
        "required": ("context", "value"),
        "numbers": ("prompt_tokens", "sequences", "prefill_step_size"),
        "texts": ("part", "unit", "line", "series", "kv_format"),
        "required_texts": ("part", "unit"),
    },
    # mlx_lm's peak, measured: mx.get_peak_memory() around mlx_lm's own generate_step (kvcore.measure.peaks) for a
    # prompt of prompt_tokens fed in chunks of prefill_step, then `generated` tokens; peak_mib above the weights (the
    # median of the repeats, each in peak_runs_mib); the caches at the end as allocated (.nbytes) and used. Only what
    # was measured: kvcore's plan for the same run (kvcore.runtimes.mlx_lm_plan) is computed when it is shown
    "peak": {
        "required": ("prompt_tokens", "generated", "prefill_step", "peak_mib"),
        "numbers": ("allocated_mib", "used_mib", "quantized_kv_start", "repeats"),
        "texts": ("kv_format",),
        "required_texts": ("kv_format",),
        "lists": ("peak_runs_mib",),
    },
}
# what a memory row's part and unit may be (a runtime's own words for its buffers; decimal or binary units, as printed)
MEMORY_PARTS = ("peak", "kv", "weights", "compute", "output")
MEMORY_UNITS = {"GB": 10**9, "MB": 10**6, "GiB": 2**30, "MiB": 2**20}
# Counts that must be whole and at least 1 (a batch of 0.5 sequences or a prompt of 0 tokens is not a run)
COUNTS = {
    "prefill": ("prompt_tokens", "batch"),
    "batch": ("batch",),
    "memory": ("context", "sequences"),
    "peak": ("prompt_tokens", "prefill_step", "repeats"),
    "long_context": ("end", "tokens"),
    "retrieval": ("context", "prompt_tokens"),
    "server": ("request", "prompt_tokens", "completion_tokens"),
}
WHOLE = {  # whole numbers that may be 0
    "peak": ("generated", "quantized_kv_start"),
    "long_context": ("start",),
    "retrieval": ("correct", "text_tokens", "fact_token", "answer_tokens"),
    "server": ("cached_tokens",),
}
SCOPES = ("prefix", "window")  # a long_context row's scope
SECTIONS = {name: (f["required"], f.get("numbers", ())) for name, f in ROW_FIELDS.items()}
TEXT_FIELDS = {name: f.get("texts", ()) for name, f in ROW_FIELDS.items()}
REQUIRED_TEXT = {
    name: f["required_texts"] for name, f in ROW_FIELDS.items() if "required_texts" in f
}
LIST_FIELDS = {name: f["lists"] for name, f in ROW_FIELDS.items() if "lists" in f}
GRADES = (
    "A",
    "A-",
    "B",
    "C",
)  # A: model, quantization, chip, runtime and depths all stated; C: unusual or 2 points
CITATION_TEXT = ("url", "note", "author", "date", "command", "settings", "context_rule")
# A run cited by its URL is one a reader can check: its page is on a public host anyone can open without an
# account (every bundled source is a GitHub thread or file), and it states who, when, how good (grade), the
# settings besides the command and how its depths became `context`; its runtime (name, version) and chip
# (hardware.chip, chip_stated); a decode series also quotes its command and the model's quantization.
PUBLIC_HOSTS = ("github.com",)
CITED = ("author", "date", "grade", "settings", "context_rule")
CITED_SERIES = ("command",)  # citation fields a cited decode series states besides CITED
CHIP_NOT_STATED = "not stated"  # hardware.chip when the source does not name it (never guessed)
MAX_LIST = 10_000


def schema_rows() -> str:
    """ROW_FIELDS written out, one line per section: required fields, then [optional ones], texts in quotes.

    Example: schema_rows().splitlines()[0] -> 'decode: context, tokens_per_s [, ms_per_token, ..., "kv_format", pass_ms[]]'.
    """
    lines = []
    for name, f in ROW_FIELDS.items():
        required = [*f["required"], *(f'"{t}"' for t in f.get("required_texts", ()))]
        optional = [
            *f.get("numbers", ()),
            *(f'"{t}"' for t in f.get("texts", ()) if t not in f.get("required_texts", ())),
            *(f"{t}[]" for t in f.get("lists", ())),
        ]
        lines.append(
            f"{name}: {', '.join(required)}" + (f" [, {', '.join(optional)}]" if optional else "")
        )
    return "\n".join(lines)


def known_fields(section: str) -> set[str]:
    """Every field a row of `section` may carry (numbers, texts and lists of numbers).

    Example: "pass_ms" in known_fields("decode") -> True.
    """
    required, optional = SECTIONS[section]
    return (
        set(required)
        | set(optional)
        | set(TEXT_FIELDS[section])
        | set(LIST_FIELDS.get(section, ()))
    )


class RecordingError(KvError):
    """A recording that cannot be used; str() is one sentence naming the file and the problem.

    A reader's upload can cause every one of them, so each carries a code (errors.CODES, `rec_*`) and the
    values it quotes, with `label` (the file's name) among them: the site says it in the reader's language.
    """
