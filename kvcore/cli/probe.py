"""`python -m kvcore probe | kv`: the real mlx_lm cache classes without weights (seconds).

probe drives one layer's caches token by token and in chunks (the .nbytes trap: allocated against
used); kv fills a model's caches to each context and reads allocated, used, theory and the
allocator's active and peak memory.
"""

from __future__ import annotations

from kvcore.cli.live_args import (
    DEFAULT_KV_CONTEXTS,
    DEFAULT_MODEL,
    GEOMETRY_HELP,
    add_common,
    contexts,
    count,
    kv_format,
)
from kvcore.cli.run import checked, show_and_save, with_bar

PROBE_COLUMNS = [  # (key, header, format)
    ("cache", "cache", "<16"),
    ("pattern", "updates", "<16"),
    ("tokens", "offset", ","),
    ("capacity", "capacity", ","),
    ("nbytes", "nbytes/layer", ","),
    ("used_bytes", "used/layer", ","),
    ("allocated_mib", "alloc MiB", ".3f"),
    ("used_mib", "used MiB", ".3f"),
    ("theory_mib", "theory MiB", ".3f"),
]
KV_COLUMNS = [
    ("context", "context", ","),
    ("allocated_mib", "alloc MiB", ".3f"),
    ("used_mib", "used MiB", ".3f"),
    ("theory_mib", "theory MiB", ".3f"),
    ("active_mib", "active MiB", ".1f"),
    ("peak_mib", "peak MiB", ".1f"),
]
SHOWN_STEPS = (1, 255, 256, 257, 512, 513, 1024, 1025)  # token-by-token rows probe prints


def _cmd_probe(a) -> int:
    from kvcore.measure.probes import cache_classes, resolve_geometry, trap_probe
    from kvcore.measure.recording import model_info, trap_method

    geometry = resolve_geometry(a.model)
    layer = next((layer for layer in geometry.layers if layer.kind == "full"), None)
    kinds = ", ".join(
        f"{geometry.count(k)} {k}"
        for k in ("full", "sliding", "mla", "linear")
        if geometry.count(k)
    )
    print(
        f"model      {geometry.name}: {kinds} layers; {layer.kv_heads if layer else '-'} KV heads "
        f"x head_dim {layer.k_dim if layer else '-'}; the trap drives one layer, totals x "
        f"{geometry.count('full')} layers"
    )
    classes: dict[str, int] = {}
    for row in cache_classes(a.model):
        label = row["cache"] + (f"(max_size={row['max_size']})" if row["max_size"] else "")
        classes[label] = classes.get(label, 0) + 1
    print("caches     make_prompt_cache: " + ", ".join(f"{n} x {c}" for c, n in classes.items()))
    rows = with_bar(trap_probe, geometry, dtype=a.kv_format, tokens=a.tokens, kv_bits=a.kv_bits)
    shown = [r for r in rows if r["pattern"] != "token by token" or r["tokens"] in SHOWN_STEPS]
    print()
    method = trap_method(a.tokens, a.kv_format, a.kv_bits, geometry.count("full"))
    model = model_info(None, geometry, a.kv_format)
    show_and_save(a, "trap", rows, PROBE_COLUMNS, model, method, shown=shown)
    return 0


def _cmd_kv(a) -> int:
    from kvcore.measure.probes import growth_probe, resolve_geometry
    from kvcore.measure.recording import growth_method, model_info

    geometry = resolve_geometry(a.model)
    rows = with_bar(
        growth_probe, geometry, a.contexts, kv_format=a.kv_format, dtype=a.activation_dtype
    )
    method = growth_method(a.kv_format)
    show_and_save(a, "growth", rows, KV_COLUMNS, model_info(None, geometry, a.kv_format), method)
    return 0


def add(sub) -> None:
    p = sub.add_parser(
        "probe", help="the .nbytes trap on the real mlx_lm cache classes (no weights, seconds)"
    )
    add_common(p, DEFAULT_MODEL, GEOMETRY_HELP)
    p.add_argument(
        "--kv-format",
        default="fp16",
        choices=["fp16", "bf16", "fp32"],
        help="dtype of the K/V tensors",
    )
    p.add_argument("--kv-bits", type=int, default=8, choices=[4, 8], help="QuantizedKVCache bits")
    p.add_argument(
        "--tokens", type=count("tokens", 1, 100_000), default=1025, help="token-by-token steps"
    )
    p.set_defaults(run=checked(_cmd_probe))

    p = sub.add_parser(
        "kv", help="KV memory vs context on real caches: allocated, used, theory, allocator, peak"
    )
    add_common(p, DEFAULT_MODEL, GEOMETRY_HELP)
    p.add_argument("--contexts", type=contexts, default=contexts(DEFAULT_KV_CONTEXTS))
    p.add_argument("--kv-format", type=kv_format, default="fp16")
    p.add_argument(
        "--activation-dtype",
        default="fp16",
        choices=["fp16", "bf16", "fp32"],
        help="dtype of the K/V tensors (and of quantized scales)",
    )
    p.set_defaults(run=checked(_cmd_kv))
