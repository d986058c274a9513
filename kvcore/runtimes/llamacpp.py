"""llama.cpp as a runtime: its padded caches allocated when the context is created
(kvcore.runtimes.llamacpp_cache), their log lines, the -ctk/-ctv types it stores, its options (-np, --kv-unified,
-ub, --swa-full) and their limits, and what a decode step reads from a unified or split cache.

Example: LlamaCppRuntime().kv_bytes(gpt_oss_20b, 131072, KvSpec()) -> (3072 + 18) MiB.
"""

from __future__ import annotations

from kvcore.errors import KvError
from kvcore.limits import MAX_CONTEXT
from kvcore.memory.formats import llamacpp_types
from kvcore.memory.formulas import GGUF_WEIGHT_FORMATS
from kvcore.runtimes import llamacpp_cache as llamacpp
from kvcore.runtimes.base import DecodeRead, Runtime, Setting
from kvcore.runtimes.llamacpp_plan import BACKENDS, check_backend


class LlamaCppRuntime(Runtime):
    """llama.cpp: padded caches allocated when the context is created (kvcore.runtimes.llamacpp_cache), logged line by line.
    `context` is `-c` (the cells of the whole cache, shared out among the slots), `sequences` is `-np`."""

    name = windows = fit_class = llamacpp.NAME
    help = "llama.cpp (its preallocated caches)"
    engines = ("llama.cpp", "llama-server", "ollama")  # Ollama runs llama.cpp's engine
    sequence_noun = "slot"
    server = "llama-server"  # tools/server/ in its source tree
    max_sequences = llamacpp.LLAMA_MAX_SEQ
    ignored_window_note = "sliding_ignored_llamacpp"
    preallocates = reads_gguf = flash_attention = plans_memory = True
    backends = BACKENDS  # the CPU build and Metal: the plan's buffer names, compute buffer and -fa auto differ
    mac_backend = (
        "metal"  # ggml-metal: what a Mac's llama.cpp (LM Studio, Ollama, llama-server) runs on
    )
    # -ctk/-ctv unset: common/common.h @ 0c1e570 `cache_type_k = GGML_TYPE_F16`, llama_context_default_params too
    default_kv_format = "fp16"
    # its GGUF files: the block types and mixes people download (f16/bf16 files too), Q4_K_M first
    weight_formats = ("gguf-q4_k_m", *(w for w in GGUF_WEIGHT_FORMATS if w != "gguf-q4_k_m"))
    weight_formats += ("bf16", "fp16")
    default_weights = "gguf-q4_k_m"
    settings = (
        Setting(
            "unified",
            "--kv-unified",
            False,
            "llama.cpp: one cache stream shared by all sequences (-kvu)",
            "uni",
        ),
        Setting(
            "ubatch",
            "--ubatch",
            llamacpp.DEFAULT_UBATCH,
            f"llama.cpp: micro-batch -ub (default {llamacpp.DEFAULT_UBATCH}); it sizes the sliding-window cache",
            "ub",
            1,
            llamacpp.MAX_UBATCH,
        ),
        Setting(
            "swa_full",
            "--swa-full",
            False,
            "llama.cpp: a full-size sliding-window cache (--swa-full)",
            "swafull",
        ),
    )

    @property
    def kv_formats(self) -> tuple[str, ...]:  # its -ctk/-ctv types, from the table of formats
        return llamacpp_types()

    def options(self, sequences=1, base=None, **values):
        """llamacpp.Options with -np `sequences`; the other fields from `values`, else from `base`, else the defaults.
        `backend` (cpu, metal) is the build the plan is for: it changes the plan, not the caches."""
        if base is not None and not isinstance(base, llamacpp.Options):
            raise KvError(f"llama.cpp's options are a llamacpp.Options, not {type(base).__name__}.")
        base = base or llamacpp.Options()
        backend = check_backend(values.pop("backend", base.backend))
        known = {s.field: s for s in self.settings}
        for field in values:
            if field not in known:
                raise KvError(
                    f"llama.cpp has no option {field!r}; its options: {', '.join(known)}."
                )
        fields = {f: known[f].check(values[f]) if f in values else getattr(base, f) for f in known}
        return llamacpp.Options(sequences, batch=base.batch, backend=backend, **fields)

    def kv_bytes(self, geometry, context, spec, sequences=1, options=None):
        self.check(geometry)
        return llamacpp.kv_bytes(
            geometry, context, spec.k_format, spec.v_format, self.options(sequences, options)
        )

    def sizes(self, geometry, context, spec, sequences, options):
        self.check(geometry)
        options = self.options(sequences, options)
        k, v = spec.k_format, spec.v_format
        caches = llamacpp.caches(geometry, context, k, v, options)
        total = sum(c.bytes for c in caches)

        def row(layer):
            k_width, v_width = llamacpp.kv_widths(layer)
            return llamacpp.row_bytes(k, k_width) + llamacpp.row_bytes(v, v_width)

        return {
            "sequences": options.sequences,
            "kv_bytes": total,
            "kv_bytes_per_sequence": total // options.sequences,
            "kv_bytes_per_token": sum(row(layer) for layer in geometry.layers),
            "kv_bytes_per_token_average": total
            // options.sequences
            / context,  # one slot's cache / -c
            # what one more token of -c adds: the rows of the layers whose cache spans the whole context (not the SWA one)
            "kv_bytes_per_token_at_context": sum(
                row(geometry.layers[i]) for c in caches if c.spans_context for i in c.layers
            ),
            "kv_prefill_peak_bytes": total,  # allocated up front: no growth during prefill
            "per_layer": llamacpp.per_layer(geometry, caches, k, v),
            "formula": llamacpp.cells_text(caches),
            "caches": [c.as_dict() for c in caches],
            "log_lines": [c.log_line() for c in caches],
            "llama_cpp": {
                "sequences": options.sequences,
                "unified": options.unified,
                "batch": options.batch,
                "ubatch": options.ubatch,
                "ubatch_used": llamacpp.micro_batch(context, options),
                "swa_full": options.swa_full,
            },
        }

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
        """Model, KV, output and compute buffers as llama.cpp logs them (kvcore.runtimes.llamacpp_plan); the
        chip does not change them."""
        from kvcore.runtimes.llamacpp_plan import plan

        self.check(geometry)
        options = self.options(sequences, options)
        return plan(
            geometry,
            context,
            spec.k_format,
            spec.v_format,
            options,
            flash_attn,
            weights_bytes,
        ).as_dict()

    def largest_context(self, geometry, spec, sequences, budget, options=None):
        self.check(geometry)
        options = self.options(sequences, options)

        def need(n_ctx: int) -> int:
            return llamacpp.kv_bytes(geometry, n_ctx, spec.k_format, spec.v_format, options)

        # the largest -c whose caches fit (0: not even -c 1); cache bytes never fall as -c grows
        if need(1) > budget:
            return 0
        lo, hi = 1, MAX_CONTEXT
        if need(hi) <= budget:
            return hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if need(mid) <= budget else (lo, mid)
        return lo

    def most_sequences(self, geometry, spec, context, budget, options=None):
        """The most slots that each get `context` tokens, i.e. `-c context x slots -np slots` (at most LLAMA_MAX_SEQ);
        llama.cpp's padding makes the need step, so every count is tried."""
        self.check(geometry)
        if budget < 0:
            return 0
        best = 0
        for slots in range(1, min(self.max_sequences, MAX_CONTEXT // context) + 1):
            if self.kv_bytes(geometry, context * slots, spec, slots, options) <= budget:
                best = slots
        return best

    def decode_read(self, geometry, context, spec, sequences=1, options=None, tokens=None):
        """A decode step's read: every stream's get_n_kv cells (kvcore.runtimes.llamacpp_cache.read_cells) once.

        Split cache (-np N): N streams of n_ctx/N cells, each sequence reads its own stream. Unified cache: one
        stream of n_ctx cells shared by the slots, read once per step for all of them (not once per slot).
        `tokens` is what each sequence holds (default: the cache full).
        """
        self.check(geometry)
        options = self.options(sequences, options)
        read = cells = 0
        for cache in llamacpp.caches(geometry, context, spec.k_format, spec.v_format, options):
            if cache.name == "recurrent":  # the whole state, every step
                read += cache.bytes
                continue
            used = cache.cells if tokens is None else tokens * (sequences if options.unified else 1)
            n_kv = llamacpp.read_cells(min(used, cache.cells), cache.cells)
            read += cache.bytes // cache.cells * n_kv
            if cache.spans_context:
                cells += n_kv * cache.streams
        return DecodeRead(read, sequences, cells)

    def decode_position(self, context, sequences=1, options=None):
        """Split streams: each slot's share of -c (n_ctx_seq); unified: the slots together fill the -c cells."""
        options = self.options(sequences, options)
        return min(
            context, context if options.unified else llamacpp.context_cells(context, options)[0]
        )

    def prefill_chunk(self, prompt, options=None):
        return llamacpp.micro_batch(prompt, self.options(1, options))  # -ub as llama.cpp clamps it

    def plan_context(self, context, sequences=1):
        return context * sequences  # -c context x N -np N: each slot gets `context` cells

    def sequence_share(self, context, sequences=1, options=None):
        return context if self.options(sequences, options).unified else context // sequences

    def shares_cache(self, sequences=1, options=None):
        return sequences > 1 and self.options(sequences, options).unified

    def describe_options(self, result):
        o = result["llama_cpp"]
        lines = [
            f"llama.cpp  -c {result['context']} -np {o['sequences']}{' --kv-unified' if o['unified'] else ''} "
            f"-ub {o['ubatch']} (micro-batch used: {o['ubatch_used']}){' --swa-full' if o['swa_full'] else ''}"
        ]
        lines += [
            f"  {cache['name']:<9} {line}"
            for cache, line in zip(result["caches"], result["log_lines"])
        ]
        plan = result.get("plan")
        if plan:  # every buffer, and the lines llama.cpp will print for them
            fa = "on" if plan["flash_attn"] else "off"
            lines.append(
                f"memory plan ({plan['backend']} build, flash attention {fa}, micro-batch "
                f"{plan['n_tokens']:,} tokens):"
            )
            lines += [
                f"  {part['name']:<26} {part['bytes']:>16,} B  {part['rule']}"
                for part in plan["parts"]
            ]
            lines.append(
                f"  {'total':<26} {plan['total_bytes']:>16,} B  (compute buffer {plan['compute_tolerance']})"
            )
            lines.append("what llama.cpp will print:")
            lines += [f"  {line}" for line in plan["log_lines"]]
            lines += [f"  also printed, not planned: {what}" for what in plan["unplanned"]]
        return lines


LLAMA_CPP = LlamaCppRuntime()  # the one llama.cpp runtime (kvcore.runtimes.registry names it)
