"""The Many conversations chapter's numbers (kvcore.views.servers): a real mlx_lm.server's recorded conversation
replayed from its counts line for line, each request's peak part by part, users × turns and the levers; hostile
widget values refused in one sentence before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvcore.errors import KvError
from kvcore.limits import (
    MAX_CHAPTER_TURN_TOKENS,
    MAX_CHAPTER_TURNS,
    MAX_CHAPTER_USERS,
    MAX_SCRIPT_REQUESTS,
)
from kvcore.recordings import store
from kvcore.views import servers as views

ROOT = Path(__file__).resolve().parent.parent
RECORDING = ROOT / "recordings" / "measured-linux-cpu-mlx-lm-server-smollm2-135m.yaml"


def _rows(name: str | None = None) -> list[dict]:
    rows = store.load(RECORDING).data["sections"]["server"]
    return [r for r in rows if name is None or r["conversation"] == name]


def test_one_users_eight_turns_replay_from_counts_as_the_server_printed_them():
    rows = _rows("one user, 8 turns")
    result = views.replay(rows, "smollm2-135m", "fp32")  # refuses any request it does not reproduce
    got = result["requests"]
    assert [r["cached_tokens"] for r in got] == [r["cached_tokens"] for r in rows]
    assert [r["log_lines"] for r in got] == [r["log"].split("\n") for r in rows]
    assert result["kv_bytes_per_token"] == 30 * 3 * (64 + 64) * 4  # 30 layers, 3 KV heads, fp32


def test_counts_cannot_stand_for_users_whose_prompts_share_the_templates_prefix():
    """Four users' first prompts share the chat template's opening: the server resumed some tokens of another
    user's entry, which counts (users share nothing) cannot know; the replay says so instead of drawing it."""
    rows = _rows("4 users interleaved")
    with pytest.raises(KvError, match="is not what its counts replay"):
        views.replay(rows, "smollm2-135m", "fp32")
    assert views.replayable(_rows(), "smollm2-135m", "fp32") == [
        "one user, 8 turns",
        "one user, 8 turns, --kv-bits 8",  # the sequential path's (kvcore.servers.mlx_lm_sequential)
    ]


def test_a_kv_bits_conversation_stacks_its_whole_entries_with_nothing_beyond_the_count():
    """On the sequential path (--kv-bits) an entry is the request's whole cache, 256 rows at a time and 8-bit
    from --quantized-kv-start, counted whole: the parts add up to each peak, the newest entry is the request's own
    cache, nothing lies beyond the server's count, and what stands above it is the copy and the growing buffers."""
    result = views.replay(_rows("one user, 8 turns, --kv-bits 8"), "smollm2-135m", "fp32")
    parts = views.parts(result["requests"], result["kv_bytes_per_token"], result["options"])
    by = parts.pivot(index="request", columns="part", values="bytes")
    assert (
        parts.groupby("request")["bytes"].sum() == parts.groupby("request")["peak_bytes"].first()
    ).all()
    assert (parts["bytes"] >= 0).all() and (by["uncounted"] == 0).all()
    line = parts.groupby("request")["server_line"].first()
    assert (by["active"] + by["counted"] == line).all()  # the server's count is what it holds
    assert (by["transient"] > 0).all()
    # read as the batched path counts (used rows), the same requests do not add up: a negative part, refused
    with pytest.raises(KvError):
        views.parts(result["requests"], result["kv_bytes_per_token"])


def test_each_requests_parts_add_up_to_its_peak_and_stand_above_the_servers_own_count():
    """The chapter's claim: after eight turns the server's line counts well under half of what the last request
    held at its peak (the growing batch buffer and the copy of the entry it resumed)."""
    result = views.replay(_rows("one user, 8 turns"), "smollm2-135m", "fp32")
    parts = views.parts(result["requests"], result["kv_bytes_per_token"])
    sums = parts.groupby("request")["bytes"].sum()
    peaks = parts.groupby("request")["peak_bytes"].first()
    assert (sums == peaks).all() and (parts["bytes"] >= 0).all()
    last = result["requests"][-1]
    assert last["peak_bytes"] > 2 * last["prompt_cache_bytes"]
    assert sorted(set(parts["part"])) == sorted(views.PARTS)


@pytest.mark.mlx
def test_the_counts_replay_holds_the_same_bytes_as_the_tokenized_ledger():
    from kvcore.measure import real_model
    from kvcore.measure.server_model import make_folder
    from kvcore.servers.ledger import server_ledger

    if not real_model.available():
        pytest.skip(real_model.MISSING)
    folder = make_folder(Path.home() / ".cache" / "kvsite-servers" / "smollm2-135m-mlx-fp32")
    rows = _rows("one user, 8 turns")
    script = [
        {
            "user": r["user"],
            "messages": json.loads(r["messages"]),
            "reply": r["reply"],
            "completion_tokens": r["completion_tokens"],
        }
        for r in rows
    ]
    tokenized = server_ledger("mlx_lm.server", str(folder), json.dumps(script), [])["requests"]
    assert views.replay(rows, "smollm2-135m", "fp32")["requests"] == tokenized


def test_more_users_than_entries_process_every_prompt_again():
    """4 users taking turns through 3 entries: each user's entry is evicted before that user returns."""
    script = views.conversation(4, 4, 256, 64)
    prompt = sum(r["prompt_tokens"] for r in script)
    levers = {lever["flags"]: lever for lever in views.levers("llama-3.2-1b", script)}
    assert levers["--prompt-cache-size 3"]["reprocessed_tokens"] == prompt
    assert levers[""]["reprocessed_tokens"] == 16 * 256  # each turn its new message only
    assert levers["--prompt-cache-size 3"]["resident_bytes"] < levers[""]["resident_bytes"]


def test_the_turns_a_model_holds_are_its_context():
    assert views.context_of("phi-3-mini-4k") == 4096
    with pytest.raises(KvError, match="beyond the model's context of 4,096"):
        views.ledger("phi-3-mini-4k", views.conversation(1, 9, 256, 256))


@pytest.mark.parametrize(
    "users,turns,message,reply",
    [
        (10**9, 1, 64, 64),
        (1, -3, 64, 64),
        (1, 10**6, 64, 64),
        (True, 1, 64, 64),
        (1, 1, MAX_CHAPTER_TURN_TOKENS + 1, 64),
        (1, 1, 64, 0),
        (1.5, 1, 64, 64),
    ],
)
def test_hostile_conversations_are_refused_in_one_sentence_before_any_work(
    users, turns, message, reply
):
    with pytest.raises(KvError) as e:  # checked before a single request is built
        views.conversation(users, turns, message, reply)
    assert len(str(e.value).splitlines()) == 1 and str(e.value).endswith(".")


def test_the_chapters_largest_conversation_is_a_script_the_ledger_accepts():
    assert MAX_CHAPTER_USERS * MAX_CHAPTER_TURNS <= MAX_SCRIPT_REQUESTS
    script = views.conversation(MAX_CHAPTER_USERS, MAX_CHAPTER_TURNS, 64, 64)
    assert len(script) == MAX_CHAPTER_USERS * MAX_CHAPTER_TURNS
    assert len(views.ledger("llama-3.1-8b", script)["requests"]) == len(script)


def test_the_levers_seconds_are_the_time_models_for_the_tokens_processed_again():
    """Each lever's seconds: every request's reprocessed tokens as one prefill after the tokens it resumed, on
    the named chip; more tokens processed again take longer, none take none."""
    from kvcore.fits.shares import efficiency
    from kvcore.memory.formats import KvSpec
    from kvcore.servers.ledger import load_model
    from kvcore.timing.estimate import prefill_step

    script = views.conversation(4, 8, 512, 256)
    by_flags = {lever["flags"]: lever for lever in views.levers("llama-3.1-8b", script)}
    default, evicting = by_flags[""], by_flags["--prompt-cache-size 1"]
    assert evicting["reprocessed_tokens"] > default["reprocessed_tokens"]
    assert evicting["reprocessed_s"] > default["reprocessed_s"] > 0
    g, dtype, _ = load_model("llama-3.1-8b")
    one = prefill_step(
        g,
        512,
        views.LEVER_CHIP,
        efficiency(views.LEVER_CHIP),
        KvSpec(dtype, dtype, 64, dtype),
        dtype,
    ).time_s
    rows = [
        {"reprocessed_tokens": 512, "cached_tokens": 0},
        {"reprocessed_tokens": 0, "cached_tokens": 9},
    ]
    assert views.reprocessed_seconds("llama-3.1-8b", rows) == pytest.approx(one)


def test_the_kv_format_is_a_lever_from_the_turn_a_cache_passes_its_quantized_start():
    """mlx_lm.server's --kv-bits 8 (kvcore.servers.mlx_lm_sequential): what stays after the last request is the 8-bit
    entries'; its peak drops only as far as the turns past --quantized-kv-start (5,000 tokens) go, all the way with
    the start at 0; no token is served or processed differently."""
    script = views.conversation(4, 8, 512, 256)
    by_flags = {lever["flags"]: lever for lever in views.levers("llama-3.1-8b", script)}
    default, eight, at_once = (
        by_flags[""],
        by_flags["--kv-bits 8"],
        by_flags["--kv-bits 8 --quantized-kv-start 0"],
    )
    assert eight["resident_bytes"] < 0.6 * default["resident_bytes"]
    assert at_once["peak_bytes"] < eight["peak_bytes"] < default["peak_bytes"]
    for lever in (eight, at_once):
        assert (
            lever["resident_bytes"]
            == views.ledger("llama-3.1-8b", script, tuple(lever["flags"].split()))["requests"][-1][
                "resident_bytes"
            ]
        )
        assert (lever["cached_tokens"], lever["reprocessed_tokens"]) == (
            default["cached_tokens"],
            default["reprocessed_tokens"],
        )
