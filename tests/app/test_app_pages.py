"""Every page, both languages, from the bundled and a temporary recordings folder; controls drive the data."""

from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path

import pytest
import yaml
from app_helpers import (
    CPU_DEMO,
    PAGES,
    chart_labels,
    charts,
    english_label,
    english_runs,
    page,
    source_texts,
    texts,
)

from kvcore.inputs.preset_files import preset_names
from kvcore.memory.formats import FORMATS
from kvcore.memory.formulas import WEIGHT_FORMATS
from kvcore.runtimes.registry import RUNTIMES
from kvsite import i18n

JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
NAMES = {
    *preset_names(),
    *FORMATS,
    *WEIGHT_FORMATS,
    *RUNTIMES,
    "tok/s",
}  # model ids, format names, runtimes' names and units keep their spelling


def test_a_bad_update_pattern_is_refused_in_the_pages_language(rec_dir):
    at = page("pages/2_Nbytes_trap.py", "ja", updates="300, abc")
    assert not at.exception
    assert "'300, abc' はトークン数の並びとして読めません" in at.error[0].value
    assert (
        "is not a list" in page("pages/2_Nbytes_trap.py", "en", updates="300, abc").error[0].value
    )


@pytest.mark.parametrize("lang", ["en", "ja"])
@pytest.mark.parametrize("path", [None, *PAGES])
def test_every_page_renders_in_both_languages(rec_dir, path, lang):
    at = page(path, lang)
    assert not at.exception, [e.message for e in at.exception]
    shown = texts(at)
    assert "⟨" not in shown, re.findall("⟨[^⟩]*⟩", shown)  # no missing i18n key
    raw = re.findall(
        r"(?<![\w.,/#-])(\d+\.\d{5,}|\d{5,})(?![\w.,/-])",
        re.sub(r"`[^`]*`|https?://\S+", " ", shown),
    )
    assert not raw, (
        raw
    )  # numbers for readers: 3 significant figures, thousands separators (kvcore.units.fmt_num)
    title = next(m.value for m in at.markdown if m.value.startswith("# ")).splitlines()[
        0
    ]  # Frame.intro: "# title"
    assert bool(JAPANESE.search(title)) == (lang == "ja"), title
    if (
        lang == "ja"
    ):  # no English sentence on a Japanese page, not even inside Japanese prose (code, names, sources aside)
        prose = [
            str(e.value)
            for kind in (
                "header",
                "subheader",
                "markdown",
                "caption",
                "info",
                "warning",
                "error",
                "success",
            )
            for e in getattr(at, kind)
        ]
        prose += [t for m in at.metric for t in (m.label, m.proto.help)] + [
            e.label for e in at.expander
        ]
        sources = source_texts(rec_dir)
        english = {p: runs for p in prose if (runs := english_runs(p, sources))}
        assert not english, english
        spaced = {
            p[:40]: spaces for p in prose if (spaces := i18n.stray_spaces(p))
        }  # joins in code included
        assert not spaced, spaced
        # what charts, tables and formulas say is Japanese too: titles, legends, tooltips, bar labels, column headers
        labels = {text for c in charts(at) for text in chart_labels(c["spec"], c["data"])}
        labels |= {str(col) for df in at.dataframe for col in df.value.columns}
        english = sorted(text for text in labels if english_label(text, NAMES))
        assert not english, english
        formulas = [c.value for c in at.code if not c.language]
        assert not [f for f in formulas if english_runs(f, sources, words=2)], formulas


def test_english_runs_finds_a_sentence_inside_japanese():
    assert english_runs("当てはめた帯域です。Not memory-bound: the points miss the line.") == [
        "Not memory-bound: the points miss the line."
    ]
    assert (
        english_runs(
            "Llama 3.1 8B Instruct、`mlx_lm ignores sliding_window here` の Hugging Face 版"
        )
        == []
    )
    assert (
        english_runs(
            "出典：Google Research, as reported by Article B",
            {"Google Research, as reported by Article B"},
        )
        == []
    )


@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_from_the_repository_recordings(path, monkeypatch):
    monkeypatch.delenv("KVCORE_RECORDINGS_DIR", raising=False)
    at = page(path, "ja")
    assert not at.exception


@pytest.mark.parametrize(
    "path,src",
    [
        ("pages/2_Nbytes_trap.py", CPU_DEMO),
        ("pages/4_Decode_slowdown.py", CPU_DEMO),
        ("pages/1_Mechanism.py", CPU_DEMO),
    ],
)
def test_second_recording_is_selectable_and_labelled_as_cpu_demo(rec_dir, path, src):
    at = page(path, "en", src=src)
    assert not at.exception
    shown = texts(at)
    assert (
        "Test CPU 9000" in shown and "cpu-demo" in shown and "fill: synthetic" in shown
    )  # machine, model, method
    assert "not an Apple Silicon measurement" in shown


def test_badge_of_the_default_source_is_the_published_m5_pro(rec_dir):
    shown = texts(page("pages/4_Decode_slowdown.py", "en"))
    assert (
        "Published: M5 Pro · Llama-3.2-1B" in shown
    )  # kind, chip, model (its short name, Recording.short_name)
    assert "Llama-3.2-1B-Instruct-4bit" in shown


def test_trap_slider_changes_the_chart_data_and_shows_the_jump(rec_dir):
    at = page("pages/2_Nbytes_trap.py", "en")
    assert charts(at)[0]["data"]["tokens"].max() == 600
    at.slider(key="tokens").set_value(
        2048
    ).run()  # ?tokens=2048 once sent 6,144 rows and hit Altair's limit
    assert not at.exception
    data = charts(at)[0]["data"]
    assert data["tokens"].max() == 2048
    sim = data[data["source"] == "kvcore simulation of mlx_lm's allocator"]
    alloc = sim[sim["series"] == "allocated (.nbytes)"].set_index("tokens")["mib"]
    # drawn from its breakpoints (step-after): 8 MiB from token 1, 16.0 MiB from 257, ... 64 MiB at 2048
    assert list(alloc.index) == [1, 257, 513, 769, 1025, 1281, 1537, 1793, 2048]
    assert (alloc[1], alloc[257], alloc[2048]) == (8.0, 16.0, 64.0)
    assert len(data) < 30


def test_trap_points_are_the_chosen_runs_kvcache_token_by_token_only(rec_dir):
    """The CPU demo recorded KVCache, QuantizedKVCache and RotatingKVCache rows and chunk patterns: only its KVCache
    token-by-token rows belong on the fp16 chart (stray dots at 4.25/8.5/12.75 MiB came from the others)."""
    at = page("pages/2_Nbytes_trap.py", "en", src="measured-linux-cpu-demo-mlx-cpu", tokens=2048)
    data = charts(at)[0]["data"]
    measured = data[
        data["source"].str.startswith("CPU demo")
    ]  # the legend's short name (Recording.short_name)
    from kvcore.recordings.store import load

    rows = [
        r
        for r in load(rec_dir / "measured-linux-cpu-demo-mlx-cpu.yaml").rows("trap")
        if r["cache"] == "KVCache" and r["pattern"] == "token by token"
    ]
    allocated = (
        measured[measured["series"] == "allocated (.nbytes)"].set_index("tokens")["mib"].to_dict()
    )
    assert allocated == {r["tokens"]: r["allocated_mib"] for r in rows}
    assert not set(measured["mib"]) & {4.25, 8.5, 12.75}
    assert set(measured["source"]) == {"CPU demo · Intel Xeon · cpu-demo"}
    q4 = charts(
        page("pages/2_Nbytes_trap.py", "en", src="measured-linux-cpu-demo-mlx-cpu", fmt="mlx-q4")
    )[0]["data"]
    assert not q4["source"].str.startswith("Measured").any()  # it measured the fp16 KVCache only


def test_trap_format_and_chunk_pattern(rec_dir):
    at = page("pages/2_Nbytes_trap.py", "en", fmt="mlx-q4", updates="1,256")
    data = charts(at)[0]["data"]
    alloc = data[data["series"] == "allocated (.nbytes)"].set_index("tokens")["mib"]
    assert alloc[1] == pytest.approx(
        8.0 * 576 / 2048
    )  # 256 rows from the first token on; mlx-q4: 576 B per token per layer vs fp16's 2048
    row = next(
        line for m in at.markdown for line in m.value.splitlines() if line.startswith("| `1,256` |")
    )
    assert row.split("|")[3].strip() == "257"  # the reader's pattern, in the table: capacity 257


def test_growth_model_select_changes_the_data(rec_dir):
    at = page("pages/3_Linear_growth.py", "en")
    before = charts(at)[0]["data"]
    at.selectbox(key="model").select("llama-3.1-8b").run()
    after = charts(at)[0]["data"]
    assert before["gib"].max() != after["gib"].max()
    # allocated, used and theory draw one line here, one legend entry naming all three (issue 36)
    assert set(after["series"]) == {"allocated = used = theory, one line", "weights"}
    theory = after[after["series"].str.contains("theory")].set_index("context")["gib"]
    assert theory[32768] == pytest.approx(4.0)  # Llama 3.1 8B, fp16, 32,768 tokens: exactly 4 GiB


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_growth_per_layer_chart_is_sent_only_while_open_and_follows_the_models_choices(
    rec_dir, lang
):
    """The per-layer chart does not change with the context slider: closed, its expander sends its title alone (a
    step sends one chart); open, it is the engine's chart for the page's model, format, sequences and language."""
    from kvsite.sections.growth import growth_layers

    assert len(charts(page("pages/3_Linear_growth.py", lang))) == 1
    for model, kv, seqs in (("llama-3.2-1b", "fp16", 1), ("gemma-3-4b", "mlx-q4", 3)):
        at = page(
            "pages/3_Linear_growth.py", lang, state={"growth_layers_open": True},
            model=model, kv=kv, seqs=seqs, lctx=4096,
        )  # fmt: skip
        assert not at.exception and len(charts(at)) == 2
        want = growth_layers(model, (1024, 4096, 8192, 32768, 131072), 4096, kv, seqs, lang)
        shown = chart_labels(charts(at)[1]["spec"], charts(at)[1]["data"])
        assert shown == chart_labels(want["chart"].spec, want["chart"].data) and shown
        assert len(charts(at)[1]["data"]) == len(want["chart"].data)  # a row per layer and context


@pytest.mark.parametrize(
    "path, param, values",
    [
        ("pages/1_Mechanism.py", "prompt", (16, 200)),
        ("pages/2_Nbytes_trap.py", "tokens", (10, 300)),
        ("pages/3_Linear_growth.py", "ctx", ("32,768", "131,072")),
        ("pages/4_Decode_slowdown.py", "eff", (0.6, 0.8)),
        ("pages/6_Savings.py", "mem", (36, 64)),
        ("pages/7_Many_conversations.py", "users", (4, 6)),
        ("pages/8_Calculator.py", "ctx", (32768, 65536)),
    ],
)
def test_a_slider_step_changes_a_charts_data_not_its_spec(rec_dir, path, param, values):
    """Each chapter's slider (benchmarks/bench_slider.py's) changes its chart's rows and leaves its spec as it was:
    Streamlit's frontend then updates the drawn view's datasets in place, where a spec that changed (Altair's dataset
    names are hashes of their rows) made it build the view again on every step."""
    one, two = (charts(page(path, "en", **{param: v})) for v in values)
    assert [c["spec"] for c in one] == [c["spec"] for c in two]
    assert any(not a["data"].equals(b["data"]) for a, b in zip(one, two)) or path.endswith(
        "Calculator.py"
    )


def test_mechanism_slider_changes_work(rec_dir):
    at = page("pages/1_Mechanism.py", "en")
    at.slider(key="new").set_value(100).run()
    assert charts(at)[0]["data"]["step"].max() == 100


def test_decode_worked_check_matches_the_article(rec_dir):
    at = page("pages/4_Decode_slowdown.py", "en")
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Predicted slowdown"] == "2.43×" and metrics["Measured slowdown"] == "2.45×"
    assert (
        metrics["Bytes read per token"] == "695 MiB → 1.65 GiB"
    )  # 3 significant figures, sizes in binary units


def test_decode_chip_select_changes_the_prediction(rec_dir):
    def what_if(at):
        return [c for c in charts(at) if "predicted_slowdown" not in c["data"]][-1]["data"]

    at = page("pages/4_Decode_slowdown.py", "en")
    before = what_if(at)["tokens_per_s"].max()
    at.selectbox(key="chip").select("M4 Max (40-core GPU)").run()
    assert what_if(at)["tokens_per_s"].max() > before


def test_numbers_follow_the_recording(rec_dir):
    path = rec_dir / "published-article-a-m5-pro.yaml"
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["sections"]["decode"][1]["tokens_per_s"] = 146  # 292 / 146 = 2.00x
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    at = page("pages/4_Decode_slowdown.py", "en")
    assert {m.label: m.value for m in at.metric}["Measured slowdown"] == "2.00×"


def test_broken_recording_is_named_and_skipped(rec_dir):
    (rec_dir / "zz-broken.yaml").write_text("schema: 1\nkind: nonsense\n", encoding="utf-8")
    for path in (None, "pages/4_Decode_slowdown.py"):
        at = page(path, "en")
        assert not at.exception
        assert any("zz-broken.yaml" in w.value for w in at.warning)


def test_savings_formats_and_turbo3_discrepancy(rec_dir):
    at = page("pages/6_Savings.py", "en", fmts="fp16")
    formats = charts(at)[1]["data"]["format"].unique().tolist()
    assert formats == ["fp16"]
    table = (
        next(m.value for m in at.markdown if "| Claim |" in m.value)
        .split("| Claim |")[1]
        .split("\n\n")[0]
    )
    claims = {float(line.split("|")[3]) for line in table.splitlines()[2:]}  # the GiB column
    assert claims == {3.72, 3.125, 3.5}


def test_recordings_page_lists_every_run(rec_dir):
    at = page("pages/9_Recordings.py", "en", rec=CPU_DEMO)
    ids = set(next(d.value for d in at.dataframe if "ID" in d.value)["ID"])
    assert {"published-article-a-m5-pro", CPU_DEMO} <= ids
    assert "Test CPU 9000" in texts(at)


@pytest.mark.parametrize(
    "lang, fields, method",
    [
        (
            "en",
            [
                "**Machine and backend**: Linux 6.1 (x86_64), mlx cpu, Device(cpu, 0), 16 GB RAM",
                "**Chip**: Test CPU 9000",
                "**Model**: cpu-demo",
                "**KV format**: fp32",
                "**Versions**: python 3.11.2, mlx 0.32.4, mlx_lm 0.32.2, kvcore 0.1.0",
                "**Date**: 2026-11-29 00:00 UTC",
                "**Command**: `tests/app fixture`",
            ],
            "fill: synthetic; 3 warm-up steps; 16 timed steps; 3 repeats",
        ),
        (
            "ja",
            [
                "**マシンとバックエンド**：Linux 6.1 (x86_64), mlx cpu, Device(cpu, 0)、RAM 16 GB",
                "**チップ**：Test CPU 9000",
                "**モデル**：cpu-demo",
                "**KV の形式**：fp32",
                "**日時**：2026-11-29 00:00 UTC",
            ],
            "K/V の埋め方：synthetic、ウォームアップ 3 回、計測 16 ステップ、3 回繰り返し",
        ),
    ],
)
def test_the_provenance_card_is_translated_fields_with_the_method_in_words(
    rec_dir, lang, fields, method
):
    at = page("pages/9_Recordings.py", lang, rec=CPU_DEMO)
    card = next(m.value for m in at.markdown if m.value.startswith("- **"))
    for field in fields:
        assert "- " + field in card.splitlines()
    assert f"  - {method}" in card.splitlines()
    assert "{" not in card and "warmup" not in card  # no mapping dumped as it is stored


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_every_method_field_of_the_bundled_measured_run_has_words(rec_dir, lang):
    at = page("pages/9_Recordings.py", lang, rec="measured-linux-cpu-demo-mlx-cpu")
    card = next(m.value for m in at.markdown if m.value.startswith("- **")).splitlines()
    command = f"- **{i18n.translate(lang, 'recordings.f_command')}**"
    assert not [
        line for line in card if "`" in line and not line.startswith(command)
    ]  # `field`: a field without words
    groups = [line.split("**")[1] for line in card if line.startswith("  - **")]
    assert groups == [
        i18n.translate(lang, f"recordings.section_{g}")
        for g in ("trap", "growth", "decode", "mechanism", "backend", "cross_checks")
    ]


def test_the_recordings_tables_and_tabs_are_japanese_on_the_japanese_page(rec_dir):
    at = page("pages/9_Recordings.py", "ja", rec="measured-linux-cpu-demo-mlx-cpu")
    listing, section, *_logs = (d.value for d in at.dataframe)  # then the logs from real Macs
    assert all(JAPANESE.search(c) or c == "ID" for c in listing.columns), list(listing.columns)
    assert set(listing["種類"]) == {"実測", "公表値"} and set(listing["保存場所"]) == {"同梱"}
    assert all(JAPANESE.search(s) for s in listing["データ"])
    assert [t.label.split(" · ")[0] for t in at.tabs] == [
        ".nbytes の罠",
        "KV の増え方",
        "decode 速度",
        "キャッシュの有無",
    ]
    assert all(JAPANESE.search(c) for c in section.columns), list(
        section.columns
    )  # the open tab: the trap rows
    assert "token by token" not in set(section["追加の仕方"]) and "1 トークンずつ" in set(
        section["追加の仕方"]
    )
    assert set(section["キャッシュのクラス"]) == {
        "KVCache",
        "RotatingKVCache",
        "QuantizedKVCache",
    }  # code names stay


@pytest.mark.parametrize(
    "model,expected",
    [
        ("llama-3.2-3b", "24 query heads and 8 KV heads: each KV head serves 3"),
        ("llama-3.1-70b", "serves 8 query heads"),
        ("llama-3.1-405b", "serves 16 query heads"),
    ],
)
def test_savings_heads_text_states_the_selected_models_heads(rec_dir, model, expected):
    assert expected in texts(page("pages/6_Savings.py", "en", model=model))


def test_savings_heads_text_of_an_mla_model_says_it_caches_a_latent(rec_dir):
    assert "caches one compressed latent of 512 values" in texts(
        page("pages/6_Savings.py", "en", model="deepseek-v3")
    )


@pytest.mark.parametrize("fmt,shown", [("fp16", True), ("mlx-q4", False), ("mlx-q8", False)])
def test_trap_quotes_article_a_only_for_its_fp16_cache(rec_dir, fmt, shown):
    text = texts(page("pages/2_Nbytes_trap.py", "en", fmt=fmt))
    assert (
        "Article A measured the same: 8.0 → 16.0 MiB allocated, 8.000 → 8.031 MiB used" in text
    ) == shown
    assert (
        "So `1 + 256` ends at exactly 257 rows while `256 + 1` ends at 512, and `300 + 300` ends at 812"
        in text
    )


def test_decode_verdict_and_geometry_notes_are_translated(rec_dir):
    assert "メモリ帯域律速（memory-bound）です" in texts(page("pages/4_Decode_slowdown.py", "ja"))
    at = page("pages/8_Calculator.py", "ja", model="mistral-7b-v0.1")
    assert any("sliding_window=4096" in c.value and "無視" in c.value for c in at.caption)


def test_a_charts_data_and_downloads_are_sent_only_while_its_expander_is_open(rec_dir):
    at = page("pages/2_Nbytes_trap.py", "en", tokens=300)
    assert (
        not at.get("download_button") and len(at.dataframe) == 0
    )  # closed: nothing behind the chart is sent
    at.session_state["trap_chart_data"] = True  # what a click on the expander does
    at.run()
    assert sorted(b.proto.label for b in at.get("download_button")) == ["CSV", "PNG", "SVG"]
    table = at.dataframe[0].value
    chart = charts(at)[0]["data"]
    assert (
        len(table) == len(chart) and table["Tokens"].max() == chart["tokens"].max() == 300
    )  # the chart's own rows, titled for readers
    at.session_state["trap_chart_data"] = False
    at.run()
    assert not at.get("download_button")


# What a warm rerun may call in the engine: accessors and lookups, no arithmetic, parsing or chart building
# (those run once per set of inputs, inside a cached section). This is the intent behind the page benchmark.
RERUN_MAY_CALL = {  # by module file name
    "store": {
        "recordings_dir",
        "local_dir",
        "read_only",
        "writable",
        "id",
        "kind",
        "label",
        "title",
        "has",
        "rows",
        "is_recording_name",  # the folder's signature: which names are recordings (a name check per file)
    },
    "preset_files": {"preset_names"},
    "servers": {
        "drawn",
        "<genexpr>",
    },  # which recordings' server rows the chapter draws: a look at each row's name
    "units": {"gib", "fmt_bytes", "fmt_num", "fmt_ratio", "fmt_pct", "fmt_size"},
    "published": {"source"},
    "hardware": {
        "chips",
        "get_chip",
        "find_chip",
        "gpu_memory_limit_gb",
        "efficiency_range",
        "slowest_memory",
    },
    "provenance": {"badge_fields", "source_class", "<genexpr>"},
    "calculator": {"runtime_formats"},  # a table lookup
    "memory_fit": {
        "gpu_limit",
        "share",
        "lever",
        "<genexpr>",
    },  # the GPU's limit, a verdict's fields
    "formats": {
        "mlx_cache_formats",
        "llamacpp_types",  # the -ctk/-ctv types llama.cpp stores
        "<genexpr>",
        "__post_init__",  # a KvSpec's names looked up
        "get_format",
    },  # the formats a cache class holds: a table lookup
    # the Calculator's request (kvcore.capacity.request), built on each run: its names and settings looked up
    "request": {
        "__post_init__",
        "spec",
        "sized",
        "options",
        "is_preset",
        "<dictcomp>",
        "<genexpr>",
    },
    "mlx_lm": {"options", "<dictcomp>"},  # a runtime's options object from its settings
    "llamacpp": {"options", "<dictcomp>", "kv_formats"},
    "llamacpp_cache": {"__post_init__"},  # llama.cpp's options object checks its fields
    "llamacpp_plan": {"check_backend"},  # the build named (cpu, metal): a look-up
    "registry": {"get_runtime"},  # the runtime object: a look-up
    "token": {"kv_formats"},  # the formats it stores: a look-up
    "base": {
        "name",
        "switch",
        "check",  # a setting's value within its range
    },  # a runtime setting's name (its flag as a Python name) and kind: properties
}


@pytest.mark.parametrize(
    "path, params",
    [
        *((p, {}) for p in [None, *PAGES]),
        # the Calculator under the other runtime: its own settings and types
        ("pages/8_Calculator.py", {"rt": "llama.cpp"}),
    ],
)
def test_a_warm_rerun_does_no_engine_work(rec_dir, path, params):
    _no_warm_work(page(path, "en", **params))


def test_a_warm_rerun_of_llama_servers_conversation_does_no_engine_work(rec_dir):
    """The chapter's other server: its recording, a conversation picked, users × turns through it."""
    _no_warm_work(
        page(
            "pages/7_Many_conversations.py",
            "en",
            src="measured-linux-cpu-llama-server-smollm2-135m",
            conv="4 users interleaved, -np 4 split",
            server="llama-server",
        )
    )


def _no_warm_work(at) -> None:
    at.run()  # warm: every section of these inputs is cached now
    calls = set()

    def watch(frame, event, arg):
        if event == "call" and f"{os.sep}kvcore{os.sep}" in frame.f_code.co_filename:
            calls.add((Path(frame.f_code.co_filename).stem, frame.f_code.co_name))

    threading.setprofile(watch)  # the script runs in its own thread
    try:
        at.run()
    finally:
        threading.setprofile(None)
    assert not at.exception
    work = sorted(
        f"{module}.{name}" for module, name in calls if name not in RERUN_MAY_CALL.get(module, ())
    )
    assert not work, ", ".join(work)


def test_one_unit_for_a_size_across_pages(rec_dir):
    """Article A's 32K KV cache is one number in one unit on Home and in the Decode chapter's worked check."""
    from kvcore.units import fmt_size

    home = page(None, "en")
    decode = page("pages/4_Decode_slowdown.py", "en")
    kv_32k = fmt_size(2**30)  # 16 layers x 2 x 8 KV heads x 64 x 2 bytes x 32,768 tokens
    assert any(m.value == kv_32k for m in home.metric)
    assert f"plus {kv_32k} of KV" in texts(decode)
    assert not re.search(r"\d GB(?!/s)", texts(decode))  # sizes in GiB/MiB; only rates in GB/s


def test_what_fits_shows_what_differs_between_formats_at_the_default_memory(rec_dir):
    """llama-3.1-8b on a 36 GB Mac (27 GiB the GPU may use): most formats would hold more than the model's 131,072
    tokens. Bars of the capped context would all be one length; the bars show what memory holds, and the labels say
    where the model stops."""
    at = page("pages/6_Savings.py", "en")
    chart = next(
        c
        for c in charts(at)
        if "label" in c["data"]
        and c["data"]["label"].astype(str).str.contains("the model stops").any()
    )
    spec = json.dumps(chart["spec"])
    data = chart["data"].drop_duplicates("format")
    assert (
        data["memory_max_context"].nunique() >= 5
    )  # formats of different cost, bars of different length
    assert '"field": "memory_max_context"' in spec and '"x"' in spec
    assert any("131,072" in label for label in data["label"])


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_what_fits_is_weights_and_kv_within_the_gpu_limit_and_says_so(rec_dir, lang):
    """The longest context per format on a 16 GB Mac: weights + KV within the 10.67 GiB its GPU may use (two thirds
    of the RAM, not a flat share of it), one more token past it; the caption names the limit with its source and
    says nothing else is counted."""
    from kvcore.capacity.memory_fit import gpu_limit
    from kvcore.inputs.presets import preset_geometry
    from kvcore.memory.formats import KvSpec
    from kvcore.memory.formulas import kv_bytes, weights_bytes
    from kvcore.timing.working_set import working_set
    from kvcore.units import GIB

    at = page("pages/6_Savings.py", lang, mem=16)
    limit = gpu_limit(16)
    assert f"{limit.bytes / GIB:,.2f}" == "10.67"
    (note,) = [c.value for c in at.caption if "10.67 GiB" in c.value]
    assert working_set(16).report.url in note  # the Mac that printed it
    assert ("nothing else counted" if lang == "en" else "ほかのものは数えていない") in note
    g = preset_geometry("llama-3.1-8b")
    weights = weights_bytes(g, "mlx-q4")
    chart = next(c for c in charts(at) if "memory_max_context" in c["data"])
    data = chart["data"].drop_duplicates("format")
    assert len(data) >= 3
    for row in data.itertuples():
        spec = KvSpec(row.format, row.format)
        assert weights + kv_bytes(g, row.memory_max_context, spec) <= limit.bytes
        assert weights + kv_bytes(g, row.memory_max_context + 1, spec) > limit.bytes


def test_the_turbo3_table_keeps_its_sources_out_of_its_columns(rec_dir):
    """At 390 px a column of long citations squeezed the claim column to one character a line: the table cites
    by number, the sources follow it as a numbered list."""
    at = page("pages/6_Savings.py", "ja")
    table = next(m.value for m in at.markdown if "| 主張 |" in m.value)
    rows = [line for line in table.splitlines() if line.startswith("| ") and "主張" not in line][:3]
    assert all(line.rstrip().endswith(("[1] |", "[2] |")) for line in rows)
    assert (
        "1. 「KVキャッシュとは？" in table
        and "2. AtomicBot-ai/atomic-llama-cpp-turboquant の ggml-common.h" in table
    )


@pytest.mark.parametrize("lang", ["en", "ja"])
def test_the_recordings_page_sets_published_memory_figures_beside_kvcore(rec_dir, lang):
    """Each bundled memory figure in one table, linked to its source, with kvcore's number and the reason in `lang`."""
    at = page("pages/9_Recordings.py", lang, rec=CPU_DEMO)
    head = i18n.translate(lang, "recordings.mem_col_published")
    assert not [m for m in at.markdown if f"| {head} |" in m.value]  # computed only when opened
    at.session_state["rec_memory"] = True  # what a click on the expander does
    (table,) = [m.value for m in at.run().markdown if f"| {head} |" in m.value]
    assert "(https://github.com/ollama/ollama/issues/7938)" in table
    assert (
        "| 816.00 MiB | 816.00 MiB |" in table
    )  # the Metal KV line and llama.cpp's cache, as printed
    assert i18n.translate(lang, "recordings.mem_reason_plan_differs") in table
    assert table.count("(https://github.com/ml-explore/mlx-lm/pull/40)") == 2
    if lang == "ja":
        assert "KV cache buffer" not in table and "Why they differ" not in table
