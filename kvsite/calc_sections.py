"""The calculator's sections, one cached function each (kvsite.sections' conventions; the
arithmetic is kvcore.views.calculator's): its numbers and verdict, the levers, the memory and decode
charts, the runtimes compared, the formula. Keys are cheap: the model source (kvsite.calc), the
runtime, and the widget values.

Example: numbers((None, "llama-3.2-1b", "mlx_lm"), 32768, 1, "fp16", "fp16", "bf16", 2**34)
-> {"result": calc --json's numbers, "verdict": ..., "layers": ...}
"""

from __future__ import annotations

import pandas as pd

from kvcore.limits import MAX_CONTEXT
from kvcore.memory.formats import KvSpec
from kvcore.memory.formulas import formula_terms
from kvcore.runtimes.registry import RUNTIMES, get_runtime, gguf_runtime, runtime_of
from kvcore.units import GIB, fmt_bytes
from kvcore.views import calculator, memory_fit, what_if
from kvcore.views import savings as savings_views

from . import i18n
from .cache import section_cache
from .calc import config_geometry, runtime_options
from .growth_sections import formula_markdown
from .sections import cached, limit_rule, memory_curves, speed_curves
from .tables import arrow, md_table

NUMBERS = (
    "kv_bytes",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "kv_prefill_peak_bytes",
    "weights_bytes",
    "weights_bytes_active",
)


@cached
def numbers(src: tuple, ctx: int, seqs: int, k: str, v: str, w: str, mem_bytes: int) -> dict:
    """calc --json's numbers, the verdict, why kvcore has no plan (if it has none), and, unless the plan fits, the
    three levers (without a plan: upper bounds, weights + KV within the memory) and, with a plan, the smaller
    prefill step that fits (a lever dict, or None)."""
    g, spec, opts = config_geometry(*src), KvSpec(k, v), runtime_options(src, seqs)
    result = calculator.calculate(g, ctx, seqs, spec, w, opts)
    need = result["need_bytes"]  # the runtime's whole plan where it has one, else weights + KV
    out = {
        "result": result,
        "need": need,
        "verdict": calculator.verdict(need, mem_bytes, result["fit_allowance_bytes"]),
        "unplanned": calculator.unplanned_because(g),  # None: the runtime's whole plan is counted
        "layers": pd.DataFrame(result["per_layer"]),
        "blocking": None,  # the plan's part whose running sum first passes the memory (in the runtime's words)
    }
    if "plan" in result and out["verdict"].status != "fits":
        out["blocking"] = memory_fit.fit(result["plan"], memory_fit.Limit(mem_bytes, "")).blocking
    if out["verdict"].status != "fits":
        weights = result["weights_bytes"]
        out["levers"] = (
            calculator.max_context(g, spec, seqs, weights, mem_bytes, opts),
            calculator.max_sequences(g, spec, ctx, weights, mem_bytes, opts),
            calculator.formats_that_fit(g, ctx, seqs, weights, mem_bytes, spec, opts),
            # with a plan: the largest smaller prefill step that fits (-ub, --prefill-step-size), else None
            calculator.smaller_chunk(g, ctx, seqs, spec, weights, mem_bytes, opts),
        )
    return out


@cached
def numbers_table(
    src: tuple, ctx: int, seqs: int, k: str, v: str, w: str, mem_bytes: int, lang: str
) -> str:
    """numbers()' byte counts as a markdown table in `lang`: each quantity's name, its size in readable units and
    its exact bytes."""
    result = numbers(src, ctx, seqs, k, v, w, mem_bytes)["result"]
    t = i18n.translator(lang)
    windowed = (
        result["kv_bytes_per_token_at_context"] != result["kv_bytes_per_token"]
    )  # sliding windows stop growing
    rows = []
    for q in NUMBERS:
        if (
            q == "kv_bytes_per_token" and windowed
        ):  # what one token adds only until the windows are full; and the average
            rows.append(
                {
                    "quantity": t("calc.q_kv_bytes_per_token_window"),
                    "size": fmt_bytes(result[q]),
                    "bytes": result[q],
                }
            )
            avg = result["kv_bytes_per_token_average"]
            rows.append(
                {
                    "quantity": t("calc.q_kv_bytes_per_token_average", n=f"{ctx:,}"),
                    "size": fmt_bytes(avg),
                    "bytes": round(avg),
                }
            )
            continue
        rows.append(
            {"quantity": t(f"calc.q_{q}"), "size": fmt_bytes(result[q]), "bytes": result[q]}
        )
    rows = pd.DataFrame(rows)
    return md_table(
        rows,
        {
            "quantity": (t("calc.col_quantity"), None),
            "size": (t("calc.col_size"), None),
            "bytes": (t("calc.col_bytes"), "{:,}"),
        },
    )


@cached
def layers_table(
    src: tuple, ctx: int, seqs: int, k: str, v: str, w: str, mem_bytes: int, lang: str
):
    """numbers()' per-layer rows with the layer kinds in `lang`, as the Arrow table st.dataframe sends."""
    layers = numbers(src, ctx, seqs, k, v, w, mem_bytes)["layers"]
    return arrow(
        layers.assign(
            kind=layers["kind"].map(lambda kind: i18n.translate(lang, f"growth.kind_{kind}"))
        )
    )


def chart_end(ctx: int) -> int:
    """The last context the Calculator's charts draw for a reader at `ctx`: 1M tokens, or 8x `ctx` beyond 128K."""
    return min(MAX_CONTEXT, max(1_048_576, 8 * ctx))


def chart_contexts(ctx: int) -> list[int]:
    return what_if.log_contexts(1024, chart_end(ctx))


@cached
def memory_chart(
    src: tuple, end: int, seqs: int, k: str, v: str, weights: int, mem_bytes: int, lang: str
):
    """Weights + KV vs context up to `end` (chart_end of the reader's context, which the chart does not mark: a new
    context below 128K redraws nothing) for several formats (the reader's first), the available memory dashed."""
    g, t = config_geometry(*src), i18n.translator(lang)
    contexts = what_if.log_contexts(1024, end)
    formats = list(dict.fromkeys([k if k == v else "fp16", *what_if.CURVE_FORMATS]))
    curves = pd.DataFrame(
        what_if.memory_curves(
            g, contexts, weights, seqs, KvSpec(k, v), formats, runtime_options(src, seqs)
        )
    )
    curves = savings_views.one_line_per_cost(curves, g)  # formats of equal cost: one line, one name
    line = pd.DataFrame(
        [
            {"context": c, "format": t("calc.available_line"), "total_bytes": mem_bytes}
            for c in (contexts[0], contexts[-1])
        ]
    )
    data = pd.concat([curves, line], ignore_index=True).assign(gib=lambda d: d["total_bytes"] / GIB)
    return memory_curves(
        data, data, g, contexts[-1], lang, dashed=t("calc.available_line"), height=220
    )


@cached
def decode_chart(
    src: tuple,
    ctx: int,
    seqs: int,
    k: str,
    v: str,
    w: str,
    mem_bytes: int,
    chip: str,
    share: float,
    lang: str,
) -> dict:
    """Predicted tok/s vs context on `chip` at `share` of its peak, marked at the reader's context ("here").

    When weights + KV do not fit at `ctx`, nothing is predicted there (here None) and the curve stops at the
    longest context that fits (`fits_to`; 0: not even one token, no chart).
    """
    g, t = config_geometry(*src), i18n.translator(lang)
    out = numbers(src, ctx, seqs, k, v, w, mem_bytes)
    fits = out["verdict"].status != "no"
    fits_to = ctx if fits else out["levers"][0]
    if fits_to < 1:
        return {"chart": None, "here": None, "fits_to": 0}
    contexts = (
        chart_contexts(ctx)
        if fits
        else what_if.log_contexts(min(1024, max(1, fits_to // 64)), fits_to)
    )
    llama = runtime_options(src, seqs)
    rows = what_if.predict_decode(g, contexts, KvSpec(k, v), w, chip, share, seqs, llama)
    at = (
        what_if.predict_decode(g, [ctx], KvSpec(k, v), w, chip, share, seqs, llama)[0]
        if fits
        else None
    )
    here = at["tokens_per_s"] if at else None
    each = t(f"calc.decode_each_{runtime_of(g).sequence_noun}")  # slot (llama.cpp) or sequence
    one = t("calc.predicted") if seqs == 1 else t("calc.predicted_as", what=each)
    dec = pd.DataFrame(rows).assign(series=one)
    if seqs > 1:  # the total of all sequences is a second line, named as such
        total = pd.DataFrame(rows).assign(
            tokens_per_s=lambda d: d["tokens_per_s_total"],
            series=t("calc.predicted_as", what=t("calc.decode_all", n=seqs)),
        )
        dec = pd.concat([dec, total], ignore_index=True)
    marks = (
        pd.DataFrame(
            [{"context": ctx, "tokens_per_s": here, "label": f"{ctx:,}: {here:,.1f} tok/s"}]
        )
        if here is not None
        else None
    )
    return {
        "chart": speed_curves(
            dec,
            dec,
            lang,
            "marked_series_chart",
            rules=limit_rule(g, contexts[-1], lang),
            marks=marks,
        ),
        "here": here,
        "here_total": at["tokens_per_s_total"] if at else None,
        "each": each,
        "fits_to": fits_to,
    }


@section_cache(max_entries=8)
def efficiency(recs: list) -> what_if.Efficiency:
    """BW_eff / peak from the recordings on known chips (recordings hash by content)."""
    return what_if.efficiency(recs)


@section_cache(max_entries=8)
def efficiency_sources(recs: list, lang: str) -> str:
    """The recordings what_if.efficiency fitted, named as the site names them everywhere (not their English titles)."""
    from .sources import source_label

    return i18n.translate(lang, "recordings.list_sep").join(
        source_label(r, lang) for r in recs if what_if.efficiency([r]).source != "assumption"
    )


@cached
def runtimes_compared(src: tuple, ctx: int, seqs: int, lang: str) -> str:
    """The same model, context and sequences under each runtime's rules (fp16 K and V, llama.cpp with the page's
    options or its defaults), as a markdown table: KV bytes and why they differ (padding, windows)."""
    t = i18n.translator(lang)
    rows = []
    for runtime in (
        [gguf_runtime()] if isinstance(src[0], tuple) else RUNTIMES.values()
    ):  # a GGUF: its reader's rules only
        here = (*src[:2], runtime.name, src[3] if runtime is get_runtime(src[2]) else ())
        g = config_geometry(src[0], src[1], runtime.name)
        r = calculator.calculate(
            g, ctx, seqs, KvSpec("fp16", "fp16"), "bf16", runtime_options(here, seqs)
        )
        why = [t(f"calc.note_{code}", window=window) for code, window in g.note_codes]
        if runtime.preallocates:
            cells = ", ".join(
                t("calc.cmp_cells", name=c["name"], cells=f"{c['cells']:,}", streams=c["streams"])
                for c in r["caches"]
            )
            why.insert(0, t("calc.cmp_llamacpp", cells=cells))
        rows.append(
            {
                "runtime": runtime.name,
                "kv": fmt_bytes(r["kv_bytes"], decimal=False),
                "bytes": r["kv_bytes"],
                "why": i18n.join(lang, *why) or "—",
            }
        )
    return md_table(
        pd.DataFrame(rows),
        {
            "runtime": (t("calc.runtime"), "`{}`"),
            "kv": (t("calc.cmp_kv"), None),
            "bytes": (t("calc.col_bytes"), "{:,}"),
            "why": (t("calc.cmp_why"), None),
        },
    )


@cached
def formula(src: tuple, ctx: int, seqs: int, k: str, v: str, lang: str) -> str:
    """The KV formula with this model's numbers, written out in `lang` (mlx_lm and reference rules)."""
    g, spec = config_geometry(*src), KvSpec(k, v)
    return formula_markdown(formula_terms(g, ctx, spec, seqs), spec, lang)


@cached
def plan_table(src: tuple, ctx: int, seqs: int, k: str, v: str, w: str, mem_bytes: int, lang: str):
    """The runtime's memory plan in `lang`: a markdown table (each buffer as the runtime's log names it, its size,
    its exact bytes and the rule behind it, linked to its source line), the log lines it will print and the compute
    buffer's tolerance; None when the runtime has no plan."""
    plan = numbers(src, ctx, seqs, k, v, w, mem_bytes)["result"].get("plan")
    if plan is None:
        return None
    t = i18n.translator(lang)
    prefix = plan.get(
        "text_prefix", ""
    )  # a runtime's own texts for its part kinds (mlx_lm: "mlx_")

    def rule(part: dict) -> str:
        words = part["rule"] if lang == "en" else t(f"calc.plan_rule_{prefix}{part['kind']}")
        return f"[{words}]({part['source']})"

    rows = [
        {"part": p["name"], "size": fmt_bytes(p["bytes"]), "bytes": p["bytes"], "rule": rule(p)}
        for p in plan["parts"]
    ]
    rows.append(
        {
            "part": t("calc.plan_total"),
            "size": fmt_bytes(plan["total_bytes"]),
            "bytes": plan["total_bytes"],
            "rule": "",
        }
    )
    columns = {
        "part": (t("calc.plan_part"), None),
        "size": (t("calc.plan_size"), None),
        "bytes": (t("calc.plan_bytes"), "{:,}"),
        "rule": (t("calc.plan_rule"), None),
    }
    return {
        "table": md_table(pd.DataFrame(rows), columns, lang),
        "log": "\n".join(plan["log_lines"]),
        "tolerance": f"{plan['compute_tolerance_share']:.0%}",
        # what the runtime's plan leaves out, in `lang` (calc.plan_not_planned, _mlx for mlx_lm)
        "not_planned": t("calc.plan_not_planned" + (f"_{prefix.rstrip('_')}" if prefix else "")),
    }
