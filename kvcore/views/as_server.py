"""The Calculator "as a server": the reader's model behind its runtime's server (mlx_lm -> mlx_lm.server,
llama.cpp -> llama-server), users taking turns in a counts-only conversation run through that server's ledger
(kvcore.servers.ledger.run), what stays resident after each turn and the conversation's peak, judged as the
Calculator judges (kvcore.capacity.memory_fit) and said side by side:

- GPU side, against the memory the GPU may use (a Mac's working set): the weights and the runtime's working memory
  (its memory plan's buffers beside the cache) and, for llama-server, the slot pool: `-c` cells allocated once at
  start, whatever they hold (the Calculator's own plan for `-c`, `-np`, `-kvu`, `-ctk/-ctv` is the server's); for
  mlx_lm.server every cache, the one a request fills and every prompt-cache entry, all MLX arrays in GPU buffers.
- host side, in RAM outside the GPU's working set: llama-server's prompt cache (`--cache-ram`), slot states saved
  into host memory (server-task.cpp `server_prompt_cache`); mlx_lm.server keeps nothing there.
What stays after a request counts the working memory too: llama-server's compute buffers are allocated once;
mlx_lm's freed buffers stay in MLX's buffer cache, whose limit defaults to the memory limit
(https://ml-explore.github.io/mlx/build/html/python/_autosummary/mlx.core.metal.set_cache_limit.html).

`resident_bytes` and `peak_bytes` are the ledger's own figures (its last row's resident bytes, its highest peak);
the GPU and host figures split them and add what the runtime holds beside the cache.
Example: as_server(Request(ModelSource("llama-3.1-8b"), 8192, runtime="mlx_lm", memory_bytes=2**34),
    ServerAsk(users=2, turns=4), geometry).fit.status -> "fits"
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from kvcore.capacity import calculator
from kvcore.capacity.memory_fit import Fit, plan_allowance
from kvcore.capacity.request import Request
from kvcore.errors import KvError
from kvcore.limits import (
    MAX_CHAPTER_TURN_TOKENS,
    MAX_CHAPTER_TURNS,
    MAX_CHAPTER_USERS,
    MAX_PROMPT_CACHE_ENTRIES,
    MAX_RAM_GB,
    MIN_RAM_GB,
)
from kvcore.memory.formats import get_format, ggml_name
from kvcore.model.geometry import Geometry
from kvcore.runtimes import llamacpp_cache
from kvcore.runtimes.registry import RUNTIMES
from kvcore.servers import llama_server, mlx_lm_server
from kvcore.servers.ledger import run
from kvcore.servers.options import parse_options
from kvcore.servers.script import parse_script
from kvcore.units import GIB
from kvcore.views.llama_server import printed_line
from kvcore.views.servers import conversation

MODULES = {mlx_lm_server.NAME: mlx_lm_server, llama_server.NAME: llama_server}
DEFAULTS = {o.flag: o.default for m in MODULES.values() for o in m.OPTIONS}
# the runtimes whose server has a ledger (each runtime object names its server), by runtime
SERVER_OF = {name: rt.server for name, rt in RUNTIMES.items() if rt.server in MODULES}
MLX_DTYPES = ("fp16", "bf16", "fp32")  # the KVCache dtypes mlx_lm.server stores without --kv-bits
# llama-server's --cache-ram as its ledger bounds it
MAX_CACHE_RAM_MIB = next(o.high for o in llama_server.OPTIONS if o.flag == "--cache-ram")
# what the ledger leaves out, said with every answer (the site and the CLI give each its words by code)
NOTES = {
    "serial": "the requests run one after another, as the ledger models them (never two in flight)",
    "counts": "counts only: each user's prompt extends that user's previous prompt and reply token for token; "
    "users share no prefix",
    "mlx_sequences": "mlx_lm.server has no slots: the Calculator's sequences and context do not apply to it; "
    "its caches grow with the conversation",
    "mlx_working": "the working memory is mlx_lm's plan for one request of the conversation's longest prompt",
    "mlx_resident": "between requests that working memory stays in MLX's buffer cache for the next one (its cache "
    "limit defaults to the memory limit), so it counts as resident",
    "llama_pool": "llama-server allocates its slot pool once at start: the GPU side is the Calculator's plan "
    "for the same -c, -np and -kvu, whatever the slots hold",
    "mlx_kv_bits": "an mlx-quantized format runs mlx_lm.server with --kv-bits and --kv-group-size: one request at "
    "a time, each from a copy of the entry it resumes, its cache quantized once it passes --quantized-kv-start "
    "(5,000 tokens by default), not before",
}


def _whole(name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise KvError(
            f"The {name} must be a whole number from {low:,} to {high:,}.",
            "server_bound",
            name=name,
            low=f"{low:,}",
            high=f"{high:,}",
        )
    return value


@dataclass(frozen=True)
class ServerAsk:
    """The conversation and the server's own options the Calculator does not already hold: users taking turns
    (a1 b1 ... a2 b2 ...), each turn a message of `message_tokens` and a reply of `reply_tokens`; llama-server's
    `--cache-ram` (MiB: -1 no limit, 0 off), mlx_lm.server's `--prompt-cache-size`; the machine's RAM for the
    host side's verdict (None: not judged). Every field is bounded here, before any work."""

    users: int = 1
    turns: int = 8
    message_tokens: int = 256
    reply_tokens: int = 256
    cache_ram_mib: int = DEFAULTS["--cache-ram"]
    prompt_cache_size: int = DEFAULTS["--prompt-cache-size"]
    ram_bytes: int | None = None

    def __post_init__(self) -> None:
        _whole("number of users", self.users, 1, MAX_CHAPTER_USERS)
        _whole("number of turns", self.turns, 1, MAX_CHAPTER_TURNS)
        _whole("message length", self.message_tokens, 1, MAX_CHAPTER_TURN_TOKENS)
        _whole("reply length", self.reply_tokens, 1, MAX_CHAPTER_TURN_TOKENS)
        _whole("--cache-ram", self.cache_ram_mib, -1, MAX_CACHE_RAM_MIB)
        _whole("--prompt-cache-size", self.prompt_cache_size, 1, MAX_PROMPT_CACHE_ENTRIES)
        if self.ram_bytes is not None:
            _whole("RAM", self.ram_bytes, MIN_RAM_GB * GIB, MAX_RAM_GB * GIB)

    def script(self) -> list[dict]:
        return conversation(self.users, self.turns, self.message_tokens, self.reply_tokens)


@dataclass(frozen=True)
class ServerResult:
    """What the server holds, turn by turn and at the conversation's peak, and the verdicts (see the module)."""

    server: str
    command: str  # the server's command line the ledger ran, in its own spelling
    kv_type: (
        str  # the cache's type as the server names it (mlx: the KVCache dtype; llama: -ctk/-ctv)
    )
    turns: tuple[dict, ...]  # per turn, after every user's request of it
    resident_bytes: int  # the ledger's: its last row's resident_bytes
    peak_bytes: int  # the ledger's: its highest peak_bytes
    weights_bytes: int
    working_bytes: int  # the runtime's plan beside the weights and the cache
    gpu_resident_bytes: int
    gpu_peak_bytes: int  # what the GPU verdict compares
    host_resident_bytes: int
    host_peak_bytes: int
    host_cap_bytes: (
        int | None
    )  # llama-server's --cache-ram in bytes (None: no limit, or no host side)
    cached_tokens: int
    reprocessed_tokens: int
    server_line: str  # what the server's own line says of its prompt cache after the conversation
    fit: Fit | None  # GPU side against the GPU's limit (None: no memory given)
    host_fit: (
        dict | None
    )  # llama-server: GPU + host side against the RAM {"status", "need_bytes", "ram_bytes"}
    notes: tuple[str, ...]  # NOTES codes

    def as_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "fit"}
        out["turns"] = list(self.turns)
        out["notes"] = [NOTES[n] for n in self.notes]
        out["fit"] = self.fit.as_dict() if self.fit else None
        return out


def server_for(runtime: str) -> str:
    """The server a runtime's reader runs, as the runtime object names it (mlx_lm: mlx_lm.server, llama.cpp:
    llama-server), where the servers' ledgers model it."""
    if runtime not in SERVER_OF:
        raise KvError(
            f"The {runtime} runtime is no server's; pick mlx_lm (mlx_lm.server) or llama.cpp (llama-server).",
            "server_runtime",
            runtime=runtime,
        )
    return SERVER_OF[runtime]


def runtime_for(server: str) -> str:
    """The runtime whose server `server` is (the runtime object names it): llama.cpp for llama-server."""
    for runtime, name in SERVER_OF.items():
        if name == server:
            return runtime
    raise KvError(f"No runtime names {server!r} its server; the servers are {', '.join(MODULES)}.")


def _mlx_argv(request: Request, ask: ServerAsk) -> tuple[list[str], str]:
    """mlx_lm.server's options for `request`: its float dtype as the cache's, or an mlx-quantized format as
    --kv-bits and --kv-group-size (the cache in the activations' dtype until --quantized-kv-start, the server's
    default); K and V in one format, as mlx_lm keeps them."""
    fmt = get_format(request.k_format)
    quantized = fmt.kind == "mlx"
    if request.k_format != request.v_format or not (quantized or request.k_format in MLX_DTYPES):
        raise KvError(
            f"mlx_lm.server stores K and V in one format: a float dtype ({', '.join(MLX_DTYPES)}), or mlx's "
            f"quantized format with --kv-bits (mlx-q8, mlx-q4, ...); not K {request.k_format} and V "
            f"{request.v_format}.",
            "server_mlx_format",
            k=request.k_format,
            v=request.v_format,
        )
    step = request.options().prefill_step
    argv = ["--prompt-cache-size", str(ask.prompt_cache_size), "--prefill-step-size", str(step)]
    if quantized:
        argv += ["--kv-bits", str(fmt.bits), "--kv-group-size", str(request.group_size)]
        return argv, request.activation_dtype
    return argv, request.k_format


def _llama_argv(request: Request, ask: ServerAsk) -> tuple[list[str], str]:
    options = request.options()
    k, v = ggml_name(request.k_format), ggml_name(request.v_format)
    argv = ["-c", str(request.context), "-np", str(request.sequences)]
    argv += ["-kvu"] if options.unified else []
    argv += ["-ctk", k, "-ctv", v, "-fa", request.flash_attn, "--cache-ram", str(ask.cache_ram_mib)]
    return argv, k if k == v else f"{k}/{v}"


def _slot_check(request: Request, longest: int) -> None:
    """Every turn's prompt and reply within one slot: -c shared by the slots (-kvu), else -c / -np each."""
    cells, _ = llamacpp_cache.context_cells(request.context, request.options())
    if longest > cells:
        raise KvError(
            f"The last turn holds {longest:,} tokens, beyond the {cells:,} a slot holds at -c "
            f"{request.context:,} -np {request.sequences}; give a longer context, fewer turns or shorter turns.",
            "server_slot",
            tokens=longest,
            cells=cells,
            context=request.context,
            slots=request.sequences,
        )


def _server_line(server: str, rows: list[dict]) -> str:
    """What mlx_lm.server's `Prompt Cache: N sequences, X GB` would say before the next request; what llama-server's
    last `cache state: N prompts, X MiB (limits: ...)` said (printed while it picks a slot)."""
    last = rows[-1]
    if server == mlx_lm_server.NAME:
        n, nbytes = last["prompt_cache_entries"], last["prompt_cache_bytes"]
        return f"{n} sequences, {nbytes / 1e9:.2f} GB"
    line = next((x for r in reversed(rows) if (x := printed_line(r))), None)
    return line.split("cache state: ", 1)[1] if line else ""


def as_server(request: Request, ask: ServerAsk, geometry: Geometry) -> ServerResult:
    """The conversation `ask` through the server of `request`'s runtime, for `request`'s model (`geometry`, as the
    Calculator read it), formats and settings; with the request's memory, the Calculator's verdict on the GPU side
    at the conversation's peak, and with `ask.ram_bytes` (llama-server: a host side), both sides against the RAM."""
    server = server_for(request.runtime)
    module = MODULES[server]
    script = ask.script()
    longest = max(r["prompt_tokens"] + r["completion_tokens"] for r in script)
    notes = ["serial", "counts"]
    if server == llama_server.NAME:
        _slot_check(request, longest)
        argv, kv_type = _llama_argv(request, ask)
        sized = calculator.size(request.sized(), geometry)  # the pool as the server allocates it
        notes.append("llama_pool")
    else:
        argv, kv_type = _mlx_argv(request, ask)
        sized = calculator.size(replace(request.sized(), context=longest, sequences=1), geometry)
        notes += ["mlx_sequences", "mlx_working", "mlx_resident"]
    options = parse_options(module.OPTIONS, argv, server)
    if module is mlx_lm_server and mlx_lm_server.sequential(options):
        notes.append("mlx_kv_bits")  # its sequential path, read from the options as parsed
    rows = run(module, options, geometry, kv_type, parse_script(json.dumps(script)))["requests"]
    plan = sized.plan
    cache_parts = ("kv",) if server == llama_server.NAME else ("kv", "growth")
    if plan is not None:
        working = plan["total_bytes"] - sized.weights_bytes
        working -= sum(p["bytes"] for p in plan["parts"] if p["kind"] in cache_parts)
    else:
        working = (
            0  # without a plan: weights and the caches only, said by the verdict ("unplanned")
        )

    def sides(row: dict, peak: bool) -> tuple[int, int]:
        held = row["peak_bytes"] if peak else row["resident_bytes"]
        if server == mlx_lm_server.NAME:  # every cache an MLX array: GPU side
            return sized.weights_bytes + working + held, 0
        pool = row[
            "active_kv_bytes"
        ]  # the slot pool; the rest of the ledger's bytes is the prompt cache
        return sized.weights_bytes + working + pool, held - pool

    turns = []
    for t in range(ask.turns):
        these = rows[t * ask.users : (t + 1) * ask.users]
        gpu, host = sides(these[-1], False)
        peaks = [sides(r, True) for r in rows[: (t + 1) * ask.users]]
        gpu_peak, host_peak = max(g for g, _ in peaks), max(h for _, h in peaks)
        turns.append(
            {
                "turn": t + 1,
                "prompt_tokens": these[-1]["prompt_tokens"],
                "cached_tokens": sum(r["cached_tokens"] for r in these),
                "reprocessed_tokens": sum(r["reprocessed_tokens"] for r in these),
                "resident_bytes": these[-1]["resident_bytes"],
                "peak_bytes": max(r["peak_bytes"] for r in rows[: (t + 1) * ask.users]),
                "gpu_resident_bytes": gpu,
                "host_resident_bytes": host,
                "gpu_peak_bytes": gpu_peak,
                "host_peak_bytes": host_peak,
            }
        )
    last = turns[-1]
    fit = None
    if request.memory_bytes is not None:
        allowance = plan_allowance(plan) if plan is not None else None
        fit = calculator.verdict(last["gpu_peak_bytes"], request.memory_bytes, allowance)
    host_fit = None
    if ask.ram_bytes is not None and server == llama_server.NAME:  # mlx_lm.server: no host side
        need = last["gpu_peak_bytes"] + last["host_peak_bytes"]
        status = "fits" if need <= ask.ram_bytes else "no"
        host_fit = {"status": status, "need_bytes": need, "ram_bytes": ask.ram_bytes}
    cap = None
    if server == llama_server.NAME and ask.cache_ram_mib >= 0:
        cap = ask.cache_ram_mib * llama_server.MIB
    return ServerResult(
        server=server,
        command=" ".join([server, *argv]),
        kv_type=kv_type,
        turns=tuple(turns),
        resident_bytes=rows[-1]["resident_bytes"],
        peak_bytes=max(r["peak_bytes"] for r in rows),
        weights_bytes=sized.weights_bytes,
        working_bytes=working,
        gpu_resident_bytes=last["gpu_resident_bytes"],
        gpu_peak_bytes=last["gpu_peak_bytes"],
        host_resident_bytes=last["host_resident_bytes"],
        host_peak_bytes=last["host_peak_bytes"],
        host_cap_bytes=cap,
        cached_tokens=sum(r["cached_tokens"] for r in rows),
        reprocessed_tokens=sum(r["reprocessed_tokens"] for r in rows),
        server_line=_server_line(server, rows),
        fit=fit,
        host_fit=host_fit,
        notes=tuple(notes),
    )
