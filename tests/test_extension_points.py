"""Where a new cache format, model family, runtime, language or published run goes: one entry, and it reaches the
engine, the calculator, the CLI and the chapters' format choices (Linear growth, the .nbytes trap, the live runs'
weights); a wrong one is refused by the code in one sentence naming it (docs/contributing.md, "Where things go"; the
Calculator page's choices are held by tests/app/test_app_calculator.py, a chapter's and a language's registry by
tests/app/test_chapters.py).

Every entry here is monkeypatched into its registry, or written into a temporary copy, for one test: nothing is
written into the repository."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvcore.capacity.calculator import calculate, formats_that_fit, runtime_formats
from kvcore.cli import main as cli
from kvcore.errors import KvError
from kvcore.inputs import preset_files, presets
from kvcore.inputs.config import parse_config
from kvcore.measure import models as live_models
from kvcore.memory import formats
from kvcore.memory.formats import CacheFormat, KvSpec
from kvcore.memory.formulas import kv_bytes
from kvcore.model import families
from kvcore.runtimes import registry as runtimes
from kvcore.runtimes.base import Runtime, Setting
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.runtimes.token import TokenRuntime

ROOT = Path(__file__).resolve().parent.parent


def calc_json(capsys, *args) -> dict:
    assert cli.main(["calc", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- formats


@pytest.fixture
def throwaway_format(monkeypatch):
    """A 6-bit block format (32 values in 26 bytes) that llama.cpp would store, in the one table of formats."""
    fmt = CacheFormat(
        "q6_test", "block", 6, 32, 26, source="a throw-away format for this test", llamacpp=True
    )
    monkeypatch.setitem(formats.FORMATS, fmt.name, fmt)
    return fmt


def test_a_format_added_to_the_table_reaches_the_formula_the_calculator_and_the_cli(
    throwaway_format, capsys
):
    g = presets.preset_geometry("llama-3.2-1b", "reference")  # the runtime that sizes any format
    spec = KvSpec("q6_test", "q6_test")
    assert (
        kv_bytes(g, 1024, spec) == 1024 * 16 * 8 * 2 * (64 // 32) * 26
    )  # tokens x layers x heads x K+V x blocks x bytes
    assert calculate(g, 1024, 1, spec, "mlx-q4").kv_bytes == kv_bytes(g, 1024, spec)
    assert "q6_test" in formats_that_fit(g, 131072, 1, 0, 10**12, KvSpec())  # offered as a lever
    assert calc_json(
        capsys,
        *("--model", "llama-3.2-1b", "--context", "1024", "--kv-format", "q6_test"),
        *("--runtime", "reference"),
    )["kv_bytes"] == kv_bytes(g, 1024, spec)
    mlx = presets.preset_geometry("llama-3.2-1b")  # mlx_lm: no cache class of its holds it
    assert "q6_test" not in formats_that_fit(mlx, 131072, 1, 0, 10**12, KvSpec())
    with pytest.raises(KvError, match="mlx_lm does not store K/V as 'q6_test'") as e:
        calculate(mlx, 1024, 1, spec, "mlx-q4")
    assert e.value.code == "runtime_format"


def test_a_format_llama_cpp_stores_reaches_the_llama_cpp_runtime(throwaway_format, capsys):
    assert (
        "q6_test" in runtime_formats("llama.cpp") and "q6_test" not in formats.mlx_cache_formats()
    )
    r = calc_json(
        capsys,
        "--model",
        "llama-3.2-1b",
        "--context",
        "4096",
        "--runtime",
        "llama.cpp",
        "--kv-format",
        "q6_test",
    )
    assert r["kv_bytes"] == 4096 * 16 * 2 * 8 * 64 // 32 * 26 and "K (q6_test)" in r["log_lines"][0]


def test_a_block_format_whose_block_does_not_divide_the_row_is_refused_not_padded(
    monkeypatch, capsys
):
    """The q6_k experiment of issue 15: 256-value blocks (210 bytes) on Llama-3.2-1B's 64-value rows once showed 26.25
    bits per value (one padded block per row) and were offered as a lever; ggml asserts whole blocks."""
    monkeypatch.setitem(
        formats.FORMATS, "q6_k", CacheFormat("q6_k", "block", 6, 256, 210, llamacpp=True)
    )
    g = presets.preset_geometry("llama-3.2-1b", "reference")  # the runtime that sizes any format
    with pytest.raises(
        KvError, match="whole blocks of 256 values and does not pad them: a 64-value row"
    ) as e:
        kv_bytes(g, 1024, KvSpec("q6_k", "q6_k"))
    assert e.value.code == "format_block"
    assert "q6_k" not in formats_that_fit(g, 1024, 1, 0, 10**12, KvSpec())  # never a lever
    argv = ["calc", "--model", "llama-3.2-1b", "--context", "1024", "--kv-format", "q6_k"]
    assert cli.main([*argv, "--runtime", "reference"]) == 2
    err = capsys.readouterr().err
    assert (
        "a 64-value row is not a multiple of 256" in err
        and "26.25" not in err
        and len(err.strip().splitlines()) == 1
    )
    with pytest.raises(KvError, match="128-value row"):
        formats.FORMATS["q6_k"].row_bytes(128)
    assert (
        formats.FORMATS["turbo3"].row_bytes(64) == 50
    )  # the TurboQuant fork pads: one 128-value block


def test_a_format_of_an_unknown_layout_is_refused_with_its_kind():
    with pytest.raises(KvError, match="'ggml'.*known kinds: plain, mlx, block"):
        CacheFormat("q6_old", "ggml", 6, 32, 26)


def one_sentence(error: KvError, name: str) -> str:
    """The refusal's text, checked to be one line that names the thing refused and ends as a sentence."""
    text = str(error)
    assert repr(name) in text and text.endswith(".") and "\n" not in text, text
    return text


_QUANT = "QuantizedKVCache"


@pytest.mark.parametrize(
    "row, says",
    [  # issue 26's impossible rows, and their kin
        (
            dict(kind="mlx", bits=7, mlx_cache=_QUANT),
            "quantizes to 7 bits; mlx quantizes with 1, 2",
        ),
        (
            dict(kind="block", bits=4, block_values=32, block_bytes=20),
            "ggml's Q4_0 block is 32 values in 18",
        ),
        (dict(kind="block", bits=4, block_values=32, block_bytes=16), "4 bits take 16 bytes"),
        (dict(kind="block", bits=8, block_values=32, block_bytes=64), "(33 to 36 in all)"),
        (dict(kind="mlx", bits=4, mlx_cache="QuantisedKVCache"), "mlx_lm's are KVCache, Quantized"),
        (dict(kind="block", bits=4, block_values=17, block_bytes=10), "blocks of 17 values"),
        (dict(kind="plain", bits=12), "plain values of 12 bits"),
        (dict(kind="plain", bits=8, mlx_cache=_QUANT), "QuantizedKVCache holds mlx ones"),
        (dict(kind="mlx", bits=4, block_values=32, block_bytes=18), "mlx format with a block size"),
        (dict(kind="plain", bits=16, pads=True), "not a block format"),
    ],
)
def test_an_impossible_format_row_is_refused_when_made_in_one_sentence(row, says):
    name = {"mlx": "mlx-q7", "block": "q4_0", "plain": "fp12"}[row["kind"]]
    with pytest.raises(KvError) as e:
        CacheFormat(name, **row)
    assert says in one_sentence(e.value, name)


@pytest.mark.parametrize(
    "extra, name",
    [
        (CacheFormat("q8_0", "block", 8, 32, 34, llamacpp=True), "q8_0"),  # once silently dropped
        (CacheFormat("half", "plain", 16, ggml="f16"), "f16"),  # fp16's llama.cpp name
    ],
)
def test_a_format_listed_twice_is_refused_when_the_table_is_built(extra, name):
    with pytest.raises(KvError, match="is listed twice in the table of formats") as e:
        formats.format_table(*formats.FORMATS.values(), extra)
    one_sentence(e.value, name)
    assert (
        formats.format_table(*formats.FORMATS.values()) == formats.FORMATS
    )  # the table's own rows


def test_one_name_to_cache_mapping_so_every_command_takes_the_same_mlx_formats():
    """kvcore.memory.formats.mlx_cache is how a live cache, a live model's weights and a quality run read a format name:
    what the calculator sizes under mlx_lm is what they make, and a format it refuses they refuse."""
    from kvcore.measure.mlx_quality import parse_format
    from kvcore.measure.models import _weights_kind

    mlx = presets.preset_geometry("llama-3.2-1b")
    assert formats.mlx_cache("mlx-q3") == ("QuantizedKVCache", 3)
    assert formats.mlx_cache("bf16") == ("KVCache", None)
    for name in formats.mlx_cache_formats():
        calculate(mlx, 1024, 1, KvSpec(name, name), "mlx-q4")  # calc sizes it
        assert parse_format(name).bits == formats.mlx_cache(name)[1]  # quality measures it
    assert _weights_kind("mlx-q8") == (None, 8) and _weights_kind("fp16") == ("fp16", None)
    for name in ("mlx-q7", "q8_0", "mlx-q"):
        with pytest.raises(KvError, match=f"Unknown KV format '{name}'"):
            formats.mlx_cache(name)
        with pytest.raises(KvError, match=f"Unknown KV format '{name}' for quality"):
            parse_format(name)
        with pytest.raises(KvError, match=f"'{name}'"):
            calculate(mlx, 1024, 1, KvSpec(name, name), "mlx-q4")


# ---------------------------------------------------------------- the chapters' format choices


def chapter(path: str, **params) -> AppTest:
    """A chapter's page as a reader opens it, in English, with `params` in its URL."""
    at = AppTest.from_file(str(ROOT / "streamlit_app.py"), default_timeout=60)
    for key, value in {"lang": "en", **params}.items():
        at.query_params[key] = value
    at.switch_page(path)
    return at.run()


@pytest.fixture
def throwaway_mlx_format(monkeypatch):
    """A 1-bit format an mlx_lm cache class holds (QuantizedKVCache(bits=1)), in the one table of formats."""
    fmt = CacheFormat(
        "mlx-q1", "mlx", 1, source="a throw-away format", mlx_cache="QuantizedKVCache"
    )
    monkeypatch.setitem(formats.FORMATS, fmt.name, fmt)
    return fmt


def test_a_format_reaches_the_chapters_that_offer_formats_of_its_purpose(
    throwaway_format, throwaway_mlx_format
):
    """Linear growth and the .nbytes trap offer what an mlx_lm cache class holds (both chapters grow mlx_lm's
    cache): the block format is offered on neither, the mlx one on both, and it is drawn when chosen."""
    growth = chapter("pages/3_Linear_growth.py", kv="mlx-q1")
    options = growth.selectbox(key="kv").options
    assert "mlx-q1" in options and "q6_test" not in options
    assert not growth.exception and growth.selectbox(key="kv").value == "mlx-q1"
    assert "mlx-q1" in growth.code[0].value  # the formula names it
    trap = chapter("pages/2_Nbytes_trap.py", fmt="mlx-q1")
    options = trap.selectbox(key="fmt").options
    assert "mlx-q1" in options and "q6_test" not in options
    assert not trap.exception and trap.selectbox(key="fmt").value == "mlx-q1"


def test_a_format_an_mlx_lm_cache_holds_reaches_the_live_probes_and_their_option(
    throwaway_mlx_format,
):
    """The live probes read the formats an mlx_lm cache class holds when asked (a copy taken at import
    time never saw a format added later): the spec a live cache is sized by, `--kv-format`; an
    unknown one is refused in one sentence naming the valid ones, the new one among them."""
    import argparse

    from kvcore.cli import live_args
    from kvcore.measure import caches as live_memory

    assert live_memory.kv_spec("mlx-q1", "fp16") == KvSpec("mlx-q1", "mlx-q1", 64, "fp16")
    assert live_args.kv_format("mlx-q1") == "mlx-q1"
    with pytest.raises(KvError, match=r"Unknown KV format 'mlx-q7'; valid here: .*mlx-q1"):
        live_memory.kv_spec("mlx-q7", "fp16")
    with pytest.raises(argparse.ArgumentTypeError, match=r"one of .*mlx-q1.*, not 'q6_test'"):
        live_args.kv_format("q6_test")  # a block format no mlx_lm cache class holds


def test_a_live_weight_format_reaches_the_live_runs_choice(monkeypatch):
    """The live runs offer the weight formats a live model is built in (kvcore.measure.models), the CLI's default
    chosen."""
    monkeypatch.setattr(
        live_models, "LIVE_WEIGHT_FORMATS", (*live_models.LIVE_WEIGHT_FORMATS, "mlx-q6")
    )
    at = chapter("pages/4_Decode_slowdown.py", src="live")
    weights = at.selectbox(key="live_w_decode")
    assert not at.exception and "mlx-q6" in weights.options and weights.value == "mlx-q4"


# ---------------------------------------------------------------- languages


@pytest.fixture
def language_folder(tmp_path, monkeypatch):
    """A copy of kvsite/i18n/ the site reads for one test (nothing is written into the repository)."""
    import shutil

    from kvsite import i18n

    for path in i18n.FOLDER.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    monkeypatch.setattr(i18n, "FOLDER", tmp_path)
    i18n.texts.cache_clear()
    yield tmp_path
    i18n.texts.cache_clear()


def write_language(folder: Path, code: str, change) -> None:
    """A new language file: English's texts with `change` made to them (a dict of sections)."""
    import yaml

    tree = yaml.safe_load((folder / "en.yaml").read_text(encoding="utf-8"))
    change(tree)
    (folder / f"{code}.yaml").write_text(yaml.safe_dump(tree, allow_unicode=True), encoding="utf-8")


def test_every_language_file_present_has_every_key_of_every_other(language_folder, monkeypatch):
    """A new language whose file lacks a key once showed ⟨common.context⟩ on the pages (parity was checked for
    ja alone): now the file is refused when it is read, naming the file and the key, and check_languages reads
    every file present. Its other contracts: listed in LANGUAGES, the same {placeholders}, no key English lacks."""
    from kvsite import i18n

    i18n.check_languages()  # the files as they are
    monkeypatch.setitem(i18n.LANGUAGES, "xx", "Throwaway")
    write_language(language_folder, "xx", lambda t: t["common"].pop("context"))
    sentence = (
        "The language file xx.yaml lacks 1 key(s) of en.yaml: common.context; every key is in"
    )
    for check in (i18n.check_languages, lambda: i18n.texts("xx")):
        with pytest.raises(KvError, match=re.escape(sentence)) as e:
            check()
        assert "\n" not in str(e.value) and str(e.value).endswith(".")
    at = chapter("pages/1_Mechanism.py", lang="xx")  # the pages say it, not ⟨common.context⟩
    assert at.exception and sentence in at.exception[0].message

    write_language(language_folder, "xx", lambda t: t["common"].update(contxt="typo"))
    i18n.texts.cache_clear()
    with pytest.raises(KvError, match=r"xx.yaml has 1 key\(s\) en.yaml does not: common.contxt;"):
        i18n.texts("xx")
    first = next(k for k, v in i18n.texts("en").items() if "{" in v)
    section, key = first.split(".", 1)

    def placeholders(tree):
        node = tree[section]
        *path, last = key.split(".")
        for part in path:
            node = node[part]
        node[last] = "no values named"

    write_language(language_folder, "xx", placeholders)
    with pytest.raises(
        KvError, match=f"xx.yaml fills other {{placeholders}} than en.yaml in {first};"
    ):
        i18n.check_languages()
    write_language(language_folder, "xx", lambda t: t.update(errors={"rec_yamll": "a typo"}))
    with pytest.raises(
        KvError, match=r"xx.yaml words 1 error\(s\) kvcore does not raise: errors.rec_yamll;"
    ):
        i18n.check_languages()
    write_language(language_folder, "yy", lambda t: None)  # a whole file, but not on the switch
    with pytest.raises(KvError, match=r"yy.yaml is not in kvsite.i18n.LANGUAGES"):
        i18n.check_languages()


# ---------------------------------------------------------------- published and uploaded runs

CITED_RUN = ROOT / "recordings" / "published-rapid-mlx-586-m3-ultra-llama-3.1-8b-4bit.yaml"


def _cited(change) -> bytes:
    """A bundled cited run (its URL, author, date, chip, preset...) with `change` made to its data, as an upload's
    bytes."""
    import yaml

    from kvcore.recordings import store as recordings

    data = yaml.safe_load(CITED_RUN.read_text(encoding="utf-8"))
    change(data)
    return recordings.dump_text(data).encode()


def _drop(section: str, key: str):
    return lambda d: d[section].pop(key)


def _set(section: str, key: str, value):
    return lambda d: d[section].update({key: value})


@pytest.mark.parametrize(
    "change, code, says",
    [  # issue 26: each loaded before; "URL on github.com" and "settings/context_rule required" lived in tests
        (
            _set("hardware", "chip", "M9 Ultra"),
            "rec_chip",
            "hardware.chip 'M9 Ultra' is not a chip",
        ),
        (_set("hardware", "chip_stated", False), "rec_chip_stated", "chip_stated is false"),
        (
            _set("model", "preset", "llama-3.1-8bb"),
            "rec_preset",
            "model.preset 'llama-3.1-8bb' is not",
        ),
        (_set("citation", "date", "2026-02-30"), "rec_date", "citation.date '2026-02-30' is not a"),
        (_set("citation", "date", "2999-01-01"), "rec_date", "not after today"),
        (
            _set("citation", "url", "https://example.com/run"),
            "rec_url_host",
            "must be a page on github",
        ),
        (_drop("citation", "settings"), "rec_missing", "'citation.settings' must be"),
        (_drop("citation", "context_rule"), "rec_missing", "'citation.context_rule' must be"),
        (
            _drop("citation", "command"),
            "rec_missing",
            "'citation.command' must be",
        ),  # a decode series
        (_drop("runtime", "version"), "rec_missing", "'runtime.version' must be"),
        (_drop("model", "quantization"), "rec_missing", "'model.quantization' must be"),
        (_set("model", "unusual", True), "rec_missing", "'model.architecture_note' must be"),
        (
            _set("model", "config", {"model_type": "nope"}),
            "rec_config",
            "model.config cannot be read",
        ),
    ],
)
def test_a_published_run_that_breaks_a_rule_is_refused_on_upload_in_one_sentence(
    change, code, says
):
    from kvcore.recordings import store as recordings
    from kvsite import i18n

    recordings.parse_bytes(_cited(lambda d: None), "run.yaml")  # the run as bundled loads
    with pytest.raises(recordings.RecordingError) as e:
        recordings.parse_bytes(_cited(change), "run.yaml")
    text = str(e.value)
    assert (
        e.value.code == code and says in text and text.startswith("run.yaml: ") and "\n" not in text
    )
    assert i18n.has("ja", f"errors.{code}")  # the site says it in Japanese too
    assert "run.yaml" in i18n.error_text("ja", e.value)


def test_a_key_written_twice_in_a_run_is_refused_not_read_as_its_last_value():
    from kvcore.recordings import store as recordings

    raw = _cited(lambda d: None).replace(b"kv_format: fp16", b"kv_format: fp16\n  kv_format: q4_0")
    with pytest.raises(recordings.RecordingError, match="repeats the key 'kv_format' of its") as e:
        recordings.parse_bytes(raw, "run.yaml")
    assert e.value.code == "rec_duplicate_key" and "line " in str(e.value)
    twice = b"sections:\n  decode:\n    - {context: 1, tokens_per_s: 2, context: 3}\n"
    with pytest.raises(recordings.RecordingError, match="repeats the key 'context'"):
        recordings.read_yaml(twice.decode(), "run.yaml")
    recordings.read_yaml(
        "a: {b: 1}\nc: {b: 2}\nd: [{b: 1}, {b: 1}]\n"
    )  # the same key in two mappings


def test_a_misspelt_preset_is_named_not_reported_as_no_model():
    """A file that skipped validation (kvcore.recordings.check refuses it on loading): the decode model names the
    preset rather than saying the run names no model (decode_model once swallowed the error into "no_model")."""
    import yaml

    from kvcore.fits import decode as decode_runs
    from kvcore.recordings.store import Recording

    data = yaml.safe_load(_cited(_set("model", "preset", "llama-3.1-8bb")))
    with pytest.raises(KvError, match="'llama-3.1-8bb'"):
        decode_runs.no_fit_reason(Recording(None, data))
    named = Recording(None, yaml.safe_load(_cited(_set("hardware", "chip", "M4 Max"))))
    assert decode_runs.chip_for(named) is None  # a family whose variant the source does not state


# ---------------------------------------------------------------- families


def test_a_family_added_to_the_table_is_parsed_by_its_row_and_an_unknown_one_is_refused(
    monkeypatch,
):
    config = dict(preset_files.load_preset("llama-3.2-1b")["config"], model_type="throwaway_llama")
    with pytest.raises(KvError, match="throwaway_llama"):
        parse_config(config, "config.json", MLX_LM)
    monkeypatch.setitem(
        families.FAMILIES,
        "throwaway_llama",
        families.Family("throwaway_llama", defaults={"head_dim": 32}),
    )
    g = parse_config({k: v for k, v in config.items() if k != "head_dim"}, "config.json", MLX_LM)
    assert g.model_type == "throwaway_llama" and {layer.k_dim for layer in g.layers} == {
        32
    }  # the row's default applies


@pytest.mark.parametrize(
    "change, named",
    [
        (dict(windows={"mlx_lm": "layer_types|sometimes"}), "'sometimes'"),
        (dict(ffn="moe_mixtral"), "'moe_mixtral'"),
        (dict(attention_extras="all_bias"), "'all_bias'"),
        (dict(attention="linear_only"), "'linear_only'"),
    ],
)
def test_a_family_with_an_unknown_rule_or_layout_is_refused_naming_it(monkeypatch, change, named):
    config = dict(preset_files.load_preset("llama-3.2-1b")["config"], model_type="throwaway_llama")
    monkeypatch.setitem(
        families.FAMILIES, "throwaway_llama", families.Family("throwaway_llama", **change)
    )
    with pytest.raises(KvError, match=named):
        parse_config(config, "config.json", MLX_LM)


@pytest.mark.parametrize("key", ["mlx-lm", "llama_cpp", "vllm"])
def test_a_family_stating_window_rules_for_an_unknown_key_is_refused_when_made(key):
    """A window key no runtime reads (a typo of mlx_lm, llama.cpp, or a runtime not registered) would leave that
    runtime on `none`, every layer full, without a word: refused when the row is made, in one sentence."""
    with pytest.raises(
        KvError, match=f"states window rules for '{key}', which is no runtime's"
    ) as e:
        families.Family("throwaway_gemma", windows={"reference": "pattern", key: "pattern"})
    one_sentence(e.value, key)
    with pytest.raises(KvError, match=f"'{key}'"):  # a row changed later is made again, and checked
        dataclasses.replace(families.FAMILIES["llama"], windows={key: "none"})


def test_every_runtime_reads_a_window_key_of_the_family_table():
    """families.WINDOW_KEYS is the list of rule sets; each registered runtime applies one of them."""
    assert {rt.windows for rt in runtimes.RUNTIMES.values()} <= set(families.WINDOW_KEYS)
    for family in families.FAMILIES.values():
        families.check_window_keys(family)


def test_a_shared_expert_is_its_own_field_not_the_gated_query():
    """Qwen3-Next has both; a family with a gated query alone gets no shared expert (issue 15)."""
    config = preset_files.load_preset("qwen3-next-80b-a3b")["config"]
    real = parse_config(config, "config.json", MLX_LM)
    h, inter = config["hidden_size"], config["shared_expert_intermediate_size"]
    moe_layers = config["num_hidden_layers"]
    with pytest.MonkeyPatch.context() as m:
        m.setitem(
            families.FAMILIES,
            "qwen3_next",
            dataclasses.replace(families.FAMILIES["qwen3_next"], shared_expert=False),
        )
        without = parse_config(config, "config.json", MLX_LM)
    assert real.params.total - without.params.total == moe_layers * (
        3 * h * inter + h
    )  # the expert and its gate


# ---------------------------------------------------------------- runtimes


@pytest.fixture
def throwaway_runtime(monkeypatch):
    """A runtime that counts tokens under the config's own window rules (as vLLM would), registered for one test."""
    rt = TokenRuntime(
        "throwaway_rt", "throwaway_rt (a test's runtime)", "sliding_ignored", windows="reference"
    )
    monkeypatch.setitem(runtimes.RUNTIMES, rt.name, rt)
    return rt


def test_a_runtime_added_to_the_registry_reaches_the_engine_the_calculator_and_the_cli(
    throwaway_runtime, capsys
):
    g = presets.preset_geometry("mistral-7b-v0.1", "throwaway_rt")
    assert (
        g.runtime == "throwaway_rt" and g.count("sliding") == 32
    )  # the reference rules it applies
    assert runtimes.runtime_of(g) is throwaway_runtime
    r = calculate(g, 10000, 1, KvSpec(), "bf16")
    assert r.kv_bytes == kv_bytes(g, 10000, KvSpec()) and r.runtime == "throwaway_rt"
    assert (
        calc_json(
            capsys, "--model", "mistral-7b-v0.1", "--context", "10000", "--runtime", "throwaway_rt"
        )["kv_bytes"]
        == r.kv_bytes
    )


def test_an_unknown_runtime_and_a_runtime_of_unknown_window_rules_are_refused(monkeypatch, capsys):
    assert (
        cli.main(["calc", "--model", "llama-3.2-1b", "--context", "100", "--runtime", "no_such_rt"])
        == 2
    )
    assert "'no_such_rt'" in capsys.readouterr().err
    rt = TokenRuntime("odd_rt", "odd_rt", "sliding_ignored", windows="odd_rules")
    with pytest.raises(KvError, match="'odd_rules', which no model family states"):
        runtimes.checked((*runtimes.RUNTIMES.values(), rt))


def test_a_runtime_class_that_leaves_out_a_question_is_refused_when_it_is_defined():
    """A runtime in a module of its own subclasses kvcore.runtimes.base.Runtime; one without every method of
    REQUIRED is refused by its class statement, naming what it lacks."""
    with pytest.raises(KvError, match=r"Runtime class Half does not define sizes, largest_context"):

        class Half(Runtime):
            def kv_bytes(self, geometry, context, spec, sequences=1, options=None):
                return 0

    class Whole(TokenRuntime):  # a subclass of a whole runtime inherits its answers
        pass

    assert Whole("whole_rt", "whole_rt", "sliding_ignored").name == "whole_rt"


def test_a_runtime_whose_mac_build_is_not_one_of_its_backends_is_refused_when_it_is_defined():
    """The Calculator offers a runtime's Mac build first (mac_backend): a name its backends do not have is refused
    by the class statement, never a silent first choice."""
    with pytest.raises(KvError, match=r"Runtime class Odd names 'vulkan' its Mac build"):

        class Odd(TokenRuntime):
            backends = ("cpu", "metal")
            mac_backend = "vulkan"

    class Mac(TokenRuntime):
        backends = ("cpu", "metal")
        mac_backend = "metal"

    assert Mac.mac_backend in Mac.backends


# A runtime module whose class leaves out every question (or a registry entry of unknown window rules),
# met while the CLI imports the registry: the module's attributes are made only when it is imported from.
BROKEN_RUNTIME = """
import runpy, sys, types
from kvcore.runtimes.base import Runtime
from kvcore.runtimes.token import TokenRuntime

def broken(name):
    if {odd_windows}:
        return TokenRuntime("odd_rt", "odd_rt", "sliding_ignored", windows="odd_rules")
    class Half(Runtime):
        pass

module = types.ModuleType("kvcore.runtimes.reference")
module.__getattr__ = broken
sys.modules[module.__name__] = module
sys.argv = ["kvcore", "calc", "--model", "llama-3.2-1b", "--context", "100"]
runpy.run_module("kvcore", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "odd_windows, words",
    [
        (False, "Runtime class Half does not define kv_bytes"),
        (True, "Runtime odd_rt applies the window rules of 'odd_rules'"),
    ],
)
def test_a_runtime_that_breaks_its_contract_stops_the_cli_in_one_sentence(odd_windows, words):
    """`python -m kvcore` with a runtime refused as the registry loads: one line on stderr naming
    it, exit 2, no traceback."""
    import subprocess
    import sys

    code = BROKEN_RUNTIME.format(odd_windows=odd_windows)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.stderr.startswith(f"error: kvcore cannot start: {words}"), done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.returncode == 2
    assert done.stdout == ""


@pytest.mark.parametrize(
    "setting, words",
    [
        (dict(flag="ubatch"), "must start with '--'"),
        (dict(help=""), "needs its options field, its help text and its URL key"),
        (dict(key=""), "needs its options field, its help text and its URL key"),
        (dict(low=4096), "0 < low <= default <= high"),
        (dict(high=0), "0 < low <= default <= high"),
    ],
)
def test_a_runtime_setting_without_its_help_key_or_range_is_refused(setting, words):
    fields = dict(field="n_ubatch", flag="--ubatch", default=512, help="micro-batch", key="ub")
    fields.update(low=1, high=1 << 20)
    Setting(**fields)  # the whole one is taken
    with pytest.raises(KvError, match=words):
        Setting(**{**fields, **setting})


def test_two_runtimes_of_one_name_or_a_format_kvcore_does_not_know_are_refused():
    with pytest.raises(KvError, match="'mlx_lm' is empty or taken"):
        runtimes.checked((*runtimes.RUNTIMES.values(), TokenRuntime("mlx_lm", "again", "x")))
    odd = TokenRuntime("odd_rt", "odd_rt", "sliding_ignored", kv_formats=("fp16", "fp5"))
    with pytest.raises(KvError, match="fp5"):
        runtimes.checked((odd,))


def test_a_runtime_whose_report_does_not_add_up_is_refused():
    """The calculator's per-layer table and its total come from one report: a runtime whose rows do not sum to
    its KV bytes is refused with both numbers, never shown."""

    class Leaky(TokenRuntime):
        def sizes(self, geometry, context, spec, sequences, options):
            result = super().sizes(geometry, context, spec, sequences, options)
            return {**result, "per_layer": result["per_layer"][1:]}  # one layer lost

    rt = Leaky("leaky_rt", "leaky_rt", "sliding_ignored")
    g = presets.preset_geometry("llama-3.2-1b")
    with pytest.raises(
        KvError, match=r"Runtime leaky_rt's report for llama-3.2-1b does not add up"
    ):
        rt.report(g, 4096, KvSpec(), 1, None)


def test_a_setting_with_choices_takes_only_those():
    """A whole-number setting that takes only some values (a block size of 16, 32, 64 or 128) refuses 17 in one
    sentence, and a setting whose default is not among its choices is refused when it is made."""
    block = Setting(
        "block", "--block-size", 32, "block size", "bs", 1, 256, choices=(16, 32, 64, 128)
    )
    assert block.check(64) == 64
    with pytest.raises(KvError, match=r"--block-size must be one of 16, 32, 64, 128, not 17\."):
        block.check(17)
    with pytest.raises(KvError, match="its choices must hold its default"):
        Setting("block", "--block-size", 17, "block size", "bs", 1, 256, choices=(16, 32))


def test_a_runtime_setting_without_its_texts_is_one_sentence_on_the_page(monkeypatch):
    """A runtime whose setting has no label in the page's language: the Calculator says which keys are missing,
    in that language, instead of showing a label like ⟨calc.block_size⟩."""

    class Blocky(TokenRuntime):
        settings = (
            Setting("block", "--block-size", 32, "size", "bs", 1, 256, choices=(16, 32, 64)),
        )

    rt = Blocky("blocky_rt", "blocky_rt (a test's runtime)", "sliding_ignored", windows="reference")
    monkeypatch.setitem(runtimes.RUNTIMES, rt.name, rt)
    for lang in ("en", "ja"):
        at = chapter("pages/8_Calculator.py", lang=lang, rt="blocky_rt")
        said = " ".join(e.value for e in at.error)
        shown = re.sub(r"\\(.)", r"\1", said)  # as the reader reads it
        assert not at.exception and "calc.block_size" in shown and "⟨" not in shown
        assert ("設定" in shown) == (lang == "ja")


def test_a_short_label_too_long_for_a_phones_legend_is_refused_not_cut():
    """A run's short_label is what a phone's legend shows whole: one longer than 35 characters is refused in one
    sentence naming the limit (it was cut with an ellipsis, unsaid)."""
    import yaml

    from kvcore.recordings.store import Recording, RecordingError, validate

    data = yaml.safe_load(_cited(_set("hardware", "chip", "M3 Max (40-core GPU)")))
    validate(dict(data, short_label="M3 Max · Llama-3.3-70B · mlx-lm"))  # 31: taken
    with pytest.raises(RecordingError, match="short_label must be at most 35 characters, not 44"):
        validate(dict(data, short_label="x" * 44))
    assert Recording  # the store's own type, as every bundled file loads into
