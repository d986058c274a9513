"""The Many conversations chapter's llama-server numbers (kvcore.views.llama_server) on the bundled recording of a
real llama-server: every recorded conversation replayed line for line, each request's peak part by part (the
slot pool on the GPU side, the prompt cache in host RAM, the server's own cache state as the line), the levers,
and the recording's token ids refused in one sentence when they are not token ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvcore.errors import KvError
from kvcore.recordings import store
from kvcore.servers.llama_server import state_bytes
from kvcore.views import llama_server as llama
from kvcore.views import servers as views

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "recordings" / "measured-linux-cpu-llama-server-smollm2-135m.yaml"
MLX_RECORDING = ROOT / "recordings" / "measured-linux-cpu-mlx-lm-server-smollm2-135m.yaml"
MODEL = "smollm2-135m"
CELL = (
    30 * 2 * 3 * 64 * 2
)  # SmolLM2-135M, f16 K and V: 30 layers x (K, V) x 3 KV heads x 64 x 2 bytes
MIB = 1024 * 1024


def _rows(name: str | None = None) -> list[dict]:
    rows = store.load(RECORDING).data["sections"]["server"]
    return [r for r in rows if name is None or r["conversation"] == name]


def test_the_chapter_draws_both_servers_recordings_but_never_a_mix():
    assert views.drawn(_rows()) and views.drawn(
        store.load(MLX_RECORDING).data["sections"]["server"]
    )
    mixed = _rows()[:1] + [dict(_rows()[1], server="mlx_lm.server")]
    assert not views.drawn(mixed) and not views.drawn([]) and not views.drawn([{"server": "x"}])


def test_every_recorded_conversation_replays_from_the_servers_own_token_ids():
    """The recording carries each prompt's ids as the server tokenized it and each reply's as it sampled them,
    so every request of every conversation is reproduced: cached tokens and cache lines, all of them."""
    rows = _rows()
    assert llama.has_ids(rows)
    names = list(dict.fromkeys(r["conversation"] for r in rows))
    assert llama.replayable(rows, MODEL) == names and len(names) == 5
    for name in names:
        got = llama.replay(_rows(name), MODEL)[
            "requests"
        ]  # refuses a request it does not reproduce
        assert [r["cached_tokens"] for r in got] == [r["cache_n"] for r in _rows(name)]


def test_counts_alone_replay_only_the_single_user():
    """Without the ids, users whose prompts share the chat template's opening cannot be told apart from users
    who share nothing: only the one-user conversation replays, and the others are refused, not drawn wrong."""
    bare = [{k: v for k, v in r.items() if k not in ("prompt_ids", "reply_ids")} for r in _rows()]
    assert llama.replayable(bare, MODEL) == ["one user, 8 turns"]
    with pytest.raises(KvError, match="is not what the ledger replays"):
        llama.replay([r for r in bare if r["conversation"] == "4 users interleaved, -np 1"], MODEL)


@pytest.mark.parametrize(
    "name, streams",
    [
        ("one user, 8 turns", 1),
        ("4 users interleaved, -np 1", 1),
        ("4 users interleaved, -np 4 split", 4),
        ("4 users interleaved, -np 4 unified", 1),
        ("5 users, --cache-ram 4", 1),
    ],
)
def test_each_request_is_the_slot_pool_on_the_gpu_side_and_the_prompt_cache_in_host_ram(
    name, streams
):
    """The pool is -c cells (8,192, the trained context, per stream when split), allocated once: the same in
    every request. The host parts add up to what the server's own `cache state` line prints after it."""
    rows = _rows(name)
    got = llama.replay(rows, MODEL)["requests"]
    parts = llama.parts(got)
    assert (
        parts.groupby("request")["bytes"].sum() == parts.groupby("request")["peak_bytes"].first()
    ).all()
    pool = parts[parts["part"] == "slots"]["bytes"]
    assert set(pool) == {streams * 8192 * CELL}
    host = parts[parts["part"].isin(["cache", "cache_copies"])].groupby("request")["bytes"].sum()
    for row, ledger in zip(rows, got):
        line = llama.printed_line(row)
        if line is not None:  # "cache state: N prompts, X MiB ..." as the server printed it
            printed = float(line.split("prompts, ")[1].split(" MiB")[0])
            assert f"{host[row['request']] / MIB:.3f}" == f"{printed:.3f}"
        assert ledger["checkpoint_bytes"] == 0  # a full-attention model makes none
    split = llama.split(got)
    assert (
        split["gpu_bytes"] == streams * 8192 * CELL
        and split["host_peak_bytes"] >= split["host_bytes"]
    )


def test_split_slots_keep_what_they_saved_so_the_cache_holds_it_twice():
    """-np 4 split: idle slots are saved into the prompt cache and keep their tokens (only a unified pool clears
    them), so entries a slot also holds appear; under -kvu they never do."""
    split = llama.parts(llama.replay(_rows("4 users interleaved, -np 4 split"), MODEL)["requests"])
    unified = llama.parts(
        llama.replay(_rows("4 users interleaved, -np 4 unified"), MODEL)["requests"]
    )
    assert split[split["part"] == "cache_copies"]["bytes"].sum() > 0
    assert unified[unified["part"] == "cache_copies"]["bytes"].sum() == 0


def test_eviction_under_a_small_cache_ram_shows_as_a_transient_part():
    parts = llama.parts(llama.replay(_rows("5 users, --cache-ram 4"), MODEL)["requests"])
    transient = parts[parts["part"] == "cache_transient"]["bytes"]
    assert transient.max() > 0  # saved, then trimmed to 4 MiB within the request
    held = parts[parts["part"].isin(["cache", "cache_copies"])].groupby("request")["bytes"].sum()
    assert held.max() <= 4 * MIB


def test_the_levers_cost_the_pool_the_host_ram_and_the_tokens_processed_again():
    script = views.conversation(4, 3, 256, 128)
    seconds = lambda rows: views.reprocessed_seconds(  # noqa: E731
        MODEL, rows, runtime="llama.cpp", kv_dtype="fp16"
    )
    out = {lever["flags"]: lever for lever in llama.levers(MODEL, script, seconds)}
    assert list(out)[:5] == ["", "-np 1", "-np 4", "-np 4 -kvu", "--cache-ram 0"]
    assert (
        out[""]["gpu_bytes"] == 8192 * CELL
    )  # auto: 4 slots sharing one pool of the trained context
    assert (
        out["-np 4"]["gpu_bytes"] == 4 * out["-np 4 -kvu"]["gpu_bytes"]
    )  # a whole context per stream
    assert out["--cache-ram 0"]["host_peak_bytes"] == 0
    first_turns = 4 * 256  # each user's first prompt is processed whatever the options
    assert out[""]["reprocessed_tokens"] >= first_turns
    slow = out[
        "-np 1 --cache-ram 0"
    ]  # one slot, no cache: every returning user from the first token
    assert slow["reprocessed_tokens"] == sum(r["prompt_tokens"] for r in script)
    assert slow["reprocessed_s"] > out[""]["reprocessed_s"] > 0
    assert out["-np 1"]["cached_tokens"] > 0  # served from the host-RAM cache instead
    entry = state_bytes(
        256 + 127, 1, 30, CELL
    )  # a slot saved after its first turn (the last token not kept)
    assert out["-np 1"]["host_peak_bytes"] >= entry


@pytest.mark.parametrize(
    "ids, words",
    [
        ("1 2 x", "token ids"),
        ("", "token ids"),
        ("-3 4", "token ids"),
        ("1 " * 200_000, "token ids"),
        ("99999999999 1", "token ids"),
    ],
)
def test_ids_that_are_not_token_ids_are_refused_in_one_sentence(ids, words):
    rows = [dict(r) for r in _rows("one user, 8 turns")]
    rows[0]["prompt_ids"] = ids
    with pytest.raises(KvError) as e:
        llama.replay(rows, MODEL)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_ids_not_as_many_as_the_counts_are_refused():
    rows = [dict(r) for r in _rows("one user, 8 turns")]
    rows[0]["reply_ids"] = rows[0]["reply_ids"] + " 5"
    with pytest.raises(KvError, match="not as many as its counts"):
        llama.replay(rows, MODEL)


def test_k_and_v_in_q8_0_shrink_the_pool_and_the_saved_prompts_by_the_format():
    """-ctk q8_0 -ctv q8_0: 34 bytes a block of 32 values for f16's 64, in the slot pool (exactly) and in the host-RAM
    prompt cache; the tokens served and processed again as with f16."""
    script = views.conversation(4, 3, 256, 128)
    out = {lever["flags"]: lever for lever in llama.levers(MODEL, script, lambda rows: 0.0)}
    f16, q8 = out[""], out["-ctk q8_0 -ctv q8_0"]
    assert q8["gpu_bytes"] * 64 == f16["gpu_bytes"] * 34
    assert 0 < q8["host_peak_bytes"] < f16["host_peak_bytes"]
    assert (q8["cached_tokens"], q8["reprocessed_tokens"]) == (
        f16["cached_tokens"],
        f16["reprocessed_tokens"],
    )
