"""Ask a real llama.cpp (llama-cpp-python) what it allocates: load a GGUF, create a context, keep its log lines.

The model is loaded with `no_alloc` (llama.cpp sizes every buffer without allocating or reading the weights),
so a 131,072-cell cache for a 405B geometry costs nothing. The context is made through the low-level
`llama_context_params`, the only way to set `n_seq_max`, `kv_unified` and `swa_full` (the high-level
`Llama()` exposes neither of the first two and leaves llama.cpp's C default `swa_full = true`, where
llama-server and llama-cli default to false). llama.cpp's log is captured with `llama_log_set`.
llama_cpp is imported here only, lazily. Run as `python -m kvcore.measure.llamacpp_probe FILE.gguf '{"n_ctx": 4096}'`
to get the lines as JSON from a separate process (llama.cpp aborts the process on some bad inputs).

Example: allocation(path, n_ctx=4096)["lines"] ->
    ["llama_kv_cache: size =  180.00 MiB (  4096 cells,  30 layers,  1/1 seqs), K (f16): ...", ...]
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from dataclasses import asdict, dataclass

FLASH_ATTN = {"auto": -1, "off": 0, "on": 1}  # LLAMA_FLASH_ATTN_TYPE_*
ECHO = bool(
    os.environ.get("KVCORE_LLAMACPP_ECHO")
)  # echo llama.cpp's log to stderr as it comes (debugging a crash)
CACHE_LINES = ("llama_kv_cache: size =", "llama_memory_recurrent: size =")
# the buffer lines of a context: its output buffer (llama_context), KV buffers, a hybrid model's recurrent-state (RS)
# buffer (llama_memory_recurrent) and the compute buffer (sched_reserve)
BUFFER_LINES = (
    "output buffer size =",
    "compute buffer size =",
    "KV buffer size =",
    "RS buffer size =",
)


@dataclass(frozen=True)
class Request:
    """One context: llama.cpp's own parameter names (llama_context_params)."""

    n_ctx: int
    n_seq_max: int = 1
    kv_unified: bool = False
    n_batch: int = 2048  # common_params defaults (llama-cli, llama-server)
    n_ubatch: int = 512
    swa_full: bool = False
    type_k: str = "f16"
    type_v: str = "f16"
    flash_attn: str = "auto"


_log: list[str] = []
_partial: list[str] = []
_callback = None


def install_log() -> None:
    global _callback
    import llama_cpp

    if _callback is not None:
        return

    @llama_cpp.llama_log_callback
    def on_log(level, text, user_data):  # pieces of lines arrive; join them at the newline
        _partial.append(text.decode("utf-8", "replace"))
        if _partial[-1].endswith("\n"):
            _log.extend("".join(_partial).splitlines())
            _partial.clear()
            if ECHO:
                print(_log[-1], file=sys.stderr, flush=True)

    _callback = on_log
    llama_cpp.llama_log_set(_callback, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()


def ggml_type(name: str) -> int:
    """The ggml_type id of a cache type name (f16, q8_0, ...), from gguf-py's enumeration of ggml's."""
    from gguf import GGMLQuantizationType

    return int(GGMLQuantizationType[{"fp16": "F16", "fp32": "F32"}.get(name, name.upper())])


def allocations(path: str, requests: list[Request]):
    """Load `path` once (no_alloc) and create one context per request; yields one result per request:
    {"caches": the cache size lines llama.cpp logged, "error": None or its error line, "model_bytes": llama_model_size}.
    """
    import llama_cpp

    install_log()
    _log.clear()
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), _model_params())
    if not model:
        error = error_line()
        for _ in requests:
            yield {"caches": [], "model_bytes": None, "error": error}
        return
    try:
        model_bytes = int(llama_cpp.llama_model_size(model))
        for request in requests:
            _log.clear()
            cp = llama_cpp.llama_context_default_params()
            cp.n_ctx, cp.n_batch, cp.n_ubatch = request.n_ctx, request.n_batch, request.n_ubatch
            cp.n_seq_max, cp.kv_unified, cp.swa_full = (
                request.n_seq_max,
                request.kv_unified,
                request.swa_full,
            )
            cp.type_k, cp.type_v = ggml_type(request.type_k), ggml_type(request.type_v)
            cp.flash_attn_type = FLASH_ATTN[request.flash_attn]
            cp.n_threads = cp.n_threads_batch = 1
            ctx = llama_cpp.llama_init_from_model(model, cp)
            error = None if ctx else error_line()
            if ctx:
                llama_cpp.llama_free(ctx)
            yield {
                "caches": [line for line in _log if line.startswith(CACHE_LINES)],
                "buffers": [line for line in _log if any(b in line for b in BUFFER_LINES)],
                "model_bytes": model_bytes,
                "error": error,
                "log": [line for line in _log if "flash_attn" in line or "n_ctx" in line],
            }
    finally:
        llama_cpp.llama_model_free(model)


def allocation(path: str, request: Request) -> dict:
    """One context for `path`: see allocations()."""
    return next(allocations(path, [request]))


def _model_params():
    """no_alloc on the CPU without mmap or lazy reads (no_alloc asserts against a mapped buffer, llama-model.cpp:1855)."""
    import llama_cpp

    mp = llama_cpp.llama_model_default_params()
    mp.no_alloc, mp.n_gpu_layers = True, 0
    mp.load_mode, mp.lazy_mode = 0, 0  # LLAMA_LOAD_MODE_NONE, LLAMA_LAZY_MODE_OFF
    return mp


def load_only(path: str) -> tuple[str | None, list[str]]:
    """Load `path` with no_alloc and free it: (None when llama.cpp accepts the file, else its error line; the log)."""
    import llama_cpp

    install_log()
    _log.clear()
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), _model_params())
    if not model:
        return error_line(), list(_log)
    llama_cpp.llama_model_free(model)
    return None, list(_log)


def error_line() -> str:
    errors = [line for line in _log if "error" in line.lower() or "failed" in line.lower()]
    return errors[0] if errors else (_log[-1] if _log else "llama.cpp failed without a log line")


def main(argv: list[str]) -> int:
    """`python -m kvcore.measure.llamacpp_probe FILE '[{request}, ...]'`: one JSON line per request, as each is done."""
    path, requests = argv[0], [Request(**r) for r in json.loads(argv[1])]
    for request, result in zip(requests, allocations(path, requests)):
        print(json.dumps({"request": asdict(request), **result}), flush=True)
    return 0


def run_isolated(path: str, requests: list[Request], timeout: float = 600) -> list[dict]:
    """allocations() in a child process, so that a request llama.cpp aborts on (GGML_ASSERT) costs that request only:
    its result is {"crashed": the last lines of the child's stderr}, and the rest run in a new child."""
    import subprocess

    results: list[dict] = []
    while len(results) < len(requests):
        rest = requests[len(results) :]
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "kvcore.measure.llamacpp_probe",
                str(path),
                json.dumps([asdict(r) for r in rest]),
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        done = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
        results += done
        if child.returncode != 0 and len(done) < len(rest):
            tail = [
                line
                for line in child.stderr.splitlines()
                if "GGML_ASSERT" in line or "error" in line.lower()
            ]
            results.append(
                {
                    "request": asdict(rest[len(done)]),
                    "crashed": (tail or child.stderr.splitlines()[-3:])[-1:],
                }
            )
        elif len(done) < len(rest):
            raise RuntimeError(f"llama.cpp probe stopped early: {child.stderr[-500:]}")
    return results


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
