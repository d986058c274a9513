"""What tests and benchmarks hand the engine: a preset's config with fields changed, the command line run as a
reader runs it, and the most memory a call allocates.

Example: preset_config("llama-3.2-1b", num_hidden_layers=1024)["num_hidden_layers"] -> 1024
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

from kvcore.errors import KvError
from kvcore.inputs.preset_files import load_preset

ROOT = Path(__file__).resolve().parent.parent


# A model inside every field's limit whose sums are inside no machine (1,024 layers of 10^9-wide heads): a
# calculator must refuse its totals, not overflow a 64-bit table
PAST_ANY_MACHINE = dict(
    num_hidden_layers=1024,
    hidden_size=10**9,
    intermediate_size=10**9,
    vocab_size=10**9,
    num_attention_heads=1,
    num_key_value_heads=1,
    head_dim=10**9,
)


def preset_config(name: str, **fields) -> dict:
    """A bundled preset's config.json (a copy) with `fields` set over it."""
    return {**json.loads(json.dumps(load_preset(name)["config"])), **fields}


def run_kvcore(
    *args: str, cwd: Path = ROOT, env: dict | None = None
) -> subprocess.CompletedProcess:
    """`python -m kvcore ARGS` in a process of its own, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "kvcore", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def peak_bytes(call) -> int:
    """The most memory Python allocated while `call` ran (its result or its KvError)."""
    tracemalloc.start()
    try:
        try:
            call()
        except KvError:
            pass
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# a key-value of junk a hostile GGUF header repeats, each ~4 to 50 kB: (GGUF element type, count, the elements)
GGUF_JUNK = {
    # 4,096 i8 values of -128, outside CPython's small-int cache: 40 bytes each as a Python list
    "i8 arrays": (1, 4096, b"\x80" * 4096),
    "empty-string arrays": (8, 4096, bytes(8 * 4096)),  # 4,096 strings of length 0
    "arrays of empty arrays": (9, 4096, struct.pack("<IQ", 1, 0) * 4096),  # gguf.cpp refuses these
}


def gguf_with_junk(gguf: bytes, kind: str, junk_bytes: int) -> tuple[bytes, int]:
    """A GGUF (a whole file's bytes, or its header as a browser sends it) with about `junk_bytes` of junk keys of
    GGUF_JUNK[kind] put first, padded to a multiple of 32 bytes (the default alignment: the data section and every
    tensor offset move together). Returns (the new bytes, how many bytes were inserted).

    Example: gguf_with_junk(header, "i8 arrays", 16_000_000) -> 3,866 arrays of 4,096 i8 values, 16 MB more.
    """
    item, count, body = GGUF_JUNK[kind]
    entries = []
    for i in range(max(1, junk_bytes // (len(body) + 42))):
        key = f"junk.{i:06d}".encode()
        entries.append(
            struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, item, count) + body
        )
    size = sum(map(len, entries))
    pad = (-size) % 32  # one more key: a u8 array of `pad` bytes, 32 + pad bytes in all
    entries.append(struct.pack("<Q", 8) + b"junk.pad" + struct.pack("<IIQ", 9, 0, pad) + bytes(pad))
    n_kv = struct.unpack_from("<Q", gguf, 16)[0] + len(entries)
    junk = b"".join(entries)
    return gguf[:16] + struct.pack("<Q", n_kv) + junk + gguf[24:], len(junk)


def memory_upload(figures: int, value: float = 12.257, layers: int = 1024) -> dict:
    """A published recording as a reader could upload it: the bundled mlx-lm #40 peak run (an M2 Ultra's mlx_lm
    peak) with its model as a config of `layers` layers and `figures` peak rows at 10^8 tokens down, each one a
    memory plan when shown (issue 38: 3,000 of them under 1,024 layers cost 85-148 s of CPU)."""
    import yaml

    path = ROOT / "recordings" / "published-mlx-lm-40-m2-ultra-mistral-7b-4bit-peak.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    model = data["model"]
    model["config"] = preset_config(model.pop("preset"), num_hidden_layers=layers)
    data["sections"]["memory"] = [
        {"context": 10**8 - i, "value": value, "unit": "GB", "part": "peak"} for i in range(figures)
    ]
    return data
