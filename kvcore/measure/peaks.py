"""mlx_lm's peak memory, measured: mx.get_peak_memory() around mlx_lm's own generate_step, the figure
`mlx_lm.generate` prints as "Peak memory" (kvcore.runtimes.mlx_lm_plan plans it).

mlx and mlx_lm are imported inside functions only.
Example: generate_peak(build_random("cpu-demo", config, "fp32"), 513, prefill_step=256)["peak_bytes"]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvcore.errors import KvError

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
    del cache
    mx.clear_cache()
    return {
        "prompt": prompt,
        "generated": generated,
        "prefill_step": prefill_step,
        "kv_bits": kv_bits,
        "quantized_kv_start": quantized_kv_start if kv_bits else None,
        "weights_bytes": weights,
        "kv_bytes_end": kv,
        "peak_bytes": peak - before + weights,
    }
