"""A log read back: the model and settings from its own lines, and every size line beside kvcore's plan.

kvcore.inputs.logs finds the facts; this module rebuilds the model from the log's print_info / GGUF-key lines
(kvcore.inputs.gguf.geometry_from_keys: the reading a GGUF header gets) and the run's settings (n_ctx, n_seq_max,
n_ubatch, flash_attn, K and V types), asks llama.cpp's plan (kvcore.runtimes.llamacpp_plan) for the same settings,
and sets each printed size beside the planned one:

    KV cache, KV buffer, output buffer   equal at the printed precision (the plan is exact; llamacpp_cache)
    model buffer                         the file size print_info states, at its printed precision
    compute buffer (CPU build)           within the plan's measured tolerance (COMPUTE_TOLERANCE)
    compute buffer (Metal, MTL0)         the Metal rule (the CPU build's graph + ggml-metal's extra room), same
                                         tolerance
    MTL0_Mapped model buffer             the file size print_info states (the host's CPU_Mapped line beside it
                                         is the input embedding, the same file pages mapped again)
    host compute buffer beside a GPU's, Ollama's estimates without the model's lines, mlx_lm's peak: printed,
                                         not re-derived (the line says why)

Then the verdict against the log's own working-set line (recommendedMaxWorkingSetSize, or ggml-metal's running
"(allocated / limit)" figure). Every line's explanation is one English sentence; its key `log.<code>` and params
are the site's (kvsite/i18n/{en,ja}.yaml).
Example: reading(open("recordings/logs/llamacpp-metal-m4-16gb-qwen2.log").read()).runtime -> "llama.cpp"
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import KvError
from kvcore.inputs.gguf import geometry_from_keys
from kvcore.inputs.logs import GIB, HPARAM_KEYS, MIB, Fact, printed_bytes, read_log
from kvcore.runtimes import llamacpp_cache, llamacpp_plan

SIZED = (
    "kv_cache",
    "kv_buffer",
    "output_buffer",
    "model_buffer",
    "compute_buffer",
    "compute_exit",
    "working_set",
    "metal_alloc",
    "ollama",
    "system_memory",
    "mlx_peak",
)
BUFFERS = ("kv_buffer", "output_buffer", "model_buffer", "compute_buffer")
GPU_DEVICES = ("Metal", "MTL", "CUDA", "ROCm", "Vulkan")
OLLAMA_KV = "memory.required.kv"

# code -> the English sentence (the site's texts: log.<code> in kvsite/i18n/en.yaml, the same words, and ja.yaml)
TEXTS = {
    "model": "The model: {key} = {value}, read back to plan its buffers.",
    "setting": "A setting of this run: {what}.",
    "device": "The GPU the runtime found: {gpu}.",
    "kv_layer": "One layer's K and V widths as llama.cpp stored them: {k} and {v} values per cell.",
    "kv_cache": "The KV cache: {cells} cells x {layers} layers of K and V rows ({types}), allocated whole when "
    "the context is created; kvcore's plan for these settings: {derived}.",
    "kv_buffer": "The buffer that holds that KV cache on {device}; kvcore's plan: {derived}.",
    "output_buffer": "The logits of one token per sequence: n_vocab x n_seq_max x 4 bytes; kvcore's plan: "
    "{derived}.",
    "model_buffer": "The weights on {device}, the file's tensors as stored; print_info's file size: {derived}.",
    "model_split": "Part of the weights, on {device}: the file's tensors are split across devices here, so this "
    "line alone is not planned.",
    "compute_buffer": "The compute buffer: the graph of the largest micro-batch (n_ubatch tokens over the whole "
    "cache); kvcore's plan for the CPU build: {derived}, held within {tolerance} of the real build.",
    "compute_metal": "The Metal compute buffer: the graph of the largest micro-batch, each tensor with the extra "
    "room ggml-metal reserves for its kernels (beside flash attention: f16 copies of K and V); kvcore's plan for "
    "Metal: {derived}, held within {tolerance}.",
    "model_metal": "The weights on {device}: the span of the file that holds the offloaded tensors, mapped for the "
    "GPU; print_info's file size: {derived}.",
    "model_host": "The input embedding on {device}: llama.cpp keeps the input layer on the CPU, mapped from the "
    "same file pages as the GPU's buffer, so it is not more memory; not planned.",
    "compute_exit": "The same compute buffer, printed again to four decimals as the context is freed; kvcore's "
    "plan: {derived}, held within {tolerance}.",
    "compute_host": "The host's compute buffer beside {gpu}'s (the CPU's share of a split graph): not planned.",
    "compute_2023": "The compute buffer of a 2023 build (its graph has changed since): not planned.",
    "needs_model": "Printed, not re-derived: {why}.",
    "working_set": "macOS's limit on what the GPU may hold (recommendedMaxWorkingSetSize), in {unit}.",
    "metal_alloc": "ggml-metal's allocation of {what}, and its running total against the working-set limit "
    "({total} of {limit} MiB){over}.",
    "ollama": "Ollama's own estimate, {figure}; {derived}.",
    "system_memory": "The machine's memory, as Ollama reads it.",
    "mlx_peak": "mlx_lm's peak: the most the GPU held at once during the run (mx.get_peak_memory(), GB of 10^9 "
    "bytes); it depends on the prompt, so it is printed, not re-derived from the log.",
    "mlx_tokens": "mlx_lm's {phase}: {tokens} tokens.",
    "gguf_key": "A key of the GGUF file: {key} = {value}, read back to plan its buffers.",
}
NOTES = {
    "mb_1024": "This log writes MB for 1024-based sizes (llama.cpp and ggml-metal in 2023): they are read as "
    "MiB.",
    "mb_mixed": "The working-set line is in MB (10^6 bytes) while the buffers are in MiB (2^20 bytes): they "
    "are compared in bytes.",
}


@dataclass(frozen=True)
class Row:
    """One known line: its figure as printed and in bytes, kvcore's figure, whether they agree, and why."""

    n: int
    kind: str
    printed: str | None
    printed_bytes: int | None
    derived_bytes: int | None
    agrees: bool | None
    code: str
    params: dict

    @property
    def explained(self) -> str:
        return TEXTS[self.code].format(**self.params)

    def as_dict(self) -> dict:
        return {
            "n": self.n,
            "kind": self.kind,
            "printed": self.printed,
            "printed_bytes": self.printed_bytes,
            "derived_bytes": self.derived_bytes,
            "agrees": self.agrees,
            "explained": self.explained,
            "key": f"log.{self.code}",
            "params": self.params,
        }


@dataclass(frozen=True)
class Reading:
    """A log as kvcore reads it: who printed it, on what, the model and settings, each line, the verdict."""

    runtime: str | None
    device: str | None
    model: dict
    settings: dict
    rows: tuple[Row, ...]
    unknown_lines: tuple[tuple[int, str], ...]
    verdict: dict | None
    notes: tuple[str, ...]

    def as_dict(self) -> dict:
        return {
            "runtime": self.runtime,
            "device": self.device,
            "model": self.model,
            "settings": self.settings,
            "lines": [r.as_dict() for r in self.rows],
            "unknown_lines": [{"n": n, "text": t} for n, t in self.unknown_lines],
            "verdict": self.verdict,
            "notes": [NOTES[c] for c in self.notes],
            "note_keys": [f"log.note_{c}" for c in self.notes],
        }


def _mib(n_bytes: int) -> str:
    return f"{n_bytes / MIB:.2f} MiB"


def _same(printed: str, derived: int) -> bool:
    """Equal as llama.cpp prints MiB: two decimals."""
    return f"{derived / MIB:.2f}" == f"{float(printed):.2f}"


def _model(facts: list[Fact]) -> tuple[dict, dict]:
    """(the GGUF keys the log states, what it says of the model for readers)."""
    said = {f.values["key"]: f.values["value"] for f in facts if f.kind == "model"}
    keys = {f.values["key"]: f.values["value"] for f in facts if f.kind == "gguf_key"}
    arch = said.get("arch") or keys.get("general.architecture")
    if not arch and any(f.values.get("loader") == "llama_model_load_internal" for f in facts):
        arch = "llama"  # the 2023 loader (ggjt files) read LLaMA models only
    if arch:
        keys.setdefault("general.architecture", arch)
        for name, key in HPARAM_KEYS.items():
            if name in said:
                keys.setdefault(key.format(arch=arch), said[name])
        if "tokenizer.ggml.tokens" in keys:
            keys.setdefault(f"{arch}.vocab_size", keys["tokenizer.ggml.tokens"])
    return keys, {"arch": arch, **{k: v for k, v in said.items() if k != "arch"}}


def _settings(facts: list[Fact]) -> dict:
    s: dict = {}
    for f in facts:
        if f.kind == "setting":
            s.update(f.values)
    if "ctx_size" in s:  # Ollama starts its runner with --ctx-size and --parallel
        s.setdefault("n_ctx", s["ctx_size"])
    if "parallel" in s:
        s.setdefault("n_seq_max", s["parallel"])
    if "kv_size" in s:
        s.setdefault("n_ctx", s["kv_size"])
    kv = next((f.values for f in facts if f.kind == "kv_cache" and "k_type" in f.values), None)
    if kv:
        s.setdefault("type_k", kv["k_type"])
        s.setdefault("type_v", kv["v_type"])
        if "cells" in kv and "n_ctx" not in s and "swa_cells" not in s:
            s["n_ctx"] = kv["cells"]  # the cache's cells: n_ctx padded to 256
    return s


def _flash(value) -> str:
    text = str(value).lower()
    return {
        "enabled": "on",
        "true": "on",
        "1": "on",
        "disabled": "off",
        "false": "off",
        "0": "off",
    }.get(text, "auto" if text == "auto" else "auto")


def _plan(keys: dict, settings: dict, file_bytes: int | None, backend: str = "cpu"):
    """llama.cpp's plan for the log's model and settings, or (None, why)."""
    if "n_ctx" not in settings:
        return None, "the log does not state the context (n_ctx)"
    try:
        geometry = geometry_from_keys(keys, "the log's model")
        options = llamacpp_cache.Options(
            backend=backend,
            sequences=int(settings.get("n_seq_max", 1)),
            unified=str(settings.get("kv_unified", "false")).lower() in ("true", "1"),
            batch=int(settings.get("n_batch", llamacpp_cache.DEFAULT_BATCH)),
            ubatch=int(settings.get("n_ubatch", llamacpp_cache.DEFAULT_UBATCH)),
        )
        k, v = settings.get("type_k", "f16"), settings.get("type_v", "f16")
        plan = llamacpp_plan.plan(
            geometry,
            int(settings["n_ctx"]),
            k,
            v,
            options,
            _flash(settings.get("flash_attn", "auto")),
            weights_bytes=file_bytes or 0,
        )
        caches = llamacpp_cache.caches(geometry, int(settings["n_ctx"]), k, v, options)
    except KvError as e:
        return None, f"kvcore cannot plan the model the log describes ({e})"
    return (geometry, plan, caches), ""


def _file_bytes(model: dict) -> int | None:
    size = str(model.get("file size") or model.get("model size") or "")
    parts = size.split()
    if len(parts) >= 2 and parts[1] in ("MiB", "GiB"):
        return printed_bytes(parts[0], parts[1])
    return None


def reading(text: str, label: str = "the log") -> Reading:
    """Read a pasted log: its facts, the plan for its model and settings, each size line beside it."""
    log = read_log(text, label)
    facts = list(log.facts)
    keys, model = _model(facts)
    settings = _settings(facts)
    file_bytes = _file_bytes(model)
    gpus = [f.values for f in facts if f.kind == "device"]
    gpu = next((g["gpu"] for g in gpus if "name" in g), None) or next(
        (g["gpu"] for g in gpus), None
    )
    devices = {f.values.get("device", "") for f in facts if f.kind in BUFFERS}
    on_gpu = any(d.startswith(GPU_DEVICES) for d in devices) or any(
        f.kind in ("working_set", "metal_alloc") for f in facts
    )
    metal = any(d.startswith(("Metal", "MTL")) for d in devices) or any(
        f.kind in ("working_set", "metal_alloc") for f in facts
    )
    planned, why = (
        _plan(keys, settings, file_bytes, "metal" if metal else "cpu")
        if keys.get("general.architecture")
        else (None, "the log does not print the model's dimensions (its print_info lines)")
    )
    era_2023 = any(f.kind == "metal_alloc" and f.values["buffer"] for f in facts) or any(
        f.values.get("loader") == "llama_model_load_internal" for f in facts
    )
    model_lines = [f for f in facts if f.kind == "model_buffer"]
    rows, caches_seen, buffers_seen, notes = [], 0, 0, []
    for f in facts:
        v = f.values
        if f.kind not in SIZED:
            params = _info_params(f)
            rows.append(Row(f.n, f.kind, None, None, None, None, f.kind, params))
            continue
        mb = MIB if era_2023 else 10**6
        nbytes = printed_bytes(v["printed"], v["unit"], mb)
        printed = f"{v['printed']} {v['unit']}"
        code, derived, agrees, params = f.kind, None, None, {}
        if f.kind in ("kv_cache", "kv_buffer"):
            if planned:
                _, plan, caches = planned
                i = caches_seen if f.kind == "kv_cache" else buffers_seen
                many = "cells" not in v and f.kind == "kv_cache"  # KV self size: every cache summed
                derived = (
                    sum(c.bytes for c in caches)
                    if many
                    else (caches[i].bytes if i < len(caches) else None)
                )
                agrees = None if derived is None else _same(v["printed"], derived)
            if f.kind == "kv_cache":
                caches_seen += 1
                cache = planned[2][0] if planned and planned[2] else None
                params = {
                    "cells": v.get("cells", cache and cache.cells),
                    "layers": v.get("layers", cache and len(cache.layers)),
                    "types": f"{v.get('k_type', 'f16')}/{v.get('v_type', 'f16')}",
                }
            else:
                buffers_seen += 1
                params = {"device": v["device"]}
        elif f.kind == "output_buffer" and planned:
            derived = planned[1].output_bytes
            agrees = _same(v["printed"], derived)
        elif f.kind == "model_buffer":
            params = {"device": v["device"]}
            mapped = {m.values["device"] for m in model_lines}
            if mapped == {"CPU_Mapped", "MTL0_Mapped"} and len(model_lines) == 2:
                code = "model_host" if v["device"] == "CPU_Mapped" else "model_metal"
                if code == "model_metal" and file_bytes:
                    derived = file_bytes
                    agrees = abs(nbytes - derived) <= 0.005 * GIB + 0.005 * MIB
            elif len(model_lines) > 1:
                code = "model_split"
            elif file_bytes:
                derived = file_bytes
                agrees = abs(nbytes - derived) <= 0.005 * GIB + 0.005 * MIB
        elif f.kind in ("compute_buffer", "compute_exit"):
            device = v["device"]
            if v["unit"] == "MB":
                code = "compute_2023"
            elif device == "CPU" and on_gpu:
                code, params = "compute_host", {"gpu": gpu or "the GPU"}
            elif planned:
                derived = planned[1].compute_bytes
                agrees = abs(derived - nbytes) <= llamacpp_plan.compute_allowance(nbytes)
                code = "compute_metal" if device.startswith(("Metal", "MTL")) else "compute_buffer"
                code = "compute_exit" if f.kind == "compute_exit" else code
                floor_mib = llamacpp_plan.COMPUTE_FLOOR // 2**20
                params = {
                    "tolerance": f"max({floor_mib} MiB, {llamacpp_plan.COMPUTE_TOLERANCE:.0%})"
                }
        elif f.kind == "working_set":
            params = {
                "unit": "MiB (2^20 bytes), as 2023 builds printed it"
                if era_2023
                else "MB (10^6 bytes)"
            }
        elif f.kind == "metal_alloc":
            params = {
                "what": f"the '{v['buffer']}' buffer" if v["buffer"] else "a buffer",
                "total": v["total"],
                "limit": v["limit"],
                "over": ": over the limit, as the line warns" if v["over"] else "",
            }
        elif f.kind == "ollama":
            params = {"figure": v["figure"], "derived": "not re-derived"}
            if v["figure"] == OLLAMA_KV and planned:
                derived = planned[1].kv_bytes
                agrees = f"{derived / UNIT_OF[v['unit']]:.1f}" == f"{float(v['printed']):.1f}"
                params["derived"] = f"kvcore's plan: {_mib(derived)}"
        if derived is not None and "derived" not in params:
            params["derived"] = _mib(derived)
        if (
            code
            in (
                "kv_cache",
                "kv_buffer",
                "output_buffer",
                "model_buffer",
                "model_metal",
                "compute_buffer",
                "compute_metal",
                "compute_exit",
            )
            and derived is None
        ):
            lacking = "the log does not print the file's size (print_info)"
            code, params = "needs_model", {"why": lacking if f.kind == "model_buffer" else why}
        rows.append(Row(f.n, f.kind, printed, nbytes, derived, agrees, code, params))
    if era_2023 and any(f.values.get("unit") == "MB" for f in facts):
        notes.append("mb_1024")
    elif any(f.kind == "working_set" for f in facts) and any(f.kind in BUFFERS for f in facts):
        notes.append("mb_mixed")
    return Reading(
        _runtime(facts),
        _device(facts, on_gpu, gpu),
        {**model, "file_bytes": file_bytes},
        settings,
        tuple(rows),
        log.unknown,
        _verdict(rows),
        tuple(notes),
    )


UNIT_OF = {"B": 1, "KiB": 1024, "MiB": MIB, "GiB": GIB}


def _info_params(f: Fact) -> dict:
    v = f.values
    if f.kind == "setting":
        return {"what": ", ".join(f"{k} = {x}" for k, x in v.items())}
    if f.kind in ("model", "gguf_key"):
        return {"key": v["key"], "value": v["value"]}
    return dict(v)


def _runtime(facts: list[Fact]) -> str | None:
    kinds = {f.kind for f in facts}
    if kinds & {"ollama", "system_memory"}:
        return "Ollama"
    if kinds & {"mlx_peak", "mlx_tokens"}:
        return "mlx_lm"
    return "llama.cpp" if kinds else None


def _device(facts: list[Fact], on_gpu: bool, gpu: str | None) -> str | None:
    library = next(
        (f.values["library"] for f in facts if f.kind == "ollama" and f.values["library"]), None
    )
    if library:
        return library
    if on_gpu:
        devices = [f.values.get("device", "") for f in facts if f.kind in BUFFERS]
        named = next(
            (d.removesuffix("_Mapped") for d in devices if d.startswith(GPU_DEVICES)), None
        )
        return gpu and f"{named or 'Metal'} ({gpu})" or named or "Metal"
    return "CPU" if any(f.kind in BUFFERS for f in facts) else None


def _verdict(rows: list[Row]) -> dict | None:
    """The plan as printed against the log's own working-set line: within it, or over it."""
    allocs = [r for r in rows if r.kind == "metal_alloc"]
    limit_row = next((r for r in rows if r.kind == "working_set"), None)
    if allocs:
        last = allocs[-1].params
        total, limit = round(float(last["total"]) * MIB), round(float(last["limit"]) * MIB)
        over = total > limit or any(a.params["over"] for a in allocs)
        source = "ggml-metal's running total"
    elif limit_row:
        total = sum(r.printed_bytes for r in rows if r.kind in BUFFERS and r.kind != "kv_cache")
        limit, over, source = limit_row.printed_bytes, None, "the buffer lines"
        over = total > limit if total else None
    else:
        return None
    if not total:
        return None
    return {"total_bytes": total, "limit_bytes": limit, "over": over, "from": source}
