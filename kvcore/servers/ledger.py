"""A server's ledger: a model, the server's options and a conversation script -> per request, what the server
resumes and reprocesses, what it keeps, what it prints and what memory that takes.

One entry point, `server_ledger(server, model, script_text, argv)`; each server's rules live in its own module
(kvcore.servers.mlx_lm_server, kvcore.servers.mlx_lm_sequential with --kv-bits, kvcore.servers.llama_server).
Everything is bounded before work: the script (kvcore.servers.script), the options (kvcore.servers.options), and
every request's prompt and reply against the model's context.
Example: server_ledger("mlx_lm.server", "smollm2-135m", '[{"user": "a", "prompt_tokens": 10,
    "completion_tokens": 5}]', [])["requests"][0]["reprocessed_tokens"] -> 10
"""

from __future__ import annotations

import json
import struct
from dataclasses import fields
from pathlib import Path

from kvcore.errors import KvError, did_you_mean, quote
from kvcore.inputs.config import parse_config, read_config_file
from kvcore.inputs.preset_files import load_preset
from kvcore.inputs.textfile import open_regular
from kvcore.limits import MAX_CONTEXT
from kvcore.model.geometry import Geometry
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.servers import llama_server, mlx_lm_sequential, mlx_lm_server
from kvcore.servers.mlx_lm_server import DTYPE_BYTES
from kvcore.servers.options import parse_options
from kvcore.servers.script import ScriptRequest, parse_script
from kvcore.servers.sequences import Stream

SERVERS = {mlx_lm_server.NAME: mlx_lm_server, llama_server.NAME: llama_server}
MAX_SAFETENSORS_HEADER = 100_000_000
COUNTS_ASSUMED = (
    "counts only: each user's prompt extends that user's previous prompt and reply, re-rendered token for "
    "token, and users share no prefix (not even a default system prompt)"
)


def _server(name: str):
    if name not in SERVERS:
        raise KvError(
            f"Unknown server {quote(name)}; valid: {', '.join(SERVERS)}."
            + did_you_mean(name, SERVERS)
        )
    return SERVERS[name]


def _safetensors_dtype(folder: Path) -> str:
    """The activation dtype of an mlx model folder: its norm weights' dtype in the first .safetensors header."""
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise KvError(f"{folder.name} holds no .safetensors weights to read the dtype from.")
    with open_regular(files[0]) as f:
        (size,) = struct.unpack("<Q", f.read(8))
        if size > MAX_SAFETENSORS_HEADER:
            raise KvError(f"{files[0].name}'s header is {size:,} bytes: not a safetensors file.")
        header = json.loads(f.read(size))
    norms = [v["dtype"] for k, v in header.items() if k.endswith("norm.weight")]
    if not norms or norms[0] not in DTYPE_BYTES:
        raise KvError(f"{files[0].name} has no norm weight of a dtype the ledger knows.")
    return norms[0]


def load_model(model: str) -> tuple[Geometry, str, Path | None]:
    """A preset name or an mlx model folder -> (geometry under mlx_lm's rules, activation dtype, the folder)."""
    path = Path(model)
    if path.is_dir():
        geometry = parse_config(read_config_file(path / "config.json"), path.name, MLX_LM)
        return geometry, _safetensors_dtype(path), path
    preset = load_preset(model)
    dtype = preset.get("default_weights_format", "")
    if dtype not in DTYPE_BYTES:
        raise KvError(
            f"{model}'s weights are {dtype}: give the model folder, whose weights say the activations' dtype."
        )
    return parse_config(preset["config"], preset["name"], MLX_LM), dtype, None


def _beyond(index: int, tokens: int, context: int) -> KvError:
    return KvError(
        f"Request {index + 1} holds {tokens:,} tokens, beyond the model's context of {context:,}.",
        "server_context",
        request=index + 1,
        tokens=tokens,
        context=context,
    )


def turns(requests: tuple[ScriptRequest, ...], folder: Path | None, context: int):
    """The script's requests as token sequences (the model's tokenizer and chat template for messages)."""
    for i, r in enumerate(requests):
        if r.counts_only and r.prompt_tokens + r.completion_tokens > context:
            raise _beyond(i, r.prompt_tokens + r.completion_tokens, context)
    if requests[0].counts_only:
        return [
            mlx_lm_server.Turn(
                r.user, Stream(r.user, r.prompt_tokens), 0, Stream(r.user, r.completion_tokens)
            )
            for r in requests
        ]
    if folder is None:
        raise KvError(
            "A script with messages needs the model folder, with its tokenizer and chat template."
        )
    from kvcore.servers.chat import ChatTokenizer

    tokenizer = ChatTokenizer.from_folder(folder)
    out = []
    for i, r in enumerate(requests):
        prompt = tuple(tokenizer.prompt(r.messages))
        if len(prompt) + r.completion_tokens > context:
            raise _beyond(i, len(prompt) + r.completion_tokens, context)
        system_end = tokenizer.system_end(r.messages, list(prompt))
        reply = tuple(tokenizer.reply(r.reply, r.completion_tokens, i))
        out.append(mlx_lm_server.Turn(r.user, prompt, system_end, reply))
    return out


def server_ledger(server: str, model: str, script_text: str, argv: list[str]) -> dict:
    """The ledger of a script run through `server` (its options in `argv`, the server's own spelling)."""
    module = _server(server)
    options = parse_options(module.OPTIONS, argv, server)
    requests = parse_script(script_text)
    geometry, dtype, folder = load_model(model)
    return run(module, options, geometry, dtype, requests, folder)


def run(module, options: dict, geometry: Geometry, dtype: str, requests, folder=None) -> dict:
    """The ledger of parsed `requests` under a server `module` and its parsed `options`, for a model's geometry
    and activation dtype (what server_ledger does once it has read them; the site's chapter calls it with counts)."""
    context = geometry.max_position_embeddings or MAX_CONTEXT
    assumed = [COUNTS_ASSUMED] if requests[0].counts_only else []
    return run_turns(module, options, geometry, dtype, turns(requests, folder, context), assumed)


def make_ledger(module, options: dict, geometry: Geometry, dtype: str):
    """The server's ledger for the path it takes: mlx_lm.server is batched, or sequential once --kv-bits is given
    (`_is_batchable`, server.py#L768-L773: kvcore.servers.mlx_lm_sequential)."""
    if module is mlx_lm_server and mlx_lm_server.sequential(options):
        return mlx_lm_sequential.SequentialLedger(options, geometry, dtype)
    return module.Ledger(options, geometry, dtype)


def run_turns(module, options: dict, geometry: Geometry, dtype: str, seqs, assumed=()) -> dict:
    """The ledger of requests already as token sequences (mlx_lm_server.Turn: a recording's own token ids, or
    what `turns` made of a script)."""
    ledger = make_ledger(module, options, geometry, dtype)
    rows = [ledger.request(i, t) for i, t in enumerate(seqs)]
    return {
        "server": module.NAME,
        "model": geometry.name,
        "kv_dtype": dtype,
        "kv_bytes_per_token": ledger.row_bytes,
        "options": {k: v for k, v in options.items()},
        "assumed": list(assumed),
        "log_prefix": module.LOG_PREFIX,
        # shallow: asdict() would deep-copy every log line (a third of the time of the largest script)
        "requests": [{f.name: getattr(r, f.name) for f in fields(r)} for r in rows],
    }
