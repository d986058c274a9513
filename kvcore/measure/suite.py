"""Live runs -> recordings (kvcore.recordings.store schema 1): the full suite, row conversion, provenance.

A recording is assembled only after every probe finished; a stopped run raises
kvcore.measure.progress.Interrupted before anything is written.
Example: data = record_suite(model, "llama-3.2-1b", command="python -m kvcore record ...");
         kvcore.recordings.store.save(data)
"""

from __future__ import annotations

from typing import Callable

from kvcore.errors import KvError
from kvcore.measure.decode import (
    decode_sweep,
    generate_step_check,
    mechanism_probe,
    real_prefill_check,
)
from kvcore.measure.live_model import LiveModel
from kvcore.measure.machine import backend
from kvcore.measure.probes import growth_probe, trap_probe
from kvcore.measure.progress import Progress, StopCheck
from kvcore.measure.recording import (
    blas_libraries,
    build_recording,
    decode_method,
    growth_method,
    load_average,
    model_info,
    trap_method,
)
from kvcore.measure.timing import SUITE, SWEEPS, SweepOptions
from kvcore.model.geometry import Geometry


def measure_suite(
    model: LiveModel,
    geometry: Geometry | str,
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
    progress: Progress | None = None,
    should_stop: StopCheck | None = None,
    sections: tuple[str, ...] = SUITE,
    prompts: list[int] | None = None,
    batches: list[int] | None = None,
    batch_contexts: list[int] | None = None,
    on_rows: Callable[[str, list[dict]], None] | None = None,
) -> tuple[dict, dict, dict]:
    """trap + growth (cache geometry of `geometry`, random tensors) + decode sweep + mechanism (on `model`), or the
    `sections` asked for, among them prefill (a real prefill at each of `prompts`) and batch (`batches` sequences
    decoding together at each of `batch_contexts`); optionally the two decode cross-checks at `check_context`.
    Returns (rows by section, model info, method): what build_recording makes a recording of. The one runner of the
    command line's `record` and the site's live mode; on_rows(section, rows) is called as a sweep's rows arrive.
    """

    def rows_of(section: str):
        return None if on_rows is None else (lambda rows: on_rows(section, rows))

    from kvcore.measure.sweeps import BATCH_METHOD, PREFILL_METHOD, batch_sweep, prefill_sweep

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

    from kvcore.measure.probes import resolve_geometry

    g = resolve_geometry(geometry)
    rows, method = {}, {}
    timing = SweepOptions(warmup, steps, repeats)
    load_start = load_average()
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
            model, contexts, kv_format, timing, phase("decode"), should_stop, rows_of("decode")
        )
        method["decode"] = decode_method(warmup, steps, repeats, kv_format)
    if "mechanism" in sections:
        from kvcore.measure.real_model import sample_ids  # a real model continues real text

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
            on_rows=rows_of("prefill"),
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
            on_rows=rows_of("batch"),
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
        method["machine_load"] = {"load_start": load_start, "load_end": load_average()}
    if checks:
        method["cross_checks"] = [
            {k: (round(v, 4) if isinstance(v, float) else v) for k, v in c.items()} for c in checks
        ]
    geometry_used = "trap" in sections or "growth" in sections
    info = model_info(model, g if geometry_used else None, kv_format)
    if geometry_used:
        info["geometry_kv_format"] = geometry_kv_format
    return rows, info, method


def record_suite(
    model: LiveModel,
    geometry: Geometry | str,
    command: str,
    title: str | None = None,
    label: str | None = None,
    **settings,
) -> dict:
    """measure_suite(model, geometry, **settings) as one recording dict (built and validated by build_recording)."""
    return build_recording(*measure_suite(model, geometry, **settings), command, title, label)
