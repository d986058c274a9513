"""What a hostile input costs the engine, as a ratio to a plain input measured in the same run (issues 29, 38).

Pairs, each timed in alternation so that the shared machine's noise falls on both sides alike:
- the Nbytes trap's `updates` link: '1x100000000' (built a 1.5 GB list before its size was checked) against the
  plain '256x16' (kvcore.memory.allocsim.parse_updates);
- a qwen3_moe config.json of 1,024 layers with a 300,000-entry `mlp_only_layers` list (6-8 s of CPU when the list
  was scanned once per layer) against the same config without the list (kvcore.inputs.config.parse_json_text, then
  kvcore.inputs.config.parse_config: what the calculator does with a pasted config);
- GGUF headers as a browser sends them (kvcore.inputs.gguf.geometry with the file's size): Llama-3.1-8B's real
  header (a 128,256-token vocabulary, 3.2 MB) with junk keys up to the browser's 16 MB limit, three kinds
  (harness.inputs.GGUF_JUNK: arrays of 4,096 i8 values, of 4,096 empty strings, of empty arrays), against the
  same header without them.
- a cache-busting Calculator link, `?ctx=<random ~10^8>&mstep=64&rt=mlx_lm&k=mlx-q4` on a 24 GB Mac (1-1.6 s of
  CPU each when mlx_lm's plan walked its 1.5 million chunks, once per lever tried), against the page's plain link
  (32,768 tokens): the Calculator's whole answer, sizes, verdict and levers (kvcore.capacity.calculator.answer),
  a new random context on every call, as a link no cache has seen.
- a reader's upload of a published recording with 3,000 `memory` peak rows under a 1,024-layer config at 10^8
  tokens (85-148 s of CPU when each row parsed the config and planned every layer), and one at the limit
  (kvcore.limits.MAX_MEMORY_FIGURES), against the bundled mlx-lm #40 run uploaded (2 figures, 32 layers): read,
  checked and its figures computed (kvcore.recordings.store.parse_bytes, then
  kvcore.views.published_memory.recording_rows).
Each round times one call of each in CPU seconds (a refusal counts: it is the work the server does); the
result is the median of the paired ratios hostile / plain with the interquartile range, the median CPU time of
each, and the peak memory of one call of each (tracemalloc). The issues' bounds: the link within a few MB of a
plain one; the config within ~3x a plain config's time; any accepted upload's figures within ~1 s of CPU.

Run: .venv/bin/python benchmarks/bench_bounds.py --rounds 31 [--markdown docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # tests/gguf_files.py writes the real-sized header

import gguf_files  # noqa: E402

from benchmarks.doc_tables import Section, add_option, table  # noqa: E402
from harness.inputs import GGUF_JUNK, gguf_with_junk, memory_upload, peak_bytes  # noqa: E402
from kvcore.capacity.calculator import answer  # noqa: E402
from kvcore.capacity.memory_fit import gpu_limit  # noqa: E402
from kvcore.capacity.request import ModelSource, Request  # noqa: E402
from kvcore.errors import KvError  # noqa: E402
from kvcore.inputs import gguf as kgguf  # noqa: E402
from kvcore.inputs.config import parse_config, parse_json_text  # noqa: E402
from kvcore.inputs.gguf_header import read_header  # noqa: E402
from kvcore.inputs.preset_files import load_preset  # noqa: E402
from kvcore.inputs.presets import preset_geometry  # noqa: E402
from kvcore.limits import MAX_MEMORY_FIGURES  # noqa: E402
from kvcore.memory.allocsim import parse_updates  # noqa: E402
from kvcore.recordings import store  # noqa: E402
from kvcore.runtimes.mlx_lm import MLX_LM  # noqa: E402
from kvcore.views import published_memory  # noqa: E402


def _config_text(mlp_only: int) -> str:
    config = dict(load_preset("qwen3-30b-a3b")["config"], num_hidden_layers=1024)
    if mlp_only:
        config["mlp_only_layers"] = [0] * mlp_only
    return json.dumps(config)


def _pasted(text: str):
    return lambda: parse_config(parse_json_text(text), "config.json", MLX_LM)


def _header_pairs() -> dict:
    """GGUF_JUNK's kinds: Llama-3.1-8B's header as a browser sends it with junk keys up to 16 MB, and without."""
    with tempfile.TemporaryDirectory() as tmp:
        path = gguf_files.full_llama(Path(tmp) / "llama-3.1-8b.gguf")
        size = path.stat().st_size
        with open(path, "rb") as f:
            plain = f.read(read_header(path).data_offset)

    def reader(raw: bytes, file_bytes: int):
        return lambda: kgguf.geometry(raw, "llama-3.1-8b.gguf", file_bytes=file_bytes)

    pairs = {}
    for kind in GGUF_JUNK:
        raw, added = gguf_with_junk(plain, kind, 15_900_000 - len(plain))
        name = (
            f"GGUF header ({len(raw) / 1e6:.1f} MB with {kind} vs {len(plain) / 1e6:.1f} MB real)"
        )
        pairs[name] = (reader(raw, size + added), reader(plain, size))
    return pairs


def _calculator(busting: bool):
    """The Calculator's answer for llama-3.1-8b (mlx-q4 weights) on a 24 GB Mac: a cache-busting link (a random
    context near 10^8, mlx_lm's prefill step 64, an mlx-q4 cache) or the page's plain link."""
    g, memory = preset_geometry("llama-3.1-8b", "mlx_lm"), gpu_limit(24).bytes
    rng = random.Random(38)

    def call():
        if not busting:
            return answer(
                Request(ModelSource(g.name), 32768, weights_format="mlx-q4", memory_bytes=memory), g
            )
        asked = Request(
            ModelSource(g.name),
            rng.randint(90_000_000, 100_000_000),
            k_format="mlx-q4",
            v_format="mlx-q4",
            weights_format="mlx-q4",
            settings=(("prefill_step", 64),),
            memory_bytes=memory,
        )
        return answer(asked, g)

    return call


def _upload(data: dict):
    """What the server does with an uploaded recording: read and check it (kvcore.recordings.store.parse_bytes,
    as kvsite.inputs.uploads.receive), then set its memory figures beside kvcore's (the Recordings page, opened)."""
    raw = yaml.safe_dump(data, sort_keys=False).encode("utf-8")
    return lambda: published_memory.recording_rows(store.parse_bytes(raw, "upload.yaml"))


PLAIN_UPLOAD = memory_upload(
    2, layers=32
)  # the bundled mlx-lm #40 run as an upload: Mistral 7B's 32 layers

PAIRS = {
    "updates link (1x100000000 vs 256x16)": (
        lambda: parse_updates("1x100000000"),
        lambda: parse_updates("256x16"),
    ),
    "config (300,000 mlp_only_layers vs none, 1,024 layers)": (
        _pasted(_config_text(300_000)),
        _pasted(_config_text(0)),
    ),
    **_header_pairs(),
    "Calculator link (random ~10^8 tokens, step 64, mlx-q4 vs 32,768 tokens)": (
        _calculator(True),
        _calculator(False),
    ),
    "upload (3,000 memory figures vs 2, 1,024 vs 32 layers)": (
        _upload(memory_upload(3000)),
        _upload(PLAIN_UPLOAD),
    ),
    f"upload ({MAX_MEMORY_FIGURES} memory figures, the most, vs 2, 1,024 vs 32 layers)": (
        _upload(memory_upload(MAX_MEMORY_FIGURES)),
        _upload(PLAIN_UPLOAD),
    ),
}


def timed(call) -> float:
    """Seconds of this process's CPU for one call (the server's own time: what other work on a shared machine
    does not inflate)."""
    start = time.process_time()
    try:
        call()
    except KvError:
        pass
    return time.process_time() - start


peak = peak_bytes


def _ratio(x: float) -> str:
    """1.42 -> '1.42'; a refusal's 0.00031 -> '0.0003' (not '0.00')."""
    return f"{x:.2f}" if x >= 0.01 else f"{x:.1g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    add_option(parser)
    args = parser.parse_args()
    rounds, section = args.rounds, Section(args.markdown, "bench_bounds")
    rows = []
    for name, (hostile, plain) in PAIRS.items():
        timed(hostile), timed(plain)  # warm-up, untimed
        ratios, plain_s, hostile_s = [], [], []
        for i in range(rounds):
            if i % 2:  # alternate which goes first
                h, p = timed(hostile), timed(plain)
            else:
                p, h = timed(plain), timed(hostile)
            ratios.append(h / p)
            plain_s.append(p)
            hostile_s.append(h)
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        median = statistics.median(ratios)
        plain_ms, hostile_ms = (statistics.median(s) * 1000 for s in (plain_s, hostile_s))
        peaks = peak(hostile) / 2**20, peak(plain) / 2**20
        print(
            f"{name}: time ratio median {_ratio(median)} (IQR {_ratio(q1)}-{_ratio(q3)}, {rounds} "
            f"rounds; median {hostile_ms:.3g} ms vs {plain_ms:.3g} ms); peak memory "
            f"{peaks[0]:.3g} MiB vs {peaks[1]:.3g} MiB"
        )
        rows.append(
            [name, f"**×{_ratio(median)}** ({_ratio(q1)}–{_ratio(q3)})", f"{hostile_ms:.3g} ms"]
            + [f"{plain_ms:.3g} ms", f"{peaks[0]:.3g} MiB vs {peaks[1]:.3g} MiB"]
        )
    heads = ["hostile vs plain", "time, median of paired ratios (IQR)", "hostile", "plain"]
    section.write(
        table([*heads, "peak memory"], rows, right=(1, 2, 3))
        + f"\n\n{rounds} rounds, alternating which goes first; times are medians of CPU time."
    )


if __name__ == "__main__":
    main()
