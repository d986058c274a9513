"""The scanner behind the Japanese pages' check in Chromium (test_browser_widths.py: no run of five or more English
words anywhere a reader looks, proper nouns aside): it finds English and keeps names."""

from __future__ import annotations

from english_runs import english_runs


def test_the_scanner_finds_english_and_keeps_names():
    assert english_runs("モデルは Qwen3-32B です。the cache grows with every token") == [
        "the cache grows with every token"
    ]
    assert not english_runs(
        "M3 Max (40-core GPU) · Llama-3.3-70B · mlx-lm、「Slow Speed Issue in the MLX table」"
    )
    assert not english_runs(
        "https://github.com/ggml-org/llama.cpp/pull/10541 と `c.offset * kv_heads * rows`"
    )
