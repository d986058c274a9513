"""The attack on the site's inputs as tests (issue 29): hostile links, pasted and uploaded configs, GGUF headers and
recordings, each answered with one sentence in the page's language, never a traceback, a server path or the site's
last-line sentence (which would mean a page let an exception through); uploaded text shown as text."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import yaml
from app_helpers import PAGES, ROOT, measured_recording, page, texts

from harness.inputs import PAST_ANY_MACHINE, preset_config
from kvcore.inputs.preset_files import load_preset
from kvcore.recordings import store as recordings
from kvcore.timing.hardware import chips
from kvsite import i18n

JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
TRACEBACK = re.compile(r"Traceback|File \"|line \d+, in |\b[A-Z][A-Za-z]*(Error|Exception)\b")
# What a link may carry into a number widget: the values Streamlit's own binding raised on (inf, 1e400, 5,000 digits
# came back as OverflowError or ValueError tracebacks), and the empty string
HOSTILE = ["inf", "-inf", "nan", "1e400", "9" * 5000, ""]
CALC = "pages/8_Calculator.py"
KINDS = ("slider", "select_slider", "number_input", "text_input", "text_area")
# States in which more URL-bound widgets appear (llama.cpp's micro-batch, a custom machine's memory, the RAM box of
# a chip without a list of memory sizes)
STATES = {
    CALC: [
        {},
        {"rt": "llama.cpp"},
        {"chip": "custom"},
        {"chip": next(c.chip for c in chips() if not c.memory_gb)},
    ]
}
ALSO = {"pages/9_Recordings.py": ["rec"]}  # a page without a number widget: its URL choice


def bound_widgets(path: str, base: dict) -> list[str]:
    """The URL keys of the page's number, slider and text widgets in this state, found by running it."""
    at = page(path, "en", **base)
    assert not at.exception, at.exception
    keys = {
        getattr(el.proto, "query_param_key", "")
        for kind in KINDS
        for el in at.get(kind)
        if el.key != "lang__w"
    }
    keys.discard("")
    if path == CALC:
        keys.add("ctx")  # bound by kvsite.sections.calc.source.context_inputs
    if path == "pages/3_Linear_growth.py":
        keys.add("lctx")  # read from the link inside the chart
    return sorted(keys | set(ALSO.get(path, [])))


def one_sentence_at_most(at, lang: str) -> list[str]:
    """No exception, not the last line's sentence, at most one error and one warning, each one line in `lang` with no
    traceback-like text and no server path."""
    out = []
    if at.exception:
        return [f"exception: {at.exception[0].message.splitlines()[0][:200]}"]
    failed = i18n.translate(lang, "site.failed")
    for kind in ("error", "warning"):
        shown = [str(e.value) for e in getattr(at, kind)]
        shown = [s for s in shown if not s.startswith(i18n.translate(lang, "site.broken")[:10])]
        if len(shown) > 1:
            out.append(f"{len(shown)} {kind}s: {[s[:80] for s in shown]}")
        for s in shown:
            plain = re.sub(r"'[^']*'", "", s)  # less the quoted input
            if failed in s:
                out.append(f"the last line of defence fired: {s[:200]}")
            if TRACEBACK.search(plain) or str(ROOT) in s or "/site-packages/" in s:
                out.append(f"traceback-like {kind}: {s[:200]}")
            if len(s) > 700 or "\n" in s.strip():
                out.append(f"{kind} is not one short sentence: {s[:200]!r}")
            if lang == "ja" and not JAPANESE.search(plain):
                out.append(f"{kind} not in Japanese: {s[:200]}")
    return out


@pytest.mark.parametrize("path", PAGES)
def test_every_bound_widget_through_hostile_link_values(rec_dir, path):
    """inf, -inf, nan, 1e400, 5,000 digits and the empty string in every URL-bound number, slider and text widget
    (a number the page cannot take opens the widget at its default, with one sentence)."""
    failures, runs = [], 0
    for base in STATES.get(path, [{}]):
        for key in bound_widgets(path, base):
            for i, value in enumerate(HOSTILE):
                lang = ("ja", "en")[i % 2]
                at = page(path, lang, **{**base, key: value})
                runs += 1
                failures += [
                    f"?{key}={value[:12]} {base} ({lang}): {p}"
                    for p in one_sentence_at_most(at, lang)
                ]
    assert runs, f"no bound widget found on {path}"
    assert not failures, f"{len(failures)} failures in {runs} runs:\n" + "\n".join(failures[:30])


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_an_odd_number_in_a_link_is_named_in_one_sentence(rec_dir, lang):
    at = page(CALC, lang, seq="1e400")
    assert not at.exception and not at.error
    [warning] = [w.value for w in at.warning]
    assert "seq" in warning and "1e400" in warning and "40" in warning
    assert (JAPANESE.search(warning) is not None) == (lang == "ja")
    assert at.number_input(key="seq").value == 1  # the default
    at = page(CALC, lang, ctx="9" * 5000)
    assert not at.exception and "9" * 100 not in texts(at)


# ---------------------------------------------------------------- configs pasted into the calculator


def config(name: str, **fields) -> str:
    return json.dumps(preset_config(name, **fields))


PASTED = {  # what -> (config text, words of the English error, or None: the page answers without one)
    "no attention layer": (config("qwen3-next-80b-a3b", num_hidden_layers=3), None),
    "sums past any machine": (
        config("llama-3.2-1b", **PAST_ANY_MACHINE),
        "outside the range",
    ),
    "q_lora_rank 1e308": (config("deepseek-v3", q_lora_rank=1e308), "q_lora_rank"),
    "q_lora_rank negative": (config("deepseek-v3", q_lora_rank=-5), "q_lora_rank"),
    "flag as a string": (config("qwen3-8b", use_sliding_window="yes"), "use_sliding_window"),
    "layer_types of dicts": (
        config("llama-3.2-1b", layer_types=[{"a": 1}] * 16),
        "layer_types",
    ),
    "kv heads above heads": (config("llama-3.2-1b", num_key_value_heads=64), "num_key_value_heads"),
    "4,301 digits": (config("llama-3.2-1b")[:-1] + ', "x": ' + "9" * 4301 + "}", "4,301 digits"),
    "990 kB model_type": (config("llama-3.2-1b", model_type="q" * 990_000), "model_type"),
    "330,000 mlp_only_layers": (
        config("qwen3-30b-a3b", num_hidden_layers=1024, mlp_only_layers=[0] * 300_000),
        "mlp_only_layers",
    ),
}


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("what", list(PASTED))
def test_a_hostile_pasted_config_gets_one_sentence(rec_dir, what, lang):
    text, words = PASTED[what]
    at = page(CALC, lang, msrc="config")
    at.text_area(key="pasted").input(text).run()
    assert not (p := one_sentence_at_most(at, lang)), p
    errors = [e.value for e in at.error]
    if words is None:
        assert not errors, errors
        assert at.markdown or at.metric  # the model is sized (its state only)
    else:
        assert len(errors) == 1, errors
        if lang == "en":
            assert words in errors[0], errors[0][:300]


# ---------------------------------------------------------------- GGUF files (a browser's header: tests/test_gguf_browser.py)


def test_a_hostile_gguf_file_gets_one_sentence(rec_dir, tmp_path):
    import gguf_files

    arch, keys = gguf_files.metadata(load_preset("llama-3.2-1b")["config"])
    cases = {
        "kv0.gguf": gguf_files.write(
            tmp_path / "kv0.gguf", arch, {**keys, ".attention.head_count_kv": 0}, {}
        ),
        "kv64.gguf": gguf_files.write(
            tmp_path / "kv64.gguf",
            arch,
            {**keys, ".attention.head_count": 4, ".attention.head_count_kv": 64},
            {},
        ),
        "arch.gguf": gguf_files.write(
            tmp_path / "arch.gguf",
            "z" * 200_000,
            {(arch + k if k.startswith(".") else k): v for k, v in keys.items()},
            {},
            vocab=False,
        ),
    }
    arch, keys = gguf_files.metadata(
        {**load_preset("qwen3-next-80b-a3b")["config"], "num_hidden_layers": 2}
    )
    cases["state-only.gguf"] = gguf_files.write(tmp_path / "state-only.gguf", arch, keys, {})
    for i, (name, path) in enumerate(cases.items()):
        lang = ("ja", "en")[i % 2]
        at = page(CALC, lang, msrc="gguf")
        at.text_input(key="gguf_path").set_value(str(path)).run()
        assert not (p := one_sentence_at_most(at, lang)), (name, p)
        if name == "state-only.gguf":  # two recurrent blocks, no attention: sized by their state
            assert not at.error, [e.value[:200] for e in at.error]
            continue
        assert len(at.error) == 1 and len(at.error[0].value) < 600, (
            name,
            [e.value[:200] for e in at.error],
        )


# ---------------------------------------------------------------- uploaded recordings: text is text


def hostile_run() -> bytes:
    data = measured_recording()
    data["title"] = "![pixel](https://example.com/p.png) **bold** [click](https://example.com)"
    data["label"] = "![x](https://example.com/x.png) run"
    data["provenance"]["machine"]["chip"] = "Apple M9 ![y](https://example.com/y.png)"
    data["provenance"]["note"] = "[a link](https://example.com) and :red[red]"
    return yaml.safe_dump(data, sort_keys=False).encode("utf-8")


UNESCAPED = re.compile(
    r"(?<!\\)!\[|(?<!\\)\]\(|(?<!\\)\*\*bold"
)  # an image, a link, bold: unescaped


def shown_as(markdown: str) -> str:
    """What a reader sees of escaped markdown (a backslash before punctuation dropped, and the invisible word joiner
    that keeps an address from becoming a link)."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("\u2060", "")


def test_an_uploaded_runs_title_and_note_render_as_plain_text(rec_dir):
    at = page("pages/9_Recordings.py", "en")
    at.file_uploader(key="rec_upload").set_value(
        ("x.yaml", hostile_run(), "application/x-yaml")
    ).run()
    assert not at.exception and not at.error
    success = at.success[0].value
    assert "![pixel](https://example.com/p.png)" in shown_as(success), success
    assert not UNESCAPED.search(success), success
    at.selectbox(key="rec__w").select(
        next(o for o in at.selectbox(key="rec__w").options if "x.yaml" in o or "run" in o)
    )
    at.run()
    shown = "\n".join(str(m.value) for m in [*at.markdown, *at.caption])
    assert "Apple M9 ![y](https://example.com/y.png)" in shown_as(shown), shown[:500]
    for block in shown.split("\n"):
        if "example" in block:
            assert not UNESCAPED.search(block), block


def test_an_uploaded_quality_run_without_bytes_per_token_shows_its_table(rec_dir):
    data = measured_recording()
    data["title"] = "quality without bytes"
    data["sections"] = {
        "quality": [
            {
                "tokens": 64,
                "kv_format": "fp16",
                "perplexity": 9.1,
                "kl_vs_baseline": 0.0,
                "top1_agreement": 1.0,
            },
            {
                "tokens": 64,
                "kv_format": "mlx-q4",
                "perplexity": 9.4,
                "kl_vs_baseline": 0.02,
                "top1_agreement": 0.95,
            },
        ]
    }
    at = page("pages/9_Recordings.py", "ja")
    at.file_uploader(key="rec_upload").set_value(
        ("q.yaml", yaml.safe_dump(data, sort_keys=False).encode(), "application/x-yaml")
    ).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.switch_page("pages/6_Savings.py").run()
    picker = at.selectbox(key="src__w")  # the quality section's source
    picker.select(next(o for o in picker.options if "cpu-demo" in o and "アップロード" in o)).run()
    assert not (p := one_sentence_at_most(at, "ja")), p
    assert "9.40" in texts(at)  # the run's table, its perplexity


# ---------------------------------------------------------------- saves, and the last line of defence


def test_a_leftover_temporary_file_warns_on_no_page(rec_dir):
    local = rec_dir / "local"
    local.mkdir(exist_ok=True)
    (local / f"{recordings.TEMP_PREFIX}k1ll3d.yaml").write_text("", encoding="utf-8")
    (local / f"{recordings.TEMP_PREFIX}wh0le.yaml").write_text(
        yaml.safe_dump(measured_recording()), encoding="utf-8"
    )
    for path in (None, "pages/4_Decode_slowdown.py"):
        at = page(path, "en")
        assert not at.exception and not at.warning, [w.value for w in at.warning]


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_last_line_of_defence_shows_one_sentence_and_no_path(rec_dir, tmp_path, lang):
    """An exception no page caught (here a page that raises one naming a server path), in a copy of the site."""
    shutil.copytree(
        ROOT / "pages", tmp_path / "pages", ignore=shutil.ignore_patterns("__pycache__")
    )
    app = str(shutil.copy(ROOT / "streamlit_app.py", tmp_path))
    (tmp_path / "pages" / "1_Mechanism.py").write_text(
        'from kvsite.frame.page import setup\nf = setup("mechanism")\n'
        'raise OverflowError("/srv/kvsite/kvcore/secret.py line 1: cannot convert float infinity")\n',
        encoding="utf-8",
    )
    at = page("pages/1_Mechanism.py", lang, app=app)
    assert not at.exception
    assert [e.value for e in at.error] == [i18n.translate(lang, "site.failed")]
    assert "/srv/" not in texts(at) and "Overflow" not in texts(at)


# ---------------------------------------------------------------- digits that are not 0-9 (issue 38)

TRAP = "pages/2_Nbytes_trap.py"


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize(
    "path, key", [(CALC, "ctx"), (TRAP, "updates"), (CALC, "seq"), (CALC, "mstep")]
)
def test_a_superscript_digit_in_a_link_is_one_sentence_at_most(rec_dir, path, key, lang):
    """'²'.isdigit() is True and int('²') a ValueError: ?ctx=² failed the whole Calculator, ?updates=² the trap's
    section. Each now opens the page with one sentence at most (or the field's default), never a traceback."""
    for value in ("²", "300, ²", "٣"):
        at = page(path, lang, **{key: value})
        assert one_sentence_at_most(at, lang) == [], (key, value)
    if key == "ctx":
        assert at.number_input(key="ctx").value == 32768  # the default


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_a_superscript_digit_typed_into_the_custom_updates_is_one_sentence(rec_dir, lang):
    at = page(TRAP, lang)
    at.text_input(key="updates").input("300, ²").run()
    assert one_sentence_at_most(at, lang) == []
    [error] = [e.value for e in at.error]
    assert "'300, ²'" in error and i18n.translate(lang, "site.failed") not in error


# ---------------------------------------------------------------- markdown from a link or an upload (issue 38)

EVIL = "[click here](https://evil.example/login) ![px](https://evil.example/p.png) **bold**"


def live_markdown(value: str) -> list[str]:
    """What in `value` markdown would render as a link, an image, an address or emphasis: each mark left after
    the escaped characters (\\x) are taken out."""
    bare = re.sub(r"\\.", "", value)
    marks = [m for m in ("](", "![", "**", "<") if m in bare]
    return marks + (["an address"] if "https://evil" in value else [])


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize(
    "path, key",
    [
        ("pages/4_Decode_slowdown.py", "src"),
        (TRAP, "src"),
        (TRAP, "updates"),
        (CALC, "k"),
        (CALC, "v"),
    ],
)
def test_markdown_in_a_link_is_shown_as_text_and_cut_short(rec_dir, path, key, lang):
    """?src= went whole and unescaped into the page's warning (a live link and a remote image inside the site's own
    words; 500,000 characters -> a 500,123-character warning); ?updates=, ?k=, ?v= through quote(), a short prefix,
    but unescaped. Every value echoed is text now, a short prefix of it."""
    for value in (EVIL, EVIL + "x" * 500_000):
        at = page(path, lang, **{key: value})
        assert one_sentence_at_most(at, lang) == [], key
        said = [str(e.value) for kind in ("error", "warning") for e in getattr(at, kind)]
        assert said, f"?{key}= was not named"
        for s in said:
            assert live_markdown(s) == [] and len(s) < 700, s[:300]
        if value == EVIL:  # quoted as written (a 500,000-character list is named by its length)
            assert "click here" in re.sub(r"\\(.)", r"\1", " ".join(said))


def test_an_uploads_short_label_is_text_in_the_decode_chapters_run_table(rec_dir):
    """The run table under the slowdown-vs-bytes chart rendered an upload's short_label as markdown."""
    data = measured_recording()
    data["provenance"]["machine"]["chip"] = "Apple M4 Max"  # a Mac run: in the table at once
    data["short_label"] = "[x](https://evil.example) ![i](https://evil.example/p.png)"[:35]
    at = page("pages/9_Recordings.py", "en")
    at.file_uploader(key="rec_upload").set_value(
        ("mine.yaml", yaml.safe_dump(data).encode(), "application/x-yaml")
    )
    at.run()
    assert at.success, [e.value for e in at.error]
    at.switch_page("pages/4_Decode_slowdown.py").run()
    assert not at.exception
    tables = [m.value for m in at.markdown if "evil" in m.value]
    assert tables and all(live_markdown(t) == [] for t in tables), tables


def test_an_uploads_quality_rows_are_text_in_the_savings_tables(rec_dir):
    """An uploaded run's quality rows name their caches in its own words (kv_format, label): the Savings tables
    show them as written, never a link or an image (issue 38: no markdown from an upload)."""
    data = yaml.safe_load(
        (ROOT / "recordings" / "measured-linux-cpu-smollm2-135m.yaml").read_text(encoding="utf-8")
    )
    evil = "[x](https://evil.example) ![i](https://evil.example/p.png)"
    for r in data["sections"]["quality"]:
        r["kv_format"] = r["label"] = evil + r["label"]
    at = page("pages/9_Recordings.py", "en")
    at.file_uploader(key="rec_upload").set_value(
        ("mine.yaml", yaml.safe_dump(data, allow_unicode=True).encode(), "application/x-yaml")
    )
    at.run()
    at.query_params["src"] = "upload-mine"
    at.switch_page("pages/6_Savings.py").run()
    assert not at.exception, [e.value for e in at.exception]
    shown = [m.value for m in at.markdown if "evil" in m.value]
    errors = [e.value for e in at.error]
    # no link, image or address from the upload (the site's own words may be bold)
    live = [(s[:80], m) for s in shown + errors if (m := set(live_markdown(s)) - {"**"})]
    assert (shown or errors) and not live, live
