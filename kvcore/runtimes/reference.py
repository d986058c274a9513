"""The reference runtime: the architecture as its config defines it (the config's own window rules, as
transformers and vLLM run them), every KV format kvcore knows, K and V apart."""

from __future__ import annotations

from kvcore.runtimes.token import TokenRuntime

REFERENCE = TokenRuntime(
    "reference",
    "reference (the config's own window rules, as transformers and vLLM run them)",
    "sliding_ignored",
)
