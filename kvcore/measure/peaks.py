"""mlx_lm's peak memory, measured: mx.get_peak_memory() around mlx_lm's own generate_step, the figure
`mlx_lm.generate` prints as "Peak memory" (kvcore.runtimes.mlx_lm_plan plans it).

mlx and mlx_lm are imported inside functions only. A run's repeats become one row of a recording's `peak` section
(peak_row; kvcore.recordings.schema), written by scripts/mlx_peak_sweep.py --record.
Example: generate_peak(build_random("cpu-demo", config, "fp32"), 513, prefill_step=256)["peak_bytes"]
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from kvcore.errors import KvError
from kvcore.units import MIB

if TYPE_CHECKING:
    from kvcore.measure.live_model import LiveModel


def generate_peak(
    model: LiveModel,
    prompt: int,
    generated: int = 0,
    prefill_step: int = 2048,
    kv_bits: int | None = None,
    quantized_kv_start: int = 5000,
    kv_group_size: int = 64,
) -> dict:
    """Run generate_step on a `prompt`-token prompt for `generated` tokens in fresh caches (make_prompt_cache),
    with mx.reset_peak_memory() before; the peak is counted from the weights up: what mlx held beyond the model's
    own arrays before the run (the prompt's token ids) is left out."""
    import mlx.core as mx
    from mlx_lm.generate import generate_step
    from mlx_lm.models.cache import make_prompt_cache

    from kvcore.measure.caches import used_bytes

    if isinstance(prompt, bool) or not isinstance(prompt, int) or prompt < 1:
        raise KvError(f"The prompt must be a positive whole number of tokens, not {prompt!r}.")
    vocab = model.geometry.vocab_size
    ids = mx.array([(i * 7919) % vocab for i in range(prompt)], dtype=mx.uint32)
    mx.eval(ids)
    mx.clear_cache()
    weights = model.weights_bytes()
    before = mx.get_active_memory()
    mx.reset_peak_memory()
    cache = make_prompt_cache(model.module)
    options = {"max_tokens": generated, "prompt_cache": cache, "prefill_step_size": prefill_step}
    if kv_bits:
        options.update(
            kv_bits=kv_bits, quantized_kv_start=quantized_kv_start, kv_group_size=kv_group_size
        )
    for _ in generate_step(ids, model.module, **options):
        pass
    peak = mx.get_peak_memory()
    kv = sum(c.nbytes for c in cache)
    used = sum(used_bytes(c) for c in cache)
    del cache
    mx.clear_cache()
    return {
        "prompt": prompt,
        "generated": generated,
        "prefill_step": prefill_step,
        "kv_bits": kv_bits,
        "quantized_kv_start": quantized_kv_start if kv_bits else None,
        "weights_bytes": weights,
        "kv_bytes_end": kv,  # the caches' .nbytes (allocated)
        "kv_used_bytes_end": used,  # the rows they hold (keys_and_values())
        "peak_bytes": peak - before + weights,
    }


def peak_row(runs: list[dict], kv_format: str) -> dict:
    """One row of a recording's `peak` section from the repeats of one case (generate_peak's dicts, alike but for
    the peak): the peak above the weights in MiB, the median and each repeat, and the caches at the end.

    Example: peak_row([run, run2], "fp32") -> {"prompt_tokens": 513, ..., "peak_mib": 38.2, "peak_runs_mib": [...]}
    """
    first = runs[0]
    above = [(r["peak_bytes"] - r["weights_bytes"]) / MIB for r in runs]
    row = {
        "prompt_tokens": first["prompt"],
        "generated": first["generated"],
        "prefill_step": first["prefill_step"],
        "kv_format": kv_format,
        "peak_mib": statistics.median(above),
        "peak_runs_mib": above,
        "repeats": len(runs),
        "allocated_mib": first["kv_bytes_end"] / MIB,
        "used_mib": first["kv_used_bytes_end"] / MIB,
    }
    if first["kv_bits"]:
        row["quantized_kv_start"] = first["quantized_kv_start"]
    return row


def peak_method(repeats: int, weights_bytes: int, kv_group_size: int = 64) -> dict:
    """How a peak sweep was made (a recording's method.peak)."""
    return {
        "driver": "mlx_lm.generate.generate_step on random token ids, fresh caches (make_prompt_cache) each run",
        "peak": "mx.get_peak_memory() after mx.reset_peak_memory(), less what mlx held before the run but "
        "the weights (peak_mib: above the weights)",
        "weights_bytes": weights_bytes,
        "repeats": repeats,
        "statistic": "median of the repeats (peak_runs_mib: each)",
        "warmup_run": "one untimed 64-token run first (mlx's first run in a process holds a little more)",
        "caches_at_end": "allocated_mib: the caches' .nbytes; used_mib: their keys_and_values() arrays",
        "quantized": f"kv_bits from kv_format, group {kv_group_size}, quantized_kv_start as recorded",
    }
