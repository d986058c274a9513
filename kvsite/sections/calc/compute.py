"""The calculator's sections, one cached function each (kvsite.sections.shared's conventions; the
arithmetic is kvcore.capacity's): its result (numbers, verdict, levers), the memory and decode
charts, the runtimes compared, the formula, the plan. Each is keyed by the request
(kvcore.capacity.request.Request) reduced to what it computes: the sizes do not read the memory, the
memory chart not the context below its end, so two links that ask the same question share one entry.

Example: result(Request(ModelSource("llama-3.2-1b"), 32768, memory_bytes=2**34)) -> a Result with its fit.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from kvcore.capacity import calculator
from kvcore.capacity.request import Request, Result
from kvcore.limits import MAX_CONTEXT
from kvcore.memory.formulas import formula_terms, weights_bytes
from kvcore.model.geometry import Geometry
from kvcore.runtimes.registry import RUNTIMES, gguf_runtime, runtime_of
from kvcore.units import GIB, fmt_bytes
from kvcore.views import savings as savings_views
from kvcore.views import what_if
from kvsite import i18n
from kvsite.charts.tables import arrow, md_table
from kvsite.data.cache import section_cache
from kvsite.sections.growth import formula_markdown
from kvsite.sections.shared import cached, limit_rule, memory_curves, speed_curves

from .source import config_geometry

NUMBERS = (
    "kv_bytes",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "kv_prefill_peak_bytes",
    "weights_bytes",
    "weights_bytes_active",
)


def geometry(request: Request) -> Geometry:
    """The request's model under its runtime's rules (kvsite.sections.calc.source.config_geometry, cached)."""
    return config_geometry(request.model.text, request.model.name, request.runtime)


def result(request: Request) -> Result:
    """calc --json's numbers and, with the memory, the verdict and levers: the sizes cached without the memory
    (a new memory judges them again, the levers' solving being the only new work)."""
    sized = _sized(request.sized())
    return sized if request.memory_bytes is None else _judged(request)


@cached
def _sized(request: Request) -> Result:
    return calculator.size(request, geometry(request))


@cached
def _judged(request: Request) -> Result:
    return calculator.judge(_sized(request.sized()), request, geometry(request))


@cached
def layers(request: Request) -> pd.DataFrame:
    return pd.DataFrame(list(_sized(request).per_layer))


def numbers_table(request: Request, lang: str) -> str:
    """The result's byte counts as a markdown table in `lang`: each quantity's name, its size in readable units
    and its exact bytes (the memory does not enter)."""
    return _numbers_table(request.sized(), lang)


@cached
def _numbers_table(request: Request, lang: str) -> str:
    r = _sized(request)
    ctx, t = request.context, i18n.translator(lang)
    windowed = (
        r.kv_bytes_per_token_at_context != r.kv_bytes_per_token
    )  # sliding windows stop growing
    rows = []
    for q in NUMBERS:
        if (
            q == "kv_bytes_per_token" and windowed
        ):  # what one token adds only until the windows are full; and the average
            rows.append(
                {
                    "quantity": t("calc.q_kv_bytes_per_token_window"),
                    "size": fmt_bytes(getattr(r, q)),
                    "bytes": getattr(r, q),
                }
            )
            avg = r.kv_bytes_per_token_average
            rows.append(
                {
                    "quantity": t("calc.q_kv_bytes_per_token_average", n=f"{ctx:,}"),
                    "size": fmt_bytes(avg),
                    "bytes": round(avg),
                }
            )
            continue
        value = getattr(r, q)
        rows.append({"quantity": t(f"calc.q_{q}"), "size": fmt_bytes(value), "bytes": value})
    rows = pd.DataFrame(rows)
    return md_table(
        rows,
        {
            "quantity": (t("calc.col_quantity"), None),
            "size": (t("calc.col_size"), None),
            "bytes": (t("calc.col_bytes"), "{:,}"),
        },
    )


def layers_table(request: Request, lang: str):
    """The result's per-layer rows with the layer kinds in `lang`, as the Arrow table st.dataframe sends."""
    return _layers_table(request.sized(), lang)


@cached
def _layers_table(request: Request, lang: str):
    rows = layers(request)
    return arrow(
        rows.assign(kind=rows["kind"].map(lambda kind: i18n.translate(lang, f"growth.kind_{kind}")))
    )


def chart_end(ctx: int, limit: int | None = None) -> int:
    """The last context the Calculator's charts draw for a reader at `ctx`: the model's own limit (its
    max_position_embeddings) when the reader stays within it; past it (or with no limit), 1M tokens or 8x `ctx`,
    the part beyond the limit marked as such (kvsite.sections.shared.limit_rule)."""
    if limit and ctx <= limit:
        return max(limit, 2048)
    return min(MAX_CONTEXT, max(1_048_576, 8 * ctx))


def chart_contexts(ctx: int, limit: int | None = None) -> list[int]:
    return what_if.log_contexts(1024, chart_end(ctx, limit))


def memory_chart(request: Request, lang: str):
    """Weights + KV vs context up to chart_end of the reader's context (which the chart does not mark: a new
    context below 128K redraws nothing) for several formats (the reader's first), the available memory dashed."""
    end = chart_end(request.context, geometry(request).max_position_embeddings)
    return _memory_chart(replace(request, context=end), lang)


@cached
def _memory_chart(request: Request, lang: str):
    g, t = geometry(request), i18n.translator(lang)
    k, v, seqs = request.k_format, request.v_format, request.sequences
    contexts = what_if.log_contexts(1024, request.context)
    formats = list(dict.fromkeys([k if k == v else "fp16", *what_if.CURVE_FORMATS]))
    weights = weights_bytes(g, request.weights_format)
    curves = pd.DataFrame(
        what_if.memory_curves(g, contexts, weights, seqs, request.spec, formats, request.options())
    )
    curves = savings_views.one_line_per_cost(curves, g)  # formats of equal cost: one line, one name
    line = pd.DataFrame(
        [
            {"context": c, "format": t("calc.available_line"), "total_bytes": request.memory_bytes}
            for c in (contexts[0], contexts[-1])
        ]
    )
    data = pd.concat([curves, line], ignore_index=True).assign(gib=lambda d: d["total_bytes"] / GIB)
    return memory_curves(
        data, data, g, contexts[-1], lang, dashed=t("calc.available_line"), height=190
    )


@cached
def decode_chart(request: Request, chip: str, share: float, lang: str) -> dict:
    """Predicted tok/s vs context on `chip` at `share` of its peak, marked at the reader's context ("here").

    When the request does not fit, nothing is predicted there (here None) and the curve stops at the longest
    context that fits (`fits_to`, the context lever; 0: not even one token, no chart).
    """
    g, t = geometry(request), i18n.translator(lang)
    ctx, seqs, spec, w = request.context, request.sequences, request.spec, request.weights_format
    fit = result(request).fit
    fits = fit.status != "no"
    longest = fit.lever("context")
    fits_to = ctx if fits else longest["value"] if longest else 0
    if fits_to < 1:
        return {"chart": None, "here": None, "fits_to": 0}
    contexts = (
        chart_contexts(ctx, g.max_position_embeddings)
        if fits
        else what_if.log_contexts(min(1024, max(1, fits_to // 64)), fits_to)
    )
    llama = request.options()
    rows = what_if.predict_decode(g, contexts, spec, w, chip, share, seqs, llama)
    at = what_if.predict_decode(g, [ctx], spec, w, chip, share, seqs, llama)[0] if fits else None
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
    from kvsite.data.sources import source_label

    return i18n.translate(lang, "recordings.list_sep").join(
        source_label(r, lang) for r in recs if what_if.efficiency([r]).source != "assumption"
    )


def runtimes_compared(request: Request, lang: str) -> str:
    """The same model, context and sequences under each runtime's rules (fp16 K and V, the page's settings for
    its runtime, the others' defaults), as a markdown table: KV bytes and why they differ (padding, windows)."""
    plain = replace(request.sized(), k_format="fp16", v_format="fp16", weights_format="bf16")
    return _runtimes_compared(replace(plain, group_size=64, activation_dtype="fp16"), lang)


@cached
def _runtimes_compared(request: Request, lang: str) -> str:
    t = i18n.translator(lang)
    rows = []
    gguf = isinstance(request.model.text, tuple)
    for runtime in [gguf_runtime()] if gguf else RUNTIMES.values():  # a GGUF: its reader's rules
        own = runtime.name == request.runtime  # the page's settings are its runtime's
        here = replace(request, runtime=runtime.name, settings=request.settings if own else ())
        r = _sized(here)
        why = [t(f"calc.note_{code}", window=window) for code, window in geometry(here).note_codes]
        if runtime.preallocates:
            cells = ", ".join(
                t("calc.cmp_cells", name=c["name"], cells=f"{c['cells']:,}", streams=c["streams"])
                for c in r.runtime_report["caches"]
            )
            why.insert(0, t("calc.cmp_llamacpp", cells=cells))
        rows.append(
            {
                "runtime": runtime.name,
                "kv": fmt_bytes(r.kv_bytes, decimal=False),
                "bytes": r.kv_bytes,
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


def formula(request: Request, lang: str) -> str:
    """The KV formula with this model's numbers, written out in `lang` (mlx_lm and reference rules)."""
    return _formula(replace(request.sized(), weights_format="bf16", settings=()), lang)


@cached
def _formula(request: Request, lang: str) -> str:
    g, spec = geometry(request), request.spec
    return formula_markdown(formula_terms(g, request.context, spec, request.sequences), spec, lang)


def plan_table(request: Request, lang: str):
    """The runtime's memory plan in `lang`: a markdown table (each buffer as the runtime's log names it, its size,
    its exact bytes and the rule behind it, linked to its source line), the log lines it will print and the compute
    buffer's tolerance; None when the runtime has no plan."""
    return _plan_table(request.sized(), lang)


@cached
def _plan_table(request: Request, lang: str):
    plan = _sized(request).plan
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
        {
            "part": i18n.data_text(
                lang, p["name"]
            ),  # the runtime's own part names, where one is words
            "size": fmt_bytes(p["bytes"]),
            "bytes": p["bytes"],
            "rule": rule(p),
        }
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


@cached
def turbo3_note(lang: str) -> str:
    """Why the turbo3 line is not Article B's figure: the layout it counts, Article B's GiB and the layout's for the
    same model and context (kvcore.views.savings.turbo3_claims), linked to the Savings chapter that shows why."""
    from kvcore.recordings.published import figures
    from kvsite.frame.chapters import by_slug

    claims = savings_views.turbo3_claims().set_index("claim")
    item = figures()["turbo3_llama31_8b_131k"]
    return i18n.translate(
        lang,
        "calc.turbo3_note",
        bits=f"{claims.loc['block_layout', 'bits_per_value']:.3f}",
        model=item["model"],
        context=f"{item['context']:,}",
        b_gib=f"{claims.loc['article_b', 'gib']:g}",
        block_gib=f"{claims.loc['block_layout', 'gib']:.2f}",
        url=f"{by_slug('savings').url}?lang={lang}",
    )
