"""The live commands' arguments: their defaults, the options they share and one parser per kind of value.

Each parser is an argparse type that names the option and the value it refuses in one line.
Example: contexts("256,1K") -> [256, 1024]; contexts("256,,1K") -> "contexts must be whole numbers ...".
"""

from __future__ import annotations

import argparse
import re

from kvcore.cli.args import whole_number  # one wording for every whole-number option
from kvcore.errors import KvError, quote
from kvcore.memory.formulas import LIVE_WEIGHTS_FORMAT

DEFAULT_MODEL = "llama-3.2-1b"  # the live commands' --model (kvcore.cli.doctor checks its default run from these)
DEFAULT_WEIGHTS_FORMAT = LIVE_WEIGHTS_FORMAT  # random weights' --weights-format
DEFAULT_CONTEXTS = "256,1024,4096,16384,32768"
DEFAULT_KV_CONTEXTS = "1024,2048,4096,8192,16384,32768"
MAX_LIVE_CONTEXT = 1_048_576
DEFAULT_PROMPTS = "256,1024,4096"
DEFAULT_BATCHES = "1,2,4,8"
DEFAULT_BATCH_CONTEXTS = "256,1024,4096"
MAX_BATCH = 256
MODEL_HELP = (
    "preset name, cpu-demo, a config.json, a model folder, or a Hugging Face id "
    "(e.g. mlx-community/Llama-3.2-1B-Instruct-4bit; downloaded by mlx_lm.load)"
)
GEOMETRY_HELP = "preset name, cpu-demo or a config.json (its cache geometry)"


def default_max_context() -> int:
    """The largest context of the live commands' default runs (decode's and kv's --contexts)."""
    return max(parse_contexts(DEFAULT_CONTEXTS) + parse_contexts(DEFAULT_KV_CONTEXTS))


def contexts(text: str) -> list[int]:
    """An argparse type: token counts separated by commas, 4K meaning 4,096, sorted and unique."""
    try:
        return parse_contexts(text)
    except KvError as e:  # argparse would replace a ValueError's message with its own
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_contexts(text: str) -> list[int]:
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or "" in items:
        raise KvError(
            "contexts must be whole numbers separated by single commas (e.g. 256,1024,4K), "
            f"not {quote(text)}"
        )
    try:
        values = [
            int(t.replace("_", "").upper().replace("K", ""))
            * (1024 if t.upper().endswith("K") else 1)
            for t in items
        ]
    except ValueError:
        raise KvError(
            f"contexts must be whole numbers separated by commas (e.g. 256,1024,4K), not {quote(text)}"
        ) from None
    if any(not 1 <= v <= MAX_LIVE_CONTEXT for v in values):
        raise KvError(
            f"every context must be a whole number from 1 to {MAX_LIVE_CONTEXT:,}, not {quote(text)}"
        )
    return sorted(set(values))


def count(label: str, low: int, high: int):
    return whole_number(label, low, high)


def kv_format(text: str) -> str:
    from kvcore.memory.formats import mlx_cache_formats

    known = mlx_cache_formats()  # read when asked: a format added to kvcore.memory.formats counts
    if text not in known:
        raise argparse.ArgumentTypeError(
            f"--kv-format must be one of {', '.join(known)}, not {quote(text)}"
        )
    return text


def mlx_kv_help() -> str:
    """--kv-format's help for an mlx_lm run: the formats its cache classes hold (kvcore.memory.formats), and its default."""
    from kvcore.memory.formats import mlx_cache_formats

    return f"{', '.join(mlx_cache_formats())} (default: the activation dtype: fp32 on CPU, fp16 on Metal)"


def any_format(text: str) -> str:
    """A cache format kvcore knows, by its name or llama.cpp's spelling (f16 -> fp16); which ones a runtime
    stores is the command's to check (record: the runtime it runs under)."""
    from kvcore.memory.formats import get_format

    try:
        return get_format(text).name
    except KvError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def formats(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or "" in items:
        raise argparse.ArgumentTypeError(
            f"--kv-formats must be format names separated by commas (e.g. fp16,mlx-q4), "
            f"not {quote(text)}"
        )
    return list(dict.fromkeys(items))


def stem(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", text):
        raise argparse.ArgumentTypeError(
            f"--name must be letters, digits, '.', '_' or '-' (no folders), not {quote(text)}"
        )
    return text


def sections(text: str) -> tuple[str, ...]:
    from kvcore.measure.timing import SWEEPS

    items = tuple(dict.fromkeys(t.strip() for t in text.split(",")))
    bad = [t for t in items if t not in SWEEPS]
    if bad or not items:
        raise argparse.ArgumentTypeError(
            f"--sections must be some of {','.join(SWEEPS)} separated by commas, not {quote(text)}"
        )
    return items


def batch_sizes(text: str) -> list[int]:
    values = contexts(text)
    if values[-1] > MAX_BATCH:
        raise argparse.ArgumentTypeError(
            f"every batch size must be a whole number from 1 to {MAX_BATCH}, not {quote(text)}"
        )
    return values


def require_gguf(a, does: str) -> None:
    """Refuse, before anything runs, a --runtime that runs GGUF files given another --model."""
    from kvcore.inputs.gguf import is_gguf_name

    if not is_gguf_name(a.model):
        raise KvError(
            f"--runtime {a.runtime} {does} a GGUF file: give --model FILE.gguf, not {quote(a.model)}.",
            "gguf_runtime",
            label=a.model,
            runtime=a.runtime,
        )


def add_common(p, model_default: str, model_help: str, saves: bool = False) -> None:
    """--model, where the recording goes (record saves unless --no-save; the others only if asked),
    --title and --label."""
    p.add_argument("--model", default=model_default, help=model_help)
    if saves:  # record
        p.add_argument(
            "--out",
            help="folder for the recording "
            "(default: recordings/local/, or $KVCORE_RECORDINGS_DIR/local/)",
        )
        p.add_argument("--no-save", action="store_true", help="print only; save no recording")
    else:
        p.add_argument(
            "--save",
            action="store_true",
            help="also save the run as a recording in recordings/local/ (default: print only)",
        )
        p.add_argument("--out", help="save the run as a recording in this folder (implies --save)")
        p.add_argument(
            "--no-save", action="store_true", help=argparse.SUPPRESS
        )  # the default; kept for old scripts
    p.add_argument("--title", help="recording title")
    p.add_argument("--label", help="how the site names the recording")


def add_model_args(p, decode: bool = True, kv_type=kv_format, kv_help: str = "") -> None:
    """The model's weights and formats, and (decode) the timing loop's warm-up, steps and repeats; `kv_type`
    reads --kv-format (default: a format an mlx_lm cache class holds)."""
    p.add_argument(
        "--weights",
        help="random (build from the config) or a model folder / Hugging Face id to load "
        "(default: load when --model is a model folder or a hub id, else random)",
    )
    p.add_argument(
        "--weights-format",
        default=DEFAULT_WEIGHTS_FORMAT,
        help="random weights: mlx-q4 (default, like the article), mlx-q8, fp32, fp16, bf16",
    )
    p.add_argument(
        "--kv-format",
        type=kv_type,
        help=kv_help or mlx_kv_help(),
    )
    if decode:
        p.add_argument("--warmup", type=count("warmup", 0, 1000), default=3)
        p.add_argument("--steps", type=count("steps", 1, 10000), default=16)
        p.add_argument("--repeats", type=count("repeats", 1, 100), default=3)


def add_token_counts(p) -> None:
    """mechanism's --new-tokens and --prompt-tokens (record measures mechanism too)."""
    p.add_argument("--new-tokens", type=count("--new-tokens", 1, 4096), default=64)
    p.add_argument("--prompt-tokens", type=count("--prompt-tokens", 1, 65536), default=32)
