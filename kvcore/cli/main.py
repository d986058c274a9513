"""`python -m kvcore`: calc, presets, chips, selftest, doctor, log (and the live probes, which import mlx lazily).

Bad input prints one sentence to stderr and exits 2; nothing prints a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys

from kvcore.cli import calc as calc_command
from kvcore.cli import calc_server
from kvcore.cli import log as log_command
from kvcore.cli.args import Parser, number_in, whole_number
from kvcore.errors import KvError, quote
from kvcore.inputs.config import parse_config
from kvcore.inputs.preset_files import load_preset, preset_names
from kvcore.limits import MAX_CONTEXT, MAX_RAM_GB, MAX_SEQUENCES, MIN_RAM_GB
from kvcore.memory.formats import FORMATS
from kvcore.memory.formulas import DOWNLOAD_WEIGHT_FORMATS, FILE_WEIGHTS
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.runtimes.registry import DEFAULT as DEFAULT_RUNTIME
from kvcore.runtimes.registry import RUNTIMES
from kvcore.timing import hardware
from kvcore.timing.working_set import DEFAULT_MACOS

EXIT_BAD_INPUT = 2


def _positive_int(label: str, limit: int):
    return whole_number(label, 1, limit)


def _cmd_presets(a) -> int:
    rows = []
    for name in preset_names():
        preset = load_preset(name)
        g = parse_config(preset["config"], name, MLX_LM)
        kinds = ", ".join(
            f"{g.count(k)} {k}" for k in ("full", "sliding", "mla", "linear") if g.count(k)
        )
        attn = next((layer for layer in g.layers if layer.kind != "linear"), None)
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
        print(json.dumps(rows, allow_nan=False))
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
        print(json.dumps(rows, ensure_ascii=False, allow_nan=False))
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
    from kvcore.cli.selftest import run_checks

    failed, checks = 0, run_checks()
    for label, ok, detail in checks:
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'}  {label}: {detail}")
    print(f"{len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0


def _cmd_doctor(a) -> int:
    from kvcore.cli.doctor import print_report

    return print_report()


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m kvcore", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    c = sub.add_parser("calc", help="KV-cache and weight bytes for a model at a context")
    c.add_argument(
        "--model",
        required=True,
        help="preset name, a config.json (or a folder holding one) or a .gguf file (--runtime llama.cpp)",
    )
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
        help=f"one of {', '.join(DOWNLOAD_WEIGHT_FORMATS)} (GGUF: kvcore.memory.weight_formats; "
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
        "--backend",
        choices=("cpu", "metal"),
        help="llama.cpp: the build its memory plan is for (default cpu: the build the plan is tested on; metal: "
        "Apple's GPU, its buffers named MTL0 and its compute buffer with flash attention's extra room)",
    )
    c.add_argument(
        "--flash-attn",
        choices=("on", "off", "auto"),
        help="llama.cpp: flash attention (-fa, default auto: on where the backend runs it); "
        "it sizes the compute buffer of the memory plan",
    )
    c.add_argument(
        "--ram",
        type=number_in("ram", MIN_RAM_GB, MAX_RAM_GB, "GB"),
        help=f"the Mac's RAM in GB ({MIN_RAM_GB:,} to {MAX_RAM_GB:,}): adds the verdict against the memory its GPU may use (macOS's default working "
        "set for that RAM): the runtime's whole memory plan (llama.cpp; mlx_lm for the layers its plan knows), "
        "else weights + KV only, saying what is not counted (never 'fits')",
    )
    c.add_argument(
        "--macos",
        default=DEFAULT_MACOS,
        help=f"with --ram: the Mac's macOS version (e.g. 14, 15.5, 26.1), which sets its default GPU working set "
        f"(default {DEFAULT_MACOS}: 15 or earlier; 26 gives more where Macs reported it)",
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
    calc_server.add(c, whole_number)  # --server and its conversation
    c.add_argument("--json", action="store_true")
    c.set_defaults(run=calc_command.run)
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
    log_command.add(sub)
    add_live_commands(sub)
    from kvcore.cli import serve

    serve.add(sub)
    return p


def add_live_commands(sub) -> None:
    """`probe | kv | decode | mechanism | quality | record`: live measurement on the real mlx_lm caches (record also
    on llama.cpp), one module per command, in the order --help lists them. Each prints a table and shows a progress
    bar; `record` saves one recording (recordings/local/ or --out; --no-save prints only), the others only when
    asked (--save or --out). The destination is checked before anything is measured; read-only mode saves nothing;
    Ctrl-C saves nothing. mlx is imported only when a command runs (their shared options: kvcore.cli.live_args;
    what they do around a measurement: kvcore.cli.run)."""
    from kvcore.cli import decode, probe, quality, record

    for command in (probe, decode, quality, record):
        command.add(sub)


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
    except (
        Exception
    ) as e:  # the last line: one sentence, never a traceback (a bug is still named by its type)
        print(
            f"error: kvcore could not handle this input ({type(e).__name__}: {quote(str(e))}).",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
