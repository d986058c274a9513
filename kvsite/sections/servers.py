"""The Many conversations chapter's sections: a real server's recorded conversation stacked by part, and
users × turns with the server's options as levers (kvcore.views.servers: mlx_lm.server's ledger;
kvcore.views.llama_server: llama-server's).

Example: recorded(rec, "en")["chart"] -> the first screen's chart; users_turns("mlx_lm.server", "llama-3.1-8b",
4, 8, 512, 256, 16, "en")["levers_md"] -> the levers as a markdown table.
"""

from __future__ import annotations

import pandas as pd

from kvcore.capacity.memory_fit import gpu_limit
from kvcore.errors import KvError
from kvcore.recordings.store import Recording
from kvcore.units import GIB, MIB, fmt_num
from kvcore.views import llama_server as llama
from kvcore.views import servers as views
from kvcore.views.as_server import runtime_for
from kvsite import i18n
from kvsite.charts.chart import make_chart
from kvsite.charts.tables import md_table

from .shared import cached, cols

MAC_RAM_GB = 16  # the Mac the first screen's limit is said for (the reader picks another below)
SERVERS = (views.mlx_lm_server.NAME, llama.NAME)
# each server's parts keep their colours in every chart of the chapter, whichever of them a chart holds (by place
# among them, mlx_lm.server's copy alive during a request was red in one chart and green in the next): llama-server's
# host RAM blues and reds, the GPU's pool orange (kvcore.views.chart_parts.PALETTE)
MLX_COLORS = {
    "active": "#4c78a8",
    "counted": "#e45756",
    "uncounted": "#f58518",
    "transient": "#54a24b",
}
LLAMA_COLORS = {
    "cache": "#4c78a8",
    "cache_copies": "#b279a2",
    "cache_transient": "#e45756",
    "checkpoints": "#72b7b2",
    "slots": "#f58518",
}


def _named(df: pd.DataFrame, lang: str, unit: int, column: str) -> pd.DataFrame:
    """The parts in `lang` and in `unit`; a part no request holds is left out (of the legend too)."""
    t = i18n.translator(lang, "servers.part_")
    df = df[df["part"].map(df.groupby("part")["bytes"].sum() > 0)]
    return df.assign(
        part=df["part"].map(t),
        **{column: df["bytes"] / unit, f"line_{column}": df["server_line"] / unit},
    )


def _chart(
    df: pd.DataFrame,
    lang: str,
    column: str,
    unit_title: str,
    limit=None,
    height=300,
    parts=views.PARTS,
    line_key="servers.server_line",
):
    t = i18n.translator(lang)
    titles = cols(lang, "request", "user", "part", column, "reprocessed_tokens") | {
        f"line_{column}": t(line_key, unit=unit_title)
    }
    order = [n for n in (t(f"servers.part_{p}") for p in parts) if n in set(df["part"])]
    colors = {
        t(f"servers.part_{p}"): c
        for p, c in (LLAMA_COLORS if parts == llama.PARTS else MLX_COLORS).items()
    }
    fields = ["request", "user", "part", column, f"line_{column}", "reprocessed_tokens"]
    return make_chart(
        df[fields].rename(columns=titles),
        "stacked_bars",
        df,
        "request",
        column,
        "part",
        t("cols.request"),
        unit_title,
        order=order,
        colors=colors,
        line=f"line_{column}",
        limit=limit,
        titles=titles,
        extra_tooltip=("user", "reprocessed_tokens"),
        height=height,
    )


@cached
def conversations(rec: Recording) -> tuple[str, ...]:
    """The conversations of `rec` its server's ledger replays exactly, in recorded order (the picker's options)."""
    rows = rec.data["sections"]["server"]
    model, dtype = rec.data["model"].get("name", ""), rec.data["model"].get("kv_format", "")
    try:
        if rows[0]["server"] == llama.NAME:
            return tuple(llama.replayable(rows, model))
        return tuple(views.replayable(rows, model, dtype))
    except KvError:
        return ()


@cached
def recorded(rec: Recording, lang: str, name: str | None = None) -> dict:
    """Conversation `name` of `rec` (else the first its ledger replays exactly), each request's peak stacked by
    part in MiB, the server's own count as a tick; or {"error": why not}."""
    t = i18n.translator(lang, "servers.")
    rows = rec.data["sections"]["server"]
    model, dtype = rec.data["model"].get("name", ""), rec.data["model"].get("kv_format", "")
    names = conversations(rec)
    if not names:
        return {"error": t("no_replay")}
    name = name if name in names else names[0]
    conversation = [r for r in rows if r["conversation"] == name]
    if rows[0]["server"] == llama.NAME:
        return _recorded_llama(conversation, model, dtype, lang)
    try:
        result = views.replay(conversation, model, dtype)
    except KvError as e:
        return {"error": i18n.error_markdown(lang, e)}
    parts = views.parts(result["requests"], result["kv_bytes_per_token"], result["options"])
    df = _named(parts, lang, MIB, "mib")
    last = result["requests"][-1]
    limit = gpu_limit(MAC_RAM_GB)
    rss = [r["rss_mib"] for r in conversation if isinstance(r.get("rss_mib"), (int, float))]
    ratio = last["peak_bytes"] / max(1, last["prompt_cache_bytes"])
    rss_growth = rss[-1] - rss[0] if len(rss) > 1 else None
    return {
        "server": views.mlx_lm_server.NAME,
        # what the page shows beside the chart: the server's count, what it holds at its peak, the two's ratio
        "metrics": (
            (t("m_line", n=len(conversation)), f"{fmt_num(last['prompt_cache_bytes'] / MIB)} MiB"),
            (t("m_peak"), f"{fmt_num(last['peak_bytes'] / MIB)} MiB"),
            (t("m_ratio"), f"{ratio:.1f}×"),
        ),
        "note": i18n.join(
            lang,
            t(
                "recorded_note",
                model=model,
                dtype=dtype,
                per=f"{result['kv_bytes_per_token']:,}",
                rss=fmt_num(rss_growth or 0),
                gib=fmt_num(limit.bytes / GIB),
                times=f"{limit.bytes / max(1, last['peak_bytes']):,.0f}",
                ram=MAC_RAM_GB,
            ),
            _sequential_note(result["options"], t),
        ),
        "chart": _chart(df, lang, "mib", "MiB", height=260),
        "conversation": name,
        "requests": len(conversation),
        "line": last["prompt_cache_bytes"],
        "peak": last["peak_bytes"],
        "printed": next(x for x in last["log_lines"] if x.startswith("Prompt Cache")),
        "ratio": ratio,
        "rss_growth_mib": rss_growth,
        "limit_gib": limit.bytes / GIB,
        "limit_times": limit.bytes / max(1, last["peak_bytes"]),
        "model": model,
        "dtype": dtype,
        "per_token": result["kv_bytes_per_token"],
    }


def _sequential_note(options: dict, t) -> str:
    """What a --kv-bits conversation's bars are (mlx_lm.server's sequential path), or ""."""
    if not views.mlx_lm_server.sequential(options):
        return ""
    return t(
        "recorded_kv_bits",
        bits=options["--kv-bits"],
        start=f"{options['--quantized-kv-start']:,}",
    )


def _recorded_llama(conversation: list[dict], model: str, dtype: str, lang: str) -> dict:
    """A llama-server conversation replayed (kvcore.views.llama_server.replay), stacked as `recorded` does."""
    try:
        result = llama.replay(conversation, model)
    except KvError as e:
        return {"error": i18n.error_markdown(lang, e)}
    requests = result["requests"]
    df = _named(llama.parts(requests), lang, MIB, "mib")
    chart = _chart(
        df, lang, "mib", "MiB", height=260, parts=llama.PARTS, line_key="servers.llama_line"
    )
    rss = [r["rss_mib"] for r in conversation if isinstance(r.get("rss_mib"), (int, float))]
    options = result["options"]
    slots, unified = llama.llama_server.slot_layout(options)
    cells = requests[-1]["active_kv_bytes"] // result["kv_bytes_per_token"]
    limit = gpu_limit(MAC_RAM_GB)
    t = i18n.translator(lang, "servers.")
    layout = t(
        "slots_unified" if unified else "slots_split",
        n=slots,
        cells=f"{cells if unified else cells // slots:,}",
    )
    sides = llama.split(requests)
    options_said = conversation[0].get("options", "") or ""
    mib = lambda n: fmt_num(n / MIB)  # noqa: E731
    return {
        "server": llama.NAME,
        "chart": chart,
        # what the page shows beside the chart: the server's count, the slot pool, the host RAM at its peak
        "metrics": (
            (
                t("m_llama_line", n=len(conversation)),
                f"{mib(requests[-1]['prompt_cache_bytes'])} MiB",
            ),
            (t("m_pool"), f"{mib(sides['gpu_bytes'])} MiB"),
            (t("m_host"), f"{mib(sides['host_peak_bytes'])} MiB"),
        ),
        "note": t(
            "recorded_llama_note",
            options=options_said,
            basis=t("basis_ids" if llama.has_ids(conversation) else "basis_counts"),
            model=model,
            dtype=dtype,
            per=f"{result['kv_bytes_per_token']:,}",
            pool=mib(sides["gpu_bytes"]),
            slots=layout,
            gib=fmt_num(limit.bytes / GIB),
            ram=MAC_RAM_GB,
            host=mib(sides["host_peak_bytes"]),
            rss0=fmt_num(rss[0] if rss else 0),
            rss=fmt_num(rss[-1] - rss[0] if len(rss) > 1 else 0),
        ),
        "conversation": conversation[0]["conversation"],
        "requests": len(conversation),
        "options": options_said,
        "slots": layout,
        "line": requests[-1]["prompt_cache_bytes"],
        "printed": llama.printed_line(conversation[-1]) or "",
        "from_ids": llama.has_ids(conversation),
        **sides,
        "rss_first_mib": rss[0] if rss else None,
        "rss_growth_mib": rss[-1] - rss[0] if len(rss) > 1 else None,
        "limit_gib": limit.bytes / GIB,
        "model": model,
        "dtype": dtype,
        "per_token": result["kv_bytes_per_token"],
    }


def _seconds(server: str, model: str):
    if server == llama.NAME:
        return lambda rows: views.reprocessed_seconds(
            model, rows, runtime=runtime_for(server), kv_dtype=llama.DTYPE
        )
    return lambda rows: views.reprocessed_seconds(model, rows)


def _lever_table(server: str, levers: list[dict], lang: str) -> pd.DataFrame:
    """Each lever's row: its flags, the two sizes that server's levers move (mlx_lm.server: what stays and the peak;
    llama-server: the slot pool and the host RAM at its peak), the tokens served and processed again, the seconds;
    the flags as code spans (an option reads as typed)."""
    t = i18n.translator(lang, "servers.")
    llama_server = server == llama.NAME
    lever, default, sizes = (
        (
            "llama_lever",
            "llama_default",
            (("llama_gpu", "gpu_bytes"), ("llama_host", "host_peak_bytes")),
        )
        if llama_server
        else ("lever", "default", (("resident", "resident_bytes"), ("peak", "peak_bytes")))
    )
    return pd.DataFrame(
        [
            {
                t(lever): f"`{row['flags']}`" if row["flags"] else t(default),
                **{t(head): f"{fmt_num(row[key] / GIB)} GiB" for head, key in sizes},
                t("cached"): f"{row['cached_tokens']:,}",
                t("reprocessed"): f"{row['reprocessed_tokens']:,}",
                t("reprocessed_s"): fmt_num(row["reprocessed_s"]),
            }
            for row in levers
        ]
    )


@cached
def users_turns(
    server: str,
    model: str,
    users: int,
    turns: int,
    message: int,
    reply: int,
    ram: int,
    lang: str,
) -> dict:
    """`users` users × `turns` turns through `server`'s defaults for `model`: each request's peak stacked
    by part in GiB against a Mac's GPU limit, and the levers; or {"error": the engine's sentence}."""
    t = i18n.translator(lang, "servers.")
    if server not in SERVERS:
        return {"error": t("unknown_server", server=server, servers=", ".join(SERVERS))}
    context = views.context_of(model)
    held = min(turns, context // (message + reply))  # the turns this model's context holds
    if held == 0:
        return {"warning": t("no_turn", model=model, context=f"{context:,}")}
    is_llama = server == llama.NAME
    try:
        script = views.conversation(users, held, message, reply)
        if is_llama:
            result = llama.ledger(model, script)
            levers = llama.levers(model, script, _seconds(server, model))
            df = llama.parts(result["requests"])
        else:
            result = views.ledger(model, script)
            levers = views.levers(model, script)
            df = views.parts(result["requests"], result["kv_bytes_per_token"], result["options"])
    except KvError as e:
        return {"error": i18n.error_markdown(lang, e)}
    df = _named(df, lang, GIB, "gib")
    limit = gpu_limit(ram)
    rule = pd.DataFrame(
        [
            {
                "value": limit.bytes / GIB,
                "label": t("limit", ram=ram, gib=fmt_num(limit.bytes / GIB)),
            }
        ]
    )
    rows = result["requests"]
    peak = max(r["peak_bytes"] for r in rows)
    chart = _chart(
        df,
        lang,
        "gib",
        "GiB",
        limit=rule,
        height=280,
        parts=llama.PARTS if is_llama else views.PARTS,
        line_key="servers.llama_line" if is_llama else "servers.server_line",
    )
    # llama-server: the slot pool on the GPU side, its prompt cache in host RAM; mlx_lm.server: all of it is Metal's
    sides = llama.split(rows) if is_llama else {"gpu_bytes": peak, "host_peak_bytes": 0}
    gpu = sides["gpu_bytes"]
    table = _lever_table(server, levers, lang)
    return {
        "chart": chart,
        # shown as a markdown table: st.dataframe's grid, sent again at each step of the users slider, cost that
        # step about a third of a one-line page's (a paired A/B, docs/benchmarks.md, 7 December)
        "levers_md": md_table(
            table, {c: (c, None) for c in table.columns}, lang, right=tuple(table.columns[1:])
        ),
        "resident": rows[-1]["resident_bytes"],
        "peak": peak,
        "gpu": gpu,
        "host_peak": sides["host_peak_bytes"],
        "over": gpu > limit.bytes,
        "cells": gpu // result["kv_bytes_per_token"] if is_llama else 0,
        "limit": limit.bytes,
        "line": rows[-1]["prompt_cache_bytes"],
        "reprocessed": sum(r["reprocessed_tokens"] for r in rows),
        "prompt": sum(r["prompt_tokens"] for r in rows),
        "cut": t("cut", model=model, context=f"{context:,}", n=held) if held < turns else "",
    }
