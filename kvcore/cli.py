"""`python -m kvcore`: calc, presets, chips, selftest, doctor (and the live probes, which import mlx lazily).

Bad input prints one sentence to stderr and exits 2; nothing prints a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

from .cli_args import Parser, whole_number
from .errors import KvError
from .formats import FORMATS
from .calculator import calculate
from .formulas import DOWNLOAD_WEIGHT_FORMATS, FILE_WEIGHTS, KvSpec
from .limits import MAX_CONTEXT, MAX_SEQUENCES
from .geometry import load_preset, parse_config, preset_names
from .model_source import resolve_model
from .runtimes import DEFAULT as DEFAULT_RUNTIME, RUNTIMES, get_runtime, runtime_of
from .units import fmt_bytes
from . import hardware, timing, timing_fit

EXIT_BAD_INPUT = 2


def _positive_int(label: str, limit: int):
    return whole_number(label, 1, limit)


def _print_calc(r: dict) -> None:
    runtime = get_runtime(r["runtime"])
    print(f"model      {r['model']} ({r['runtime']} rules)   source: {r['source']}")
    for line in runtime.describe_options(
        r
    ):  # llama.cpp: its options and the lines it logs for its caches
        print(line)
    print(
        f"context    {r['context']:,} tokens x {r['sequences']} sequence(s), K {r['k_format']}, V {r['v_format']}"
    )
    print(f"KV cache   {fmt_bytes(r['kv_bytes'])}  ({r['kv_bytes']:,} B)")
    if r["kv_bytes_per_token_at_context"] == r["kv_bytes_per_token"]:
        print(f"per token  {r['kv_bytes_per_token']:,} B per token per sequence (all layers)")
    else:  # sliding layers stop growing once their window is full
        print(
            f"per token  {r['kv_bytes_per_token']:,} B per token per sequence (all layers) until the sliding windows are "
            f"full; {r['kv_bytes_per_token_at_context']:,} B per token at {r['context']:,} tokens (windows full); "
            f"{r['kv_bytes_per_token_average']:,.0f} B per token on average over the {r['context']:,}"
        )
    for line in runtime.describe_sizes(
        r
    ):  # mlx_lm: the chunked prefill's peak above the steady state
        print(line)
    print(
        f"weights    {fmt_bytes(r['weights_bytes'])} ({r['weights_format']}, {r['params']:,} parameters;"
        f" {r['active_params']:,} read per token)"
    )
    if "plan" in r:  # the runtime's whole plan: its buffers beside the weights and the KV cache
        print(
            f"total      {fmt_bytes(r['plan']['total_bytes'])} (weights, KV, output and compute buffers;"
            f" weights + KV alone {fmt_bytes(r['kv_bytes'] + r['weights_bytes'])})"
        )
    else:
        print(f"total      {fmt_bytes(r['kv_bytes'] + r['weights_bytes'])}")
    print(f"formula    {r['formula']}")
    if "fit" in r:
        _print_fit(r["fit"])
    if "decode_tokens_per_s" in r:
        _print_time(r)
    for note in r["notes"]:
        print(f"note       {note}")
    print("\nlayer  kind      tokens held        KV bytes")
    for row in r["per_layer"]:
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


def _time(a, geometry, result: dict, spec: KvSpec, llama) -> None:
    """Adds the time model's figures to `result` for `calc --chip [--prompt]` (flat keys and a "time" block)."""
    if a.prompt and not a.chip:
        raise KvError(
            "--prompt needs --chip: the time to the first token depends on the chip's compute."
        )
    if not a.chip:
        return
    chip = hardware.get_chip(a.chip)
    per_slot = runtime_of(geometry).sequence_share(result["context"], result["sequences"], llama)
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
        spec,
        result["weights_format"],
        result["context"],
        result["sequences"],
        llama,
    )
    if not a.prompt:
        for key in ("prompt", "prefill_s", "prefill_bound", "prefill_intensity", "prefill"):
            t.pop(key)
    result["time"] = t
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
            result[key] = t[key]


def _fit(a, geometry, result: dict, spec: KvSpec, options, runtime) -> None:
    """Adds the plan's verdict against the GPU's memory for `calc --ram [--wired-limit-mb]` (a "fit" block)."""
    if a.ram is None:
        if a.wired_limit_mb is not None:
            raise KvError("--wired-limit-mb needs --ram (the Mac's RAM in GB).")
        return
    if "plan" not in result:
        owners = [r.name for r in RUNTIMES.values() if r.plans_memory]
        raise KvError(
            f"--ram judges a runtime's whole memory plan, which the engine has for {' and '.join(owners)}; "
            f"add --runtime {owners[0]}."
        )
    from .memory_fit import fit, gpu_limit, levers

    limit = gpu_limit(a.ram, True, a.wired_limit_mb)
    verdict = fit(result["plan"], limit)
    out = verdict.as_dict()
    if verdict.status != "fits":
        out["levers"] = levers(
            runtime,
            geometry,
            a.context,
            spec,
            a.sequences,
            options,
            result["weights_bytes"],
            a.flash_attn or "auto",
            limit,
            MAX_CONTEXT,
        )
    result["fit"] = out


def _print_fit(f: dict) -> None:
    limit = f["limit"]
    where = f"; {f['blocking']} does not fit" if f["blocking"] else ""
    print(
        f"fit        {f['status']}: the plan needs {fmt_bytes(f['need_bytes'])} (compute buffer +/- "
        f"{fmt_bytes(f['allowance_bytes'])}) of the {fmt_bytes(limit['bytes'])} the GPU may use{where}"
    )
    print(f"GPU limit  {limit['source']}")
    names = {
        "flash_attn": "flash attention {}",
        "ubatch": "-ub {}",
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
        print(f"lever      {names[lever['lever']].format(value)} fits")


def _cmd_calc(a) -> int:
    if a.kv_format and (a.k_format or a.v_format):
        raise KvError("Give either --kv-format or --k-format/--v-format, not both.")
    k = a.k_format or a.kv_format or "fp16"
    v = a.v_format or a.kv_format or "fp16"
    spec = KvSpec(k, v, a.group_size, a.activation_dtype)
    runtime = get_runtime(a.runtime)
    for other in RUNTIMES.values():  # another runtime's settings, given: say whose they are
        changed = [
            s.flag
            for s in other.settings
            if other is not runtime and getattr(a, s.name) != s.default
        ]
        if changed:
            raise KvError(
                f"{', '.join(changed)} {'is a' if len(changed) == 1 else 'are'} {other.name} setting"
                f"{'' if len(changed) == 1 else 's'}; add --runtime {other.name}."
            )
    if a.flash_attn and not runtime.flash_attention:
        owners = [r.name for r in RUNTIMES.values() if r.flash_attention]
        raise KvError(
            f"--flash-attn is a {' and '.join(owners)} setting; add --runtime {owners[0]}."
        )
    geometry, preset = resolve_model(a.model, runtime.name)
    # --sequences is the runtime's (llama.cpp: -np, its n_seq_max, at most LLAMA_MAX_SEQ)
    options = runtime.options(
        a.sequences, **{s.field: getattr(a, s.name) for s in runtime.settings}
    )
    result = calculate(
        geometry,
        a.context,
        a.sequences,
        spec,
        a.weights_format or preset.get("default_weights_format", "bf16"),
        options,
        a.flash_attn or "auto",
    )
    result["source"] = preset.get("source", a.model)
    _fit(a, geometry, result, spec, options, runtime)
    _time(a, geometry, result, spec, options)
    if a.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        _print_calc(result)
    return 0


def _cmd_presets(a) -> int:
    rows = []
    for name in preset_names():
        preset = load_preset(name)
        g = parse_config(preset["config"], name)
        kinds = ", ".join(
            f"{g.count(k)} {k}" for k in ("full", "sliding", "mla", "linear") if g.count(k)
        )
        attn = next((l for l in g.layers if l.kind != "linear"), None)
        rows.append(
            {
                "name": name,
                "hf_id": preset["hf_id"],
                "layers": kinds,
                "heads": g.num_attention_heads,
                "kv_heads": attn.kv_heads,
                "head_dim": attn.k_dim,
                "params": g.params.total,
                "active_params": g.active_params.total,
            }
        )
    if a.json:
        print(json.dumps(rows))
        return 0
    print(f"{'preset':<22}{'layers':<28}{'heads':>6}{'kv':>4}{'dim':>5}{'params':>18}")
    for r in rows:
        print(
            f"{r['name']:<22}{r['layers']:<28}{r['heads']:>6}{r['kv_heads']:>4}{r['head_dim']:>5}{r['params']:>18,}"
        )
    return 0


def _cmd_chips(a) -> int:
    rows = [c.as_dict() for c in hardware.chips()]
    if a.json:
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    print(f"{'chip':<24}{'GB/s':>7}{'FP16 TFLOPS':>13}{'ridge':>7}  sources (bandwidth; compute)")
    for c in rows:
        tflops = f"{c['fp16_tflops']:g}" if c["fp16_tflops"] else "—"
        ridge = f"{c['ridge_flops_per_byte']:.0f}" if c["ridge_flops_per_byte"] else "—"
        print(
            f"{c['chip']:<24}{c['bandwidth_gbps']:>7g}{tflops:>13}{ridge:>7}  {c['bandwidth_source']}; {c['compute_source']}"
        )
    print(
        "ridge: FLOPs per byte read above which a step is compute-bound on that chip (peak FLOP/s / peak bytes/s)"
    )
    return 0


def _cmd_selftest(a) -> int:
    from .selftest import run_checks

    failed, checks = 0, run_checks()
    for label, ok, detail in checks:
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'}  {label}: {detail}")
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _cmd_doctor(a) -> int:
    from .doctor import print_report

    return print_report()


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m kvcore", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    c = sub.add_parser("calc", help="KV-cache and weight bytes for a model at a context")
    c.add_argument("--model", required=True, help="preset name or path to a config.json")
    c.add_argument("--context", required=True, type=_positive_int("context", MAX_CONTEXT))
    c.add_argument(
        "--sequences",
        default=1,
        type=_positive_int("sequences", MAX_SEQUENCES),
        help="concurrent sequences (llama.cpp: -np, its n_seq_max)",
    )
    c.add_argument("--kv-format", choices=None, help=f"K and V format: {', '.join(FORMATS)}")
    c.add_argument("--k-format")
    c.add_argument("--v-format")
    c.add_argument(
        "--weights-format",
        help=f"one of {', '.join(DOWNLOAD_WEIGHT_FORMATS)} (GGUF: kvcore.gguf_weights; "
        f"a mix such as gguf-q4_k_m is Q4_K with some tensors at Q6_K), or {FILE_WEIGHTS} for a .gguf "
        "model's own tensors (default: the preset's)",
    )
    c.add_argument(
        "--group-size", type=int, default=64, help="mlx quantization group size (32, 64, 128)"
    )
    c.add_argument(
        "--activation-dtype", default="fp16", help="dtype of mlx scales/biases: fp16, bf16, fp32"
    )
    c.add_argument(
        "--runtime",
        default=DEFAULT_RUNTIME,
        choices=list(RUNTIMES),
        help="; ".join(rt.help for rt in RUNTIMES.values()),
    )
    for runtime in RUNTIMES.values():  # each runtime's own settings, from its object
        for s in runtime.settings:
            if s.switch:
                c.add_argument(s.flag, dest=s.name, action="store_true", help=s.help)
            else:
                c.add_argument(
                    s.flag,
                    dest=s.name,
                    default=s.default,
                    type=whole_number(s.flag.lstrip("-"), s.low, s.high),
                    help=s.help,
                )
    c.add_argument(
        "--flash-attn",
        choices=("on", "off", "auto"),
        help="llama.cpp: flash attention (-fa, default auto: on where the backend runs it); "
        "it sizes the compute buffer of the memory plan",
    )
    c.add_argument(
        "--ram",
        type=float,
        help="the Mac's RAM in GB: adds the verdict of the runtime's memory plan against the memory its GPU "
        "may use (macOS's default working set for that RAM; llama.cpp)",
    )
    c.add_argument(
        "--wired-limit-mb",
        type=_positive_int("wired-limit-mb", 1 << 30),
        help="with --ram: the GPU limit set with sudo sysctl iogpu.wired_limit_mb instead of macOS's default",
    )
    c.add_argument(
        "--chip",
        help="adds decode speed at the context on this chip (see `python -m kvcore chips`)",
    )
    c.add_argument(
        "--prompt",
        type=_positive_int("prompt", MAX_CONTEXT),
        help="prompt tokens: adds prefill_s, the time to the first token (needs --chip)",
    )
    c.add_argument("--json", action="store_true")
    c.set_defaults(run=_cmd_calc)
    ps = sub.add_parser("presets", help="list the bundled model presets")
    ps.add_argument("--json", action="store_true")
    ps.set_defaults(run=_cmd_presets)
    ch = sub.add_parser(
        "chips", help="the hardware table: peak bandwidth and FP16 compute per chip, with sources"
    )
    ch.add_argument("--json", action="store_true")
    ch.set_defaults(run=_cmd_chips)
    st = sub.add_parser("selftest", help="check the engine against the source articles' figures")
    st.set_defaults(run=_cmd_selftest)
    dr = sub.add_parser(
        "doctor",
        help="this machine for a bug report: backend, chip, memory, versions, which probes can start",
    )
    dr.set_defaults(run=_cmd_doctor)
    try:
        from .live_cli import add_live_commands
    except ImportError:
        pass
    else:
        add_live_commands(sub)
    return p


def missing_package_line(e: ModuleNotFoundError) -> str:
    """One line for a missing dependency: which package, and how to install it (mlx is needed only to measure)."""
    top = (e.name or "").split(".")[0]
    package = {"yaml": "PyYAML", "mlx_lm": "mlx-lm"}.get(top, top)
    if top in ("mlx", "mlx_lm"):
        how = (
            "this command measures with mlx: install mlx and mlx-lm (`.venv/bin/pip install mlx mlx-lm` on a Mac, "
            "`mlx[cpu] mlx-lm` on Linux), or use calc, presets and selftest, which need neither"
        )
    else:
        how = "install the project's requirements: `python3 -m venv .venv && .venv/bin/pip install -r requirements.txt`, then run `.venv/bin/python -m kvcore`"
    return f"error: the Python package {package} is not installed; {how}."


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv[:1] == ["kvcore"]:
            raise KvError(
                "`kvcore` is written twice: type `python -m kvcore calc ...` (or `--help`), not `python -m kvcore kvcore ...`."
            )
        args = build_parser().parse_args(argv)
        return args.run(args)
    except KvError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ModuleNotFoundError as e:
        print(missing_package_line(e), file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # output piped into `head`
        return 0
    except KeyboardInterrupt:
        print("interrupted: nothing was saved.", file=sys.stderr)
        return 130
