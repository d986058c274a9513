"""Every reachable state of every page: each widget through its whole range, through the URL.

The widgets are found by running the page, not listed by hand: every widget bound to the URL
(``bind="query-params"``: its ``query_param_key``; ``kvsite.frame.page.url_choice``: the options it was called with)
is driven through its ends, its boundaries, its default, every option (every data source, every preset, every
format) and odd text, starting from the state in which it appeared (the custom-memory field appears only for
``chip=custom``); widgets the URL does not hold are driven by interaction. Then hypothesis draws whole query
strings over the same widgets. Both languages.

Each run passes when: no exception element; no error element unless the input was deliberately invalid (odd
text, a number outside the widget's range) or the page is giving a verdict (the model does not fit), and then one
plain sentence in the page's language without a traceback; every chart's spec is Vega-Lite by its schema (each
structure once) and holds at least one row and at most Altair's row limit (5,000) in each dataset, with that limit
left on; no missing i18n key (⟨key⟩) shows.
"""

from __future__ import annotations

import ast
import functools
import io
import json
import math
import re
from dataclasses import dataclass, field
from urllib.parse import urlencode

import altair as alt
import pyarrow.ipc
import pytest
from app_helpers import APP, CPU_DEMO, PAGES, ROOT, english_runs, texts, vega_lite_problems
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as hs
from streamlit.testing.v1 import AppTest

import kvsite.frame.page
from kvcore.errors import KvError
from kvcore.inputs.preset_files import load_preset, preset_names
from kvcore.inputs.presets import preset_geometry
from kvcore.memory.formats import FORMATS
from kvsite import i18n

ALTAIR_MAX_ROWS = 5000  # altair.utils.data.MaxRowsError: the default transformer's limit
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
TRACEBACK = re.compile(r"Traceback|File \"|line \d+, in |\b[A-Z][A-Za-z]*(Error|Exception)\b")
# Verdicts a page gives in an error box on valid input (the model does not fit): allowed, still checked as sentences.
VERDICT_KEYS = ("calc.verdict_no", "calc.verdict_plan_no", "savings.no_fit")
# Odd text for text inputs: empty, blanks, signs, full-width digits, huge, symbols, markup, long, non-numbers.
ODD_TEXT = [
    "",
    " ",
    "0",
    "-1",
    "abc",
    "300, abc",
    "１２３",
    "1e9",
    "99999999999999999999",
    "NaN",
    "inf",
    "1,,2",
    "500x0",
    "0x500",
    "2048+2047+1",
    "💥",
    "<script>alert(1)</script>",
    "'; DROP TABLE x; --",
    "1, " * 300,
    "{",
    "{}",
    "[]",
    "null",
    '{"num_hidden_layers": -1}',
]
# What a link may carry into any bound widget besides its own odd values: not a finite number (Streamlit's binding
# raised OverflowError on these), 5,000 digits, nothing. Each is refused or reset with at most one sentence.
HOSTILE_URL = ["inf", "-inf", "nan", "1e400", "9" * 5000, ""]
# Widgets the sweep must find (a floor: discovery finds these and anything added later). The Recordings page's
# comparison picker and the live controls are not URL state; they are driven by interaction.
EXPECTED = {
    None: set(),
    "pages/1_Mechanism.py": {"prompt", "new", "view", "src"},
    "pages/2_Nbytes_trap.py": {"src", "tokens", "fmt", "updates", "pstep"},
    "pages/3_Linear_growth.py": {
        "src",
        "model",
        "ctx",
        "w",
        "kv",
        "seqs",
    },  # lctx: inside the chart
    "pages/4_Decode_slowdown.py": {"src", "chip", "model", "w", "eff"},
    "pages/5_Prefill_and_decode.py": {"src", "chip", "model", "w", "prompt", "answer", "seq"},
    "pages/6_Savings.py": {"model", "ctx", "fmts", "mem", "w"},
    "pages/8_Calculator.py": {
        "msrc",
        "model",
        "rt",
        "~ctx",  # bound to ?ctx= by kvsite.sections.calc.source.context_inputs, not by Streamlit (?ctx=1 came back as 32,768)
        "~ctx_log",
        "seq",
        "k",
        "v",
        "w",
        "chip",
        "ram",
        "limit",
        "gib",
        "mstep",  # mlx_lm's --prefill-step-size (the default runtime's setting)
        "~pasted",
    },
    "pages/9_Recordings.py": {"rec"},
}
KINDS = (
    "slider",
    "select_slider",
    "selectbox",
    "number_input",
    "text_input",
    "text_area",
    "multiselect",
    "radio",
    "button_group",
    "checkbox",
    "toggle",
)


# ---------------------------------------------------------------- url_choice options, as the page passes them

CHOICES: dict[str, list] = {}  # URL key -> the raw options of this run's url_choice widgets
_url_choice = kvsite.frame.page.url_choice


def _spy_url_choice(widget, label, options, default, key, *args, **kwargs):
    CHOICES[key] = list(options)
    return _url_choice(widget, label, options, default, key, *args, **kwargs)


@pytest.fixture(autouse=True)
def spy_url_choice(monkeypatch):
    """The real url_choice, noting its options: in kvsite.frame.page, where pages import it from on every run, and in
    every site module that imported it once (the Calculator's inputs)."""
    import sys

    for name, module in list(sys.modules.items()):
        if name.startswith("kvsite") and getattr(module, "url_choice", None) is _url_choice:
            monkeypatch.setattr(module, "url_choice", _spy_url_choice)


# ---------------------------------------------------------------- widgets as the sweep drives them


@dataclass
class Knob:
    """One widget: its kind, key, URL parameter (None: not URL state), values to try, and the state it appeared in.

    values: URL strings (or lists of them for a multiselect); for a widget the URL does not hold, Python values.
    raw: URL string -> the value to set by interaction (None: the value can only be set through the URL).
    """

    kind: str
    key: str
    param: str | None
    values: list
    outside: list = field(
        default_factory=list
    )  # values the widget refuses or clamps (deliberately invalid)
    base: dict = field(default_factory=dict)
    strategy: object = None  # hypothesis strategy over URL values (None: interaction only)
    raw: object = None

    @property
    def name(self) -> str:
        return self.param or f"~{self.key}"


def _num(v: float, is_int: bool) -> str:
    return str(int(v)) if is_int else f"{round(v, 9):g}"


@functools.cache
def model_limits() -> frozenset[int]:
    """Every preset's max_position_embeddings: where a context widget crosses a model's limit."""
    return frozenset(
        n
        for name in preset_names()
        if (n := load_preset(name)["config"].get("max_position_embeddings"))
    )


def _range_values(lo: float, hi: float, step: float, default: float, is_int: bool) -> list[float]:
    """Ends, one step in from each end, the default, the middle (on the step grid); for a wide integer range
    also the powers of ten and the presets' context limits with one past each (a calculator's boundaries)."""
    mid = lo + round((hi - lo) / 2 / step) * step
    vals = {lo, hi, min(hi, lo + step), max(lo, hi - step), default, mid}
    if is_int and hi / max(lo, 1) > 1000:
        vals |= {10**k for k in range(12) if lo < 10**k < hi}
        vals |= {v for n in model_limits() for v in (n, n + 1) if lo < v < hi}
    return sorted(vals)


def _spread(options: list, most: int) -> list:
    """At most `most` options, both ends included, evenly spaced (every one when there are few)."""
    if len(options) <= most:
        return list(options)
    return [options[round(i * (len(options) - 1) / (most - 1))] for i in range(most)]


@functools.cache
def _every_one_ids() -> frozenset[str]:
    """The bundled recordings' ids, the measured test run's, live mode's and the presets' (read once a session: the
    sweep asks for every widget of every state, ~1,700 times a page)."""
    ids = {p.stem for p in (ROOT / "recordings").glob("*.yaml")}
    return frozenset(ids | {CPU_DEMO, kvsite.frame.page.LIVE} | set(preset_names()))


def every_one(options: list) -> bool:
    """Options the sweep takes all of, however many: data sources (recording ids) and model presets."""
    ids = _every_one_ids()
    return bool(options) and all(str(o) in ids for o in options)


MAX_OPTIONS = 12  # other long option lists (29 chips, 11 formats): a spread of 12, ends included; hypothesis draws any


def knobs_of(at: AppTest, base: dict, known: frozenset | set = frozenset()) -> list[Knob]:
    """The page's widgets as knobs, but those whose name (Knob.name) is in `known`."""
    out = []
    for kind in KINDS:
        for el in at.get(kind):
            key, proto = el.key, el.proto
            if key is None or key == "lang__w":
                continue
            param = getattr(proto, "query_param_key", "") or None
            if param is None and key.endswith("__w") and key[:-3] in CHOICES:
                param = key[:-3]
            if (param or f"~{key}") not in known:
                out.append(_knob(kind, el, key, param, base))
    return [k for k in out if k is not None]


def _knob(kind: str, el, key: str, param: str | None, base: dict) -> Knob | None:
    proto = el.proto
    if param is not None and key.endswith("__w"):  # url_choice: the raw options the page passed
        raw = {str(o): o for o in CHOICES[param]}
        opts = list(raw)
        vals = opts if every_one(opts) else _spread(opts, MAX_OPTIONS)
        return Knob(kind, key, param, vals, ["no-such-option"], base, hs.sampled_from(opts), raw)
    if kind in ("slider", "number_input"):
        is_int = proto.data_type == proto.INT
        lo = el.min if el.min is not None else -1e6
        hi = el.max if el.max is not None else 1e6
        step = el.step or 1
        default = (
            proto.default[0]
            if kind == "slider"
            else (proto.default if proto.HasField("default") else lo)
        )
        vals = _range_values(lo, hi, step, default, is_int)
        if param is None:
            return Knob(kind, key, None, [lo, hi, default], base=base)
        outside = [_num(lo - step, is_int), _num(hi + step, is_int), "abc", *HOSTILE_URL]
        if is_int:
            strat = hs.integers(int(lo), int(hi)).map(
                lambda v: str(int(lo + (v - lo) // step * step))
            )
        else:
            strat = hs.floats(lo, hi, allow_nan=False).map(
                lambda v: _num(lo + round((v - lo) / step) * step, False)
            )
        urls = [_num(v, is_int) for v in vals]
        return Knob(
            kind,
            key,
            param,
            urls,
            outside,
            base,
            hs.one_of(strat, hs.sampled_from(urls)),
            {u: int(u) if is_int else float(u) for u in urls},
        )
    if kind in ("selectbox", "radio", "select_slider"):
        opts = list(proto.options)
        raws = [_literal(o) for o in opts]
        recoverable = all(r is not None and el.format_func(r) == o for r, o in zip(raws, opts))
        if kind == "selectbox":  # set by position, whatever its values are
            raw = {o: i for i, o in enumerate(opts)}
        else:
            raw = dict(zip(opts, raws)) if recoverable else None
        vals = opts if every_one(opts) else _spread(opts, MAX_OPTIONS)
        if param is None:
            return (
                Knob(kind, key, None, [raw[o] for o in vals], base=base)
                if raw is not None
                else None
            )
        return Knob(kind, key, param, vals, ["no-such-option"], base, hs.sampled_from(opts), raw)
    if kind == "multiselect":
        opts = list(proto.options)
        if param is None:
            return Knob(kind, key, None, [[], list(el.value)[:1]], base=base)
        vals = ["", *([o] for o in _spread(opts, MAX_OPTIONS)), opts]
        return Knob(
            kind,
            key,
            param,
            vals,
            [["no-such-option"]],
            base,
            hs.lists(hs.sampled_from(opts), unique=True),
            "multi" if all(el.format_func(o) == o for o in opts) else None,
        )
    if kind in ("text_input", "text_area"):
        default = proto.default if proto.HasField("default") else ""
        valid = [default] if default else []
        if key == "pasted":  # a config.json: one real one, from a preset, next to the odd ones
            valid.append(json.dumps(load_preset(preset_names()[0])["config"]))
        if param is None:
            return Knob(kind, key, None, valid + ODD_TEXT, base=base)
        return Knob(
            kind,
            key,
            param,
            valid + ODD_TEXT,
            HOSTILE_URL,
            base,
            hs.one_of(hs.sampled_from(valid + ODD_TEXT), hs.text(max_size=40)),
            "text",
        )
    if kind in ("checkbox", "toggle"):
        if param is None:
            return Knob(kind, key, None, [True, False], base=base)
        return Knob(
            kind,
            key,
            param,
            ["true", "false"],
            [],
            base,
            hs.sampled_from(["true", "false"]),
            {"true": True, "false": False},
        )
    return None  # a segmented control not bound through url_choice: none today


def _literal(label: str):
    try:
        return ast.literal_eval(label.replace(",", ""))
    except (ValueError, SyntaxError):
        return label


def element(at: AppTest, knob: Knob):
    return next((e for e in at.get(knob.kind) if e.key == knob.key), None)


def interact(at: AppTest, knob: Knob, value) -> bool:
    """Set the widget as a reader would (False: it is not on the page, or this value has no interaction)."""
    el = element(at, knob)
    if el is None:
        return False
    if knob.param is None:
        if knob.kind == "selectbox":
            el.select_index(value)
        else:
            el.set_value(value)
        return True
    if knob.raw is None:
        return False
    if knob.raw == "multi":
        el.set_value([] if value == "" else list(value))
    elif knob.raw == "text":
        el.set_value(value)
    elif knob.kind == "selectbox" and not knob.key.endswith("__w"):
        el.select_index(knob.raw[value])
    else:
        el.set_value(knob.raw[value])
    return True


# ---------------------------------------------------------------- one run and its checks


def run(path: str | None, lang: str, params: dict) -> AppTest:
    """The page opened at ?lang=..&params: AppTest's first run reads the URL as a browser's first load does."""
    CHOICES.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lang"] = lang
    for k, v in params.items():
        at.query_params[k] = v
    if path:
        at.switch_page(path)
    return at.run()


def where(path: str | None, lang: str, params: dict, action_text: str = "") -> str:
    short = {
        k: v[:40] + "…" if isinstance(v, str) and len(v) > 40 else v for k, v in params.items()
    }
    return f"{path or 'streamlit_app.py'} ?{urlencode({'lang': lang, **short}, doseq=True)}{action_text}"


def verdicts(lang: str) -> list[re.Pattern]:
    """The verdict sentences as patterns ({placeholders} match anything), the engine's among them (in English its
    raise site's sentence, with its values as placeholders; a calculator prefixes a pasted config's)."""

    def pattern(key: str) -> str:
        return ".*".join(re.escape(part) for part in re.split(r"\{[^}]*\}", i18n.texts(lang)[key]))

    part = pattern("calc.verdict_part")  # a plan's verdict may name the part that passes the limit
    out = [
        re.compile(f"{pattern(k)}(?:\\s*{part})?", re.S) for k in VERDICT_KEYS if i18n.has(lang, k)
    ]
    for e in ENGINE_VERDICTS:
        text = i18n.texts(lang)[f"errors.{e.code}"] if lang != "en" else str(e)
        if lang == "en":
            for value in sorted({str(v) for v in e.params.values()}, key=len, reverse=True):
                text = text.replace(value, "{}")
        out.append(
            re.compile(
                ".*" + ".*".join(re.escape(part) for part in re.split(r"\{[^}]*\}", text)), re.S
            )
        )
    return out


def _engine_verdict(refuse) -> KvError:
    try:
        refuse()
    except KvError as e:
        return e
    raise AssertionError("the engine accepted what it should refuse")


# The engine's refusals a page shows as its verdict on valid input: this model's cache cannot be stored in the
# chosen format (mlx quantizes in groups of 64; Phi-3-mini's head_dim is 96)
ENGINE_VERDICTS = [_engine_verdict(lambda: FORMATS["mlx-q4"].row_bytes(96))]


def problems(at: AppTest, lang: str, invalid: str | None = None) -> list[str]:
    """What is wrong with one run (empty: it passes). `invalid`: the odd input this run was given, if any."""
    out = []
    for e in at.exception:
        out.append(f"exception: {e.message.splitlines()[0] if e.message else e.value}")
    if out:
        return out
    errors = [str(e.value) for e in at.error]
    if (
        i18n.translate(lang, "site.failed") in errors
    ):  # an exception the page let through to the last line
        return ["the site's last line of defence fired (an exception no page caught)"]
    unexplained = [e for e in errors if not any(v.fullmatch(e.strip()) for v in verdicts(lang))]
    if unexplained and invalid is None:
        out.append(f"error shown on valid input: {unexplained[0][:160]!r}")
    if len(errors) > 1:
        out.append(f"{len(errors)} error elements: {[e[:80] for e in errors]}")
    for e in errors:
        plain = e  # less the odd input it echoes, as given or as its repr ({text!r}: control characters escaped)
        for echo in (invalid, repr(invalid)) if invalid else ():
            plain = plain.replace(echo, " ")
        if TRACEBACK.search(plain):
            out.append(f"traceback-like error text: {e[:160]!r}")
        if lang == "ja" and (not JAPANESE.search(plain) or english_runs(plain)):
            out.append(f"error not in Japanese: {e[:160]!r}")
        if lang == "en" and JAPANESE.search(plain):
            out.append(f"Japanese in an English error: {e[:160]!r}")
    for i, el in enumerate(at.get("vega_lite_chart")):
        spec = json.loads(el.proto.spec)
        title = spec.get("title") or el.proto.id or f"chart {i}"
        out.extend(f"chart {i} ({str(title)[:40]}): {p}" for p in vega_lite_problems(spec))
        counts = [
            pyarrow.ipc.open_stream(io.BytesIO(d.data.data)).read_all().num_rows
            for d in el.proto.datasets
        ]
        counts += [len(d["values"]) for d in _inline_data(spec)]
        if sum(counts) == 0:
            out.append(f"chart {i} ({str(title)[:40]}) has no data row")
        if max(counts, default=0) > ALTAIR_MAX_ROWS:
            out.append(
                f"chart {i} ({str(title)[:40]}) sends {max(counts)} rows > Altair's {ALTAIR_MAX_ROWS}"
            )
    if alt.data_transformers.options.get("max_rows", ALTAIR_MAX_ROWS) != ALTAIR_MAX_ROWS:
        out.append(f"Altair's row limit changed: {alt.data_transformers.options}")
    shown = texts(at)
    if "⟨" in shown:
        out.append(f"missing i18n keys: {sorted(set(re.findall('⟨[^⟩]*⟩', shown)))}")
    return out


def _inline_data(node):
    if isinstance(node, dict):
        if isinstance(node.get("values"), list) and set(node) <= {"values", "name", "format"}:
            yield node
        for v in node.values():
            yield from _inline_data(v)
    elif isinstance(node, list):
        for v in node:
            yield from _inline_data(v)


def took(at: AppTest, knob: Knob, value) -> str | None:
    """None when the widget shows the URL's value (the sweep really reached that state), else what it shows."""
    el = next((e for e in at.get(knob.kind) if e.key == knob.key), None)
    if el is None:
        return "widget gone"
    if knob.key.endswith("__w"):
        shown = str(at.session_state[knob.key])
    elif knob.kind == "multiselect":
        shown, value = (
            sorted(str(v) for v in el.value),
            sorted(value) if isinstance(value, list) else [],
        )
    elif knob.kind in ("slider", "number_input"):
        return (
            None
            if math.isclose(float(el.value), float(value), rel_tol=1e-9)
            else f"shows {el.value}"
        )
    elif knob.kind in ("selectbox", "radio", "select_slider"):
        shown = el.format_func(el.value) if el.value is not None else None
    else:
        shown = el.value
    return (
        None if shown == value or str(shown).lower() == str(value).lower() else f"shows {shown!r}"
    )  # checkbox: 'false' -> False


# ---------------------------------------------------------------- the sweep: every widget, every value

SWEPT: dict[str | None, tuple[list[str], dict[str, Knob], int]] = {}
LANGS = tuple(i18n.LANGUAGES)  # every language the site has, not a list of our own


def sweep(path: str | None) -> tuple[list[str], dict[str, Knob], int]:
    """Every widget of the page through its values, breadth first; a widget that appears only in some state
    (?chip=custom) is swept from that state. Each widget's far end and the values it refuses go through the URL
    (a fresh page, as a shared link opens); the other values are set on an open page, as a reader would, in
    Japanese and English in turn (a fresh page costs ~3x a rerun). Returns (failures, widgets by name, runs);
    cached per page (every test's recordings folder holds the same files)."""
    if path in SWEPT:
        return SWEPT[path]
    failures: list[str] = []
    found: dict[str, Knob] = {}
    queue: list[Knob] = []
    runs = 0

    def check(at, lang, params, desc, invalid=None, knob=None, value=None):
        failures.extend(f"{desc}: {p}" for p in problems(at, lang, invalid))
        if (
            knob is not None
            and value is not None
            and not at.exception
            and (miss := took(at, knob, value))
        ):
            failures.append(f"{desc}: the URL's value did not reach the widget ({miss})")
        if not at.exception and params is not None:
            for new in knobs_of(at, params, set(found)):
                if new.name not in found:
                    found[new.name] = new
                    queue.append(new)

    for lang in LANGS:
        at = run(path, lang, {})
        runs += 1
        check(at, lang, {}, where(path, lang, {}))
    while queue:
        knob = queue.pop(0)
        is_text = knob.kind in ("text_input", "text_area")
        by_url = (
            []
            if knob.param is None
            else [(knob.values[-1], None), *((v, str(v)) for v in knob.outside)]
        )
        if (
            knob.param is not None and knob.raw is None
        ):  # no interaction for it: every value through the URL
            by_url = [(v, None) for v in knob.values] + by_url[1:]
        for j, (value, invalid) in enumerate(
            by_url
        ):  # the languages in turn, Japanese first (the strictest)
            params, lang = {**knob.base, knob.param: value}, LANGS[j % len(LANGS)]
            at = run(path, lang, params)
            runs += 1
            odd = str(value) if is_text and value in ODD_TEXT else invalid
            check(
                at,
                lang,
                params,
                where(path, lang, params),
                odd,
                knob if invalid is None else None,
                value,
            )
        if knob.param is not None and knob.raw is None:
            continue
        pages: dict[str, AppTest] = {}
        for i, value in enumerate(v for v in knob.values if not (by_url and v == knob.values[-1])):
            lang = LANGS[i % len(LANGS)]
            at = pages.get(lang)
            if at is None or at.exception:
                at = pages[lang] = run(path, lang, knob.base)
                runs += 1
            if not interact(at, knob, value):
                failures.append(
                    f"{where(path, lang, knob.base)}: widget {knob.key} not found to set {str(value)[:40]!r}"
                )
                break
            at.run()
            runs += 1
            if knob.param is None:
                params, desc = (
                    None,
                    where(path, lang, knob.base, f" then {knob.key} := {str(value)[:40]!r}"),
                )
            else:
                params = {**knob.base, knob.param: value}
                desc = where(path, lang, params)
            odd = str(value) if is_text and value in ODD_TEXT else None
            check(at, lang, params, desc, odd)
    SWEPT[path] = (failures, found, runs)
    return SWEPT[path]


@pytest.mark.parametrize("path", [None, *PAGES])
def test_every_widget_through_its_whole_range(rec_dir, path):
    failures, found, runs = sweep(path)
    missing = EXPECTED.get(path, set()) - set(found)
    assert not missing, f"the sweep did not find {missing} on {path}: found {sorted(found)}"
    assert not failures, f"{len(failures)} failures in {runs} runs:\n" + "\n".join(failures[:40])


@pytest.mark.parametrize("path", ["pages/2_Nbytes_trap.py", "pages/8_Calculator.py"])
def test_every_data_source_and_preset_is_swept(rec_dir, path):
    """The sweep reaches every recording with the page's section (the test recording included) and every preset
    (one test per page, beside that page's sweep: tests/conftest.py keeps a page's sweep tests on one worker)."""
    _, found, _ = sweep(path)
    if path == "pages/2_Nbytes_trap.py":
        assert CPU_DEMO in found["src"].values
        assert "published-article-a-m5-pro" in found["src"].values
    else:
        assert set(found["model"].values) == set(preset_names())
        assert found["gib"].base == {"chip": "custom"} and found["~pasted"].base == {
            "msrc": "config"
        }


# ---------------------------------------------------------------- random whole states (hypothesis)


@pytest.mark.parametrize("path", PAGES)
@settings(
    max_examples=5,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking:
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # each try is a page run
@given(data=hs.data())
def test_random_states_from_the_url(rec_dir, path, data):
    """A query string drawn over every URL-bound widget the sweep found (a widget that needs a state, such as
    ?gib= after ?chip=custom, brings that state along), in any of the site's languages."""
    _, found, _ = sweep(path)
    lang = data.draw(hs.sampled_from(LANGS), label="lang")
    params: dict = {}
    for name in sorted(found):
        knob = found[name]
        if knob.strategy is None or not data.draw(hs.booleans(), label=f"set {name}"):
            continue
        for k, v in knob.base.items():
            params.setdefault(k, v)
        params[name] = data.draw(
            hs.one_of(knob.strategy, hs.sampled_from(knob.outside))
            if knob.outside
            else knob.strategy,
            label=name,
        )
    at = run(path, lang, params)
    odd = next(
        (
            str(v)
            for n, v in params.items()
            if found.get(n) and found[n].kind in ("text_input", "text_area")
        ),
        None,
    )
    outside = any(v in found[n].outside for n, v in params.items() if n in found)
    assert not (p := problems(at, lang, odd if (odd is not None or outside) else None)), (
        f"{where(path, lang, params)}: {p}"
    )


def test_the_schema_check_refuses_a_spec_vega_lite_does_not_know():
    """The check the sweep gives every chart: a mark Vega-Lite has no such type for is refused with its place; the
    legend layout kvsite.charts.chart sets for Vega is not."""
    spec = {
        "mark": "line",
        "encoding": {"x": {"field": "a", "type": "quantitative"}},
        "data": {"name": "d"},
    }
    spec["config"] = {
        "legend": {"layout": {"bottom": {"direction": "vertical", "anchor": "start"}}}
    }
    assert vega_lite_problems(spec) == []
    wrong = vega_lite_problems({**spec, "encoding": {"x": {"field": "a", "type": "bogus"}}})
    assert len(wrong) == 1 and "encoding/x/type" in wrong[0], wrong


def test_no_code_turns_off_altairs_row_limit():
    """A chart that needs more than 5,000 rows should draw fewer, not lift the limit."""
    sources = [
        ROOT / "streamlit_app.py",
        *(ROOT / "pages").glob("*.py"),
        *(ROOT / "kvsite").rglob("*.py"),
        *(ROOT / "kvcore").rglob("*.py"),
    ]
    lifting = [
        str(p.relative_to(ROOT))
        for p in sources
        if re.search(
            r"disable_max_rows|max_rows\s*=\s*None|data_transformers\.(enable|register)",
            p.read_text(encoding="utf-8"),
        )
    ]
    assert not lifting, lifting


# ---------------------------------------------------------------- head_dim x format: the combinations one widget at a time misses


def head_dim_classes() -> list[str]:
    """One preset per way its head dims divide (gcd with 256 of each layer kind's K and V dims: 96 -> 32, 64 -> 64,
    128 -> 128, 256 and MLA's 512 -> 256): every case a group size (mlx: 32/64/128) or block (ggml: 32, turbo: 128
    with padding) can meet. Example: phi-3-mini-4k (head_dim 96) is its own class."""
    seen: dict[tuple, str] = {}
    for name in preset_names():
        layers = preset_geometry(name).layers
        seen.setdefault(
            tuple(
                sorted({(x.kind, math.gcd(x.k_dim, 256), math.gcd(x.v_dim, 256)) for x in layers})
            ),
            name,
        )
    return list(seen.values())


def format_classes(options: list[str]) -> list[str]:
    """The page's format options, one per storage rule (plain, mlx groups, ggml blocks of a size, turbo blocks)."""
    seen: dict[tuple, str] = {}
    for name in options:
        seen.setdefault((FORMATS[name].kind, FORMATS[name].block_values), name)
    return list(seen.values())


def _format_knobs(at: AppTest) -> list:
    return [
        el
        for kind in ("selectbox", "multiselect")
        for el in at.get(kind)
        if el.key
        and getattr(el.proto, "query_param_key", "")
        and list(el.proto.options)
        and set(el.proto.options) <= set(FORMATS)
    ]


@pytest.mark.parametrize("path", PAGES)
def test_every_head_dim_class_with_every_format_rule(rec_dir, path):
    """Every page with a model and a KV-format choice, with one model of each head-dim class and one format of each
    storage rule (a multiselect: each alone, then all at once), on every runtime a page offers: no exception, and
    a model whose head_dim a format cannot hold gets the engine's one sentence (a verdict), not a traceback."""
    first = run(path, "en", {})
    runtimes = [{}] + [
        {"rt": o} for el in first.get("selectbox") if el.key == "rt" for o in el.proto.options
    ][1:]
    if not any(el.key == "model" for el in first.get("selectbox")) or not _format_knobs(first):
        pytest.skip("no model and KV-format choice on this page")
    failures, runs, refused, seen = [], 0, 0, set()
    for base in runtimes:
        knobs = _format_knobs(first if not base else run(path, "en", base))
        for model in head_dim_classes():
            for knob in knobs:
                formats = format_classes(list(knob.proto.options))
                values = (
                    [[f] for f in formats] + [formats] if knob.type == "multiselect" else formats
                )
                for i, value in enumerate(values):
                    lang = LANGS[i % len(LANGS)]
                    params = {**base, "model": model, knob.proto.query_param_key: value}
                    if knob.key in ("k", "v"):  # the calculator: K and V in the same format
                        params.update(k=value, v=value)
                    state = (lang, urlencode(params, doseq=True))
                    if state in seen:  # the calculator's V knob repeats the K knob's states
                        continue
                    seen.add(state)
                    at = run(path, lang, params)
                    runs += 1
                    refused += bool(at.error)
                    failures.extend(f"{where(path, lang, params)}: {p}" for p in problems(at, lang))
                    shown = next((e.value for e in at.selectbox if e.key == "model"), None)
                    if not at.exception and shown != model:
                        failures.append(
                            f"{where(path, lang, params)}: the URL's model did not reach the page ({shown})"
                        )
    assert not failures, f"{len(failures)} failures in {runs} runs:\n" + "\n".join(failures[:40])
    if path.endswith(("3_Linear_growth.py", "8_Calculator.py")):
        assert refused, (
            "phi-3-mini-4k with an mlx format was not refused in a sentence"
        )  # the class exists
