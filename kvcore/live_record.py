"""Live runs -> recordings (kvcore.recordings schema 1): the full suite, row conversion, provenance.

A recording is assembled only after every probe finished; a stopped run raises
kvcore.live.Interrupted before anything is written.
Example: data = record_suite(model, "llama-3.2-1b", command="python -m kvcore record ...");
         kvcore.recordings.save(data)
"""

from __future__ import annotations

from pathlib import Path

from . import recordings
from .errors import KvError
from .recordings import is_apple_silicon
from .geometry import Geometry
from .formulas import PREFILL_STEP
from .live import ROTATING_MAX, Interrupted, Progress, StopCheck, growth_probe, trap_probe
from .live_memory import GROUP_SIZE
from .live_decode import decode_sweep, generate_step_check, mechanism_probe, real_prefill_check
from .live_models import LiveModel
from .live_timing import SWEEP_ORDER, SWEEP_SPREAD, SweepOptions
from .machine import backend, measured_provenance

ROW_FIELDS = {name: recordings.known_fields(name) for name in recordings.SECTIONS}
CPU_LABEL = "Measured — Linux CPU demonstration (mlx[cpu]), not Apple Silicon"


def section_rows(section: str, rows: list[dict]) -> list[dict]:
    """Keep the fields the recording schema knows for `section` (probe rows carry more, e.g. exact bytes)."""
    keep = ROW_FIELDS[section]

    def tidy(v):
        return (
            round(v, 6)
            if isinstance(v, float)
            else [tidy(x) for x in v]
            if isinstance(v, list)
            else v
        )

    return [{k: tidy(v) for k, v in row.items() if k in keep and v is not None} for row in rows]


def default_label(prov: dict) -> str:
    """How the UI names a run: Apple Silicon only when recordings.is_apple_silicon says so, never a CPU run."""
    if is_apple_silicon(prov):
        return f"Measured — {prov['machine']['chip']} ({'Metal' if prov['backend'] == 'mlx metal' else prov['backend']}), live run"
    system = prov["machine"]["os"].split()[0]
    return (
        CPU_LABEL
        if system == "Linux"
        else f"Measured — {system} CPU demonstration ({prov['backend']}), not Apple Silicon"
    )


def build_recording(
    sections: dict[str, list[dict]],
    model: dict,
    method: dict,
    command: str,
    title: str | None = None,
    label: str | None = None,
) -> dict:
    """A schema-1 measured recording from probe rows; validated before it is returned. The one path from a run to a
    recording: the command line (`kvcore record`, `--save`) and the site's live mode both call it."""
    prov = measured_provenance(command)
    data = {
        "schema": recordings.SCHEMA_VERSION,
        "kind": "measured",
        "title": title or f"Live run: {', '.join(sections)} — {model['name']} ({prov['backend']})",
        "label": label or default_label(prov),
        "provenance": prov,
        "model": model,
        "method": method,
        "sections": {name: section_rows(name, rows) for name, rows in sections.items() if rows},
    }
    return recordings.validate(data)


def model_info(
    model: LiveModel | None, geometry: Geometry | None = None, kv_format: str | None = None
) -> dict:
    """The recording's `model` mapping: which model, random or loaded, weights and KV formats."""
    info = (
        model.summary()
        if model
        else {"name": geometry.name, "source": "geometry only (no weights needed)"}
    )
    if kv_format:
        info["kv_format"] = kv_format
    if geometry is not None and (model is None or geometry.name != model.name):
        info["trap_and_growth_geometry"] = geometry.name
        info["name"] = (
            f"{info['name']} (decode, mechanism); {geometry.name} geometry (trap, growth)"
            if model
            else geometry.name
        )
    return info


DECODE_FILL = (
    "synthetic: random K/V for T+1 tokens written into each layer's cache, evaluated before timing"
)


def trap_method(tokens: int, kv_dtype: str, bits: int, layers: int) -> dict:
    """How a trap probe was made (method.trap): the one text for `kvcore probe` and `kvcore record`."""
    return {
        "driver": "real mlx_lm cache classes fed random tensors of one layer",
        "tokens": tokens,
        "kv_dtype": kv_dtype,
        "used_bytes": "from keys_and_values() arrays",
        "rotating_max_size": ROTATING_MAX,
        "quantized": f"group {GROUP_SIZE}, {bits} bits",
        "layers": layers,
    }


def growth_method(kv_format: str) -> dict:
    """How a growth sweep was made (method.growth): the one text for `kvcore kv` and `kvcore record`."""
    return {
        "fill": f"random K/V in generate_step's prefill chunks ({PREFILL_STEP})",
        "kv_format": kv_format,
        "active": "mx.get_active_memory() delta",
        "peak": "mx.get_peak_memory() over the next token",
    }


def decode_method(warmup: int, steps: int, repeats: int, kv_format: str) -> dict:
    """How a decode sweep was made (a recording's method.decode): the one text for `kvcore decode`, `kvcore record`
    and the site's live mode."""
    return {
        "fill": DECODE_FILL,
        "warmup": warmup,
        "steps": steps,
        "repeats": repeats,
        "statistic": "median of repeat medians",
        "order": SWEEP_ORDER,
        "spread": SWEEP_SPREAD,
        "sync": "mx.eval of the sampled token every step",
        "kv_format": kv_format,
    }


def quality_method(
    text: str, tokens: int, chunk: int, prompt: str | None, model: LiveModel
) -> dict:
    """How a quality run was made (the recording's method.quality); the prompt, a model input, lives in the answers'
    rows, so it is not repeated here unless no answers were asked for."""
    from .live_quality import QUANTIZE_RULE
    from . import blas

    return {
        "text": Path(text).name,
        "tokens": tokens,
        "chunk": chunk,
        "baseline": f"mlx_lm's KVCache in the activation dtype ({model.dtype})",
        "quantize": QUANTIZE_RULE,
        "metrics": "perplexity of the run; mean KL(baseline || run) in nats; share of positions with the "
        "baseline's top-1 token (kvcore.quality)",
        "weights": model.weights_note,
        "blas": blas.state()["note"],
    }


SUITE = (
    "trap",
    "growth",
    "decode",
    "mechanism",
)  # what `kvcore record` measures unless told otherwise
SWEEPS = SUITE + ("prefill", "batch")  # every section `record --sections` can measure


def record_suite(
    model: LiveModel,
    geometry: Geometry | str,
    command: str,
    *,
    trap_tokens: int = 1025,
    kv_contexts: list[int],
    contexts: list[int],
    kv_format: str | None = None,
    geometry_kv_format: str = "fp16",
    warmup: int = 3,
    steps: int = 16,
    repeats: int = 3,
    new_tokens: int = 64,
    prompt_tokens: int = 32,
    check_context: int | None = None,
    title: str | None = None,
    label: str | None = None,
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
    sections: tuple[str, ...] = SUITE,
    prompts: list[int] | None = None,
    batches: list[int] | None = None,
    batch_contexts: list[int] | None = None,
) -> dict:
    """trap + growth (cache geometry of `geometry`, random tensors) + decode sweep + mechanism (on `model`), or the
    `sections` asked for, among them prefill (a real prefill at each of `prompts`) and batch (`batches` sequences
    decoding together at each of `batch_contexts`); optionally the two decode cross-checks at `check_context`;
    one recording dict.
    """
    from .live_sweeps import BATCH_METHOD, PREFILL_METHOD, batch_sweep, prefill_sweep

    unknown = [s for s in sections if s not in SWEEPS]
    if unknown or not sections:
        raise KvError(
            f"--sections must name some of {', '.join(SWEEPS)}, not {', '.join(unknown) or 'nothing'}."
        )
    kv_format = kv_format or model.dtype
    checks_wanted = bool(check_context) and "decode" in sections
    phases = [s for s in SWEEPS if s in sections] + (
        ["generate_step", "real prefill"] if checks_wanted else []
    )
    total = 1000 * len(phases)

    def phase(name: str):
        i = phases.index(name)

        def report(done: int, n: int, text: str) -> None:
            if progress:
                progress(1000 * i + 1000 * done // max(1, n), total, f"{phases[i]}: {text}")

        return report

    from .live import resolve_geometry

    g = resolve_geometry(geometry)
    rows, method = {}, {}
    timing = SweepOptions(warmup, steps, repeats)
    load_start = _load()
    if "trap" in sections:
        rows["trap"] = trap_probe(
            geometry,
            dtype=geometry_kv_format,
            tokens=trap_tokens,
            progress=phase("trap"),
            should_stop=should_stop,
        )
        method["trap"] = trap_method(trap_tokens, geometry_kv_format, 8, g.count("full"))
    if "growth" in sections:
        rows["growth"] = growth_probe(
            geometry,
            kv_contexts,
            kv_format=geometry_kv_format,
            dtype=geometry_kv_format,
            progress=phase("growth"),
            should_stop=should_stop,
        )
        method["growth"] = growth_method(geometry_kv_format)
    if "decode" in sections:
        rows["decode"] = decode_sweep(
            model, contexts, kv_format, timing, phase("decode"), should_stop
        )
        method["decode"] = decode_method(warmup, steps, repeats, kv_format)
    if "mechanism" in sections:
        from .real_model import sample_ids  # a real model continues real text

        text = sample_ids(model.tokenizer, prompt_tokens) if model.tokenizer is not None else None
        rows["mechanism"] = mechanism_probe(
            model, new_tokens, prompt_tokens, phase("mechanism"), should_stop, prompt_ids=text
        )
        method["mechanism"] = {
            "prompt_tokens": prompt_tokens,
            "new_tokens": new_tokens,
            "without_cache": "full forward over prompt + generated tokens every step",
        }
    if "prefill" in sections:
        rows["prefill"] = prefill_sweep(
            model,
            prompts or [256, 1024, 4096],
            kv_format,
            SweepOptions(repeats=repeats),
            progress=phase("prefill"),
            should_stop=should_stop,
        )
        method["prefill"] = {**PREFILL_METHOD, "repeats": repeats, "kv_format": kv_format}
    if "batch" in sections:
        rows["batch"] = batch_sweep(
            model,
            batches or [1, 2, 4, 8],
            batch_contexts or [256, 1024, 4096],
            kv_format,
            timing,
            progress=phase("batch"),
            should_stop=should_stop,
        )
        method["batch"] = {
            **BATCH_METHOD,
            "warmup": warmup,
            "steps": steps,
            "repeats": repeats,
            "kv_format": kv_format,
        }
    checks = []
    if checks_wanted:
        checks.append(
            generate_step_check(
                model, check_context, kv_format, warmup, steps, phase("generate_step"), should_stop
            )
        )
        checks.append(
            real_prefill_check(
                model, check_context, kv_format, warmup, steps, phase("real prefill"), should_stop
            )
        )
    method["backend"] = backend()
    if blas := blas_libraries():
        method["blas"] = blas
    if load_start is not None:  # a shared machine's contention, as the timings met it
        method["machine_load"] = {"load_start": load_start, "load_end": _load()}
    if checks:
        method["cross_checks"] = [
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in c.items()} for c in checks
        ]
    geometry_used = "trap" in sections or "growth" in sections
    info = model_info(model, g if geometry_used else None, kv_format)
    if geometry_used:
        info["geometry_kv_format"] = geometry_kv_format
    return build_recording(rows, info, method, command, title, label)


def blas_libraries() -> dict:
    """Which BLAS mlx's CPU matmuls ran on (Linux, from /proc/self/maps): the libraries loaded, and the one whose
    cblas_sgemm the process's global scope finds first (a library preloaded with LD_PRELOAD or RTLD_GLOBAL, which
    mlx binds to before the reference BLAS its wheel bundles); without one, mlx's own. Empty where unknown."""
    import ctypes

    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return {}
    ranges = []
    for line in maps:
        parts = line.split()
        if len(parts) >= 6 and "blas" in parts[-1].rsplit("/", 1)[-1].lower():
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            ranges.append((lo, hi, parts[-1]))
    if not ranges:
        return {}
    loaded = sorted({name for _, _, name in ranges})
    try:
        address = ctypes.cast(ctypes.CDLL(None).cblas_sgemm, ctypes.c_void_p).value
        used = next(name for lo, hi, name in ranges if lo <= address < hi)
    except (AttributeError, OSError, StopIteration):
        used = next(
            (n for n in loaded if "mlx" in n), loaded[0]
        )  # no global definition: mlx's bundled one
    return {"libraries": loaded, "sgemm_from": used}


def _load() -> float | None:
    """The machine's 1-minute load average (os.getloadavg), None where the system has none."""
    import os

    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def save_run(data: dict, out: str | Path | None = None, name: str | None = None) -> Path:
    """Save a finished run (LOCAL_DIR unless `out`; file stem `name` or date + title); RecordingError in
    read-only mode or on a bad folder. Never overwrites: a taken name gets a -2, -3 ... suffix.
    """
    return recordings.save(data, Path(out) if out else recordings.LOCAL_DIR, stem=name)


__all__ = [
    "Interrupted",
    "SUITE",
    "SWEEPS",
    "build_recording",
    "record_suite",
    "save_run",
    "section_rows",
    "model_info",
    "CPU_LABEL",
]
