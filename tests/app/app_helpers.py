"""AppTest helpers: page runners, chart data, page text, a measured test recording."""

from __future__ import annotations

import copy
import io
import json
import re
from pathlib import Path

import altair as alt
import jsonschema
import pandas as pd
import pyarrow.ipc
import yaml
from altair.utils.schemapi import validate_jsonschema
from streamlit.testing.v1 import AppTest

from kvcore.measure.models import BUILTIN_CONFIGS
from kvcore.memory.formats import FORMATS
from kvsite.frame.chapters import CHAPTERS

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "streamlit_app.py")
PAGES = [chapter.path for chapter in CHAPTERS]  # every chapter's page (kvsite/frame/chapters.py)
CPU_DEMO = (
    "test-cpu-demo"  # a measured recording written by the fixture (test data, not a real run)
)


def measured_recording() -> dict:
    """A small measured CPU run in the schema, as kvcore.measure.recording.build_recording would write it (values are test data)."""
    config = dict(BUILTIN_CONFIGS["cpu-demo"])  # the CPU demonstration model a measured run names
    return {
        "schema": 1,
        "kind": "measured",
        "title": "test fixture: cpu-demo on a Linux CPU",
        "label": "CPU demonstration (Linux, mlx cpu) — not Apple Silicon",
        "provenance": {
            "machine": {"os": "Linux 6.1 (x86_64)", "chip": "Test CPU 9000", "memory_gb": 16},
            "backend": "mlx cpu",
            "device": "Device(cpu, 0)",
            "versions": {
                "python": "3.11.2",
                "mlx": "0.32.4",
                "mlx_lm": "0.32.2",
                "kvcore": "0.1.0",
            },
            "date": "2026-11-29T00:00:00Z",
            "command": "tests/app fixture",
        },
        "model": {
            "name": "cpu-demo",
            "source": "random weights",
            "weights_format": "fp32",
            "kv_format": "fp32",
            "activation_dtype": "fp32",
            "config": config,
        },
        "method": {"fill": "synthetic", "warmup": 3, "steps": 16, "repeats": 3},
        "sections": {
            "decode": [
                {"context": 256, "tokens_per_s": 34.7},
                {"context": 1024, "tokens_per_s": 29.1},
                {"context": 4096, "tokens_per_s": 21.3},
                {"context": 16384, "tokens_per_s": 9.5},
            ],
            "trap": [
                {"tokens": 256, "allocated_mib": 8.0, "used_mib": 8.0, "theory_mib": 8.0},
                {"tokens": 257, "allocated_mib": 16.0, "used_mib": 8.03125, "theory_mib": 8.03125},
            ],
            "mechanism": [{"new_tokens": 32, "with_cache_s": 1.2, "without_cache_s": 3.4}],
        },
    }


def page(
    path: str | None = None, lang: str = "en", app: str = APP, state: dict | None = None, **params
) -> AppTest:
    """The home page (or `path`, relative to the app's folder) of `app` (default: this repository's) run once,
    with `params` in its URL and `state` in its session (e.g. a lazy expander's key: True, open)."""
    at = AppTest.from_file(app, default_timeout=60)
    at.query_params["lang"] = lang
    for k, v in params.items():
        at.query_params[k] = str(v)
    for k, v in (state or {}).items():
        at.session_state[k] = v
    if path:
        at.switch_page(path)
    return at.run()


def md_tables(at: AppTest) -> list[pd.DataFrame]:
    """Every markdown table the page shows, as a DataFrame of its cells' text (header row as the columns)."""
    out = []
    for m in at.markdown:
        lines = [x for x in m.value.splitlines() if x.startswith("|")]
        if len(lines) < 2 or not re.fullmatch(r"\|(\s*:?-+:?\s*\|)+", lines[1].replace(" ", "")):
            continue
        cells = [[c.strip() for c in re.split(r"(?<!\\)\|", x)[1:-1]] for x in lines]
        out.append(pd.DataFrame(cells[2:], columns=cells[0]))
    return out


def charts(at: AppTest) -> list[dict]:
    """[{"spec": vega-lite dict, "data": DataFrame of every dataset concatenated}] per chart element."""
    out = []
    for el in at.get("vega_lite_chart"):
        frames = [
            pyarrow.ipc.open_stream(io.BytesIO(d.data.data)).read_all().to_pandas()
            for d in el.proto.datasets
        ]
        out.append(
            {
                "spec": json.loads(el.proto.spec),
                "data": pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(),
            }
        )
    return out


# Altair's bundled Vega-Lite schema (the version it writes). kvsite.charts.chart.to_spec builds specs without Altair's check
# (~0.1 s a chart); the tests check what the pages send instead.
VEGA_LITE = alt.vegalite.v6.schema.core.load_schema()
# A Vega config kvsite.charts.chart.to_spec sets, which Vega-Lite hands to Vega as it is: its schema lists only an
# expression there (Vega's legend layout: https://vega.github.io/vega/docs/config/#legends-properties)
PASSED_TO_VEGA = (("config", "legend", "layout"),)
_SHAPES_CHECKED: set[frozenset] = set()


# "line", "quantitative", "step-after": Vega-Lite's enumerations
ENUM_LIKE = re.compile(r"[a-z]+(-[a-z]+)*")


def _shape(node, path=()) -> set:
    """The spec's structure: every key path (list positions as *) with its value's type, and the value itself
    where it reads as one of Vega-Lite's enumerations (titles, labels and numbers vary with the state)."""
    if isinstance(node, dict):
        return {(path, "dict")}.union(*(_shape(v, (*path, k)) for k, v in node.items()))
    if isinstance(node, list):
        return {(path, "list")}.union(*(_shape(v, (*path, "*")) for v in node))
    if isinstance(node, str) and ENUM_LIKE.fullmatch(node):
        return {(path, node)}
    return {(path, type(node).__name__)}


def vega_lite_problems(spec: dict) -> list[str]:
    """What the Vega-Lite schema refuses in a chart's spec as sent, once per structure (key paths and value types):
    a sweep's thousands of states send a few dozen structures."""
    shape = frozenset(_shape(spec))
    if shape in _SHAPES_CHECKED:
        return []
    checked = copy.deepcopy(spec)
    for *parents, key in PASSED_TO_VEGA:
        node = checked
        for p in parents:
            node = node.get(p, {}) if isinstance(node, dict) else {}
        if isinstance(node, dict):
            node.pop(key, None)
    try:
        validate_jsonschema(checked, VEGA_LITE)
    except jsonschema.ValidationError as e:
        return [
            f"not Vega-Lite at {'/'.join(map(str, e.absolute_path)) or 'top'}: {e.message[:160]}"
        ]
    _SHAPES_CHECKED.add(shape)
    return []


def texts(at: AppTest) -> str:
    """All text the page shows (markdown, captions, titles, headers, metrics, alerts)."""
    parts = []
    for kind in (
        "title",
        "header",
        "subheader",
        "markdown",
        "caption",
        "info",
        "warning",
        "error",
        "success",
    ):
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [f"{m.label} {m.value}" for m in at.metric]
    return "\n".join(parts)


def source_texts(recordings: Path) -> set[str]:
    """Texts quoted from sources, which keep their own language: every multi-word string in the recordings,
    kvcore/recordings/published.yaml and kvcore/timing/hardware.yaml (titles, citations, notes), and the cache formats' sources."""
    out = {f.source for f in FORMATS.values() if " " in f.source}

    def leaves(node):
        if isinstance(node, dict):
            for v in node.values():
                leaves(v)
        elif isinstance(node, list):
            for v in node:
                leaves(v)
        elif isinstance(node, str) and " " in node.strip():
            out.add(node.strip())

    for path in [
        *recordings.glob("*.yaml"),
        ROOT / "kvcore" / "recordings" / "published.yaml",
        ROOT / "kvcore" / "timing" / "hardware.yaml",
    ]:
        leaves(yaml.safe_load(path.read_text(encoding="utf-8")))
    return out


ENGLISH_WORD = re.compile(r"[(\"'“‘]*[A-Za-z][A-Za-z'’-]*[)\"'”’,.;:!?]*")


def english_runs(text: str, sources: set[str] = frozenset(), words: int = 4) -> list[str]:
    """Runs of `words` or more English words in `text`: an English sentence, even inside Japanese prose.

    Code spans, URLs and source texts are removed first; a digit, a symbol or a Japanese character ends a run,
    so names such as "Llama 3.1 8B Instruct" or "Apple M5 Pro" never make one.
    Example: english_runs("メモリ律速です：decode follows bytes read at 10 GB/s") -> ["decode follows bytes read"]
    """
    for quoted in sorted(sources, key=len, reverse=True):
        text = text.replace(quoted, " ")
    text = re.sub(r"```.*?```|`[^`]*`|https?://\S+", " ", text, flags=re.S)
    text = re.sub(
        r"「[\x00-\x7f]+」", " ", text
    )  # an English source's title, quoted as written (ja_style.md)
    text = re.sub(
        r"[^\x00-\x7f]", " | ", text
    )  # Japanese text and full-width punctuation break a run
    runs, run = [], []
    for token in [*text.split(), "|"]:
        if ENGLISH_WORD.fullmatch(token):
            run.append(token)
            continue
        if len(run) >= words:
            runs.append(" ".join(run))
        run = []
    return runs


ENGLISH_LABEL_WORD = re.compile(
    r"(?<![.\w`])[A-Za-z]?[a-z]{3,}\b"
)  # 'with', 'allocated', 'Tokens'; not '.nbytes', 'MiB', 'fp16'


def chart_labels(spec: dict, data: pd.DataFrame | None = None) -> set[str]:
    """Every text a chart shows that the site writes: axis, legend and tooltip titles, legend entries (the colour
    scale's domain) and printed bar labels (a `label` column)."""
    out: set[str] = set()

    def walk(node, key=None):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "title" and isinstance(v, str):
                    out.add(v)
                elif k == "domain" and isinstance(v, list):
                    out.update(x for x in v if isinstance(x, str))
                else:
                    walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)

    walk({k: v for k, v in spec.items() if k not in ("datasets", "data")})
    if data is not None and "label" in data:
        out.update(str(v) for v in data["label"].dropna())
    return out


def english_label(text: str, names: set[str] = frozenset()) -> bool:
    """A label the site writes that is English on a Japanese page: no Japanese character and an English word
    (names of code, formats, models, chips and units aside; `names` are known names such as model ids)."""
    if re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", text):
        return False
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, " ")
    return bool(ENGLISH_LABEL_WORD.search(text))
