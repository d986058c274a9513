"""The savings chapter's sections: fewer KV heads, fewer bits per value, what fits, TurboQuant's
claims (what a smaller cache costs a real model: kvsite.sections.quality).

Example: formats("llama-3.2-1b", ("fp16", "q8_0"), 32768, "en")["kept"] -> ("fp16", "q8_0").
"""

from __future__ import annotations

from kvcore.capacity.memory_fit import gpu_limit
from kvcore.inputs.preset_files import load_preset
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import FORMATS
from kvcore.recordings import provenance as run_info
from kvcore.recordings.published import figures
from kvcore.recordings.store import Recording
from kvcore.units import GIB, fmt_num, fmt_pct
from kvcore.views import memory as views
from kvcore.views import savings as savings_views
from kvsite import i18n
from kvsite.charts.chart import make_chart
from kvsite.charts.tables import md_table
from kvsite.sections.calc.source import limit_reason

from .shared import cached, cols, memory_curves


@cached
def heads(model: str, ctx: int, lang: str) -> dict:
    """The MHA / this model / MQA chart (an MLA model: its latent against the MHA it replaces) and one sentence on
    this model's own query and KV heads."""
    g = preset_geometry(model)
    df = savings_views.heads_compare(
        g, ctx, mha_dims=savings_views.mla_mha_dims(load_preset(model)["config"])
    )
    df["variant"] = df["variant"].map(i18n.translator(lang, "savings.variant_"))
    df["label"] = [
        fmt_num(v, unit="GiB") + ("" if share == 1 else f" ({fmt_num(share * 100)}%)")
        for v, share in zip(df["gib"], df["vs_mha"])
    ]
    t = i18n.translator(lang)
    mla = next((layer for layer in g.layers if layer.kind == "mla"), None)
    kv = max((layer.kv_heads for layer in g.layers if layer.kind in ("full", "sliding")), default=0)
    if mla is not None:
        text = t(
            "savings.heads_mla",
            model=model,
            latent=mla.k_dim,
            rope=mla.v_dim,
            share=fmt_pct(df["vs_mha"].min()),
        )
    elif kv and kv < g.num_attention_heads:
        text = t(
            "savings.heads_shared",
            model=model,
            q_heads=g.num_attention_heads,
            kv_heads=kv,
            ratio=g.num_attention_heads // kv,
        )
    else:
        text = t("savings.heads_mha", model=model, q_heads=g.num_attention_heads)
    titles = cols(lang, "variant", "gib", "kv_heads", "vs_mha")
    table = df[["variant", "kv_heads", "gib", "vs_mha"]].rename(columns=titles)
    return {
        "chart": make_chart(
            table,
            "bar_chart",
            df,
            "variant",
            "gib",
            "variant",
            None,  # MHA, GQA, MQA name themselves: a phone's width goes to the plot
            "GiB",
            extra_tooltip=("kv_heads", "vs_mha"),
            titles=titles,
            labels="label",
            show_legend=False,
        ),
        "text": text,
    }


@cached
def formats(model: str, fmts: tuple[str, ...], ctx: int, lang: str) -> dict:
    """KV GiB vs context per format (formats of equal cost share a line and say so) up to the model's limit, and
    the formats table; `kept`: the formats this model's cache can be stored in, `left_out`: why the others cannot
    (the engine's sentences), chart None when none can."""
    g = preset_geometry(model)
    top = max(ctx, 8192)
    misfits = savings_views.misfits(g, list(fmts))
    kept = tuple(f for f in fmts if f not in misfits)
    left_out = i18n.join(lang, *(i18n.error_markdown(lang, e) for e in misfits.values()))
    if not kept:
        return {"chart": None, "table": "", "kept": kept, "left_out": left_out}
    curve = savings_views.formats_curve(g, list(kept), top)
    titles = cols(lang, "context", "format", "gib")
    return {
        "kept": kept,
        "left_out": left_out,
        "chart": memory_curves(
            curve.rename(columns=titles), curve, g, top, lang, titles=titles, height=240
        ),
        "table": _formats_table(savings_views.format_table(g, list(fmts)), lang),
    }


def _formats_table(table, lang: str) -> str:
    """The formats' numbers as a table, and where each layout comes from as a list under it (a column of layout
    descriptions wrapped every row to three lines on a phone)."""
    t = i18n.translator(lang)
    numbers = md_table(
        table,
        {
            "format": (t("savings.format"), None),
            "bits_per_value": (t("savings.bits"), "{:.3f}"),
            "bytes_per_token": (t("savings.bytes_token"), "{:,}"),
            "vs_fp16": ("× fp16", "{:.3f}"),
        },
        lang=lang,
    )
    sources = [
        f"- `{fmt}`{t('recordings.colon')}{i18n.data_text(lang, str(source))}"
        for fmt, source in zip(table["format"], table["source"])
        if isinstance(source, str) and source
    ]
    return numbers + (
        "\n\n" + f"{t('savings.source')}{t('recordings.colon').rstrip()}\n\n" + "\n".join(sources)
        if sources
        else ""
    )


@cached
def fits_words(ram: float, lang: str) -> dict:
    """What the longest contexts are measured against, in `lang`: the caption (weights + KV within the memory the GPU
    may use on a Mac with `ram` GB, its source, nothing else counted) and the sentence for weights that do not fit."""
    limit, t = gpu_limit(ram), i18n.translator(lang)
    values = {"mem": f"{ram:g}", "limit": f"{limit.bytes / GIB:,.2f}"}
    return {
        "note": t("savings.fits_note", source=limit_reason(lang, ram), **values),
        "no_fit": t("savings.no_fit", **values),
    }


@cached
def fits(model: str, weights: str, mem: float, fmts: tuple[str, ...], lang: str) -> dict | None:
    """Longest context per format whose weights + KV stay within the GPU's memory on a Mac with `mem` GB of RAM (an
    upper bound), capped at the model's limit (and saying so); None when nothing fits."""
    g = preset_geometry(model)
    df = savings_views.fits_table(g, weights, mem, list(fmts))
    if df["max_context"].max() == 0:
        return None
    t = i18n.translator(lang)
    df["label"] = [
        t("savings.fits_capped", n=f"{n:,}", memory=f"{m:,}") if capped else f"{n:,}"
        for n, m, capped in zip(df["max_context"], df["memory_max_context"], df["capped"])
    ]
    titles = cols(lang, "format", "max_context", "memory_max_context")
    table = df[["format", "max_context", "memory_max_context"]].rename(columns=titles)
    capped = bool(df["capped"].any())
    note = (
        t("savings.fits_model_limit", model=model, n=f"{g.max_position_embeddings:,}")
        if capped
        else ""
    )
    # at the model's limit every capped bar would be the same length: draw what memory holds, which differs by format
    value, other = (
        ("memory_max_context", "max_context") if capped else ("max_context", "memory_max_context")
    )
    return {
        "chart": make_chart(
            table,
            "bar_chart",
            df,
            "format",
            value,
            "format",
            None,  # the formats name themselves
            titles[value],
            extra_tooltip=(other,),
            titles=titles,
            labels="label",
            show_legend=False,
        ),
        "note": note,
    }


@cached
def turbo(lang: str) -> dict:
    claims = savings_views.turbo3_claims()
    item, fmt = figures()["turbo3_llama31_8b_131k"], FORMATS["turbo3"]
    by = claims.set_index("claim")
    values = {
        "model": item["model"],
        "context": item["context"],
        "fp16_gib": by.loc["article_b", "gib"] * by.loc["article_b", "vs_fp16"],
        "b_gib": by.loc["article_b", "gib"],
        "b_bits": by.loc["article_b", "bits_per_value"],
        "ratio": item["ratio_vs_f16"],
        "block_values": fmt.block_values,
        "block_bytes": fmt.block_bytes,
        "block_bits": by.loc["block_layout", "bits_per_value"],
        "block_gib": by.loc["block_layout", "gib"],
        "header_bits": by.loc["header_comment", "bits_per_value"],
    }
    claims["claim"] = claims["claim"].map(i18n.translator(lang, "savings.claim_"))
    t = i18n.translator(lang)
    # the sources as numbered notes under the table: a column of long citations squeezed the first to a letter a
    # line on a phone
    refs = list(dict.fromkeys(claims["source"]))
    claims["ref"] = claims["source"].map(lambda s: f"[{refs.index(s) + 1}]")
    notes = "\n".join(f"{i}. {i18n.data_text(lang, s)}" for i, s in enumerate(refs, 1))
    return {
        "claims": md_table(
            claims,
            {
                "claim": (t("savings.claim"), None),
                "bits_per_value": (t("savings.bits"), "{:.3f}"),
                "gib": ("GiB", "{:.3f}"),
                "vs_fp16": ("fp16 ÷", "{:.2f}"),
                "ref": (t("savings.source"), None),
            },
            lang=lang,
        )
        + "\n\n"
        + notes,
        "padding": md_table(
            savings_views.turbo_padding(),
            {
                "format": (t("savings.format"), None),
                "head_dim_128": (t("savings.hd128"), "{:.3f}"),
                "head_dim_64": (t("savings.hd64"), "{:.3f}"),
            },
        ),
        "text": i18n.translate(lang, "savings.turbo_text", **values),
    }


@cached
def benchmark(rec: Recording, lang: str) -> dict:
    """The weight-precision table of a published benchmark, with its model and chip named."""
    rows = views.section_frame([rec], "benchmark")
    rows["label"] = rows["tokens_per_s"].map(lambda v: fmt_num(v, unit="tok/s"))
    t = i18n.translator(lang)
    p = run_info.badge_fields(rec)
    titles = cols(lang, "name", "tokens_per_s", "peak_memory_gb")
    table = rows[["name", "tokens_per_s", "peak_memory_gb"]].rename(columns=titles)
    return {
        "chart": make_chart(
            table,
            "bar_chart",
            rows,
            "name",
            "tokens_per_s",
            "name",
            t("savings.weights_precision"),
            t("common.tok_s"),
            extra_tooltip=("peak_memory_gb",),
            sort=list(rows["name"]),
            titles=titles,
            labels="label",
            show_legend=False,
        ),
        "title": t("savings.bench_title", model=p["model"], chip=p["chip"], kv=p["kv_format"]),
    }


@cached
def published_numbers() -> dict:
    """The quoted trade-off figures of kvcore/recordings/published.yaml, by the names the prose uses."""
    p = figures()
    quality = {r["outcome"]: r["bits_per_channel"] for r in p["turboquant_quality"]["results"]}
    return {
        "lo": p["turbo3_speed"]["drop_pct_low"],
        "hi": p["turbo3_speed"]["drop_pct_high"],
        "speedup": p["turboquant_kernel"]["speedup_max"],
        "kernel_bits": p["turboquant_kernel"]["bits"],
        "q_same": quality["same"],
        "q_lower": quality["slightly_lower"],
    }
