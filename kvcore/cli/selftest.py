"""The engine checked against the source articles' figures (no mlx needed).

Each check: (what the site claims, computed by the engine from the presets, the published value).
Sources: Article A (Llama-3.2-1B on mlx_lm, M5 Pro), Article B (KV calculator, Llama 3.1 8B),
mlx_lm's QuantizedKVCache (quantized cache layout, https://github.com/ml-explore/mlx-lm/blob/v0.32.2/mlx_lm/models/cache.py).
"""

from __future__ import annotations

from kvcore.inputs.presets import preset_geometry
from kvcore.memory.allocsim import nbytes, simulate
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import bytes_per_token, kv_bytes, kv_bytes_per_token
from kvcore.model.geometry import Layer
from kvcore.timing.decode_model import slowdown
from kvcore.units import GIB, KIB, MIB


def _geometry(name: str):
    return preset_geometry(name)


def run_checks() -> list[tuple[str, bool, str]]:
    """[(label, ok, detail)] for every published figure the engine must reproduce."""
    checks: list[tuple[str, bool, str]] = []

    def check(label: str, got, want, tol: float = 0.0) -> None:
        ok = abs(got - want) <= tol if tol else got == want
        checks.append((label, ok, f"got {got:g}, published {want:g}"))

    llama1b = _geometry("llama-3.2-1b")
    layer = llama1b.layers[0]
    row = layer.k_dim * 2  # fp16 bytes per head row
    check("Llama-3.2-1B fp16 KV per token = 32 KiB (A)", kv_bytes_per_token(llama1b) / KIB, 32)
    check("Llama-3.2-1B 32,768 tokens = 1 GiB (A)", kv_bytes(llama1b, 32768) / GIB, 1)
    n = llama1b.num_layers
    for tokens, want in ((256, 8.0), (257, 16.0)):
        cap = simulate("KVCache", [1] * tokens).capacity
        check(
            f".nbytes at {tokens} tokens = {want} MiB allocated (A)",
            n * nbytes(cap, row, row, layer.kv_heads) / MIB,
            want,
        )
    check("used at 257 tokens = 8.031 MiB (A)", round(kv_bytes(llama1b, 257) / MIB, 3), 8.031)
    check(
        "GQA: 8 KV heads of 32 = 1/4 of MHA (A)", layer.kv_heads / llama1b.num_attention_heads, 0.25
    )
    llama8b = _geometry("llama-3.1-8b")
    check("Llama-3.1-8B fp16 at 131,072 tokens = 16 GiB (B)", kv_bytes(llama8b, 131072) / GIB, 16)
    check(
        "Qwen3-4B head_dim = 128, not 2560/32 (config)", _geometry("qwen3-4b").layers[0].k_dim, 128
    )
    probe = Layer(0, "full", 8, 64, 64)
    check(
        "mlx-q8 group 64 = 1088 B/token/layer (mlx_lm)",
        bytes_per_token(probe, KvSpec("mlx-q8", "mlx-q8")),
        1088,
    )
    check(
        "mlx-q4 group 64 = 576 B/token/layer (mlx_lm)",
        bytes_per_token(probe, KvSpec("mlx-q4", "mlx-q4")),
        576,
    )
    mla = _geometry("deepseek-v3").layers[0]
    check(
        "DeepSeek-V3 caches 512 + 64 values per token per layer (MLA)", mla.k_dim + mla.v_dim, 576
    )
    check(
        "292 -> 119 tok/s: predicted slowdown 1K -> 32K = 2.43 (A)",
        round(slowdown(llama1b, 1024, 32768), 2),
        2.43,
    )
    return checks
