"""The layers of a model: which attention each decoder layer uses and what it caches, by its family's rules.

Every model_type is one entry in kvcore.model.families.FAMILIES (data, not branches): its window rule per runtime,
its defaults, older field spellings and parameter layout. The layer rules follow mlx_lm's model files
(`mlx_lm/models/<model_type>.py`, mlx-lm 0.32.2) under the runtime `mlx_lm`, llama.cpp's model code
(`src/llama-model.cpp`, see kvcore.runtimes.llamacpp_cache) under `llama.cpp`, and the architecture as its config
defines it (transformers / vLLM) under `reference`; they differ only in which attention windows a runtime applies.
A runtime is named here by its window key and its note for an ignored window (kvcore.runtimes.registry: `windows`,
`ignored_window_note`), so this module knows no runtime.

Example: layers_of(cfg, family, "mlx_lm", "sliding_ignored")[0][0] ->
    Layer(index=0, kind="full", kv_heads=8, k_dim=64, v_dim=64)
"""

from __future__ import annotations

from kvcore.errors import KvError
from kvcore.model.config import Cfg
from kvcore.model.families import Family
from kvcore.model.geometry import Layer
from kvcore.model.params import check_layouts

_NOTE_TEXT = {
    "sliding_ignored": "mlx_lm ignores sliding_window={window} here and caches the full context",
    "sliding_ignored_llamacpp": "llama.cpp ignores sliding_window={window} for this architecture and caches the full context",
    "sliding_disabled": "llama.cpp disables Phi-3's sliding_window={window} and caches the full context",
    "sliding_every_layer": "every layer keeps a {window}-token window (as transformers and vLLM run it)",
}


def window_note(code: str, window: int) -> tuple[str, int, str]:
    return code, window, _NOTE_TEXT[code].format(window=window)


# Window rules by name (a family's `windows`, kvcore.model.families): layer count and the config -> (sliding flags, notes),
# or None when the rule does not apply to this config and the next rule named after "|" is tried.
def _rule_layer_types(cfg: Cfg, n: int, ignored_note: str):
    layer_types = cfg.get("layer_types")  # the config's list when present
    return ([t == "sliding_attention" for t in layer_types], []) if layer_types else None


def _rule_pattern(
    cfg: Cfg, n: int, ignored_note: str
):  # every sliding_window_pattern-th layer full (Gemma 3)
    pattern = cfg.int("sliding_window_pattern")
    return [i % pattern != pattern - 1 for i in range(n)], []


def _rule_every_layer(cfg: Cfg, n: int, ignored_note: str):  # Mistral v0.1, Phi-3 in transformers
    if cfg.get("sliding_window"):
        return [True] * n, [window_note("sliding_every_layer", cfg.int("sliding_window"))]
    return None


def _rule_full(
    code: str | None,
):  # the window is set, but this runtime caches the full context; a note says so
    def rule(cfg: Cfg, n: int, ignored_note: str):
        if cfg.get("sliding_window"):
            return [False] * n, [window_note(code or ignored_note, cfg.int("sliding_window"))]
        return None

    return rule


def _rule_max_window(
    cfg: Cfg, n: int, ignored_note: str
):  # Qwen2/3 in transformers, when use_sliding_window
    if cfg.bool("use_sliding_window", False):
        start = cfg.int("max_window_layers", 0, minimum=0)
        return [i >= start for i in range(n)], []
    return None


WINDOW_RULES = {
    "none": lambda cfg, n, ignored_note: ([False] * n, []),  # every layer full
    "layer_types": _rule_layer_types,
    "pattern": _rule_pattern,
    "alternate": lambda cfg, n, ignored_note: (
        [i % 2 == 0 for i in range(n)],
        [],
    ),  # even layers slide (gpt-oss, Gemma 2)
    "every_layer": _rule_every_layer,
    "ignored": _rule_full(None),  # the runtime's own note (mlx_lm, llama.cpp)
    "disabled": _rule_full("sliding_disabled"),  # llama.cpp turns Phi-3's window off
    "max_window": _rule_max_window,
}
ATTENTION_KINDS = (
    "gqa",
    "mla",
    "hybrid_linear",
)  # a family's `attention`: how its layers are read (layers_of)


def check_family(family: Family) -> None:
    """Refuse a family whose attention kind, window rule or layout code kvcore does not know, naming it."""
    if family.attention not in ATTENTION_KINDS:
        raise KvError(
            f"Model family {family.model_type!r} has the attention kind {family.attention!r}; known: "
            f"{', '.join(ATTENTION_KINDS)}."
        )
    for key, rules in family.windows.items():
        for rule in rules.split("|"):
            if rule not in WINDOW_RULES:
                raise KvError(
                    f"Model family {family.model_type!r} names the window rule {rule!r} for {key}; known: "
                    f"{', '.join(WINDOW_RULES)}."
                )
    check_layouts(family)


# The config flags any family reads (kvcore.model.params, the window rules): each must be JSON true or false when given
BOOL_FIELDS = ("use_sliding_window", "tie_word_embeddings", "attention_bias", "mlp_bias", "no_bias")


def check_kv_heads(label: str, heads_key: str, heads: int, kv_key: str, kv_heads: int) -> None:
    """Refuse KV heads that contradict the heads (0, or more KV heads than query heads): one check for a config.json
    and a GGUF file alike. Example: check_kv_heads("m.gguf", "head_count", 4, "head_count_kv", 64) -> KvError."""
    if not 1 <= kv_heads <= heads:
        raise KvError(
            f"{label}: {kv_key} = {kv_heads:,} must be from 1 to {heads_key} ({heads:,}); a model has at least one "
            "KV head and no more KV heads than query heads.",
            "kv_heads",
            label=label,
            heads_key=heads_key,
            heads=heads,
            kv_key=kv_key,
            kv_heads=kv_heads,
        )


def _sliding_flags(
    cfg: Cfg, family: Family, n_layers: int, windows: str, ignored_note: str
) -> tuple[list[bool], list[tuple[str, int, str]]]:
    """Which layers keep a sliding window under a runtime's `windows` key, by the family's window rules (WINDOW_RULES, tried in
    order); notes are (code, window, text)."""
    layer_types = cfg.get("layer_types")
    if layer_types is not None and (
        not isinstance(layer_types, list)
        or len(layer_types) != n_layers
        or not all(isinstance(t, str) for t in layer_types)
    ):
        raise KvError(
            f"config.json field 'layer_types' must list {n_layers} layer types.",
            "config_layer_types",
            n=n_layers,
        )
    for rule in family.windows.get(windows, "none").split("|"):
        found = WINDOW_RULES[rule](cfg, n_layers, ignored_note)
        if found is not None:
            return found
    return [False] * n_layers, []


def layers_of(
    cfg: Cfg, family: Family, windows: str, ignored_note: str
) -> tuple[list[Layer], list[tuple[str, int, str]]]:
    n_layers = cfg.int("num_hidden_layers")
    n_heads = cfg.int("num_attention_heads")
    hidden = cfg.int("hidden_size")
    if family.attention == "mla":  # one latent (kv_lora_rank) + one shared rope key per token
        latent, rope = cfg.int("kv_lora_rank"), cfg.int("qk_rope_head_dim")
        return [Layer(i, "mla", 1, latent, rope) for i in range(n_layers)], []
    kv_heads = cfg.int(
        "num_key_value_heads", n_heads
    )  # absent -> full multi-head attention (Llama 1/2, Qwen v1)
    if cfg.has(family.head_dim_field):
        head_dim = cfg.int(family.head_dim_field)
    else:
        if hidden % n_heads:
            raise KvError(
                "config.json has no 'head_dim' and hidden_size is not divisible by num_attention_heads.",
                "config_head_dim",
            )
        head_dim = hidden // n_heads
    check_kv_heads("config.json", "num_attention_heads", n_heads, "num_key_value_heads", kv_heads)
    if n_heads % kv_heads:
        raise KvError(
            f"config.json: num_attention_heads ({n_heads}) must be a multiple of num_key_value_heads ({kv_heads}).",
            "config_heads",
            heads=n_heads,
            kv_heads=kv_heads,
        )
    if (
        family.attention == "hybrid_linear"
    ):  # Qwen3-Next: gated delta net layers, full attention every interval-th
        interval = cfg.int("full_attention_interval", 4)
        nk, nv = cfg.int("linear_num_key_heads"), cfg.int("linear_num_value_heads")
        dk, dv = cfg.int("linear_key_head_dim"), cfg.int("linear_value_head_dim")
        conv_dim = 2 * nk * dk + nv * dv
        conv = (cfg.int("linear_conv_kernel_dim") - 1) * conv_dim
        layers = [
            Layer(i, "full", kv_heads, head_dim, head_dim)
            if (i + 1) % interval == 0
            else Layer(i, "linear", conv_values=conv, state_values=nv * dv * dk)
            for i in range(n_layers)
        ]
        return layers, []
    sliding, notes = _sliding_flags(cfg, family, n_layers, windows, ignored_note)
    window = cfg.int("sliding_window") if any(sliding) else None
    layers = [
        Layer(i, "sliding", kv_heads, head_dim, head_dim, window)
        if s
        else Layer(i, "full", kv_heads, head_dim, head_dim)
        for i, s in enumerate(sliding)
    ]
    return layers, notes
