"""Every reachable state of every page: each widget through its whole range, through the URL.

The widgets are found by running the page, not listed by hand: every widget bound to the URL
(``bind="query-params"``: its ``query_param_key``; ``kvsite.frame.url_choice``: the options it was called with)
is driven through its ends, its boundaries, its default, every option (every data source, every preset, every
format) and odd text, starting from the state in which it appeared (the custom-memory field appears only for
``chip=custom``); widgets the URL does not hold are driven by interaction. Then hypothesis draws whole query
strings over the same widgets. Both languages.

Each run passes when: no exception element; no error element unless the input was deliberately invalid (odd
text, a number outside the widget's range) or the page is giving a verdict (the model does not fit), and then one
plain sentence in the page's language without a traceback; every chart holds at least one row and at most
Altair's row limit (5,000) in each dataset, with that limit left on; no missing i18n key (⟨key⟩) shows.
"""

from __future__ import annotations

import ast
import io
import json
import math
import re
from dataclasses import dataclass, field
from urllib.parse import urlencode

import altair as alt
import pyarrow.ipc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import kvsite.frame
from app_helpers import APP, CPU_DEMO, PAGES, ROOT, english_runs, texts
from kvcore.geometry import load_preset, preset_names
from kvsite import i18n
from streamlit.testing.v1 import AppTest

ALTAIR_MAX_ROWS = 5000  # altair.utils.data.MaxRowsError: the default transformer's limit
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
TRACEBACK = re.compile(r"Traceback|File \"|line \d+, in |\b[A-Z][A-Za-z]*(Error|Exception)\b")
# Verdicts a page gives in an error box on valid input (the model does not fit): allowed, still checked as sentences.
VERDICT_KEYS = ("calc.verdict_no", "savings.no_fit", "calc.bad_input")
# Odd text for text inputs: empty, blanks, signs, full-width digits, huge, symbols, markup, long, non-numbers.
ODD_TEXT = ["", " ", "0", "-1", "abc", "300, abc", "１２３", "1e9", "99999999999999999999", "NaN", "inf", "1,,2",
            "500x0", "0x500", "2048+2047+1", "💥", "<script>alert(1)</script>", "'; DROP TABLE x; --", "1, " * 300,
            "{", "{}", "[]", "null", '{"num_hidden_layers": -1}']
# Widgets the sweep must find (a floor: discovery finds these and anything added later). The Recordings page's
# comparison picker and the live controls are not URL state; they are driven by interaction.
EXPECTED = {
    None: set(),
    "pages/1_Mechanism.py": {"prompt", "new", "view", "src"},
    "pages/2_Nbytes_trap.py": {"src", "tokens", "fmt", "updates"},
    "pages/3_Linear_growth.py": {"src", "model", "ctx", "w", "kv", "seqs", "lctx"},
    "pages/4_Decode_slowdown.py": {"src", "chip", "model", "w", "eff"},
    "pages/5_Savings.py": {"model", "ctx", "fmts", "mem", "w"},
    "pages/6_Calculator.py": {"msrc", "model", "rt", "ctx", "seq", "k", "v", "w", "chip", "ram", "limit", "gib",
                              "pasted"},
    "pages/8_Recordings.py": {"rec"},
}
KINDS = ("slider", "select_slider", "selectbox", "number_input", "text_input", "text_area", "multiselect", "radio",
         "button_group", "checkbox", "toggle")
MAX_INTERACTION_OPTIONS = 12  # an unbound selectbox: its first options (live controls; no URL state to sweep)


# ---------------------------------------------------------------- url_choice options, as the page passes them

CHOICES: dict[str, list[str]] = {}  # URL key -> the raw options (as URL strings) of this run's url_choice widgets
_url_choice = kvsite.frame.url_choice


def _spy_url_choice(widget, label, options, default, key, *args, **kwargs):
    CHOICES[key] = [str(o) for o in options]
    return _url_choice(widget, label, options, default, key, *args, **kwargs)


@pytest.fixture(autouse=True)
def spy_url_choice(monkeypatch):
    """The real url_choice, noting its options (pages import it from kvsite.frame on every run)."""
    monkeypatch.setattr(kvsite.frame, "url_choice", _spy_url_choice)


# ---------------------------------------------------------------- widgets as the sweep drives them

@dataclass
class Knob:
    """One widget: its kind, key, URL parameter (None: not URL state), values to try, and the state it appeared in."""

    kind: str
    key: str
    param: str | None
    values: list  # URL strings (or lists of them); for interaction, Python values
    outside: list = field(default_factory=list)  # values the widget refuses or clamps (deliberately invalid)
    base: dict = field(default_factory=dict)
    strategy: object = None  # hypothesis strategy over URL values (None: interaction only)

    @property
    def name(self) -> str:
        return self.param or f"~{self.key}"


def _num(v: float, is_int: bool) -> str:
    return str(int(v)) if is_int else f"{round(v, 9):g}"


def _range_values(lo: float, hi: float, step: float, default: float, is_int: bool) -> list[float]:
    """Ends, one step in from each end, the default, the middle (on the step grid), and powers of ten and two
    in between (a range of 1 ... 100,000,000 has its boundaries at 2^k and 10^k)."""
    mid = lo + round((hi - lo) / 2 / step) * step
    vals = {lo, hi, min(hi, lo + step), max(lo, hi - step), default, mid}
    if is_int and hi / max(lo, 1) > 1000:
        vals |= {10 ** k for k in range(12) if lo < 10 ** k < hi}
        vals |= {v for k in range(8, 40, 4) for v in (2 ** k, 2 ** k + 1) if lo < v < hi}
    return sorted(vals)


def knobs_of(at: AppTest, base: dict) -> list[Knob]:
    out = []
    for kind in KINDS:
        for el in at.get(kind):
            key, proto = el.key, el.proto
            if key is None or key == "lang__w":
                continue
            param = getattr(proto, "query_param_key", "") or None
            if param is None and key.endswith("__w") and key[:-3] in CHOICES:
                param = key[:-3]
            out.append(_knob(kind, el, key, param, base))
    return [k for k in out if k is not None]


def _knob(kind: str, el, key: str, param: str | None, base: dict) -> Knob | None:
    proto = el.proto
    if param is not None and key.endswith("__w"):  # url_choice: the raw options the page passed
        opts = CHOICES[param]
        return Knob(kind, key, param, opts, base=base, strategy=hs.sampled_from(opts))
    if kind in ("slider", "number_input"):
        is_int = proto.data_type == proto.INT
        lo = el.min if el.min is not None else -1e6
        hi = el.max if el.max is not None else 1e6
        step = el.step or 1
        default = proto.default[0] if kind == "slider" else (proto.default if proto.HasField("default") else lo)
        vals = _range_values(lo, hi, step, default, is_int)
        if param is None:
            return Knob(kind, key, None, [lo, hi, default])
        outside = [_num(lo - step, is_int), _num(hi + step, is_int), "abc", ""]
        if is_int:
            strat = hs.integers(int(lo), int(hi)).map(lambda v: str(int(lo + (v - lo) // step * step)))
        else:
            strat = hs.floats(lo, hi, allow_nan=False).map(lambda v: _num(lo + round((v - lo) / step) * step, False))
        return Knob(kind, key, param, [_num(v, is_int) for v in vals], outside, base,
                    hs.one_of(strat, hs.sampled_from([_num(v, is_int) for v in vals])))
    if kind in ("selectbox", "radio", "select_slider"):
        opts = list(proto.options)
        if param is None:
            if kind == "select_slider":
                raw = [_literal(o) for o in opts]
                if any(r is None or el.format_func(r) != o for r, o in zip(raw, opts)):
                    return None  # options not recoverable from their labels
                return Knob(kind, key, None, raw)
            return Knob(kind, key, None, list(range(min(len(opts), MAX_INTERACTION_OPTIONS))))
        return Knob(kind, key, param, opts, ["no-such-option"], base, hs.sampled_from(opts))
    if kind == "multiselect":
        opts = list(proto.options)
        if param is None:
            return Knob(kind, key, None, [[], list(el.value)[:1]])
        return Knob(kind, key, param, ["", *([o] for o in opts), opts], [["no-such-option"]], base,
                    hs.lists(hs.sampled_from(opts), unique=True))
    if kind in ("text_input", "text_area"):
        default = proto.default if proto.HasField("default") else ""
        valid = [default] if default else []
        if key == "pasted":  # a config.json: one real one, from a preset, next to the odd ones
            valid.append(json.dumps(load_preset(preset_names()[0])["config"]))
        if param is None:
            return Knob(kind, key, None, valid + ODD_TEXT)
        return Knob(kind, key, param, valid, ODD_TEXT, base, hs.one_of(hs.sampled_from(valid + ODD_TEXT), hs.text(max_size=40)))
    if kind in ("checkbox", "toggle"):
        if param is None:
            return Knob(kind, key, None, [True, False])
        return Knob(kind, key, param, ["true", "false"], [], base, hs.sampled_from(["true", "false"]))
    return None  # a segmented control not bound through url_choice: none today


def _literal(label: str):
    try:
        return ast.literal_eval(label.replace(",", ""))
    except (ValueError, SyntaxError):
        return None


# ---------------------------------------------------------------- one run and its checks

def run(path: str | None, lang: str, params: dict, action=None) -> AppTest:
    """The page opened at ?lang=..&params (AppTest's first run reads the URL as a browser's first load does);
    `action(at)` then changes a widget the URL does not hold, and the page reruns."""
    CHOICES.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["lang"] = lang
    for k, v in params.items():
        at.query_params[k] = v
    if path:
        at.switch_page(path)
    at.run()
    if action is not None and not at.exception:
        CHOICES.clear()
        action(at)
        at.run()
    return at


def where(path: str | None, lang: str, params: dict, action_text: str = "") -> str:
    return f"{path or 'streamlit_app.py'} ?{urlencode({'lang': lang, **params}, doseq=True)}{action_text}"


def verdict_prefixes(lang: str) -> list[str]:
    return [i18n.texts(lang)[k].split("{")[0].strip() for k in VERDICT_KEYS if i18n.has(lang, k)]


def problems(at: AppTest, lang: str, invalid: str | None = None) -> list[str]:
    """What is wrong with one run (empty: it passes). `invalid`: the odd input this run was given, if any."""
    out = []
    for e in at.exception:
        out.append(f"exception: {e.message.splitlines()[0] if e.message else e.value}")
    if out:
        return out
    errors = [str(e.value) for e in at.error]
    verdicts = verdict_prefixes(lang)
    unexplained = [e for e in errors if not any(p and e.startswith(p) for p in verdicts)]
    if unexplained and invalid is None:
        out.append(f"error shown on valid input: {unexplained[0][:160]!r}")
    if len(errors) > 1:
        out.append(f"{len(errors)} error elements: {[e[:80] for e in errors]}")
    for e in errors:
        plain = e.replace(invalid, " ") if invalid else e
        if TRACEBACK.search(plain):
            out.append(f"traceback-like error text: {e[:160]!r}")
        if lang == "ja" and (not JAPANESE.search(plain) or english_runs(plain)):
            out.append(f"error not in Japanese: {e[:160]!r}")
        if lang == "en" and JAPANESE.search(plain):
            out.append(f"Japanese in an English error: {e[:160]!r}")
    for i, el in enumerate(at.get("vega_lite_chart")):
        spec = json.loads(el.proto.spec)
        title = spec.get("title") or el.proto.id or f"chart {i}"
        counts = [pyarrow.ipc.open_stream(io.BytesIO(d.data.data)).read_all().num_rows for d in el.proto.datasets]
        counts += [len(d["values"]) for d in _inline_data(spec)]
        if sum(counts) == 0:
            out.append(f"chart {i} ({str(title)[:40]}) has no data row")
        if max(counts, default=0) > ALTAIR_MAX_ROWS:
            out.append(f"chart {i} ({str(title)[:40]}) sends {max(counts)} rows > Altair's {ALTAIR_MAX_ROWS}")
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
        shown, value = sorted(str(v) for v in el.value), sorted(value) if isinstance(value, list) else []
    elif knob.kind in ("slider", "number_input"):
        return None if math.isclose(float(el.value), float(value), rel_tol=1e-9) else f"shows {el.value}"
    elif knob.kind in ("selectbox", "radio", "select_slider"):
        shown = el.format_func(el.value) if el.value is not None else None
    else:
        shown = el.value
    return None if shown == value or str(shown) == str(value) else f"shows {shown!r}"


# ---------------------------------------------------------------- the sweep: every widget, every value

SWEPT: dict[tuple, tuple[list[str], dict[str, Knob], int]] = {}


def sweep(path: str | None, lang: str) -> tuple[list[str], dict[str, Knob], int]:
    """Every widget of the page through its values, breadth first: a widget that appears only in some state is
    swept from that state. Returns (failures, the widgets found by name, number of runs); cached per page and
    language (the recordings folder is the same in every test)."""
    if (path, lang) in SWEPT:
        return SWEPT[(path, lang)]
    failures: list[str] = []
    at = run(path, lang, {})
    failures += [f"{where(path, lang, {})}: {p}" for p in problems(at, lang)]
    found = {k.name: k for k in knobs_of(at, {})}
    queue, runs = list(found.values()), 1
    while queue:
        knob = queue.pop(0)
        tries = [(v, False) for v in knob.values] + [(v, True) for v in knob.outside]
        for value, outside in tries:
            if knob.param is not None:
                params = {**knob.base, knob.param: value}
                at, desc = run(path, lang, params), where(path, lang, params)
            else:
                params, desc = dict(knob.base), where(path, lang, knob.base, f" then {knob.key} := {str(value)[:40]!r}")
                at = run(path, lang, params, action=lambda a, k=knob, v=value: _interact(a, k, v))
            runs += 1
            text_input = knob.kind in ("text_input", "text_area")
            invalid = str(value) if (outside or (text_input and value in ODD_TEXT)) else None
            failures += [f"{desc}: {p}" for p in problems(at, lang, invalid)]
            if not outside and knob.param is not None and not at.exception and (miss := took(at, knob, value)):
                failures.append(f"{desc}: the URL's value did not reach the widget ({miss})")
            if at.exception:
                continue
            for new in knobs_of(at, params):
                if new.name not in found:
                    found[new.name] = new
                    queue.append(new)
    SWEPT[(path, lang)] = (failures, found, runs)
    return SWEPT[(path, lang)]


def _interact(at: AppTest, knob: Knob, value) -> None:
    el = next(e for e in at.get(knob.kind) if e.key == knob.key)
    if knob.kind in ("selectbox", "radio") and isinstance(value, int):
        el.select_index(value) if knob.kind == "selectbox" else el.set_value(el.options[value])
    else:
        el.set_value(value)


@pytest.mark.parametrize("lang", ["ja", "en"])
@pytest.mark.parametrize("path", [None, *PAGES])
def test_every_widget_through_its_whole_range(rec_dir, path, lang):
    failures, found, runs = sweep(path, lang)
    missing = EXPECTED.get(path, set()) - set(found)
    assert not missing, f"the sweep did not find {missing} on {path}: found {sorted(found)}"
    assert not failures, f"{len(failures)} of {runs} states fail:\n" + "\n".join(failures[:40])


def test_every_data_source_and_preset_is_swept(rec_dir):
    """The sweep reaches every recording with the page's section (the test recording included) and every preset."""
    _, trap, _ = sweep("pages/2_Nbytes_trap.py", "ja")
    assert CPU_DEMO in trap["src"].values and "published-article-a-m5-pro" in trap["src"].values
    _, calc, _ = sweep("pages/6_Calculator.py", "ja")
    assert set(calc["model"].values) == set(preset_names())
    assert calc["gib"].base == {"chip": "custom"} and calc["pasted"].base == {"msrc": "config"}


# ---------------------------------------------------------------- random whole states (hypothesis)

@pytest.mark.parametrize("path", PAGES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(data=hs.data())
def test_random_states_from_the_url(rec_dir, path, data):
    """A query string drawn over every URL-bound widget the sweep found (a widget that needs a state, such as
    ?gib= after ?chip=custom, brings that state along), in either language."""
    _, found, _ = sweep(path, "ja")
    lang = data.draw(hs.sampled_from(["ja", "en"]), label="lang")
    params: dict = {}
    for name in sorted(found):
        knob = found[name]
        if knob.strategy is None or not data.draw(hs.booleans(), label=f"set {name}"):
            continue
        for k, v in knob.base.items():
            params.setdefault(k, v)
        params[name] = data.draw(hs.one_of(knob.strategy, hs.sampled_from(knob.outside)) if knob.outside
                                 else knob.strategy, label=name)
    at = run(path, lang, params)
    odd = next((str(v) for n, v in params.items() if found.get(n) and found[n].kind in ("text_input", "text_area")), None)
    outside = any(v in found[n].outside for n, v in params.items() if n in found)
    assert not (p := problems(at, lang, odd if (odd is not None or outside) else None)), f"{where(path, lang, params)}: {p}"


def test_no_code_turns_off_altairs_row_limit():
    """A chart that needs more than 5,000 rows should draw fewer, not lift the limit."""
    sources = [ROOT / "streamlit_app.py", *(ROOT / "pages").glob("*.py"), *(ROOT / "kvsite").rglob("*.py"),
               *(ROOT / "kvcore").rglob("*.py")]
    lifting = [str(p.relative_to(ROOT)) for p in sources
               if re.search(r"disable_max_rows|max_rows\s*=\s*None|data_transformers\.(enable|register)",
                            p.read_text(encoding="utf-8"))]
    assert not lifting, lifting
