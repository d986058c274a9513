"""A runtime's log, pasted or given as a file -> the lines this reader knows, each as a typed fact.

The lines are the ones llama.cpp (llama-cli, llama-server, llama-cpp-python: the library prints them), Ollama
and mlx_lm print when they load a model, in the forms they have had since 2023:

    print_info: n_layer          = 30                         the model (llm_load_print_meta, 2024;
    llama_model_loader: - kv   4: llama.block_count u32 = 30   llama_model_load_internal, 2023), its GGUF keys
    llama_context: n_ctx         = 4096                       the settings (llama_new_context_with_model)
    llama_kv_cache: size =   90.00 MiB (  4096 cells,  30 layers,  1/1 seqs), K (f16): ..., V (f16): ...
    llama_kv_cache:        CPU KV buffer size =    90.00 MiB   a buffer: KV, RS, output, compute, model
    ggml_metal_device_init: recommendedMaxWorkingSetSize  = 11453.25 MB   the GPU's working-set limit
    msg="offload to metal" ... memory.required.kv="448.0 MiB"  Ollama's estimate, figure by figure
    Peak memory: 12.257 GB                                     mlx_lm's peak (mx.get_peak_memory() / 1e9)

Units as each program prints them: llama.cpp's buffers in MiB (bytes / 1024 / 1024); its 2023 builds printed the
same 1024-based figure as "MB"; ggml-metal's working-set line divides by 1e6 (`/ 1e6` in ggml-metal-device.m
since 2024; the 2023 `ggml_metal_add_buffer` builds divided by 1024 twice); Ollama's GiB/MiB are 1024-based
(format.HumanBytes2); mlx_lm's GB are 10^9 bytes. Every line keeps its number: a line the reader does not know
is kept as unknown, never dropped.
Example: read_log("llama_context: n_ctx = 4096").facts[0] -> Fact(1, "setting", {"n_ctx": 4096})
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kvcore.errors import KvError
from kvcore.inputs.textfile import decode_text
from kvcore.limits import MAX_LOG_BYTES, MAX_LOG_LINE, MAX_LOG_LINES

KIB, MIB, GIB = 1024, 1024**2, 1024**3
NUM = r"([0-9]+(?:\.[0-9]+)?)"

# print_info / llm_load_print_meta / llama_model_load_internal name -> the GGUF key it prints ({arch} filled in)
HPARAM_KEYS = {
    "n_layer": "{arch}.block_count",
    "n_embd": "{arch}.embedding_length",
    "n_head": "{arch}.attention.head_count",
    "n_head_kv": "{arch}.attention.head_count_kv",
    "n_embd_head_k": "{arch}.attention.key_length",
    "n_embd_head_v": "{arch}.attention.value_length",
    "n_vocab": "{arch}.vocab_size",
    "n_ctx_train": "{arch}.context_length",
    "n_swa": "{arch}.attention.sliding_window",
    "n_ff": "{arch}.feed_forward_length",
    "n_expert": "{arch}.expert_count",
    "n_expert_used": "{arch}.expert_used_count",
    "n_ff_exp": "{arch}.expert_feed_forward_length",
    "n_layer_dense_lead": "{arch}.leading_dense_block_count",
}
HPARAM_TEXT = (
    "arch",
    "general.name",
    "file type",
    "model ftype",
    "ftype",
    "file size",
    "model size",
)
SETTINGS = ("n_ctx", "n_seq_max", "n_batch", "n_ubatch", "flash_attn", "kv_unified", "n_ctx_seq")

HPARAM = re.compile(
    r"\b(print_info|llm_load_print_meta|llama_model_load_internal):\s+([A-Za-z_][\w .]*?)\s*=\s*(.*?)\s*$"
)
GGUF_KV = re.compile(
    r"llama_model_loader: - kv\s+\d+:\s+(\S+)\s+(\w+)(?:\[(\w+),\s*(\d+)\])?\s+=\s*(.*?)\s*$"
)
CONTEXT = re.compile(r"\b(?:llama_context|llama_new_context_with_model):\s+(\w+)\s*=\s*(\S+)\s*$")
FA_RESOLVED = re.compile(r"Flash Attention was auto, set to (enabled|disabled)")
KV_INIT = re.compile(
    r"llama_kv_cache_init: kv_size = (\d+), offload = \d, type_k = '(\w+)', type_v = '(\w+)', n_layer = (\d+)"
)
KV_LAYER = re.compile(
    r"llama_kv_cache_init: layer (\d+): n_embd_k_gqa = (\d+), n_embd_v_gqa = (\d+)"
)
SWA_CREATE = re.compile(r"creating\s+(non-SWA|SWA) KV cache, size = (\d+) cells")
KV_SIZE = re.compile(
    rf"llama_kv_cache(?:_unified)?: size =\s*{NUM} MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/\s*(\d+) "
    rf"seqs\), K \((\w+)\):\s*{NUM} MiB, V \((\w+)\):\s*{NUM} MiB"
)
KV_SELF = re.compile(
    rf"KV self size\s*=\s*{NUM} MiB, K \((\w+)\):\s*{NUM} MiB, V \((\w+)\):\s*{NUM} MiB"
)
KV_SELF_2023 = re.compile(rf"kv self size\s*=\s*{NUM} MB")
BUFFER = re.compile(rf":\s+(\S+)\s+(KV|RS|compute|output|model) buffer size\s*=\s*{NUM} MiB")
BUFFER_2024 = re.compile(rf"llm_load_tensors:\s+(\S+) buffer size\s*=\s*{NUM} MiB")
COMPUTE_EXIT = re.compile(  # ~llama_context, as the context is freed (2025-): 4 decimals
    rf"~llama_context:\s+(\S+) compute buffer size is\s+{NUM} MiB, (matches|does not match) expectation"
)
WORST_CASE = re.compile(r"worst-case: n_tokens = (\d+), n_seqs = (\d+), n_outputs = (\d+)")
COMPUTE_2023 = re.compile(rf"compute buffer total size = {NUM} MB")
METAL_ALLOC = re.compile(
    rf"(?:allocated '(\w+)\s*' buffer|allocated buffer), size =\s*{NUM} (MiB|MB),[^(]*\(\s*{NUM} /\s*{NUM}\)"
)
OVER_LIMIT = "greater than the recommended max working set size"
WORKING_SET = re.compile(rf"recommendedMaxWorkingSetSize\s*=\s*{NUM} MB")
GPU_NAME = re.compile(r"(?:GPU name:|found device:)\s+(.+?)\s*$")
USING_DEVICE = re.compile(r"using device (\w+) \((.+?)\)")  # llama_model_load_from_file_impl, 2025-
OLLAMA_OFFLOAD = re.compile(r'msg="?offload(?: to (\w+))?"?')
OLLAMA_LIBRARY = re.compile(r"\blibrary=(\w+)")
OLLAMA_FIGURE = re.compile(rf'(memory\.[\w.]+)="\[?{NUM} (B|KiB|MiB|GiB)\]?"')
OLLAMA_SYSTEM = re.compile(rf'msg="system memory" total="{NUM} (GiB|MiB)"')
OLLAMA_START = re.compile(r'msg="starting llama server"')
OLLAMA_FLAG = re.compile(r"--(ctx-size|parallel|batch-size) (\d+)")
MLX_PEAK = re.compile(rf"^\s*Peak memory:\s*{NUM} GB\s*$")
MLX_TOKENS = re.compile(rf"^\s*(Prompt|Generation):\s*(\d+) tokens, {NUM} tokens-per-sec\s*$")
MLX_BENCH = re.compile(rf"peak_memory={NUM}\s*$")
UNITS = {"B": 1, "KiB": KIB, "MiB": MIB, "GiB": GIB, "GB": 10**9}


@dataclass(frozen=True)
class Fact:
    """One line the reader knows: its number (from 1), its kind and what it says (sizes as printed, as text)."""

    n: int
    kind: str
    values: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Log:
    """A log read line by line: the facts, the lines no pattern knows (number, text), and the non-blank count."""

    facts: tuple[Fact, ...]
    unknown: tuple[tuple[int, str], ...]
    lines: int


def split_lines(text: str, label: str = "the log") -> list[str]:
    """The log's lines, refused in one sentence when there are too many or one is too long (before any is read)."""
    lines = text.splitlines()
    if len(lines) > MAX_LOG_LINES:
        raise KvError(
            f"{label} has {len(lines):,} lines; the reader takes at most {MAX_LOG_LINES:,}: paste the part "
            "from the model's loading to the first reply.",
            "log_lines_many",
            label=label,
            n=len(lines),
            limit=MAX_LOG_LINES,
        )
    longest = max(range(len(lines)), key=lambda i: len(lines[i]), default=None)
    if longest is not None and len(lines[longest]) > MAX_LOG_LINE:
        raise KvError(
            f"{label}: line {longest + 1:,} has {len(lines[longest]):,} characters; a runtime's log line has "
            f"at most {MAX_LOG_LINE:,}.",
            "log_line_long",
            label=label,
            n=longest + 1,
            chars=len(lines[longest]),
            limit=MAX_LOG_LINE,
        )
    return lines


def decode_log(data: bytes, label: str = "the log") -> str:
    """A log's bytes -> its text: refused when larger than MAX_LOG_BYTES, binary or not UTF-8."""
    return decode_text(data, MAX_LOG_BYTES, label)


def _number(text: str) -> int | float | str:
    text = text.strip()
    if re.fullmatch(r"-?\d{1,15}", text):
        return int(text)
    if re.fullmatch(r"-?\d{1,15}\.\d{1,15}", text):
        return float(text)
    return text


def _hparam(prefix: str, key: str, value: str) -> Fact | None:
    if (
        key == "n_ctx"
    ):  # llama_model_load_internal (2023) printed the context among the model's lines
        number = _number(value)
        return Fact(0, "setting", {"n_ctx": number}) if isinstance(number, int) else None
    if key in HPARAM_KEYS:
        number = _number(value)
        if not isinstance(number, int):
            return None
        return Fact(0, "model", {"key": key, "value": number, "loader": prefix})
    if key in HPARAM_TEXT:
        return Fact(0, "model", {"key": key, "value": value, "loader": prefix})
    return None


def _gguf_key(match: re.Match) -> Fact | None:
    key, kind, _, count, value = match.groups()
    if key == "general.architecture" or key.endswith(
        (
            ".block_count",
            ".embedding_length",
            ".head_count",
            ".head_count_kv",
            ".key_length",
            ".value_length",
            ".vocab_size",
            ".context_length",
            ".sliding_window",
            ".feed_forward_length",
            ".expert_count",
            ".expert_used_count",
            ".expert_feed_forward_length",
            ".leading_dense_block_count",
        )
    ):
        number = _number(value)
        return Fact(0, "gguf_key", {"key": key, "value": number})
    if key == "tokenizer.ggml.tokens" and count:
        return Fact(0, "gguf_key", {"key": key, "value": int(count)})
    return None


def _ollama(line: str) -> list[Fact]:
    facts = []
    offload = OLLAMA_OFFLOAD.search(line)
    if offload and "memory." in line:
        library = offload.group(1) or (OLLAMA_LIBRARY.search(line) or [None, None])[1]
        for name, number, unit in OLLAMA_FIGURE.findall(line):
            facts.append(
                Fact(
                    0,
                    "ollama",
                    {"figure": name, "printed": number, "unit": unit, "library": library},
                )
            )
    system = OLLAMA_SYSTEM.search(line)
    if system:
        facts.append(
            Fact(0, "system_memory", {"printed": system.group(1), "unit": system.group(2)})
        )
    if OLLAMA_START.search(line):
        flags = dict(OLLAMA_FLAG.findall(line))
        if flags:
            facts.append(
                Fact(0, "setting", {k.replace("-", "_"): int(v) for k, v in flags.items()})
            )
    return facts


def _line_facts(line: str) -> list[Fact]:
    """The facts of one line (usually one; an Ollama offload line holds several figures)."""
    if "level=" in line and "msg=" in line:
        return _ollama(line)
    if m := KV_SIZE.search(line):
        size, cells, layers, seqs, streams, k_type, k, v_type, v = m.groups()
        return [
            Fact(
                0,
                "kv_cache",
                {
                    "printed": size,
                    "unit": "MiB",
                    "cells": int(cells),
                    "layers": int(layers),
                    "seqs": int(seqs),
                    "streams": int(streams),
                    "k_type": k_type,
                    "v_type": v_type,
                    "k": k,
                    "v": v,
                },
            )
        ]
    if m := KV_SELF.search(line):
        size, k_type, k, v_type, v = m.groups()
        return [
            Fact(
                0,
                "kv_cache",
                {
                    "printed": size,
                    "unit": "MiB",
                    "k_type": k_type,
                    "v_type": v_type,
                    "k": k,
                    "v": v,
                },
            )
        ]
    if m := KV_SELF_2023.search(line):
        return [Fact(0, "kv_cache", {"printed": m.group(1), "unit": "MB"})]
    if m := BUFFER.search(line):
        device, what, size = m.groups()
        kind = {"KV": "kv_buffer", "RS": "kv_buffer"}.get(what, f"{what}_buffer")
        return [Fact(0, kind, {"device": device, "printed": size, "unit": "MiB", "what": what})]
    if m := BUFFER_2024.search(line):
        return [
            Fact(0, "model_buffer", {"device": m.group(1), "printed": m.group(2), "unit": "MiB"})
        ]
    if m := COMPUTE_EXIT.search(line):
        device, size, said = m.groups()
        values = {"device": device, "printed": size, "unit": "MiB", "matches": said == "matches"}
        return [Fact(0, "compute_exit", values)]
    if m := WORST_CASE.search(line):
        tokens, seqs, outputs = (int(x) for x in m.groups())
        return [Fact(0, "setting", {"worst_case_tokens": tokens, "worst_case_seqs": seqs})]
    if m := COMPUTE_2023.search(line):
        return [Fact(0, "compute_buffer", {"device": "all", "printed": m.group(1), "unit": "MB"})]
    if m := METAL_ALLOC.search(line):
        name, size, unit, total, limit = m.groups()
        return [
            Fact(
                0,
                "metal_alloc",
                {
                    "buffer": name or "",
                    "printed": size,
                    "unit": unit,
                    "total": total,
                    "limit": limit,
                    "over": OVER_LIMIT in line,
                },
            )
        ]
    if m := WORKING_SET.search(line):
        return [Fact(0, "working_set", {"printed": m.group(1), "unit": "MB"})]
    if m := KV_INIT.search(line):
        cells, k_type, v_type, layers = m.groups()
        return [
            Fact(
                0,
                "setting",
                {
                    "kv_size": int(cells),
                    "type_k": k_type,
                    "type_v": v_type,
                    "kv_layers": int(layers),
                },
            )
        ]
    if m := KV_LAYER.search(line):
        return [
            Fact(
                0,
                "kv_layer",
                {"layer": int(m.group(1)), "k": int(m.group(2)), "v": int(m.group(3))},
            )
        ]
    if m := SWA_CREATE.search(line):
        return [
            Fact(
                0,
                "setting",
                {"swa_cells" if m.group(1) == "SWA" else "base_cells": int(m.group(2))},
            )
        ]
    if m := FA_RESOLVED.search(line):
        return [Fact(0, "setting", {"flash_attn": m.group(1)})]
    if m := GGUF_KV.search(line):
        fact = _gguf_key(m)
        return [fact] if fact else []
    if m := HPARAM.search(line):
        fact = _hparam(m.group(1), m.group(2).strip(), m.group(3))
        return [fact] if fact else []
    if (m := CONTEXT.search(line)) and m.group(1) in SETTINGS:
        return [Fact(0, "setting", {m.group(1): _number(m.group(2))})]
    if m := USING_DEVICE.search(line):
        return [Fact(0, "device", {"gpu": m.group(2), "name": m.group(1)})]
    if m := GPU_NAME.search(line):
        return [Fact(0, "device", {"gpu": m.group(1)})]
    if m := MLX_PEAK.search(line):
        return [Fact(0, "mlx_peak", {"printed": m.group(1), "unit": "GB"})]
    if m := MLX_BENCH.search(line):
        return [Fact(0, "mlx_peak", {"printed": m.group(1), "unit": "GB"})]
    if m := MLX_TOKENS.search(line):
        return [Fact(0, "mlx_tokens", {"phase": m.group(1).lower(), "tokens": int(m.group(2))})]
    return []


def read_log(text: str, label: str = "the log") -> Log:
    """Every line of a log: the facts it states and the lines it does not know (blank lines are neither)."""
    facts, unknown, count = [], [], 0
    for n, line in enumerate(split_lines(text, label), start=1):
        if not line.strip():
            continue
        count += 1
        found = _line_facts(line)
        if not found:
            unknown.append((n, line))
        facts.extend(Fact(n, f.kind, f.values) for f in found)
    return Log(tuple(facts), tuple(unknown), count)


def printed_bytes(printed: str, unit: str, mb: int = 10**6) -> int:
    """A printed figure in bytes: MiB/GiB 1024-based, GB 10^9, MB as the caller says the program meant it."""
    scale = mb if unit == "MB" else UNITS[unit]
    return round(float(printed) * scale)
