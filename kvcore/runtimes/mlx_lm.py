"""mlx_lm: its KVCache and RotatingKVCache under mlx_lm's model files, and QuantizedKVCache (one kv_bits for K
and V), counted token by token (kvcore.runtimes.token); mlx-lm 0.32.2's models/cache.py and generate.py. Its one
setting is the prefill step (`--prefill-step-size`, generate_step's `prefill_step_size`): the prompt tokens one
step of the prefill takes, which sizes the step's activations and, where attention is not fused, its scores
(kvcore.runtimes.mlx_lm_plan).

Example: MLX_LM.options(1, prefill_step=512) -> Options(sequences=1, prefill_step=512);
MLX_LM.memory_plan(..., options=that)["prefill_step"] -> 512.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvcore.errors import KvError
from kvcore.limits import MAX_PREFILL_STEP, MIN_PREFILL_STEP
from kvcore.memory.formats import mlx_cache_formats
from kvcore.memory.formulas import PREFILL_STEP, WEIGHT_FORMATS
from kvcore.runtimes import mlx_lm_plan
from kvcore.runtimes.base import Setting
from kvcore.runtimes.token import TokenRuntime

# The default, 2048: https://github.com/ml-explore/mlx-lm/blob/v0.32.2/mlx_lm/generate.py#L50
# (`DEFAULT_PREFILL_STEP_SIZE = 2048`), the default of `--prefill-step-size` (#L180-L186) and of generate_step's
# `prefill_step_size` (#L323); tests/test_runtimes.py reads it from the installed mlx_lm


@dataclass(frozen=True)
class Options:
    """mlx_lm's options: the concurrent sequences (a batch of prompts, checked where they are given) and generate_step's prefill_step_size (checked by its Setting)."""

    sequences: int = 1
    prefill_step: int = PREFILL_STEP


class MlxLmRuntime(TokenRuntime):
    """mlx_lm: a TokenRuntime whose options carry its prefill step to its memory plan, its prefill peak and its
    prefill chunk."""

    weight_formats = (
        WEIGHT_FORMATS  # mlx's own: its safetensors in fp/bf16, fp8 or mlx's group quantization
    )
    server = "mlx_lm.server"  # the package's own server (mlx_lm/server.py)
    settings = (
        Setting(
            "prefill_step",
            "--prefill-step-size",
            PREFILL_STEP,
            f"mlx_lm: prompt tokens per prefill step (generate's --prefill-step-size, default {PREFILL_STEP}); "
            "a smaller step holds smaller activations and attention scores",
            "mstep",
            MIN_PREFILL_STEP,
            MAX_PREFILL_STEP,
            # powers of two: a step that divides 256 or is a multiple of it is planned without walking every chunk
            # of a long prompt (kvcore.memory.allocsim.ChunkedTrace); mlx_lm itself takes any positive step
            tuple(
                1 << b
                for b in range(MIN_PREFILL_STEP.bit_length() - 1, MAX_PREFILL_STEP.bit_length())
            ),
        ),
    )

    def options(self, sequences=1, base=None, **values):
        """Options with `sequences`; the prefill step from `values`, else from `base`, else mlx_lm's default."""
        if base is not None and not isinstance(base, Options):
            raise KvError(
                f"mlx_lm's options are a kvcore.runtimes.mlx_lm.Options, not {type(base).__name__}."
            )
        base = base or Options()
        known = {s.field: s for s in self.settings}
        for field in values:
            if field not in known:
                raise KvError(f"mlx_lm has no option {field!r}; its options: {', '.join(known)}.")
        fields = {f: known[f].check(values[f]) if f in values else getattr(base, f) for f in known}
        return Options(sequences, **fields)

    def prefill_step(self, sequences=1, options=None) -> int:
        return self.options(sequences, options).prefill_step


MLX_LM = MlxLmRuntime(
    "mlx_lm",
    "mlx_lm (default; mlx_lm's own caches)",
    "sliding_ignored",
    prefill_peak="mlx_lm chunked prefill",
    kv_formats=mlx_cache_formats(),  # KVCache in a dtype, QuantizedKVCache(bits)
    engines=("mlx_lm", "mlx-lm", "mlx-vlm", "omlx", "rapid-mlx"),
    fit_class="mlx",
    one_kv_format=True,  # generate's one kv_bits quantizes K and V alike
    planner=mlx_lm_plan,  # generate_step's peak, part by part
)
