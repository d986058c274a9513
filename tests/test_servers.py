"""The servers' ledger (kvcore.servers) against mlx_lm.server itself: its LRUPromptCache class entry for entry, its
recorded runs line for line (recordings/measured-linux-cpu-mlx-lm-server-*.yaml, scripts/record_servers.py), and a
live 2-turn conversation with the real server; hostile scripts refused in one sentence before any work."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from kvcore.errors import KvError
from kvcore.recordings import store
from kvcore.servers.ledger import server_ledger
from kvcore.servers.prompt_cache import PromptCache
from kvcore.servers.sequences import Stream, lcp

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "recordings" / "measured-linux-cpu-mlx-lm-server-smollm2-135m.yaml"


def test_the_longest_common_prefix_is_found_at_every_length():
    rng = random.Random(0)
    for _ in range(300):
        a = tuple(rng.randrange(3) for _ in range(rng.randrange(12)))
        b = tuple(rng.randrange(3) for _ in range(rng.randrange(12)))
        slow = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        assert lcp(a, b) == slow
    assert lcp(Stream("a", 10), Stream("a", 4)) == 4 and lcp(Stream("a", 3), Stream("b", 3)) == 0


class _Cache:
    """A cache layer as LRUPromptCache sees one: its byte count, trimmable (KVCache's interface)."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes

    def is_trimmable(self):
        return True

    def trim(self, n):
        return n


def test_the_prompt_cache_chooses_inserts_and_evicts_as_mlx_lm_does():
    """Random conversations over a small vocabulary through the real LRUPromptCache and the ledger's copy: every
    fetch covers the same tokens from the same entry, every insertion leaves the same entries and counts."""
    from mlx_lm.models.cache import LRUPromptCache

    rng = random.Random(1)
    for trial in range(60):
        size = rng.randrange(1, 5)
        real, ours = LRUPromptCache(size), PromptCache(size)
        stored: list[tuple] = []
        for _ in range(25):
            base = rng.choice(stored) if stored and rng.random() < 0.7 else ()
            cut = rng.randrange(len(base) + 1)
            prompt = base[:cut] + tuple(rng.randrange(3) for _ in range(rng.randrange(1, 6)))
            cache, rest = real.fetch_nearest_cache("m", list(prompt))
            hit = ours.search(prompt)
            assert len(prompt) - len(rest) == hit.cached, (trial, prompt)
            if cache is not None:
                assert cache[0].nbytes == hit.entry.nbytes
            kind = rng.choice(["assistant", "assistant", "user", "system"])
            tokens = prompt + tuple(rng.randrange(3) for _ in range(rng.randrange(0, 3)))
            nbytes = 10 * len(
                tokens
            )  # by length, as the batched path counts (ties: the same bytes)
            real.insert_cache("m", list(tokens), [_Cache(nbytes)], cache_type=kind)
            ours.insert(tokens, nbytes, nbytes, kind)
            stored.append(tokens)
            assert len(real) == len(ours) and real.nbytes == ours.nbytes
            assert {k: v["n_sequences"] for k, v in real.stats_by_type().items()} == {
                t: len(ours.lrus[t]) for t in ours.lrus
            }
            if rng.random() < 0.2:
                limit = rng.randrange(0, 200)
                real.trim_to(n_bytes=limit)
                ours.trim_to(limit)
                assert len(real) == len(ours) and real.nbytes == ours.nbytes


def _script(rows: list[dict]) -> str:
    return json.dumps(
        [
            {
                "user": r["user"],
                "messages": json.loads(r["messages"]),
                "reply": r["reply"],
                "completion_tokens": r["completion_tokens"],
            }
            for r in rows
        ]
    )


def _held_to(rows: list[dict], folder: Path) -> None:
    """The ledger run on the recorded conversation prints what the server printed and counts what it counted."""
    options = rows[0].get("options", "").split()
    got = server_ledger("mlx_lm.server", str(folder), _script(rows), options)["requests"]
    assert len(got) == len(rows)
    for row, ledger in zip(rows, got):
        assert ledger["prompt_tokens"] == row["prompt_tokens"], row["request"]
        assert ledger["cached_tokens"] == row["cached_tokens"], row["request"]
        assert ledger["log_lines"] == row["log"].split("\n"), row["request"]


@pytest.fixture(scope="module")
def folder():
    from kvcore.measure import real_model
    from kvcore.measure.server_model import make_folder

    if not real_model.available():
        pytest.skip(real_model.MISSING)
    return make_folder(Path.home() / ".cache" / "kvsite-servers" / "smollm2-135m-mlx-fp32")


@pytest.mark.mlx
def test_the_ledger_tokenizes_a_conversation_as_mlx_lm_server_does(folder):
    from mlx_lm.tokenizer_utils import load

    from kvcore.servers.chat import ChatTokenizer

    real, ours = load(folder), ChatTokenizer.from_folder(folder)
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 12 + 30?"},
        {"role": "assistant", "content": "42, as it happens."},
        {"role": "user", "content": "And  twice that?\n"},
    ]
    want = real.apply_chat_template(messages, add_generation_prompt=True, tools=None, tokenize=True)
    pairs = [(m["role"], m["content"]) for m in messages]
    assert ours.prompt(pairs) == want
    assert (
        ours.prompt(pairs[1:]) != want[: len(ours.prompt(pairs[1:]))]
    )  # the system message counts
    assert 0 < ours.system_end(pairs, want) < len(want) and ours.eos_id in real.eos_token_ids


@pytest.mark.mlx
def test_every_recorded_request_is_reproduced_line_for_line(folder):
    rows = store.load(RECORDING).data["sections"]["server"]
    names = list(dict.fromkeys(r["conversation"] for r in rows))
    assert len(names) >= 3 and any(r["cached_tokens"] for r in rows)
    for name in names:
        _held_to([r for r in rows if r["conversation"] == name], folder)
    evicting = [r for r in rows if "--prompt-cache-size" in r["options"]]
    assert any("Prompt Cache: 3 sequences" in r["log"] for r in evicting)
    first = {r["user"]: r for r in reversed(evicting)}  # each user's first request
    returning = [r for r in evicting if r is not first[r["user"]]]
    assert any(r["cached_tokens"] < first[r["user"]]["prompt_tokens"] for r in returning)  # evicted
    # the sequential path (kvcore.servers.mlx_lm_sequential): generate_step reports from 0, and a 4M limit
    # leaves three entries of ~3.3 MB each, which the batched path would have evicted
    sequential = [r for r in rows if "--kv-bits" in r["options"]]
    assert len({r["conversation"] for r in sequential}) >= 2
    assert all("Prompt processing progress: 0/" in r["log"] for r in sequential)
    capped = [r for r in sequential if "--prompt-cache-bytes 4M" in r["options"]]
    assert any("Prompt Cache: 3 sequences, 0.01 GB" in r["log"] for r in capped)


@pytest.mark.mlx
def test_the_rule_holds_on_a_live_mlx_lm_server(folder):
    """A 2-turn conversation with the real server, now: the second turn resumes the first's prompt and reply."""
    done = subprocess.run(
        [sys.executable, "scripts/record_servers.py", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    rows = json.loads(done.stdout)
    assert [r["request"] for r in rows] == [1, 2] and rows[1]["cached_tokens"] > rows[0][
        "prompt_tokens"
    ]
    _held_to(rows, folder)


_STORED_CUT = """
import mlx.core as mx
from mlx_lm.models.cache import BatchKVCache

batch = BatchKVCache([0])
rows = mx.ones((1, 3, 300, 64))
batch.update_and_fetch(rows, rows)
mx.eval(batch.keys, batch.values)
del rows
cut = batch.extract(0)
assert cut.nbytes == 2 * 300 * 3 * 64 * 4 and batch.keys.shape[2] == 512
before = mx.get_active_memory()
del batch  # its offsets and paddings go (a few bytes); its buffer lives on in the cut
after_del = mx.get_active_memory()
mx.eval(cut.keys, cut.values)
print(before, after_del, mx.get_active_memory())
"""


@pytest.mark.mlx
def test_a_stored_cut_keeps_the_whole_batch_buffer_until_it_is_computed():
    """Rule 6 of kvcore.servers.mlx_lm_server: BatchKVCache.extract is lazy, so the entry the server counts by its
    used rows holds the batch's 256-row buffer until a later request evaluates it.

    Measured in a process of its own: mx.get_active_memory counts the whole process, and in a pytest worker an
    earlier test's arrays may be freed (or a thread allocate) between the two readings (CI saw 4.6 kB less)."""
    done = subprocess.run(
        [sys.executable, "-c", _STORED_CUT], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    before, after_del, after_eval = map(int, done.stdout.split())
    assert before - 64 <= after_del <= before
    freed = before - after_eval
    assert 0 <= freed - 2 * (512 - 300) * 3 * 64 * 4 <= 64


def test_the_same_users_next_turn_resumes_its_prompt_and_reply_and_a_small_cache_evicts():
    script = json.dumps(
        [
            {"user": "a", "prompt_tokens": 300, "completion_tokens": 50},
            {"user": "a", "prompt_tokens": 400, "completion_tokens": 50},
            {"user": "b", "prompt_tokens": 100, "completion_tokens": 20},
            {"user": "a", "prompt_tokens": 600, "completion_tokens": 50},
        ]
    )
    rows = server_ledger("mlx_lm.server", "smollm2-135m", script, [])["requests"]
    assert [r["cached_tokens"] for r in rows] == [0, 350, 0, 450]
    per_token = 30 * 3 * 128 * 2  # bf16 K and V over 30 layers of 3 KV heads x 64
    assert rows[1]["prompt_cache_bytes"] == 450 * per_token  # counted: the used rows
    assert rows[1]["resident_bytes"] == (350 + 256) * per_token  # held: merged rows + one step
    assert rows[1]["log_lines"][0] == "Prompt Cache: 1 sequences, 0.01 GB"
    small = server_ledger("mlx_lm.server", "smollm2-135m", script, ["--prompt-cache-size", "1"])
    assert [r["cached_tokens"] for r in small["requests"]] == [0, 350, 0, 0]


@pytest.mark.parametrize(
    "script, options, words",
    [
        (
            '[{"user": "a", "prompt_tokens": 1, "completion_tokens": 1}]',
            ["--prompt-cache-siz", "1"],
            "no option",
        ),
        (
            '[{"user": "a", "prompt_tokens": 1, "completion_tokens": 1}]',
            ["--draft-model", "small"],
            "does not model",
        ),
        *[
            (
                '[{"user": "a", "prompt_tokens": 1, "completion_tokens": 1}]',
                ["--kv-bits", bits],
                "takes",
            )
            for bits in ("0", "1", "7", "99", "1" + "0" * 30)
        ],
        (
            '[{"user": "a", "prompt_tokens": 1, "completion_tokens": 1}]',
            ["--kv-bits", "eight"],
            "does not take",
        ),
        (
            '[{"user": "a", "prompt_tokens": 1, "completion_tokens": 1}]',
            ["--kv-bits", "8", "--kv-group-size", "16"],
            "takes 32, 64, 128",
        ),
        (
            '[{"user": "a", "prompt_tokens": 1, "completion_tokens": 1}]',
            ["--kv-bits", "8", "--kv-group-size", "128"],
            "does not divide",
        ),
        (
            '[{"user": "a", "prompt_tokens": 1, "completion_tokens": 1}]',
            ["--kv-bits", "8", "--quantized-kv-start", "-5"],
            "must be from 0",
        ),
        ('[{"user": "a", "prompt_tokens": -3, "completion_tokens": 1}]', [], "whole number"),
        (
            '[{"user": "a", "prompt_tokens": 8000, "completion_tokens": 500}]',
            [],
            "beyond the model's context",
        ),
        ('[{"user": "a", "prompt_tokens": 10}]', [], "keys"),
        ("{}", [], "JSON list"),
        (
            json.dumps(
                [{"user": f"u{i}", "prompt_tokens": 5, "completion_tokens": 1} for i in range(1025)]
            ),
            [],
            "users",
        ),
        ("[" + ",".join(['{"user":1}'] * 10**6) + "]", [], "more than"),
    ],
)
def test_hostile_scripts_and_options_are_refused_in_one_sentence_before_any_work(
    script, options, words, monkeypatch
):
    """Refused before the ledger walks a request (either path's), and a script of a million requests before its
    JSON is parsed."""
    from kvcore.servers import mlx_lm_sequential, mlx_lm_server
    from kvcore.servers import script as script_module

    def walked(*args, **kwargs):
        raise AssertionError("a request was walked before the refusal")

    monkeypatch.setattr(mlx_lm_server.Ledger, "request", walked)
    monkeypatch.setattr(mlx_lm_sequential.SequentialLedger, "request", walked)
    parsed, loads = [], script_module.json.loads
    monkeypatch.setattr(
        script_module.json, "loads", lambda *a, **k: parsed.append(a[0][:20]) or loads(*a, **k)
    )
    with pytest.raises(KvError) as e:
        server_ledger("mlx_lm.server", "smollm2-135m", script, options)
    assert words in str(e.value) and str(e.value).count(".") <= 3 and "\n" not in str(e.value)
    if words == "more than":  # counted, never parsed
        assert script[:20] not in parsed


def test_the_command_line_prints_the_requests_and_refuses_an_unknown_server(tmp_path):
    script = tmp_path / "talk.json"
    script.write_text('[{"user": "a", "prompt_tokens": 10, "completion_tokens": 5}]')
    base = [
        sys.executable,
        "-m",
        "kvcore",
        "serve",
        "--model",
        "smollm2-135m",
        "--script",
        str(script),
    ]
    done = subprocess.run(
        [*base, "--server", "mlx_lm.server", "--json"], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["requests"]
    assert set(row) >= {
        "request", "user", "prompt_tokens", "cached_tokens", "reprocessed_tokens", "active_kv_bytes",
        "prompt_cache_entries", "prompt_cache_bytes", "copies_bytes", "checkpoint_bytes", "resident_bytes",
        "peak_bytes", "log_lines",
    }  # fmt: skip
    bad = subprocess.run(
        [*base, "--server", "mlx-server"], cwd=ROOT, capture_output=True, text=True
    )
    assert bad.returncode == 2 and "mlx-server" in bad.stderr and "Traceback" not in bad.stderr


def test_single_token_growth_is_counted_as_the_walk_finds_it():
    """mlx_lm_server.growths counts a run of single-token updates without walking it: the same capacities as
    kvcore.memory.allocsim's walk, from empty, merged (capacity = offset) and 256-aligned caches."""
    from kvcore.memory.allocsim import CacheState, trace
    from kvcore.servers.mlx_lm_server import growths

    rng = random.Random(2)
    for _ in range(500):
        offset = rng.randrange(0, 900)
        capacity = offset if rng.random() < 0.5 else -(-offset // 256) * 256
        start = CacheState(offset, capacity)
        k = rng.randrange(1, 900)
        events, end = growths(start, [-k])
        walk, seen, last = trace("KVCache", [1] * k, start=start), [], capacity
        for s in walk:
            if s.capacity != last:
                seen.append(s.capacity)
                last = s.capacity
        assert events == seen and (end.offset, end.capacity) == (walk[-1].offset, walk[-1].capacity)


def test_a_server_row_that_serves_more_than_its_prompt_from_cache_is_refused():
    from kvcore.recordings.schema import RecordingError

    row = {"conversation": "c", "server": "mlx_lm.server", "user": "a", "log": "", "request": 1}
    row |= {"prompt_tokens": 10, "completion_tokens": 2, "cached_tokens": 10}
    data = store.load(RECORDING).data if RECORDING.exists() else None
    if data is None:
        pytest.skip("the recording is not bundled yet")
    good = dict(data, sections={"server": [row]})
    store.validate(good)
    with pytest.raises(RecordingError, match="cached_tokens is out of range"):
        store.validate(dict(data, sections={"server": [dict(row, cached_tokens=11)]}))
    with pytest.raises(RecordingError, match="whole number"):
        store.validate(dict(data, sections={"server": [dict(row, request=0)]}))


KV_BITS = ["--kv-bits", "8", "--quantized-kv-start", "64"]


def test_with_kv_bits_whole_buffers_are_counted_quantized_from_the_start_and_the_byte_limit_is_not_applied():
    """The sequential path (kvcore.servers.mlx_lm_sequential): an entry counts its whole 256-row buffer, in 8 bits
    once its offset reached --quantized-kv-start (default 5000), a returning user resumes the copy, and
    --prompt-cache-bytes evicts nothing."""
    script = json.dumps(
        [
            {"user": "a", "prompt_tokens": 41, "completion_tokens": 24},
            {"user": "a", "prompt_tokens": 84, "completion_tokens": 24},
            {"user": "b", "prompt_tokens": 30, "completion_tokens": 10},
        ]
    )
    fp, q8 = (
        30 * 3 * 128 * 2,
        30 * 3 * 2 * (64 + 2 * 2),
    )  # bf16 rows; 8-bit codes + a bf16 scale and bias
    rows = server_ledger(
        "mlx_lm.server", "smollm2-135m", script, [*KV_BITS, "--prompt-cache-bytes", "1M"]
    )
    rows = rows["requests"]
    assert [r["cached_tokens"] for r in rows] == [0, 65, 0]
    assert (
        rows[0]["prompt_cache_bytes"] == 256 * q8
    )  # offset 65: quantized, capacity 256 carried over
    assert (
        rows[1]["copies_bytes"] == 256 * q8 and rows[1]["prompt_cache_entries"] == 1
    )  # its prefix went
    assert (
        rows[2]["prompt_cache_bytes"] == 256 * q8 + 256 * fp > 10**6
    )  # b's 40 tokens stay in bf16
    assert rows[0]["log_lines"][4:] == [f"Prompt processing progress: {n}/41" for n in (0, 40, 41)]
    assert rows[1]["log_lines"][:2] == [
        "Prompt Cache: 1 sequences, 0.00 GB",
        "- assistant: 1 sequences, 0.00 GB",
    ]
    late = server_ledger("mlx_lm.server", "smollm2-135m", script, ["--kv-bits", "8"])["requests"]
    assert late[0]["prompt_cache_bytes"] == 256 * fp  # never reached 5000 tokens: never quantized
    batched = server_ledger("mlx_lm.server", "smollm2-135m", script, ["--prompt-cache-bytes", "1M"])
    assert batched["requests"][2]["prompt_cache_entries"] == 1  # the batched path applies the limit


@pytest.mark.mlx
@pytest.mark.parametrize("bits, group", [(8, 64), (4, 64), (3, 32), (6, 64), (2, 32)])
def test_a_quantized_entry_takes_the_bytes_mlx_lm_counts(bits, group):
    """Rule 4 of kvcore.servers.mlx_lm_sequential against mlx_lm's own classes: a KVCache of SmolLM2-135M's layer
    shape (3 KV heads x 64, fp32) converted as generate_step converts it keeps its capacity, then grows by the
    256-row rule; over 30 layers its nbytes are the ledger's quantized row bytes times the capacity."""
    import mlx.core as mx
    from mlx_lm.generate import maybe_quantize_kv_cache
    from mlx_lm.models.cache import KVCache, QuantizedKVCache

    from kvcore.servers.ledger import load_model
    from kvcore.servers.mlx_lm_sequential import quantized_row_bytes

    geometry, _, _ = load_model("smollm2-135m")
    per_token = quantized_row_bytes(geometry, "fp32", bits, group)
    cache = [KVCache()]
    x = mx.random.normal((1, 3, 300, 64))
    cache[0].update_and_fetch(x, x)  # 512 rows
    maybe_quantize_kv_cache(cache, 64, group, bits)
    assert isinstance(cache[0], QuantizedKVCache) and 30 * cache[0].nbytes == 512 * per_token
    cache[0].update_and_fetch(x, x)  # QuantizedKVCache quantizes what it is given
    assert 30 * cache[0].nbytes == 812 * per_token  # trimmed to 300 rows, then 512 more


def test_the_command_line_serves_with_kv_bits_and_refuses_hostile_bits(tmp_path):
    script = tmp_path / "talk.json"
    script.write_text('[{"user": "a", "prompt_tokens": 41, "completion_tokens": 24}]')
    base = [
        sys.executable,
        "-m",
        "kvcore",
        "serve",
        "--server",
        "mlx_lm.server",
        "--model",
        "smollm2-135m",
    ]
    base += ["--script", str(script)]
    done = subprocess.run([*base, *KV_BITS, "--json"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)["requests"]
    assert row["prompt_cache_bytes"] == 256 * 30 * 3 * 2 * (64 + 2 * 2)
    for bits in ("3x", "0", "99"):
        bad = subprocess.run([*base, "--kv-bits", bits], cwd=ROOT, capture_output=True, text=True)
        assert bad.returncode == 2 and bits in bad.stderr and bad.stderr.count("\n") == 1, (
            bad.stderr
        )


@pytest.mark.mlx
def test_the_sequential_ledger_counts_what_mlx_lms_own_cache_counts_to_the_byte(folder):
    """The recorded --kv-bits conversations again, in process, through mlx_lm's own LRUPromptCache and
    stream_generate as `_serve_single` calls them (server.py#L1071-L1147), on the recorded conversation's tokens (the
    recorded reply fed, its end token included): after every request the real cache's `nbytes` (what the server's line prints in
    GB) equals the ledger's count exactly."""
    import mlx.core as mx
    from mlx_lm import load
    from mlx_lm.generate import stream_generate
    from mlx_lm.models.cache import LRUPromptCache, make_prompt_cache

    from kvcore.servers.ledger import load_model, turns
    from kvcore.servers.script import parse_script

    model, tokenizer = load(str(folder))
    geometry, _, _ = load_model(str(folder))
    rows = store.load(RECORDING).data["sections"]["server"]
    for name in dict.fromkeys(r["conversation"] for r in rows if "--kv-bits" in r["options"]):
        recorded = [r for r in rows if r["conversation"] == name]
        options = recorded[0]["options"].split()
        got = server_ledger("mlx_lm.server", str(folder), _script(recorded), options)["requests"]
        seqs = turns(parse_script(_script(recorded)), folder, geometry.max_position_embeddings)
        bits, start = (
            int(options[options.index(f) + 1]) for f in ("--kv-bits", "--quantized-kv-start")
        )
        real = LRUPromptCache(10)
        for turn, ledger in zip(seqs, got):
            cache, rest = real.fetch_nearest_cache("m", list(turn.prompt))
            assert len(turn.prompt) - len(rest) == ledger["cached_tokens"], (
                name,
                ledger["request"],
            )
            cache = make_prompt_cache(model) if cache is None else cache
            # the recorded reply's tokens fed in place of sampling: greedy in this process can pick another
            # token than the server did (seen once, in request 5 of the 3 users), which would change the
            # tokens that follow and where the reply ends, not the rules
            reply = iter(turn.reply)
            for _ in stream_generate(
                model,
                tokenizer,
                rest,
                max_tokens=len(turn.reply),
                sampler=lambda _logprobs: mx.array([next(reply, 0)]),
                prompt_cache=cache,
                kv_bits=bits,
                kv_group_size=64,
                quantized_kv_start=start,
            ):
                pass
            assert sum(c.offset for c in cache) == 30 * (len(turn.prompt) + len(turn.reply))
            real.insert_cache("m", [*turn.prompt, *turn.reply], cache)
            assert real.nbytes == ledger["prompt_cache_bytes"], (name, ledger["request"])
