"""`python -m kvcore calc`: a model's KV cache, weights and fit under a runtime's rules, its memory plan where the
runtime has one, and the time from the prompt to the last token; text for a terminal or `--json`.
"""

from __future__ import annotations

import json

from kvcore.capacity.calculator import NOT_COUNTED, answer
from kvcore.capacity.memory_fit import gpu_limit
from kvcore.capacity.request import ModelSource, Request, Result
from kvcore.cli import calc_server
from kvcore.errors import KvError
from kvcore.fits import shares as timing_fit
from kvcore.inputs.source import resolve_model
from kvcore.memory.formats import KvSpec
from kvcore.runtimes.registry import RUNTIMES, get_runtime, runtime_of
from kvcore.timing import estimate as timing
from kvcore.timing import hardware
from kvcore.units import fmt_bytes
from kvcore.views.as_server import as_server


def _print_calc(r: Result, out: dict) -> None:
    """calc's text: `r` read by field; `out` (calc --json's dict) for the runtime's own lines and the time."""
    runtime = get_runtime(r.runtime)
    print(f"model      {r.model} ({r.runtime} rules)   source: {out['source']}")
    for line in runtime.describe_options(out):  # llama.cpp: its options and its caches' log lines
        print(line)
    print(
        f"context    {r.context:,} tokens x {r.sequences} sequence(s), K {r.k_format}, V {r.v_format}"
    )
    print(f"KV cache   {fmt_bytes(r.kv_bytes)}  ({r.kv_bytes:,} B)")
    if r.kv_bytes_per_token_at_context == r.kv_bytes_per_token:
        print(f"per token  {r.kv_bytes_per_token:,} B per token per sequence (all layers)")
    else:  # sliding layers stop growing once their window is full
        print(
            f"per token  {r.kv_bytes_per_token:,} B per token per sequence (all layers) until the sliding windows are "
            f"full; {r.kv_bytes_per_token_at_context:,} B per token at {r.context:,} tokens (windows full); "
            f"{r.kv_bytes_per_token_average:,.0f} B per token on average over the {r.context:,}"
        )
    for line in runtime.describe_sizes(
        out
    ):  # mlx_lm: the chunked prefill's peak above the steady state
        print(line)
    print(
        f"weights    {fmt_bytes(r.weights_bytes)} ({r.weights_format}, {r.params:,} parameters;"
        f" {r.active_params:,} read per token)"
    )
    if (
        r.plan is not None
    ):  # the runtime's whole plan: its buffers beside the weights and the KV cache
        print(
            f"total      {fmt_bytes(r.plan['total_bytes'])} (everything its plan holds at the peak;"
            f" weights + KV alone {fmt_bytes(r.kv_bytes + r.weights_bytes)})"
        )
    else:
        *parts, last = NOT_COUNTED
        print(
            f"total      {fmt_bytes(r.kv_bytes + r.weights_bytes)}, weights + KV only: kvcore has no memory"
            f" plan here, so {', '.join(parts)} and {last} are not counted"
        )
    print(f"formula    {r.formula}")
    if "fit" in out:
        _print_fit(out["fit"], r.runtime)
    if "decode_tokens_per_s" in out:
        _print_time(out)
    for note in r.notes:
        print(f"note       {note}")
    print("\nlayer  kind      tokens held        KV bytes")
    for row in r.per_layer:
        print(
            f"{row['layer']:>5}  {row['kind']:<8} {row['tokens_held']:>12,} {row['kv_bytes']:>15,}"
        )


def _print_time(r: dict) -> None:
    """The time model's lines: time to the first token, decode per sequence and for all, the bounds, the shares used."""
    t = r["time"]
    if t.get("prefill_s") is not None:
        print(
            f"prefill    {t['prompt']:,}-token prompt: {t['prefill_s']:.3g} s to the first token ({t['prefill_bound']}-bound,"
            f" {t['compute_efficiency']:.0%} of {t['peak_tflops']:g} TFLOPS on {t['chip']})"
        )
    elif "prompt" in t:
        print(f"prefill    unknown: the hardware table has no compute figure for {t['chip']}")
    n = t["decode_sequences"]
    each = f"per {get_runtime(r['runtime']).sequence_noun}"
    total = f", {t['decode_tokens_per_s_total']:,.1f} tok/s for all {n}" if n > 1 else ""
    where = (
        f"over {t['decode_context']:,} cells shared by {n} slots"
        if t["decode_shared_cache"]
        else f"at {t['decode_context']:,} tokens"
    )
    print(
        f"decode     {where}: {t['decode_tokens_per_s']:,.1f} tok/s {each}{total}"
        f" ({t['decode_bound']}-bound, {t['bandwidth_efficiency']:.0%} of {t['peak_gbps']:g} GB/s"
        f" + {t['decode_overhead_s'] * 1e3:.1f} ms per step; {fmt_bytes(t['decode_bytes_per_step'])} read per step)"
    )
    print(f"shares     {t['efficiency_source']}")


def _time(a, geometry, r: Result, request: Request, out: dict) -> None:
    """Adds the time model's figures to `out` for `calc --chip [--prompt]` (flat keys and a "time" block)."""
    if a.prompt and not a.chip:
        raise KvError(
            "--prompt needs --chip: the time to the first token depends on the chip's compute."
        )
    if not a.chip:
        return
    chip = hardware.get_chip(a.chip)
    llama = request.options()
    per_slot = runtime_of(geometry).sequence_share(r.context, r.sequences, llama)
    if a.prompt and a.prompt > per_slot:
        raise KvError(
            f"--prompt {a.prompt:,} is longer than the {per_slot:,} tokens a sequence can hold here."
        )
    eff = timing_fit.efficiency(chip, geometry.runtime)
    t = timing.estimate(
        geometry,
        a.prompt or min(512, per_slot),
        chip,
        eff,
        request.spec,
        r.weights_format,
        r.context,
        r.sequences,
        llama,
    )
    if not a.prompt:
        for key in ("prompt", "prefill_s", "prefill_bound", "prefill_intensity", "prefill"):
            t.pop(key)
    out["time"] = t
    for key in (
        "prefill_s",
        "prefill_bound",
        "decode_tokens_per_s",
        "decode_tokens_per_s_total",
        "decode_bound",
        "compute_efficiency",
        "bandwidth_efficiency",
        "decode_overhead_s",
        "chip",
    ):
        if key in t:
            out[key] = t[key]


def _print_fit(f: dict, runtime: str) -> None:
    limit = f["limit"]
    if f["not_counted"]:  # no plan: weights + KV only, and the levers are upper bounds
        why = {
            "runtime": f"the {runtime} runtime",
            "model": f"this model under {runtime} (its plan knows only full and sliding-window attention layers)",
        }[f["unplanned"]]
        said = "do not fit" if f["status"] == "no" else "fit"
        passes = {"weights": "; the weights alone pass it", "KV cache": "; the KV cache passes it"}
        print(
            f"fit        {f['status']}: weights + KV alone {said}: {fmt_bytes(f['need_bytes'])} of the "
            f"{fmt_bytes(limit['bytes'])} the GPU may use{passes.get(f['blocking'], '')}"
        )
        print(
            f"uncounted  {', '.join(f['not_counted'])}: kvcore has no memory plan for {why}, so it "
            "never calls this a fit"
        )
    else:
        where = f"; {f['blocking']} does not fit" if f["blocking"] else ""
        print(
            f"fit        {f['status']}: the plan needs {fmt_bytes(f['need_bytes'])} (its working memory +/- "
            f"{fmt_bytes(f['allowance_bytes'])}) of the {fmt_bytes(limit['bytes'])} the GPU may use{where}"
        )
    print(f"GPU limit  {limit['source']}")
    names = {
        "flash_attn": "flash attention {}",
        "ubatch": "-ub {}",
        "prefill_step": "--prefill-step-size {}",
        "context": "-c {:,}",
        "sequences": "-np {}",
        "kv_format": "KV type {}",
    }
    if f["status"] != "fits" and not f["levers"]:
        print(
            "lever      none of the context's settings: the weights alone, or with one token, do not fit"
        )
    for lever in f["levers"]:
        value = lever["value"]
        value = " or ".join(value) if isinstance(value, list) else value
        if lever.get("at_most"):  # no plan: an upper bound, in calc's own options
            said = {
                "context": "at most --context {:,}",
                "sequences": "at most --sequences {}",
                "kv_format": "--kv-format {}",
            }[lever["lever"]].format(value)
            print(f"lever      {said}: weights + KV within the limit, nothing else counted")
        else:
            need = (
                f" (the plan needs {fmt_bytes(lever['need_bytes'])})"
                if "need_bytes" in lever
                else ""
            )
            print(f"lever      {names[lever['lever']].format(value)} fits{need}")


def run(a) -> int:
    if a.kv_format and (a.k_format or a.v_format):
        raise KvError("Give either --kv-format or --k-format/--v-format, not both.")
    k = a.k_format or a.kv_format or "fp16"
    v = a.v_format or a.kv_format or "fp16"
    KvSpec(k, v, a.group_size, a.activation_dtype)  # an unknown format refused first, by name
    runtime = get_runtime(a.runtime)
    for other in RUNTIMES.values():  # another runtime's settings, given: say whose they are
        changed = [
            s.flag
            for s in other.settings
            if other is not runtime and getattr(a, s.name) != s.default
        ]
        if changed:
            raise KvError(
                f"{', '.join(changed)} {'is' if len(changed) == 1 else 'are'} {other.name}'s only; add "
                f"--runtime {other.name}."
            )
    if a.flash_attn and not runtime.flash_attention:
        owners = [r.name for r in RUNTIMES.values() if r.flash_attention]
        raise KvError(
            f"--flash-attn is a {' and '.join(owners)} setting; add --runtime {owners[0]}."
        )
    if a.backend and a.backend not in runtime.backends:
        owners = [r.name for r in RUNTIMES.values() if a.backend in r.backends]
        raise KvError(
            f"--backend {a.backend} is a {' and '.join(owners)} setting; add --runtime {owners[0]}."
        )
    if a.ram is None and a.wired_limit_mb is not None:
        raise KvError("--wired-limit-mb needs --ram (the Mac's RAM in GB).")
    server = calc_server.ask(a)  # --server's conversation, bounded before any work
    geometry, preset = resolve_model(a.model, runtime.name)
    # --ram: the verdict against the memory the GPU may use (a Mac's default working set, or the wired limit)
    limit = gpu_limit(a.ram, True, a.wired_limit_mb, a.macos) if a.ram is not None else None
    settings = tuple((s.field, getattr(a, s.name)) for s in runtime.settings)
    request = Request(
        ModelSource(a.model),
        a.context,
        a.sequences,  # the runtime's (llama.cpp: -np, its n_seq_max, at most LLAMA_MAX_SEQ)
        k,
        v,
        a.weights_format or preset.get("default_weights_format", "bf16"),
        runtime.name,
        settings + (("backend", a.backend),) if a.backend else settings,
        a.flash_attn or "auto",
        a.group_size,
        a.activation_dtype,
        limit.bytes if limit else None,
    )
    result = answer(request, geometry)
    out = result.as_dict(source=preset.get("source", a.model), limit=limit)
    _time(a, geometry, result, request, out)
    if server is not None:
        out["server"] = as_server(request, server, geometry).as_dict()
        if limit is not None:  # the GPU side judged against the same limit, said as calc says it
            out["server"]["fit"]["limit"] = limit.as_dict()
    if a.json:
        print(json.dumps(out, ensure_ascii=False, allow_nan=False))  # JSON has no inf or NaN
    else:
        _print_calc(result, out)
        if server is not None:
            calc_server.print_server(out["server"], server)
    return 0
