"""`python -m kvcore decode | mechanism`: a model's decode on the real mlx_lm caches.

decode times one step at each context (synthetic fill, warm-up, median of steps, repeats) and can
cross-check it after a real prefill and through mlx_lm's generate_step; mechanism generates N new
tokens with the cache and by recomputing the prefix every step.
"""

from __future__ import annotations

from kvcore.cli.live_args import (
    DEFAULT_CONTEXTS,
    DEFAULT_MODEL,
    MAX_LIVE_CONTEXT,
    MODEL_HELP,
    add_common,
    add_model_args,
    add_token_counts,
    contexts,
    count,
)
from kvcore.cli.run import checked, load_model, print_table, save_sections, with_bar

DECODE_COLUMNS = [  # (key, header, format)
    ("context", "context", ","),
    ("ms_per_token", "ms/token", ".2f"),
    ("tokens_per_s", "tok/s", ".2f"),
    ("min_ms", "min ms", ".2f"),
    ("q1_ms", "q1 ms", ".2f"),
    ("q3_ms", "q3 ms", ".2f"),
    ("max_ms", "max ms", ".2f"),
    ("slowdown", "vs first", ".2f"),
]
MECHANISM_COLUMNS = [
    ("new_tokens", "new tokens", ","),
    ("with_cache_step_ms", "with ms/token", ".1f"),
    ("without_cache_step_ms", "without ms/token", ".1f"),
    ("with_cache_s", "with s so far", ".2f"),
    ("without_cache_s", "without s so far", ".2f"),
]


def _model_line(model, rest: str) -> str:
    from kvcore.measure.machine import backend

    weights = "random weights" if model.weights == "random" else model.weights
    return (
        f"model      {model.name} ({weights}, {model.weights_format}, activations "
        f"{model.dtype}); {rest}; {backend()['backend']}"
    )


def _cmd_decode(a) -> int:
    from kvcore.measure.decode import decode_sweep, generate_step_check, real_prefill_check
    from kvcore.measure.machine import backend
    from kvcore.measure.recording import decode_method, model_info
    from kvcore.measure.timing import SweepOptions

    model = load_model(a)
    kv_format = a.kv_format or model.dtype
    print(_model_line(model, f"KV {kv_format}"))
    options = SweepOptions(a.warmup, a.steps, a.repeats)
    rows = with_bar(decode_sweep, model, a.contexts, kv_format, options)
    base = rows[0]["ms_per_token"]
    for r in rows:
        r["slowdown"] = r["ms_per_token"] / base
    print_table(rows, DECODE_COLUMNS)
    checks = []
    if a.check_prefill:
        checks.append(
            with_bar(real_prefill_check, model, a.check_prefill, kv_format, a.warmup, a.steps)
        )
    if a.check_generate:
        checks.append(
            with_bar(generate_step_check, model, a.check_generate, kv_format, a.warmup, a.steps)
        )
    for c in checks:
        print(
            "check      "
            + ", ".join(
                f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in c.items()
            )
        )
    method = {
        "decode": decode_method(a.warmup, a.steps, a.repeats, kv_format),
        "backend": backend(),
    }
    if checks:
        method["cross_checks"] = [
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in c.items()} for c in checks
        ]
    save_sections(a, {"decode": rows}, model_info(model, None, kv_format), method)
    return 0


def _cmd_mechanism(a) -> int:
    from kvcore.measure.decode import mechanism_probe
    from kvcore.measure.machine import backend
    from kvcore.measure.recording import model_info

    model = load_model(a)
    print(_model_line(model, f"prompt {a.prompt_tokens:,} tokens"))
    text = None
    if model.tokenizer is not None:  # a real model continues real text
        from kvcore.measure.real_model import sample_ids

        text = sample_ids(model.tokenizer, a.prompt_tokens)
    rows = with_bar(mechanism_probe, model, a.new_tokens, a.prompt_tokens, prompt_ids=text)
    shown = [
        r
        for r in rows
        if r["new_tokens"] in (1, 2, a.new_tokens)
        or r["new_tokens"] % max(1, a.new_tokens // 8) == 0
    ]
    print(
        "columns    ms/token: the time of that one new token (per token); "
        "s so far: all new tokens up to it"
    )
    print_table(shown, MECHANISM_COLUMNS)
    last = rows[-1]
    print(
        f"total      {a.new_tokens} new tokens: {last['with_cache_s']:.2f} s with the cache, "
        f"{last['without_cache_s']:.2f} s without "
        f"({last['without_cache_s'] / last['with_cache_s']:.2f}x)"
    )
    method = {
        "mechanism": {
            "prompt_tokens": a.prompt_tokens,
            "new_tokens": a.new_tokens,
            "without_cache": "full forward over prompt + generated tokens every step",
        },
        "backend": backend(),
    }
    save_sections(a, {"mechanism": rows}, model_info(model, None, model.dtype), method)
    return 0


def add(sub) -> None:
    p = sub.add_parser(
        "decode", help="decode ms/token vs context (synthetic fill, warm-up, median, repeats)"
    )
    add_common(p, DEFAULT_MODEL, MODEL_HELP)
    add_model_args(p)
    p.add_argument("--contexts", type=contexts, default=contexts(DEFAULT_CONTEXTS))
    p.add_argument(
        "--check-prefill",
        type=count("--check-prefill", 1, MAX_LIVE_CONTEXT),
        metavar="CONTEXT",
        help="also time decode after a real prefill at this context",
    )
    p.add_argument(
        "--check-generate",
        type=count("--check-generate", 1, MAX_LIVE_CONTEXT),
        metavar="CONTEXT",
        help="also time mlx_lm's generate_step at this context",
    )
    p.set_defaults(run=checked(_cmd_decode))

    p = sub.add_parser(
        "mechanism", help="N new tokens with the cache vs recomputing the prefix every step"
    )
    add_common(p, DEFAULT_MODEL, MODEL_HELP)
    add_model_args(p, decode=False)
    add_token_counts(p)
    p.set_defaults(run=checked(_cmd_mechanism))
