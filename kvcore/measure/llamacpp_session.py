"""A GGUF running in the real llama.cpp (llama-cpp-python): its model, contexts, what runs record.

The model is loaded with its weights (`n_gpu_layers` 999: Metal on a Mac, ignored by the CPU build).
A context is made through the low-level `llama_context_params`, the only way to set `n_seq_max` and
`swa_full` (llama-server's and llama-cli's `swa_full = false`; the C default is true), with one
cache type for K and V (`-ctk X -ctv X`), `-b` n_batch and `-ub` min(512, n_batch). `record
--runtime llama.cpp` (kvcore/measure/llamacpp_runs.py) and `quality --runtime llama.cpp`
(kvcore/measure/llamacpp_quality.py) open the file here, hold llama.cpp's cache lines against kvcore's
(`predicted`), and write the same runtime, provenance and model blocks. llama_cpp is imported inside
functions only.

Example: Context(Model(path), "q8_0", n_ctx=512, n_batch=256, threads=1).cache_lines ->
    ["llama_kv_cache: size =    5.98 MiB (   512 cells,  30 layers,  1/1 seqs), K (q8_0): ...", ...]
"""

from __future__ import annotations

import ctypes
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from kvcore.errors import KvError
from kvcore.measure.machine import measured_provenance

LLAMA_CPP_COMMIT = "0c1e570"  # vendored by llama-cpp-python 0.3.36 (its vendor/llama.cpp)


def package_version() -> str:
    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:
        return "not installed"


class Model:
    """The GGUF loaded once in llama.cpp, with its vocabulary and chat template."""

    def __init__(self, path: str):
        import llama_cpp

        from kvcore.measure import llamacpp_probe as probe

        probe.install_log()
        probe._log.clear()
        self.lc, self.path = llama_cpp, Path(path)
        mp = llama_cpp.llama_model_default_params()
        mp.n_gpu_layers = 999  # Metal on a Mac; the CPU build ignores it
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), mp)
        if not self.model:
            raise KvError(
                f"llama.cpp could not load {self.path.name}: {probe.error_line()}",
                "model_load",
                name=self.path.name,
                detail=probe.error_line(),
            )
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        self.log = list(probe._log)

    def close(self) -> None:
        self.lc.llama_model_free(self.model)

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        """llama.cpp's own tokenization of `text` (no BOS added; control tokens parsed only when
        `special`)."""
        data = text.encode("utf-8")
        size = len(data) + 16
        buf = (self.lc.llama_token * size)()
        n = self.lc.llama_tokenize(self.vocab, data, len(data), buf, size, False, special)
        return list(buf[:n])

    def decode_text(self, ids: list[int]) -> str:
        arr = (self.lc.llama_token * max(1, len(ids)))(*ids)
        size = 16 * len(ids) + 16
        out = ctypes.create_string_buffer(size)
        n = self.lc.llama_detokenize(self.vocab, arr, len(ids), out, size, True, False)
        return out.raw[: max(0, n)].decode("utf-8", "replace")

    def is_end(self, token: int) -> bool:
        return bool(self.lc.llama_vocab_is_eog(self.vocab, token))

    def chat(self, question: str) -> list[int]:
        """The file's chat template (tokenizer.chat_template) for one user turn, tokenized with its
        control tokens."""
        return self.tokenize(self.chat_text(question), special=True)

    def chat_text(self, question: str) -> str:
        """The file's chat template rendered for one user turn, ready for the assistant's answer."""
        from kvcore.measure.real_model import render_chat

        template = self.lc.llama_model_chat_template(self.model, None)
        if not template:
            raise KvError(
                f"{self.path.name} has no chat template; give --prompt '' to score the text only."
            )
        return render_chat(template.decode("utf-8"), question)


class Context:
    """One llama.cpp context of `model` whose cache stores K and V as `kv_format` (V as `v_format`
    when given: -ctk and -ctv apart), one sequence; its log and the cache lines llama.cpp logged
    making it; `flash_attn` in llama.cpp's words (auto, off, on)."""

    def __init__(
        self,
        model: Model,
        kv_format: str,
        *,
        n_ctx: int,
        n_batch: int,
        threads: int,
        flash_attn: str = "auto",
        v_format: str | None = None,
    ):
        from kvcore.measure import llamacpp_probe as probe

        lc = self.lc = model.lc
        probe._log.clear()
        cp = lc.llama_context_default_params()
        cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_seq_max = n_ctx, n_batch, min(512, n_batch), 1
        cp.type_k = probe.ggml_type(kv_format)
        cp.type_v = probe.ggml_type(v_format or kv_format)
        cp.flash_attn_type = probe.FLASH_ATTN[flash_attn]
        cp.n_threads = cp.n_threads_batch = threads
        cp.swa_full = False  # llama-server's and llama-cli's default (the C default is true)
        self.ctx = lc.llama_init_from_model(model.model, cp)
        if not self.ctx:
            raise KvError(
                f"llama.cpp could not create a {kv_format}{'/' + v_format if v_format else ''} "
                f"context for {model.path.name}: "
                f"{probe.error_line()}",
                "model_load",
                name=model.path.name,
                detail=probe.error_line(),
            )
        self.kv_format, self.v_format, self.n_vocab = (
            kv_format,
            v_format or kv_format,
            model.n_vocab,
        )
        self.n_ctx, self.n_batch, self.n_ubatch = n_ctx, n_batch, cp.n_ubatch
        self.log = list(probe._log)
        self.cache_lines = [line for line in self.log if line.startswith(probe.CACHE_LINES)]

    def close(self) -> None:
        self.lc.llama_free(self.ctx)

    def clear(self) -> None:
        self.lc.llama_memory_clear(self.lc.llama_get_memory(self.ctx), True)

    def cut(self, tokens: int) -> None:
        """Drop every cached position from `tokens` on (llama_memory_seq_rm of sequence 0)."""
        self.lc.llama_memory_seq_rm(self.lc.llama_get_memory(self.ctx), 0, tokens, -1)

    def decode(self, batch) -> None:
        """llama_decode of `batch` (a llama_batch) after what the cache holds, or one sentence if it
        fails."""
        if self.lc.llama_decode(self.ctx, batch) != 0:
            raise KvError(
                "llama.cpp's llama_decode failed (the context is full?).",
                "model_load",
                name="llama_decode",
                detail="llama_decode returned an error",
            )


def predicted(geometry, kv_format: str, n_ctx: int, n_batch: int) -> dict:
    """kvcore's llama.cpp rules for this file and a context like Context's: the cache lines and
    bytes per token."""
    from kvcore.memory.formats import KvSpec
    from kvcore.runtimes import llamacpp_cache as llamacpp
    from kvcore.runtimes.registry import runtime_of

    options = llamacpp.Options(1, batch=n_batch, ubatch=min(512, n_batch))
    result = runtime_of(geometry).report(geometry, n_ctx, KvSpec(kv_format, kv_format), 1, options)
    return {"lines": result["log_lines"], "bytes_per_token": result["kv_bytes_per_token"]}


def run_provenance(command: str, log: list[str]) -> dict:
    """A llama.cpp run's provenance: the machine, llama.cpp's device (Metal when its log names it,
    else the CPU), the versions that ran (mlx not used), and its BLAS as llama.cpp's system info
    reports it."""
    prov = measured_provenance(command)
    metal = any(
        "Metal" in line or "MTL" in line for line in log
    )  # llama.cpp names its Metal device
    prov["backend"], prov["device"] = (
        ("llama.cpp (Metal)", "gpu") if metal else ("llama.cpp (CPU)", "cpu")
    )
    prov["blas"] = system_blas()[1]
    prov["versions"] = {
        **{k: v for k, v in prov["versions"].items() if k in ("python", "kvcore")},
        "mlx": "not used",
        "mlx_lm": "not used",  # the schema names them for every measured run
        "llama_cpp_python": package_version(),
        "llama.cpp": LLAMA_CPP_COMMIT,
    }
    return prov


def system_blas() -> tuple[str, str]:
    """(llama.cpp's system info line, its BLAS in words): a BLAS backend is named in that line when
    it is built in."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode().strip(" |")
    if "BLAS" in info:
        return info, "llama.cpp's BLAS backend (named in its system info)"
    return info, "none: llama.cpp's own CPU kernels (its system info names no BLAS backend)"


def runtime_block() -> dict:
    """A llama.cpp recording's `runtime`: the package and the llama.cpp it vendors."""
    return {
        "name": "llama.cpp",
        "version": f"llama-cpp-python {package_version()} (llama.cpp {LLAMA_CPP_COMMIT})",
    }


def model_block(geometry, kv_format: str) -> dict:
    """A llama.cpp recording's `model`: the GGUF's name, weights (its own tensor types) and the
    bundled preset whose geometry is the file's (so the decode fit has it)."""
    return {
        "name": geometry.name,
        "source": "GGUF file",
        "weights_format": "gguf-file",
        "kv_format": kv_format,
        "weights_bytes": geometry.file_weights.bytes,
        "weights_bytes_active": geometry.file_weights.active_bytes,
        **preset_of(geometry),
        "weights_types": weights_types(geometry),
    }


def weights_types(geometry) -> str:
    return ", ".join(f"{t} {n} tensors" for t, n, _, _ in geometry.file_weights.by_type)


def preset_of(geometry) -> dict:
    """{"preset": name, "preset_note": ...} for the bundled preset whose llama.cpp layers, heads and
    vocabulary are the file's (so the decode fit has the model's geometry), or {} when none is."""
    from kvcore.inputs.preset_files import preset_names
    from kvcore.inputs.presets import preset_geometry

    for name in preset_names():
        p = preset_geometry(name, geometry.runtime)
        if (p.layers, p.hidden_size, p.num_attention_heads, p.vocab_size) == (
            geometry.layers,
            geometry.hidden_size,
            geometry.num_attention_heads,
            geometry.vocab_size,
        ):
            return {
                "preset": name,
                "preset_note": (
                    "the bundled preset whose layers, heads and vocabulary equal the file's"
                ),
            }
    return {}


BASELINE = "f16"  # llama.cpp's default cache type (-ctk/-ctv f16): the baseline every format is compared with
FLASH_ATTN_NOTE = (
    "flash attention on in every context, the baseline's too (llama.cpp refuses a quantized V cache "
    "without it: 'quantized V cache requires flash_attn')"
)


def parse_formats(names: list[str]) -> list[str]:
    """The cache types as llama.cpp's runtime object knows them (its -ctk/-ctv types, in llama.cpp's spelling:
    f16, q8_0, ...), or one sentence naming the first it does not know."""
    from kvcore.memory.formats import aliases, ggml_name
    from kvcore.runtimes.registry import gguf_runtime

    runtime = gguf_runtime()
    out = []
    for name in names:
        ours = aliases().get(name, name)
        if ours not in runtime.kv_formats:
            valid = ", ".join(map(ggml_name, runtime.kv_formats))
            raise KvError(
                f"Unknown KV format {name!r} for {runtime.name}'s quality; valid: {valid} (its "
                "-ctk/-ctv cache types).",
                "llamacpp_format",
                format=name,
                valid=valid,
            )
        out.append(ggml_name(ours))
    return list(dict.fromkeys(out))


class BatchContext(Context):
    """A context fed a batch at a time (flash attention on), asking for every position's logits or the last."""

    def __init__(
        self,
        model: Model,
        kv_format: str,
        n_ctx: int,
        n_batch: int,
        threads: int,
        v_format: str | None = None,
    ):
        super().__init__(
            model,
            kv_format,
            n_ctx=n_ctx,
            n_batch=n_batch,
            threads=threads,
            flash_attn="on",
            v_format=v_format,
        )
        self.batch = self.lc.llama_batch_init(n_batch, 0, 1)
        self.pos = 0

    def close(self) -> None:
        self.lc.llama_batch_free(self.batch)
        super().close()

    def clear(self) -> None:
        super().clear()
        self.pos = 0

    def feed(self, tokens: list[int], every: bool = True):
        """Decode `tokens` after what the cache holds, n_batch at a time; [n, vocab] float32 logits of every
        position (or of the last only)."""
        import numpy as np

        out = []
        for at in range(0, len(tokens), self.n_batch):
            piece = tokens[at : at + self.n_batch]
            last = at + len(piece) == len(tokens)
            rows = self._decode(piece, every, last)
            if rows is not None:
                out.append(rows)
        return np.concatenate(out)

    def _decode(self, tokens: list[int], every: bool, last: bool):
        import numpy as np

        b = self.batch
        b.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            b.token[i], b.pos[i], b.n_seq_id[i] = token, self.pos + i, 1
            b.seq_id[i][0] = 0
            b.logits[i] = 1 if every or (last and i == len(tokens) - 1) else 0
        self.decode(b)
        self.pos += len(tokens)
        rows = len(tokens) if every else int(last)
        if not rows:
            return None
        logits = self.lc.llama_get_logits(self.ctx)
        return np.ctypeslib.as_array(logits, shape=(rows, self.n_vocab)).copy()
