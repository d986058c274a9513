"""The Japanese texts follow the style sheet: no stray spaces, one term per concept, です・ます, and the same
keys and placeholders as the English file. Reads the YAML files only (no Streamlit)."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

from kvcore.timing.decode_model import fit_bandwidth
from kvsite import i18n
from kvsite.sections.decode import verdict_text

PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def ja_texts() -> dict[str, str]:
    return i18n.texts("ja")


def shown(text: str) -> list[str]:
    """The stray spaces a reader would see, placeholders filled with a Latin value."""
    return i18n.stray_spaces(PLACEHOLDER.sub("X", text))


# -------------------------------------------------------------------------- (a) no stray spaces


def test_no_space_between_japanese_characters_or_after_a_japanese_comma_or_stop():
    assert shown("使い、\n補間") and shown("Value を\n作り直す")
    assert shown("値です。 {x} です") and shown("**KV キャッシュ** です")
    assert not shown(
        "KV キャッシュの {n:,} トークン、fp16 です。\n\n- 次の段落です。\n- 三つ目です。\n| 表 |"
    )
    bad = {k: spaces for k, v in ja_texts().items() if (spaces := shown(v))}
    assert not bad, bad
    md = MarkdownIt(
        "commonmark"
    )  # taking spaces out must keep bold bold: 「（K）**の」 is no bold in CommonMark
    broken = {k: v for k, v in ja_texts().items() if "**" in md.render(PLACEHOLDER.sub("X", v))}
    assert not broken, broken


def test_sentences_joined_in_code_run_on_in_japanese():
    assert i18n.join("ja", "値です。", "", "記事 A です。") == "値です。記事 A です。"
    assert i18n.join("en", "It is.", "", "Article A.") == "It is. Article A."
    points = [1e9, 2e9, 4e9]  # 100 GB/s and 2 ms per token, exactly: memory-bound with a fixed time
    fit = fit_bandwidth(points, [1 / (b / 100e9 + 0.002) for b in points], peak_gbps=120)
    assert fit.verdict_code == "memory_bound" and fit.fitted_overhead
    ja, en = verdict_text(fit, "ja"), verdict_text(fit, "en")
    assert ja.count("。") == 3 and not i18n.stray_spaces(ja), ja
    assert en.count(". ") == 2, en


# -------------------------------------------------------------------------- (b) one term per concept

# concept: (the word we write, the variants the style sheet rejects)
TERMS = {
    # (the two articles' own titles are quoted as they are written)
    "KV cache": (
        "KV キャッシュ",
        [r"KVキャッシュ(?!は記憶のコスト」|とは？)"],
    ),
    "decode, prefill": ("decode / prefill", [r"デコード", r"プリフィル"]),
    "chunked prefill": ("チャンク分割", [r"区切って行う", r"区切り方"]),
    "context length": ("文脈長", [r"コンテキスト長"]),
    "tokens per second": (
        "tok/s",
        [r"トークン/秒", r"トークン毎秒", r"tokens/s", r"tokens per second"],
    ),
    "memory-bound": ("メモリ帯域律速", [r"メモリ律速", r"(?<!メモリ帯域律速（)memory-bound"]),
    "theory line": ("理論値（式から計算）", [r"公式", r"理論値（理論式）"]),
    "trade-off": ("トレードオフ", [r"取引"]),
    "everything a runtime allocates": ("確保するメモリの合計", [r"もの全部"]),
    "GQA": (
        "Grouped-Query Attention（GQA）",
        [r"グループ化クエリ", r"(?<!Grouped-Query Attention（)GQA）"],
    ),
    "attention": ("attention", [r"アテンション"]),
    "concurrent sequences": ("同時系列数", [r"同時に扱う", r"同時に処理する"]),
    "element of a vector": ("要素", [r"[\d}]\s*値", r"/値"]),
}


def test_one_term_per_concept():
    found = {
        concept: hits
        for concept, (_, rejected) in TERMS.items()
        if (
            hits := {
                k: m.group(0)
                for k, v in ja_texts().items()
                for p in rejected
                if (m := re.search(p, v))
            }
        )
    }
    assert not found, found


def test_memory_bound_is_explained_at_its_first_use_on_the_decode_page():
    assert "メモリ帯域律速（memory-bound）" in ja_texts()["decode.lead"]


# -------------------------------------------------------------------------- (c) です・ます

POLITE = (
    "ます",
    "ません",
    "です",
    "でした",
    "ました",
    "ましょう",
    "ください",
    "ますか",
    "ですか",
    "でしょうか",
)
CLOSERS = "」』）)*`"


def plain_endings(text: str) -> list[str]:
    """Sentences (ended by 。？！) whose last word is a kana ending other than です・ます: 「返す。」「少なかった（…）。」
    A sentence ending in a noun, a number or a code name (体言止め) passes."""
    out = []
    for sentence in re.split(r"(?<=[。？！])", PLACEHOLDER.sub("X", text)):
        body = sentence.strip().rstrip("。？！")
        while body and (body[-1] in CLOSERS or body.endswith("）")):
            if body.endswith("）") and "（" in body:
                body = body[
                    : body.rindex("（")
                ]  # a closing parenthetical: judge the words before it
            else:
                body = body[:-1]
            body = body.rstrip()
        end = sentence.strip()[-1:]
        if end == "？" and not body.endswith("か"):
            continue  # a heading's question (「大きさは？」) has no verb to judge
        if end in "。？！" and re.search(r"[\u3040-\u309f]$", body) and not body.endswith(POLITE):
            out.append(sentence.strip()[-30:])
    return out


def test_every_japanese_sentence_is_in_desu_masu():
    assert plain_endings("確保済みの容量を返す。") and plain_endings(
        "これがメモリ律速である。次です。"
    )
    assert plain_endings("F16 より 8 % 少なかった（Qwen 3.6、Metal）。— X")
    assert plain_endings("選ぶ。最初の 2 つは設定です。") and plain_endings(
        "なぜキャッシュするのか。"
    )
    assert not plain_endings(
        "容量を返します。Key と Value（K/V）です。何ですか？ 1 トークンあたり 2 バイト。"
    )
    assert not plain_endings("凡例で選択中：X（もう一度クリックすると解除）")
    found = {k: e for k, v in ja_texts().items() if (e := plain_endings(v))}
    assert not found, found


# -------------------------------------------------------------------------- (d) same keys, same placeholders


def test_language_files_have_the_same_keys_and_placeholders():
    """Every language file present, not ja alone: kvsite.i18n refuses one that lacks a key of en.yaml, has one
    it lacks (errors.*: a language's own words for engine errors, tests/test_errors.py) or other placeholders."""
    i18n.check_languages()
    assert set(i18n.language_files()) == set(i18n.LANGS)


# -------------------------------------------------------------------------- (e) the data files' own texts


def _method_words(node):
    if isinstance(node, dict):
        for value in node.values():
            yield from _method_words(value)
    elif isinstance(node, list):
        for value in node:
            yield from _method_words(value)
    elif isinstance(node, str) and " " in node:
        yield node


def test_every_bundled_citation_note_and_method_word_has_its_japanese():
    """kvsite/i18n/data.ja.yaml holds the Japanese of every text a data file shows a reader (keyed by the English):
    a new or edited citation, note, method phrase, format or published source without one fails here."""
    from kvcore.memory.formats import FORMATS
    from kvcore.recordings import store as recordings
    from kvcore.recordings.published import figures

    recs, _ = recordings.load_all([recordings.recordings_dir()])
    wanted = set()
    for rec in recs:
        citation = rec.data.get("citation", {})
        wanted |= {citation[k] for k in ("source", "note") if citation.get(k)}
        wanted |= set(_method_words(rec.data.get("method", {})))
    wanted |= set(figures()["sources"].values()) | {
        f.source for f in FORMATS.values() if " " in f.source
    }
    missing = sorted(w for w in wanted if w not in i18n.data_texts("ja"))
    assert not missing, missing
    spaced = {k: s for k, v in i18n.data_texts("ja").items() if (s := i18n.stray_spaces(v))}
    assert not spaced, spaced


# a half-width colon next to Japanese text (「公表値: …」); the style sheet writes 「公表値：」. Not a URL's, a
# time's or a Streamlit icon's (":material/lock:"), whose neighbours are Latin.
JA_CHAR = r"[\u3040-\u30ff\u3400-\u9fff\uff01-\uff60）」』、。]"
HALF_COLON = re.compile(rf"{JA_CHAR}[ \t]*:(?!//)|(?<![a-z/]):[ \t]*(?={JA_CHAR})")


def half_colons(text: str) -> list[str]:
    return [text[max(0, m.start() - 8) : m.end() + 8] for m in HALF_COLON.finditer(text)]


def test_japanese_labels_write_a_full_width_colon():
    """In the YAML texts and in what code builds from them: every bundled source's name as the pickers, badges,
    legends and the calculator's efficiency caption show it."""
    from kvcore.recordings import store as recordings
    from kvsite.data.sources import source_label
    from kvsite.sections.calc.compute import efficiency_sources

    assert half_colons("公表値: M5 Pro") and half_colons("値です: {x}") and half_colons("{x}: 日本")
    assert not half_colons(":material/lock: Read-only") and not half_colons(
        "https://x.jp 12:40 公表値：X"
    )
    texts = {**ja_texts(), **{f"data: {k}": v for k, v in i18n.data_texts("ja").items()}}
    recs, _ = recordings.load_all([recordings.recordings_dir()])
    for rec in recs:
        for where in ("", "local", "uploaded"):
            texts[f"source_label({rec.id}, {where!r})"] = source_label(rec, "ja", where)
    texts["calc.efficiency_sources"] = efficiency_sources(recs, "ja")
    bad = {k: hits for k, v in texts.items() if (hits := half_colons(v))}
    assert not bad, bad
    assert "): " in source_label(recs[0], "en")  # the English keeps its own colon


def test_every_method_field_of_every_bundled_recording_has_words_in_every_language():
    """The Recordings page's card (kvsite.data.recording_text.provenance_card) says each method field in
    words (`recordings.m_<field>`), not as its bare name (`total_seconds`: 1374.2), for every bundled
    run and every language: a run recording a new method field without words fails here."""
    from kvcore.recordings import store as recordings
    from kvsite.data.recording_text import provenance_card

    recs, _ = recordings.load_all([recordings.BUNDLED_DIR])
    assert len(recs) > 10
    bare = re.compile(r"`([a-z_0-9]+)`: ")
    missing = sorted(
        {
            (lang, rec.id, name)
            for rec in recs
            for lang in i18n.LANGS
            for name in bare.findall(provenance_card(rec, lang))
        }
    )
    assert not missing, missing


def test_run_names_are_made_short_not_cut():
    """A legend or the sidebar shows Recording.short_name whole: every bundled one fits without an ellipsis."""
    from kvcore.recordings import store as recordings

    recs, _ = recordings.load_all([recordings.recordings_dir()])
    long = {
        r.id: r.short_name
        for r in recs
        if r.short_name.endswith("…") or len(r.short_name) > recordings.SHORT_NAME_MAX
    }
    assert not long, long
    assert recordings._shorten("Intel Xeon Processor with a long name", 20) == "Intel Xeon…"


def test_a_number_and_its_counter_are_spaced_as_article_a_writes_them():
    """Article A writes 「1,024 トークン」「32 倍」: a space between a number (or a placeholder for one) and its
    Japanese counter, never 「131,072トークン」."""
    counters = "トークン|回|層|秒|ステップ|倍|件"
    tight = re.compile(rf"(?:\d|\{{(?:v|n|limit)\}})(?:{counters})")
    found = {k: m.group(0) for k, v in ja_texts().items() if (m := tight.search(v))}
    assert not found, found


def test_the_phrases_the_editor_flagged_are_gone():
    flagged = ("1 人の読者と大勢の読者", "律するもの", "私たちの読み", "線の上", "線の下", "大勢")
    found = {k: p for k, v in ja_texts().items() for p in flagged if p in v}
    assert not found, found


def test_every_published_runs_runtime_is_japanese_on_a_japanese_card():
    """A runtime's version written in words ("not stated", "master as of ...") has its Japanese rendering."""
    from kvcore.recordings import store as recordings
    from kvcore.recordings.provenance import badge_fields as provenance

    recs, _ = recordings.load_all()
    english = re.compile(r"\b(?:not stated|as of|merged|in the file)\b")
    left = [
        p["runtime"]
        for r in recs
        if english.search((p := provenance(r))["runtime"])
        and english.search(i18n.data_text("ja", p["runtime"]))
    ]
    assert not left, left
