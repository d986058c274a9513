"""Runtimes that count the tokens each layer holds (kvcore.memory.formulas): mlx_lm and reference.

`context` is each sequence's length; `sequences` multiplies. mlx_lm runs its KVCache and RotatingKVCache under
mlx_lm's model files (kvcore.runtimes.mlx_lm); reference the config's own window rules (transformers / vLLM,
kvcore.runtimes.reference). What every runtime answers is kvcore.runtimes.base; no code outside the runtime objects
compares a runtime's name.

Example: MLX_LM.kv_bytes(llama_3_2_1b, 32768, KvSpec()) -> 1 GiB.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvcore.limits import MAX_SEQUENCES
from kvcore.memory import formulas
from kvcore.memory.formats import FORMATS
from kvcore.runtimes.base import DecodeRead, Runtime
from kvcore.units import fmt_bytes

if TYPE_CHECKING:
    pass


class TokenRuntime(Runtime):
    """A runtime whose cache holds what each layer keeps per token (mlx_lm's offset, a window's last tokens):
    kvcore.memory.formulas. `context` is each sequence's length and `sequences` the concurrent sequences."""

    def __init__(
        self,
        name: str,
        help: str,
        ignored_window_note: str,
        prefill_peak: str | None = None,
        kv_formats: tuple[str, ...] | None = None,
        windows: str | None = None,
        engines: tuple[str, ...] = (),
        fit_class: str = "",
        one_kv_format: bool = False,
        planner: Any = None,
    ):
        self.name, self.help, self.windows = name, help, windows or name
        self.engines, self.fit_class, self.one_kv_format = engines, fit_class, one_kv_format
        self.ignored_window_note, self.prefill_peak = ignored_window_note, prefill_peak
        self._kv_formats = kv_formats
        self.max_sequences = MAX_SEQUENCES
        # mlx_lm: its generate_step's peak (kvcore.runtimes.mlx_lm_plan: covers() and plan())
        self.planner = planner
        self.plans_memory = planner is not None

    def plan_covers(self, geometry):
        return self.plans_memory and self.planner.covers(geometry)

    def memory_plan(
        self,
        geometry,
        context,
        spec,
        sequences,
        options,
        weights_bytes,
        flash_attn="auto",
        chip=None,
    ):
        """mlx_lm's peak on a Mac (Metal) for a `context`-token prompt in generate_step's chunks of its prefill step,
        part by part (kvcore.runtimes.mlx_lm_plan); None where it has no plan (the reference runtime, a model whose
        layers the plan does not know)."""
        step = self.prefill_step(sequences, options)
        if not self.plan_covers(geometry):
            return None
        return self.planner.plan(
            geometry,
            context,
            spec,
            weights_bytes,
            backend="metal",
            prefill_step=step,
            sequences=sequences,
            chip=chip,
        )

    def prefill_step(self, sequences=1, options=None) -> int:
        """The prompt tokens one prefill step takes: generate_step's default prefill_step_size here (a runtime with
        a setting for it answers from its options: kvcore.runtimes.mlx_lm)."""
        self.options(sequences, options)
        return formulas.PREFILL_STEP

    @property
    def kv_formats(
        self,
    ) -> tuple[str, ...]:  # every format kvcore knows, unless the runtime names its own
        return self._kv_formats if self._kv_formats is not None else tuple(FORMATS)

    def kv_bytes(self, geometry, context, spec, sequences=1, options=None):
        self.options(sequences, options)
        return formulas.kv_bytes(geometry, context, spec, sequences)

    def sizes(self, geometry, context, spec, sequences, options):
        self.check_kv(spec)
        total = self.kv_bytes(geometry, context, spec, sequences, options)
        return {
            "sequences": sequences,
            "kv_bytes": total,
            "kv_bytes_per_sequence": total // sequences,
            "kv_bytes_per_token": formulas.kv_bytes_per_token(geometry, spec),
            "kv_bytes_per_token_average": total
            // sequences
            / context,  # one sequence's KV / its tokens
            "kv_bytes_per_token_at_context": formulas.kv_bytes_per_token_at(
                geometry, context, spec
            ),
            "kv_prefill_peak_bytes": formulas.kv_prefill_peak_bytes(
                geometry, context, spec, sequences, self.prefill_step(sequences, options)
            ),
            "per_layer": formulas.per_layer_kv(geometry, context, spec, sequences),
            "formula": formulas.formula_text(geometry, context, spec, sequences),
        }

    def largest_context(self, geometry, spec, sequences, budget, options=None):
        self.options(sequences, options)
        return formulas.max_context_within(geometry, budget, spec, sequences)

    def most_sequences(self, geometry, spec, context, budget, options=None):
        self.options(1, options)
        if budget < 0:
            return 0
        return max(0, min(self.max_sequences, budget // formulas.kv_bytes(geometry, context, spec)))

    def decode_read(self, geometry, context, spec, sequences=1, options=None, tokens=None):
        self.options(sequences, options)
        held = (
            context if tokens is None else min(tokens, context)
        )  # each sequence reads its own cache, to its offset
        spans = any(layer.kind in ("full", "mla") for layer in geometry.layers)
        return DecodeRead(
            formulas.kv_bytes(geometry, held, spec, sequences),
            sequences,
            held * sequences if spans else 0,
        )

    def decode_position(self, context, sequences=1, options=None):
        self.options(sequences, options)
        return context

    def prefill_chunk(self, prompt, options=None):
        return self.prefill_step(1, options)  # mlx_lm generate_step's prefill_step_size

    def describe_sizes(self, result):
        lines = []
        if self.prefill_peak and result["kv_prefill_peak_bytes"] != result["kv_bytes"]:
            lines.append(
                f"  prefill peak ({self.prefill_peak}): {fmt_bytes(result['kv_prefill_peak_bytes'])}"
            )
        plan = result.get("plan")
        if plan:  # the peak of generate_step, part by part (kvcore.runtimes.mlx_lm_plan)
            lines.append(
                f"memory plan ({plan['backend']} backend, prefill step {plan['prefill_step']:,}; the peak is "
                f"the {plan['peak_step']} step of {plan['n_tokens']:,} token(s) at offset {plan['peak_offset']:,}):"
            )
            lines += [
                f"  {part['name']:<26} {part['bytes']:>16,} B  {part['rule']}"
                for part in plan["parts"]
            ]
            lines.append(
                f"  {'total':<26} {plan['total_bytes']:>16,} B  ({plan['compute_tolerance']})"
            )
            lines.append(f"what {self.name} will print:")
            lines += [f"  {line}" for line in plan["log_lines"]]
        return lines
