"""The Calculator "as a server" (kvcore.views.as_server) and `calc --server`: its resident and peak figures are
the server ledger's own rows for the same script, llama-server's GPU side is the Calculator's own plan, the GPU and
host sides are said apart, and every input is bounded before any work."""

import json
from dataclasses import replace

import pytest

from harness.inputs import run_kvcore
from kvcore.capacity.calculator import answer
from kvcore.capacity.request import ModelSource, Request
from kvcore.errors import KvError
from kvcore.inputs.source import resolve_model
from kvcore.servers import llama_server, mlx_lm_server
from kvcore.servers.ledger import run
from kvcore.servers.options import parse_options
from kvcore.servers.script import parse_script
from kvcore.units import GIB
from kvcore.views.as_server import ServerAsk, as_server

MODEL = "llama-3.2-1b"


def _request(runtime: str, **changes) -> tuple[Request, object]:
    geometry, _ = resolve_model(MODEL, runtime)
    weights = "bf16" if runtime == "mlx_lm" else "gguf-q4_k_m"
    kv = "bf16" if runtime == "mlx_lm" else "fp16"
    base = Request(ModelSource(MODEL), 16384, 1, kv, kv, weights, runtime, memory_bytes=16 * GIB)
    return replace(base, **changes), geometry


def _ledger(module, argv: list[str], geometry, dtype: str, ask: ServerAsk) -> list[dict]:
    options = parse_options(module.OPTIONS, argv, module.NAME)
    return run(module, options, geometry, dtype, parse_script(json.dumps(ask.script())))["requests"]


@pytest.mark.parametrize("users,turns", [(1, 8), (3, 4), (12, 2)])
def test_mlx_lm_servers_resident_and_peak_are_its_ledgers_rows(users, turns):
    request, geometry = _request("mlx_lm")
    ask = ServerAsk(
        users=users, turns=turns, message_tokens=300, reply_tokens=120, prompt_cache_size=4
    )
    got = as_server(request, ask, geometry)
    rows = _ledger(
        mlx_lm_server,
        ["--prompt-cache-size", "4", "--prefill-step-size", "2048"],
        geometry,
        "bf16",
        ask,
    )
    assert got.resident_bytes == rows[-1]["resident_bytes"]
    assert got.peak_bytes == max(r["peak_bytes"] for r in rows)
    for t in got.turns:  # after every user's request of turn t
        end = t["turn"] * users
        assert t["resident_bytes"] == rows[end - 1]["resident_bytes"]
        assert t["peak_bytes"] == max(r["peak_bytes"] for r in rows[:end])
        # mlx_lm.server keeps every cache as MLX arrays: all of it on the GPU side, nothing in host RAM
        assert (
            t["gpu_resident_bytes"] == got.weights_bytes + got.working_bytes + t["resident_bytes"]
        )
        assert t["host_resident_bytes"] == t["host_peak_bytes"] == 0
    assert got.gpu_peak_bytes == got.weights_bytes + got.working_bytes + got.peak_bytes
    assert got.fit.need_bytes == got.gpu_peak_bytes and got.host_fit is None
    assert got.server_line == (
        f"{rows[-1]['prompt_cache_entries']} sequences, {rows[-1]['prompt_cache_bytes'] / 1e9:.2f} GB"
    )
    assert got.reprocessed_tokens == sum(r["reprocessed_tokens"] for r in rows)


@pytest.mark.parametrize(
    "slots,unified,cache_ram,kv",
    [(1, False, 8192, "fp16"), (4, True, 64, "q8_0"), (2, False, -1, "fp16")],
)
def test_llama_servers_figures_are_its_ledgers_and_its_gpu_side_is_the_calculators_plan(
    slots, unified, cache_ram, kv
):
    request, geometry = _request(
        "llama.cpp", sequences=slots, settings=(("unified", unified),), k_format=kv, v_format=kv
    )
    ask = ServerAsk(users=5, turns=3, message_tokens=400, reply_tokens=200, cache_ram_mib=cache_ram)
    ask = replace(ask, ram_bytes=24 * GIB)
    got = as_server(request, ask, geometry)
    name = "q8_0" if kv == "q8_0" else "f16"
    argv = ["-c", "16384", "-np", str(slots), *(["-kvu"] if unified else [])]
    argv += ["-ctk", name, "-ctv", name, "-fa", "auto", "--cache-ram", str(cache_ram)]
    rows = _ledger(llama_server, argv, geometry, name, ask)
    assert got.command == "llama-server " + " ".join(argv)
    assert got.resident_bytes == rows[-1]["resident_bytes"]
    assert got.peak_bytes == max(r["peak_bytes"] for r in rows)
    calc = answer(
        request, geometry
    )  # the Calculator's own answer for -c, -np, -kvu and the KV types
    kv_parts = sum(p["bytes"] for p in calc.plan["parts"] if p["kind"] == "kv")
    assert rows[0]["active_kv_bytes"] == kv_parts == calc.kv_bytes  # the pool, allocated once
    assert got.gpu_peak_bytes == got.gpu_resident_bytes == calc.need_bytes
    assert got.fit.status == calc.fit.status and got.fit.need_bytes == calc.fit.need_bytes
    for t in got.turns:  # host side: the prompt cache, the ledger's bytes beyond the pool
        end = t["turn"] * ask.users
        assert t["host_resident_bytes"] == rows[end - 1]["prompt_cache_bytes"]
        assert t["host_peak_bytes"] == max(r["peak_bytes"] for r in rows[:end]) - kv_parts
    assert got.host_fit["need_bytes"] == got.gpu_peak_bytes + got.host_peak_bytes
    assert got.host_cap_bytes == (cache_ram * 2**20 if cache_ram >= 0 else None)
    if cache_ram >= 0:
        assert got.host_peak_bytes <= cache_ram * 2**20
    last = [x for r in rows for x in r["log_lines"] if "cache state:" in x][-1]
    assert last.endswith(got.server_line)


def test_more_users_and_turns_hold_more_and_a_smaller_cache_type_less():
    request, geometry = _request("mlx_lm")
    few = as_server(request, ServerAsk(users=1, turns=2), geometry)
    many = as_server(request, ServerAsk(users=4, turns=6), geometry)
    assert many.resident_bytes > few.resident_bytes and many.peak_bytes > few.peak_bytes
    llama, lg = _request("llama.cpp", sequences=2)
    f16 = as_server(llama, ServerAsk(users=4, turns=3), lg)
    q8 = as_server(
        replace(llama, k_format="q8_0", v_format="q8_0"), ServerAsk(users=4, turns=3), lg
    )
    assert 0 < q8.host_peak_bytes < f16.host_peak_bytes and q8.gpu_peak_bytes < f16.gpu_peak_bytes


def test_the_verdicts_follow_the_memory():
    request, geometry = _request("mlx_lm")
    ask = ServerAsk(users=4, turns=8)
    roomy = as_server(request, ask, geometry)
    tight = as_server(replace(request, memory_bytes=roomy.gpu_peak_bytes - 2**30), ask, geometry)
    assert roomy.fit.status == "fits" and tight.fit.status == "no"
    assert as_server(request.sized(), ask, geometry).fit is None
    llama, lg = _request("llama.cpp", sequences=4)
    ask = ServerAsk(users=6, turns=4, cache_ram_mib=-1)
    both = as_server(llama, ask, lg)
    need = both.gpu_peak_bytes + both.host_peak_bytes  # the host side: against the RAM
    assert both.host_peak_bytes > 0 and both.fit.status == "fits"
    assert as_server(llama, replace(ask, ram_bytes=need), lg).host_fit["status"] == "fits"
    assert as_server(llama, replace(ask, ram_bytes=need - 1), lg).host_fit["status"] == "no"


@pytest.mark.parametrize(
    "fields",
    [
        {"users": 10**9},
        {"users": 0},
        {"turns": -1},
        {"turns": 17},
        {"message_tokens": 10**12},
        {"reply_tokens": 0},
        {"users": True},
        {"turns": 2.5},
        {"cache_ram_mib": -2},
        {"cache_ram_mib": 1 << 40},
        {"prompt_cache_size": 0},
        {"prompt_cache_size": 10**6},
        {"ram_bytes": 10**30},
        {"ram_bytes": -1},
    ],
)
def test_hostile_numbers_are_refused_in_one_sentence_before_any_work(fields):
    with pytest.raises(KvError) as e:
        ServerAsk(**fields)
    assert e.value.code == "server_bound" and str(e.value).count(".") <= 3


def test_what_a_server_does_not_do_is_said():
    request, geometry = _request("mlx_lm")
    with pytest.raises(KvError, match="--kv-bits") as e:  # K and V in two formats: mlx_lm keeps one
        as_server(replace(request, k_format="mlx-q4", v_format="mlx-q8"), ServerAsk(), geometry)
    assert e.value.code == "server_mlx_format" and e.value.params == {"k": "mlx-q4", "v": "mlx-q8"}
    rg, _ = resolve_model(MODEL, "reference")
    with pytest.raises(KvError, match="no server's") as e:
        as_server(replace(request, runtime="reference"), ServerAsk(), rg)
    small, _ = resolve_model("smollm2-135m", "mlx_lm")  # a context of 8,192 tokens
    beyond = replace(request, model=ModelSource("smollm2-135m"), weights_format="bf16")
    with pytest.raises(KvError, match="beyond the model's context") as e:
        as_server(beyond, ServerAsk(turns=16, message_tokens=2048, reply_tokens=2048), small)
    assert e.value.code == "server_context"
    llama, lg = _request("llama.cpp", context=2048, sequences=2)
    with pytest.raises(KvError, match="a slot holds") as e:  # -c 2048 -np 2: 1,024 cells a slot
        as_server(llama, ServerAsk(turns=3), lg)
    assert e.value.code == "server_slot" and e.value.params["cells"] == 1024


def test_calc_server_on_the_command_line():
    common = ("calc", "--model", MODEL, "--context", "16384", "--ram", "16")
    r = run_kvcore(*common, "--server", "mlx_lm.server", "--users", "3", "--turns", "4", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    request, geometry = _request("mlx_lm", k_format="fp16", v_format="fp16")
    got = as_server(request, ServerAsk(users=3, turns=4), geometry)
    server = out["server"]
    assert server["resident_bytes"] == got.resident_bytes and server["peak_bytes"] == got.peak_bytes
    assert (
        server["fit"]["limit"]["source"] == out["fit"]["limit"]["source"]
    )  # the same limit as calc's
    r = run_kvcore(
        *common,
        "--runtime",
        "llama.cpp",
        "--sequences",
        "2",
        "--server",
        "llama-server",
        "--cache-ram",
        "512",
    )
    assert r.returncode == 0, r.stderr
    assert "host side  the prompt cache in RAM" in r.stdout and "GPU fit" in r.stdout
    assert "RAM fit" in r.stdout and "--cache-ram 512" in r.stdout
    for args, said in (
        (("--users", "1000000000", "--server", "mlx_lm.server"), "users must be a whole number"),
        (("--turns", "-3", "--server", "mlx_lm.server"), "turns must be a whole number"),
        (("--users", "3"), "--users needs --server"),
        (("--server", "llama-server"), "add --runtime llama.cpp"),
        (("--server", "mlx_lm.server", "--cache-ram", "5"), "--cache-ram is llama-server's"),
    ):
        r = run_kvcore(*common, *args)
        assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    r = run_kvcore(*common, "--server", "mlx_lm.server", "--kv-format", "mlx-q4")  # --kv-bits 4
    assert r.returncode == 0 and "--kv-bits 4 --kv-group-size 64" in r.stdout, r.stderr


def test_each_runtime_names_its_server_and_only_a_server_with_a_ledger_is_offered():
    """The runtime object says which server ships with it; the Calculator offers those the ledgers model."""
    from kvcore.runtimes.registry import RUNTIMES
    from kvcore.views import as_server

    named = {name: rt.server for name, rt in RUNTIMES.items() if rt.server}
    assert named == as_server.SERVER_OF and set(named.values()) == set(as_server.MODULES)
    for name in set(RUNTIMES) - set(named):
        with pytest.raises(KvError):
            as_server.server_for(name)


def test_a_server_names_its_runtime_and_an_unknown_one_is_refused_by_name():
    from kvcore.views import as_server

    assert as_server.runtime_for("llama-server") == "llama.cpp"
    assert as_server.runtime_for("mlx_lm.server") == "mlx_lm"
    with pytest.raises(KvError, match="'vllm'"):
        as_server.runtime_for("vllm")


@pytest.mark.parametrize("fmt, bits", [("mlx-q8", 8), ("mlx-q4", 4)])
def test_an_mlx_quantized_format_runs_mlx_lm_server_with_kv_bits_from_its_quantized_start(
    fmt, bits
):
    """mlx-q8 / mlx-q4 in the Calculator: mlx_lm.server --kv-bits (its sequential path, the ledger's
    kvcore.servers.mlx_lm_sequential), quantized from --quantized-kv-start (5,000 tokens) as the server does: a
    conversation that stays under it holds what fp16 holds; one past it holds less than fp16 after its last turn."""
    request, geometry = _request("mlx_lm")
    short, long = ServerAsk(users=2, turns=4), ServerAsk(users=2, turns=8, message_tokens=1024)
    for ask, fewer in ((short, False), (long, True)):
        fp16 = as_server(request, ask, geometry)
        got = as_server(replace(request, k_format=fmt, v_format=fmt), ask, geometry)
        assert f"--kv-bits {bits} --kv-group-size 64" in got.command and "mlx_kv_bits" in got.notes
        assert "mlx_kv_bits" not in fp16.notes
        assert (got.resident_bytes < fp16.resident_bytes) is fewer
        assert got.resident_bytes <= fp16.resident_bytes
