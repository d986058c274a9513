"""The servers' ledger for llama-server (kvcore.servers.llama_server) against a real llama-server built from the
pinned sdist's llama.cpp: its recorded runs line for line (recordings/measured-linux-cpu-llama-server-*.yaml,
scripts/record_llama_server.py) and a live 2-turn conversation; its options refused by name."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kvcore.errors import KvError
from kvcore.recordings import store
from kvcore.servers.ledger import server_ledger
from kvcore.servers.llama_server import cache_lines, state_bytes
from kvcore.views import llama_server as llama_views

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "recordings" / "measured-linux-cpu-llama-server-smollm2-135m.yaml"
sys.path.insert(0, str(ROOT / "scripts"))


def _script(rows: list[dict]) -> str:
    keys = ("user", "reply", "completion_tokens")
    return json.dumps(
        [{"messages": json.loads(r["messages"]), **{k: r[k] for k in keys}} for r in rows]
    )


# A reply sampled as other tokens than its text encodes to: the server's slot holds the sampled ones, the ledger
# (given the text, as a script gives it) the re-encoded ones, so it finds a longer common prefix (107) than the
# server did (101). Given the server's own ids (the recording keeps them), the ledger holds this request too
# (test_every_recorded_request_is_reproduced_from_the_servers_own_tokens).
RETOKENIZED = {("4 users interleaved, -np 1", 11): (101, 107)}


def _held_to(rows: list[dict], folder: Path) -> None:
    """The ledger run on the recorded conversation prints the server's cache lines and counts its cache_n."""
    options = rows[0].get("options", "").split()
    got = server_ledger("llama-server", str(folder), _script(rows), options)["requests"]
    assert len(got) == len(rows)
    for row, ledger in zip(rows, got):
        if (row["conversation"], row["request"]) in RETOKENIZED:
            assert RETOKENIZED[row["conversation"], row["request"]] == (
                row["cache_n"],
                ledger["cached_tokens"],
            )
            return  # the slots differ from here on
        assert ledger["prompt_tokens"] == row["prompt_tokens"], row["request"]
        assert ledger["cached_tokens"] == row["cache_n"] == row["cached_tokens"], row["request"]
        assert ledger["reprocessed_tokens"] == row["prompt_n"], row["request"]
        assert ledger["log_lines"] == cache_lines(row["log"].split("\n")), row["request"]


@pytest.fixture(scope="module")
def folder():
    """The GGUF's own tokenizer and chat template, as a folder the ledger reads (kvcore.measure.server_model)."""
    from kvcore.measure import real_model
    from kvcore.measure.server_model import make_folder

    if not real_model.available():
        pytest.skip(real_model.MISSING)
    return make_folder(Path.home() / ".cache" / "kvsite-servers" / "smollm2-135m-mlx-fp32")


@pytest.fixture(scope="module")
def binary():
    from record_llama_server import binary

    path = binary()
    if not path.is_file():
        if os.environ.get("KVSITE_REQUIRE_LLAMACPP"):
            pytest.fail(f"No llama-server at {path}: scripts/build_llama_server.sh builds it.")
        pytest.skip(f"no llama-server at {path} (scripts/build_llama_server.sh builds it)")
    return path


@pytest.mark.mlx
def test_every_recorded_request_is_reproduced_line_for_line(folder):
    rows = store.load(RECORDING).data["sections"]["server"]
    names = list(dict.fromkeys(r["conversation"] for r in rows))
    assert len(names) >= 5 and any(r["cache_n"] for r in rows)
    for name in names:
        _held_to([r for r in rows if r["conversation"] == name], folder)
    logs = "\n".join(r["log"] for r in rows)
    assert "found better prompt" in logs and "removing oldest entry" in logs  # resumed, evicted


def test_every_recorded_request_is_reproduced_from_the_servers_own_tokens():
    """All of them, none excepted: the recording keeps the prompt's ids as the server tokenized it and the reply's
    as it sampled them (what a slot holds), so the reply the text re-encodes differently (RETOKENIZED) holds too."""
    rows = store.load(RECORDING).data["sections"]["server"]
    held = 0
    for name in dict.fromkeys(r["conversation"] for r in rows):
        conversation = [r for r in rows if r["conversation"] == name]
        got = llama_views.replay(conversation, "smollm2-135m")["requests"]
        for row, ledger in zip(conversation, got, strict=True):
            assert ledger["cached_tokens"] == row["cache_n"] == row["cached_tokens"], row["request"]
            assert ledger["reprocessed_tokens"] == row["prompt_n"], row["request"]
            assert ledger["log_lines"] == cache_lines(row["log"].split("\n")), row["request"]
            held += 1
    assert held == len(rows) == 54


@pytest.mark.mlx
def test_the_servers_tokens_are_the_ledgers_but_one_reply(folder):
    """The ledger's tokenizer (the GGUF's own, with its chat template) makes every recorded prompt's ids exactly;
    of the replies, only the one in RETOKENIZED was sampled as other tokens than its text encodes to."""
    from kvcore.servers.chat import ChatTokenizer

    tokenizer = ChatTokenizer.from_folder(folder)
    rows = store.load(RECORDING).data["sections"]["server"]
    differ = []
    for i, r in enumerate(rows):
        messages = [(m["role"], m["content"]) for m in json.loads(r["messages"])]
        assert " ".join(map(str, tokenizer.prompt(messages))) == r["prompt_ids"], r["request"]
        reply = " ".join(map(str, tokenizer.reply(r["reply"], r["completion_tokens"], i)))
        if reply != r["reply_ids"]:
            differ.append((r["conversation"], r["request"]))
    assert differ == [
        (name, request - 4) for name, request in RETOKENIZED
    ]  # c's reply, a turn before


@pytest.mark.mlx
def test_the_rule_holds_on_a_live_llama_server(folder, binary):
    """A 2-turn conversation with the real server under its defaults (4 slots, one unified pool), now."""
    done = subprocess.run(
        [sys.executable, "scripts/record_llama_server.py", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "KVSITE_LLAMA_SERVER": str(binary)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout)
    assert [r["request"] for r in rows] == [1, 2]
    assert (
        rows[1]["cache_n"] > rows[0]["prompt_tokens"]
    )  # the first turn's prompt and reply resumed
    _held_to(rows, folder)


def test_a_saved_slot_is_its_cells_rows_and_headers():
    """SmolLM2-135M, f16: 30 layers x 2 x 3 KV heads x 64 x 2 bytes = 23,040 bytes a cell, 12 more for its
    position and sequence; 8 + 4 + 4 a stream + 8 + 24 a layer of headers."""
    assert state_bytes(100, 1, 30, 23_040) == 8 + 4 + 4 + 100 * 12 + 8 + 30 * 24 + 100 * 23_040
    assert state_bytes(100, 4, 30, 23_040) - state_bytes(100, 1, 30, 23_040) == 12
    script = json.dumps([{"user": "a", "prompt_tokens": 100, "completion_tokens": 11}] * 1)
    (row,) = server_ledger("llama-server", "smollm2-135m", script, ["-np", "1"])["requests"]
    assert row["active_kv_bytes"] == 8192 * 23_040 and row["prompt_cache_bytes"] == 0
    assert row["log_lines"][-1].endswith("stop processing: n_tokens = 110, truncated = 0")


def test_a_second_user_saves_the_first_into_the_prompt_cache_and_the_first_returns_from_it():
    script = json.dumps(
        [
            {"user": "a", "prompt_tokens": 100, "completion_tokens": 11},
            {"user": "b", "prompt_tokens": 100, "completion_tokens": 11},
            {"user": "a", "prompt_tokens": 150, "completion_tokens": 11},
        ]
    )
    rows = server_ledger("llama-server", "smollm2-135m", script, ["-np", "1"])["requests"]
    assert [r["cached_tokens"] for r in rows] == [0, 0, 110]
    assert rows[1]["prompt_cache_entries"] == 1  # a's 110 tokens, saved when b took the slot
    assert rows[1]["prompt_cache_bytes"] == state_bytes(110, 1, 30, 23_040)
    assert any("found better prompt" in line for line in rows[2]["log_lines"])
    small = server_ledger("llama-server", "smollm2-135m", script, ["-np", "1", "--cache-ram", "0"])
    assert [r["cached_tokens"] for r in small["requests"]] == [0, 0, 0]


@pytest.mark.parametrize(
    "options, words",
    [
        (["--cache-reuse", "256"], "does not model"),
        (["-np", "0"], "-1 (auto)"),
        (["--parallel", "300"], "must be from"),
        (["-kv-unified"], "no option"),
        (["-fa", "maybe"], "does not take"),
    ],
)
def test_llama_server_options_are_refused_by_name(options, words):
    script = '[{"user": "a", "prompt_tokens": 10, "completion_tokens": 2}]'
    with pytest.raises(KvError) as e:
        server_ledger("llama-server", "smollm2-135m", script, options)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "script, words",
    [
        ('[{"user": "a", "prompt_tokens": -3, "completion_tokens": 1}]', "whole number"),
        ('[{"user": "a", "prompt_tokens": 8000, "completion_tokens": 500}]', "context"),
        (
            json.dumps(
                [{"user": f"u{i}", "prompt_tokens": 5, "completion_tokens": 1} for i in range(1025)]
            ),
            "users",
        ),
        ('[{"user": "a", "prompt_tokens": 1000000000, "completion_tokens": 1}]', "100,000,000"),
        ('[{"user": "a", "prompt_tokens": 10**9, "completion_tokens": 1}]', "not valid JSON"),
        ("[" + ",".join(['{"user":1}'] * 10**6) + "]", "more than"),
    ],
)
def test_hostile_scripts_are_refused_for_llama_server_too_in_one_sentence_before_any_work(
    script, words
):
    """The script's bounds are the ledger's, whichever server: negative counts, a turn beyond the model's
    context, more users than the ledger takes, 10^9 tokens (as a number and as no JSON), a million requests."""
    with pytest.raises(KvError) as e:
        server_ledger("llama-server", "smollm2-135m", script, ["-np", "4"])
    assert words in str(e.value) and "\n" not in str(e.value) and str(e.value).count(".") <= 3
