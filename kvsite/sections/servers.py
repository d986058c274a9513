"""The Many conversations chapter's sections: a real mlx_lm.server's recorded conversation stacked by part, and
users × turns with the server's options as levers (kvcore.views.servers: mlx_lm.server's ledger).

Example: recorded(rec, "en")["chart"] -> the first screen's chart; users_turns("llama-3.1-8b", 4, 8, 512, 256,
16, "en")["levers"] -> a table.
"""

from __future__ import annotations

import pandas as pd

from kvcore.capacity.memory_fit import gpu_limit
from kvcore.errors import KvError
from kvcore.recordings.store import Recording
from kvcore.units import GIB, MIB, fmt_num
from kvcore.views import servers as views
from kvsite import i18n
from kvsite.charts.chart import make_chart

from .shared import cached, cols

MAC_RAM_GB = 16  # the Mac the first screen's limit is said for (the reader picks another below)


def _named(df: pd.DataFrame, lang: str, unit: int, column: str) -> pd.DataFrame:
    """The parts in `lang` and in `unit`; a part no request holds is left out (of the legend too)."""
    t = i18n.translator(lang, "servers.part_")
    df = df[df["part"].map(df.groupby("part")["bytes"].sum() > 0)]
    return df.assign(
        part=df["part"].map(t),
        **{column: df["bytes"] / unit, f"line_{column}": df["server_line"] / unit},
    )


def _chart(df: pd.DataFrame, lang: str, column: str, unit_title: str, limit=None, height=300):
    t = i18n.translator(lang)
    titles = cols(lang, "request", "user", "part", column, "reprocessed_tokens") | {
        f"line_{column}": t("servers.server_line", unit=unit_title)
    }
    order = [n for n in (t(f"servers.part_{p}") for p in views.PARTS) if n in set(df["part"])]
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
        line=f"line_{column}",
        limit=limit,
        titles=titles,
        extra_tooltip=("user", "reprocessed_tokens"),
        height=height,
    )


@cached
def recorded(rec: Recording, lang: str) -> dict:
    """The first conversation of `rec` that its counts replay exactly (kvcore.views.servers.replay), each
    request's peak stacked by part in MiB, the server's own count as a tick; or {"error": why not}."""
    t = i18n.translator(lang, "servers.")
    rows = rec.data["sections"]["server"]
    model, dtype = rec.data["model"].get("name", ""), rec.data["model"].get("kv_format", "")
    try:
        names = views.replayable(rows, model, dtype)
        if not names:
            return {"error": t("no_replay")}
        conversation = [r for r in rows if r["conversation"] == names[0]]
        result = views.replay(conversation, model, dtype)
    except KvError as e:
        return {"error": i18n.error_markdown(lang, e)}
    df = views.parts(result["requests"], result["kv_bytes_per_token"])
    shown = (
        df.groupby("part")["bytes"].sum() > 0
    )  # a part no request holds is left out of the legend
    df = _named(df[df["part"].map(shown)], lang, MIB, "mib")
    last = result["requests"][-1]
    limit = gpu_limit(MAC_RAM_GB)
    rss = [r["rss_mib"] for r in conversation if isinstance(r.get("rss_mib"), (int, float))]
    return {
        "chart": _chart(df, lang, "mib", "MiB", height=260),
        "conversation": names[0],
        "requests": len(conversation),
        "line": last["prompt_cache_bytes"],
        "peak": last["peak_bytes"],
        "printed": next(x for x in last["log_lines"] if x.startswith("Prompt Cache")),
        "ratio": last["peak_bytes"] / max(1, last["prompt_cache_bytes"]),
        "rss_growth_mib": rss[-1] - rss[0] if len(rss) > 1 else None,
        "limit_gib": limit.bytes / GIB,
        "limit_times": limit.bytes / max(1, last["peak_bytes"]),
        "model": model,
        "dtype": dtype,
        "per_token": result["kv_bytes_per_token"],
    }


@cached
def users_turns(
    model: str, users: int, turns: int, message: int, reply: int, ram: int, lang: str
) -> dict:
    """`users` users × `turns` turns through mlx_lm.server's defaults for `model`: each request's peak stacked
    by part in GiB against a Mac's GPU limit, and the levers; or {"error": the engine's sentence}."""
    t = i18n.translator(lang, "servers.")
    context = views.context_of(model)
    held = min(turns, context // (message + reply))  # the turns this model's context holds
    if held == 0:
        return {"warning": t("no_turn", model=model, context=f"{context:,}")}
    try:
        script = views.conversation(users, held, message, reply)
        result = views.ledger(model, script)
        levers = views.levers(model, script)
    except KvError as e:
        return {"error": i18n.error_markdown(lang, e)}
    df = _named(views.parts(result["requests"], result["kv_bytes_per_token"]), lang, GIB, "gib")
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
    default = t("default")
    table = pd.DataFrame(
        [
            {
                t("lever"): lever["flags"] or default,
                t("resident"): f"{fmt_num(lever['resident_bytes'] / GIB)} GiB",
                t("peak"): f"{fmt_num(lever['peak_bytes'] / GIB)} GiB",
                t("cached"): f"{lever['cached_tokens']:,}",
                t("reprocessed"): f"{lever['reprocessed_tokens']:,}",
                t("reprocessed_s"): fmt_num(lever["reprocessed_s"]),
            }
            for lever in levers
        ]
    )
    peak = max(r["peak_bytes"] for r in rows)
    return {
        "chart": _chart(df, lang, "gib", "GiB", limit=rule, height=280),
        "levers": table,
        "resident": rows[-1]["resident_bytes"],
        "peak": peak,
        "over": peak > limit.bytes,
        "limit": limit.bytes,
        "line": rows[-1]["prompt_cache_bytes"],
        "reprocessed": sum(r["reprocessed_tokens"] for r in rows),
        "prompt": sum(r["prompt_tokens"] for r in rows),
        "cut": t("cut", model=model, context=f"{context:,}", n=held) if held < turns else "",
    }
