"""Every input bounded before any work (issue 29): a hostile number, list or name given to the engine through a
link, a config.json field, a GGUF key or the command line gets one sentence that names the field and the limit, in
English and Japanese, and costs what a plain input costs (memory measured here with tracemalloc; the time of the
same cases, a ratio to a plain input, is benchmarks/bench_bounds.py's, not a timed assertion)."""

from __future__ import annotations

import json
import math
import re
import struct
import subprocess
import sys
from pathlib import Path

import gguf_files
import pytest
from i18n_keys import missing_keys

from harness.inputs import (
    GGUF_JUNK,
    PAST_ANY_MACHINE,
    gguf_with_junk,
    peak_bytes,
    preset_config,
    run_kvcore,
)
from kvcore import limits
from kvcore.capacity.calculator import calculate
from kvcore.errors import CODES, KvError, quote
from kvcore.inputs import gguf as kgguf
from kvcore.inputs.config import parse_config, parse_json_text
from kvcore.inputs.gguf_header import read_header
from kvcore.inputs.preset_files import load_preset
from kvcore.memory import allocsim
from kvcore.numbers import whole_number
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.views.savings import format_groups, format_table
from kvsite import i18n

ROOT = Path(__file__).resolve().parents[1]
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
MIB = 2**20


config = preset_config


def refused(call, code: str) -> KvError:
    """The engine's one sentence with its code, short whatever it was given, and said in Japanese too."""
    with pytest.raises(KvError) as e:
        call()
    err = e.value
    assert err.code == code, (err.code, str(err)[:300])
    assert len(str(err)) < 600 and "\n" not in str(err), str(err)[:300]
    ja = i18n.error_text("ja", err)
    assert JAPANESE.search(ja) and "⟨" not in ja and len(ja) < 600, ja[:300]
    return err


# ---------------------------------------------------------------- one home for the limits, one way to quote


def test_every_new_code_is_said_in_japanese():
    codes = ("updates_long", "updates_digits", "kv_heads", "total_range", "json_digits")
    assert set(codes) <= set(CODES)
    assert not (gaps := missing_keys([f"errors.{code}" for code in codes], ["ja"])), gaps
    assert not (gaps := missing_keys(["site.url_number"])), gaps


@pytest.mark.parametrize(
    "value, most",
    [
        ("x" * 1_000_000, 70),
        (10**5000, 12),
        (-(10**5000), 12),
        (list(range(330_000)), 70),
        ("ab", 4),
    ],
    ids=["1MB-string", "5000-digits", "minus-5000-digits", "long-list", "short"],
)
def test_quote_keeps_a_short_prefix(value, most):
    text = quote(value)
    assert len(text) <= most, text
    assert repr(text) == text  # a translation's {value!r} shows the same quote


def test_the_engine_limits_live_in_one_module():
    """The config's reader and gguf.py take theirs from kvcore.limits (imported, not restated)."""
    from kvcore.model import config as kconfig

    assert kconfig.MAX_FIELD is limits.MAX_FIELD and kconfig.MAX_LAYERS is limits.MAX_LAYERS
    assert kgguf.MAX_FIELD is limits.MAX_FIELD
    for path in (
        "kvcore/memory/allocsim.py",
        "kvcore/model/config.py",
        "kvcore/inputs/config.py",
        "kvcore/inputs/gguf.py",
    ):
        text = (ROOT / path).read_text(encoding="utf-8")
        assert not re.search(r"^MAX_(UPDATES|FIELD|LAYERS|DIGITS)\s*=", text, re.M), path


# ---------------------------------------------------------------- the Nbytes trap's updates list


@pytest.mark.parametrize(
    "text, code",
    [
        ("1x100000000", "updates_many"),
        ("1x1000000000000", "updates_many"),
        ("2048x3000, 1x3000", "updates_many"),
        ("9" * 5000, "updates_digits"),
        ("1x" + "9" * 5000, "updates_digits"),
        ("1, " * 30_000, "updates_long"),
        ("inf", "updates_bad"),
        ("1e400", "updates_bad"),
        ("💥" * 100_000, "updates_long"),
        ("300, ²", "updates_bad"),  # '²'.isdigit() is True, and int('²') a ValueError
        ("٣x2", "updates_bad"),  # int('٣') is 3: a digit of another script
    ],
)
def test_a_hostile_updates_list_is_refused_before_it_is_built(text, code):
    refused(lambda: allocsim.parse_updates(text), code)


@pytest.mark.parametrize(
    "text", ["²", "300²", "①", "٣", "３", "+3", "-3", " 3", "3.0", "", "9" * 41]
)
def test_a_whole_number_is_read_from_the_ascii_digits_only(text):
    """kvcore.numbers.whole_number, the one reader of an integer given as text: anything str.isdigit() or int()
    takes besides 0-9 is one sentence naming the field, never a ValueError."""
    err = refused(lambda: whole_number(text, "ctx", 1, limits.MAX_CONTEXT), "number_text")
    assert str(err).startswith("ctx must be a whole number from 1 to 100,000,000"), str(err)
    assert whole_number("0300", "ctx", 1, limits.MAX_CONTEXT) == 300


def test_every_integer_read_from_text_goes_through_one_function():
    """No int() of a str.isdigit()-checked text left in the engine or the site: what reads a number from text
    calls kvcore.numbers.whole_number."""
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in ("kvcore", "kvsite", "pages")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if ".isdigit()" in line.split("#")[0]
        and path.name not in ("numbers.py", "guard.py")  # guard.py counts digits, reads none
    ]
    assert found == []


def test_the_updates_link_costs_what_a_plain_one_does():
    """/Nbytes_trap?updates=1x100000000 built a 1.5 GB list before its size was checked; now it is refused from its
    count, within a few MB of what the plain '256x16' costs."""
    plain = peak_bytes(lambda: allocsim.parse_updates("256x16"))
    for text in ("1x100000000", "1x1000000000000", "9" * 5000):
        assert peak_bytes(lambda: allocsim.parse_updates(text)) < plain + 4 * MIB, text
    assert allocsim.parse_updates("500x8") == [500] * 8  # the valid forms still work
    assert len(allocsim.parse_updates(f"1x{limits.MAX_UPDATES}")) == limits.MAX_UPDATES


# ---------------------------------------------------------------- config.json fields


@pytest.mark.parametrize("where", ["top", "nested", "list", "negative"])
def test_an_integer_of_4301_digits_anywhere_is_one_sentence(where):
    digits = "9" * 4301
    body = {
        "top": f'{{"x": {digits}}}',
        "nested": f'{{"a": {{"b": {digits}}}}}',
        "list": f'{{"a": [1, 2, {digits}]}}',
        "negative": f'{{"x": -{digits}}}',
    }[where]
    err = refused(lambda: parse_json_text(body), "json_digits")
    assert "4,301 digits" in str(err)


@pytest.mark.parametrize(
    "value, code",
    [
        (1e308, "config_range"),
        (-1, "config_range"),
        (0, "config_range"),
        (10**12, "config_range"),
        ("64", "config_not_whole"),
        (math.inf, "config_not_whole"),
    ],
)
def test_q_lora_rank_is_bounded(value, code):
    """1e308 gave 'inf GiB' and Infinity in --json; a negative rank a negative byte count."""
    err = refused(
        lambda: parse_config(config("deepseek-v3", q_lora_rank=value), "config.json", MLX_LM), code
    )
    assert "q_lora_rank" in str(err)


def test_kv_lora_rank_and_dimensions_are_bounded():
    for field in ("kv_lora_rank", "qk_rope_head_dim", "v_head_dim"):
        err = refused(
            lambda: parse_config(config("deepseek-v3", **{field: 10**10}), "config.json", MLX_LM),
            "config_range",
        )
        assert field in str(err) and "1,000,000,000" in str(err)


def test_a_null_q_lora_rank_is_no_q_lora():
    assert (
        parse_config(config("deepseek-v3", q_lora_rank=None), "config.json", MLX_LM).params.total
        > 0
    )


@pytest.mark.parametrize(
    "fields, code",
    [
        ({"use_sliding_window": "yes"}, "config_not_bool"),
        ({"use_sliding_window": 1}, "config_not_bool"),
        ({"tie_word_embeddings": "false"}, "config_not_bool"),
        ({"num_key_value_heads": 0}, "config_range"),
        ({"num_key_value_heads": 64}, "kv_heads"),
    ],
)
def test_self_contradicting_config_fields_are_refused(fields, code):
    refused(lambda: parse_config(config("qwen3-8b", **fields), "config.json", MLX_LM), code)


def test_a_layer_types_list_of_the_wrong_type_is_refused():
    n = load_preset("gemma-3-4b")["config"]["text_config"]["num_hidden_layers"]
    for value in ([{"a": 1}] * n, [1] * n, "sliding_attention", ["sliding_attention"] * (n + 1)):
        cfg = config("gemma-3-4b")
        cfg["text_config"] = {**cfg["text_config"], "layer_types": value}
        refused(lambda: parse_config(cfg, "config.json", MLX_LM), "config_layer_types")


def test_mlp_only_layers_is_read_once_and_bounded():
    """A qwen3_moe config of 1,024 layers and a 330,000-entry mlp_only_layers list cost 6-8 s (the list scanned
    once per layer): a list longer than the layers is refused from its length, a real one read once as a set."""
    big = config("qwen3-30b-a3b", num_hidden_layers=1024, mlp_only_layers=[0] * 330_000)
    err = refused(lambda: parse_config(big, "config.json", MLX_LM), "config_list")
    assert "mlp_only_layers" in str(err) and "1,024" in str(err) and len(str(err)) < 300
    plain = config("qwen3-30b-a3b", num_hidden_layers=1024)
    listed = config(
        "qwen3-30b-a3b", num_hidden_layers=1024, mlp_only_layers=list(range(0, 1024, 2))
    )
    assert (
        parse_config(listed, "config.json", MLX_LM).params.total
        < parse_config(plain, "config.json", MLX_LM).params.total
    )  # half the layers dense
    base = peak_bytes(lambda: parse_config(plain, "config.json", MLX_LM))
    assert peak_bytes(lambda: parse_config(big, "config.json", MLX_LM)) < base + 4 * MIB
    for bad in ("0,1", [1.5], [-1], [True], [{"a": 1}]):
        refused(
            lambda: parse_config(
                config("qwen3-30b-a3b", mlp_only_layers=bad), "config.json", MLX_LM
            ),
            "config_list",
        )


def test_a_huge_model_type_is_quoted_by_its_prefix():
    err = refused(
        lambda: parse_config(
            config("llama-3.2-1b", model_type="q" * 990_000), "config.json", MLX_LM
        ),
        "model_unknown",
    )
    assert "q" * 40 in str(err) and "q" * 100 not in str(err)


def test_sums_past_any_machine_are_refused_not_overflowed():
    """1,024 layers of 10^9-wide heads are inside every field's limit; their bytes are not inside a 64-bit table."""
    huge = config("llama-3.2-1b", **PAST_ANY_MACHINE)
    g = parse_config(huge, "config.json", MLX_LM)
    refused(lambda: calculate(g, 1000, 1), "total_range")
    big = parse_config(config("llama-3.1-405b"), "config.json", MLX_LM)
    refused(lambda: calculate(big, limits.MAX_CONTEXT, limits.MAX_SEQUENCES), "total_range")


def test_every_reported_sum_is_finite_and_non_negative_and_json():
    for name in ("deepseek-v3", "llama-3.2-1b", "gemma-3-4b", "qwen3-next-80b-a3b"):
        r = calculate(parse_config(config(name), "config.json", MLX_LM), limits.MAX_CONTEXT, 1)
        out = r.as_dict()
        json.dumps(out, allow_nan=False)
        for key, value in out.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                assert math.isfinite(value) and value >= 0, (name, key, value)


def test_a_model_without_attention_layers_is_sized_by_its_state():
    """A 3-layer qwen3_next has only linear (recurrent) layers: its cache is its fixed state, every KV format costs
    the same 0 B per token, and nothing divides by zero (kvcore.views.savings)."""
    g = parse_config(config("qwen3-next-80b-a3b", num_hidden_layers=3), "config.json", MLX_LM)
    assert {layer.kind for layer in g.layers} == {"linear"}
    r = calculate(g, 1000, 1)
    assert r.kv_bytes_per_token == 0 and r.kv_bytes > 0
    table = format_table(g, ["fp16", "q8_0", "mlx-q4"])
    assert set(table["vs_fp16"]) == {1.0}
    assert len(set(format_groups(g, ["fp16", "q8_0"]).values())) == 1


# ---------------------------------------------------------------- GGUF headers: the same checks


def _gguf(tmp_path, name="llama-3.2-1b", keys=None, tensors=None, file="m.gguf") -> Path:
    arch, base = gguf_files.metadata(load_preset(name)["config"])
    base |= keys or {}
    return gguf_files.write(
        tmp_path / file,
        arch,
        base,
        gguf_files.basic_tensors(arch, base) if tensors is None else tensors,
    )


@pytest.mark.parametrize("kv", [0, 64])
def test_gguf_kv_heads_that_contradict_the_heads_are_refused(tmp_path, kv):
    path = _gguf(
        tmp_path, keys={".attention.head_count": 4, ".attention.head_count_kv": kv}, tensors={}
    )
    err = refused(lambda: kgguf.geometry(path), "kv_heads")
    assert "head_count_kv" in str(err)


def test_config_and_gguf_refuse_kv_heads_by_the_same_check(tmp_path):
    from_config = refused(
        lambda: parse_config(
            config("qwen3-8b", num_attention_heads=4, num_key_value_heads=64, head_dim=128),
            "config.json",
            MLX_LM,
        ),
        "kv_heads",
    )
    path = _gguf(
        tmp_path, keys={".attention.head_count": 4, ".attention.head_count_kv": 64}, tensors={}
    )
    from_gguf = refused(lambda: kgguf.geometry(path), "kv_heads")
    assert from_config.params["kv_heads"] == from_gguf.params["kv_heads"] == 64


def huge_arch_gguf(path: Path, name: str) -> Path:
    """A GGUF whose general.architecture is `name` (its other keys a llama's)."""
    arch, keys = gguf_files.metadata(load_preset("llama-3.2-1b")["config"])
    keys = {(arch + k if k.startswith(".") else k): v for k, v in keys.items()}
    return gguf_files.write(path, name, keys, {}, vocab=False)


def test_a_1mb_architecture_name_is_quoted_by_its_prefix(tmp_path):
    path = huge_arch_gguf(tmp_path / "m.gguf", "x" * 1_000_000)
    err = refused(lambda: kgguf.geometry(path), "gguf_arch")
    assert len(str(err)) < 400


def test_long_key_and_tensor_names_are_quoted_by_their_prefix(tmp_path):
    key = "k" * 65_000
    path = _gguf(tmp_path, keys={".block_count": "many", key: 1}, tensors={}, file="k.gguf")
    refused(lambda: kgguf.geometry(path), "gguf_value")
    arch, keys = gguf_files.metadata(load_preset("llama-3.2-1b")["config"])
    tensors = {"t" * 65_000: ([33], 8)}  # Q8_0 rows of 33 values: not whole blocks
    path = gguf_files.write(tmp_path / "t.gguf", arch, keys, tensors)
    err = refused(lambda: kgguf.geometry(path), "gguf_tensor_block")
    assert "t" * 40 in str(err) and "t" * 100 not in str(err)


def with_long_array(plain: Path, path: Path, count: int) -> Path:
    """`plain` with one more key first: an f32 array of `count` zeros (a hole in a sparse file). The key takes a
    multiple of the alignment (32 bytes), so the data section and every tensor offset move together."""
    import struct

    assert (36 + 4 * count) % 32 == 0
    data = plain.read_bytes()
    kv = struct.unpack_from("<Q", data, 16)[0]
    head = data[:16] + struct.pack("<Q", kv + 1)
    key = b"general.junk"
    entry = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 6, count)
    with open(path, "wb") as f:
        f.write(head + entry)
        f.seek(4 * count, 1)  # the array's values: never written, read back as zeros
        f.write(data[24:])
    return path


def test_a_long_array_is_stepped_over_not_read(tmp_path):
    """95 MB of floats in one array cost 946 MB and 3 s: only its length matters, so it is skipped in the file."""
    plain = _gguf(tmp_path, file="plain.gguf")
    path = with_long_array(plain, tmp_path / "m.gguf", 25_000_007)
    assert path.stat().st_size > 100_000_000
    base = peak_bytes(lambda: kgguf.geometry(plain))
    assert peak_bytes(lambda: kgguf.geometry(path)) < base + 4 * MIB
    assert kgguf.geometry(path).layers == kgguf.geometry(plain).layers
    assert kgguf.geometry(path).file_weights == kgguf.geometry(plain).file_weights


@pytest.fixture(scope="module")
def plain_header(tmp_path_factory) -> tuple[bytes, int]:
    """A small llama's GGUF header as a browser sends it (up to its tensor table's end) and its file's size."""
    path = _gguf(tmp_path_factory.mktemp("plain-header"))
    data = path.read_bytes()
    return data[: read_header(path).data_offset], len(data)


@pytest.mark.parametrize("kind", GGUF_JUNK)
def test_a_16_mb_header_of_junk_keys_costs_a_fraction_of_its_bytes(plain_header, kind):
    """Issue 38: 16 MB of 3,866 arrays of 4,096 i8 values took 127 MB (each array a list of ints), arrays of 4,096
    empty strings 17 MB and 7 s, arrays of empty arrays 86 MB and 6 s. The engine keeps only the arrays it
    reads, steps over the rest and refuses arrays of arrays as llama.cpp does: the reader's peak is a few
    1 MiB read buffers, the geometry the plain header's."""
    header, size = plain_header
    raw, added = gguf_with_junk(header, kind, 16_000_000)
    assert len(raw) > 15_000_000 and added % 32 == 0

    def read():
        return kgguf.geometry(raw, "m.gguf", file_bytes=size + added)

    assert peak_bytes(read) < len(raw) / 5
    if kind == "arrays of empty arrays":
        err = refused(read, "gguf_nested_array")
        assert "junk.000000" in str(err) and "llama.cpp" in str(err)
    else:
        assert read() == kgguf.geometry(header, "m.gguf", file_bytes=size)


def test_what_a_header_keeps_is_held_to_one_budget(plain_header):
    """A string the engine reads (general.architecture) of 5 MB is 20 MB once decoded at worst: refused before it
    is built, in one sentence naming the budget (kvcore.limits)."""
    header, size = plain_header
    arch = b"general.architecture"
    at = header.index(arch) + len(arch)
    (n,) = struct.unpack_from("<Q", header, at + 4)
    # the data section moves by a multiple of 32
    value = b"x" * (5 * 2**20 + (-(5 * 2**20 - n) % 32))
    raw = header[: at + 4] + struct.pack("<Q", len(value)) + value + header[at + 12 + n :]
    added = len(raw) - len(header)

    def read():
        return kgguf.geometry(raw, "m.gguf", file_bytes=size + added)

    err = refused(read, "gguf_metadata_large")
    assert f"{limits.MAX_GGUF_METADATA_BYTES // 2**20} MiB" in str(err)
    assert peak_bytes(read) < 2 * 2**20


def test_a_tensor_count_past_the_cap_is_refused(tmp_path):
    import struct

    data = bytearray(_gguf(tmp_path).read_bytes())
    struct.pack_into("<Q", data, 8, limits.MAX_GGUF_TENSORS + 1)
    data += bytes(25 * (limits.MAX_GGUF_TENSORS + 1))  # room enough for the claim
    refused(lambda: kgguf.geometry(bytes(data)), "gguf_count")


# ---------------------------------------------------------------- the command line: exit 2, one sentence, JSON


cli = run_kvcore


def one_line(r, words: str = "") -> str:
    assert r.returncode == 2, (r.returncode, r.stdout[-300:], r.stderr[-1000:])
    err = r.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and len(err) < 800, err[:500]
    assert words in err, err
    return err


def strict_json(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"q_lora_rank": 1e308}, "q_lora_rank"),
        ({"q_lora_rank": -5}, "q_lora_rank"),
        ({"kv_lora_rank": 10**12}, "kv_lora_rank"),
        ({"model_type": "q" * 900_000}, "model_type"),
        ({"model_type": "llama", "num_key_value_heads": 0}, "num_key_value_heads"),
        ({"model_type": "llama", "num_key_value_heads": 512}, "num_key_value_heads"),
    ],
)
def test_the_cli_refuses_a_hostile_config_in_one_line(tmp_path, fields, words):
    path = tmp_path / "config.json"
    name = "llama-3.2-1b" if fields.get("model_type") == "llama" else "deepseek-v3"
    path.write_text(json.dumps(config(name, **fields)), encoding="utf-8")
    one_line(cli("calc", "--model", str(path), "--context", "1000", "--json"), words)


def test_the_cli_refuses_a_4301_digit_integer_and_a_5000_digit_argument(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config("llama-3.2-1b"))[:-1] + ', "x": ' + "9" * 4301 + "}")
    one_line(cli("calc", "--model", str(path), "--context", "1000"), "4,301 digits")
    err = one_line(cli("calc", "--model", "llama-3.2-1b", "--context", "9" * 5000), "context")
    assert "9" * 100 not in err


def test_the_cli_refuses_sums_past_any_machine(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            config("llama-3.2-1b", num_hidden_layers=1024, hidden_size=10**9, head_dim=10**9)
        )
    )
    one_line(cli("calc", "--model", str(path), "--context", "100000000", "--json"), "bytes")


def test_the_cli_sizes_a_model_without_attention_as_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config("qwen3-next-80b-a3b", num_hidden_layers=3)))
    r = cli("calc", "--model", str(path), "--context", "1000", "--json")
    assert r.returncode == 0, r.stderr
    assert strict_json(r.stdout)["kv_bytes_per_token"] == 0


def test_the_cli_refuses_a_hostile_gguf_in_one_line(tmp_path):
    path = huge_arch_gguf(tmp_path / "m.gguf", "a" * 1_000_000)
    llamacpp = ("--context", "1000", "--runtime", "llama.cpp")
    err = one_line(cli("calc", "--model", str(path), *llamacpp), "architecture")
    assert len(err) < 600
    path = _gguf(tmp_path, keys={".attention.head_count_kv": 0}, tensors={}, file="kv0.gguf")
    one_line(cli("calc", "--model", str(path), *llamacpp, "--json"), "head_count_kv")


def test_the_clis_last_line_is_one_sentence_with_exit_2():
    """An exception no check foresaw still ends in one line and exit 2 (here: a ValueError raised inside calc)."""
    code = (
        "import sys; import kvcore.cli.main as c; import kvcore.cli.calc as calc; "
        "calc.answer = lambda *a, **k: (_ for _ in ()).throw(ValueError('/srv/x' * 1000)); "
        "sys.exit(c.main(['calc', '--model', 'llama-3.2-1b', '--context', '10']))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    err = one_line(r, "ValueError")
    assert err.count("/srv/x") < 20
