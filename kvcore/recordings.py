"""Recordings: one YAML file per run (measured by kvcore, or transcribed from a publication).

Load with a bounded YAML reader (read_yaml: no aliases, at most MAX_NODES values, MAX_DEPTH levels, MAX_SCALAR
characters a value, checked on the parser's events before any data is built) and validate; a broken file gives one
RecordingError naming the file and the problem, and the other files still load. Save atomically (temporary file + rename),
never overwriting, and never at all in read-only mode (KVCORE_READ_ONLY=1).

Schema (version 1):
    schema: 1
    kind: measured | published
    title: str
    label: str                  # how the UI names it, e.g. "CPU demonstration (Linux) — not Apple Silicon"
    short_label: str            # optional: a name short enough for a phone's legend, e.g. "M3 Max · Llama-3.3-70B · mlx-lm"
    citation: {source: str, url: str, note: str}           # published only (url/note optional)
        # optional for published runs: author, date, grade (A, A-, B, C), command (quoted verbatim),
        # settings (what the source states besides the command), context_rule (how `context` is read)
    runtime: {name: str, version: str}                     # published only, optional: the engine that ran
    hardware: {chip, vendor, backend, memory_gb, chip_stated: bool, chip_note}   # published only, optional
    provenance: {machine: {os, chip, memory_gb}, backend, device,
                 versions: {python, mlx, mlx_lm, kvcore}, date, command}   # measured only
    model: {name: str, source: str, weights_format: str, kv_format: str, ...}
        # optional: quantization (as the source names it), preset_note, hybrid / unusual (bool) with
        # architecture_note: a model whose KV is not plain attention over every layer
    method: {...}               # fill, warmup, steps, repeats, ... (free-form mapping)
    sections:                   # at least one; each a list of rows: ROW_FIELDS below is the one statement of
                                # what a row holds (schema_rows() writes it out; validation reads it too)
"""

from __future__ import annotations

import functools

import math
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .errors import KvError
from .formats import FORMATS, get_format
from .formulas import ALL_WEIGHT_FORMATS
from .textfile import read_file_bytes

SCHEMA_VERSION = 1
BUNDLED_DIR = Path(__file__).resolve().parent.parent / "recordings"
LOCAL_DIR = BUNDLED_DIR / "local"  # git-ignored: runs made on this machine
READ_ONLY_ENV = "KVCORE_READ_ONLY"
DIR_ENV = "KVCORE_RECORDINGS_DIR"  # overrides BUNDLED_DIR (tests, other deployments); local/ inside it
MAX_FILE_BYTES = 2_000_000
MAX_NUMBER = 1e15
# What a file may hold, checked on the YAML parser's events before anything is built (read_yaml): the largest
# bundled recording has ~3,200 values, 4 levels and 534 characters in its longest value.
MAX_NODES = 30_000  # values (scalars, lists and mappings), so that what walks the data later is bounded too
MAX_DEPTH = 12  # levels of nested lists and mappings
MAX_SCALAR = 20_000  # characters in one value (a command quoted verbatim is the longest)
TOP_LEVEL = ("schema", "kind", "title", "label", "short_label", "citation", "runtime", "hardware", "provenance",
             "model", "method", "sections")  # the schema's top-level keys (above); any other is refused

# What a row of each section holds: required numbers, optional numbers, texts (required ones listed again under
# required_texts) and lists of numbers. The validation below and kvcore.live_record read it; schema_rows() writes it.
ROW_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "decode": {"required": ("context", "tokens_per_s"),
               "numbers": ("ms_per_token", "spread_ms", "repeats", "min_ms", "max_ms", "q1_ms", "q3_ms", "depth",
                           "prompt_tokens", "generation_tokens", "tokens_per_s_min", "tokens_per_s_max"),
               "texts": ("kv_format",), "lists": ("pass_ms",)},  # pass_ms: ms per pass, in pass order (the spread)
    "trap": {"required": ("tokens", "allocated_mib", "used_mib", "theory_mib"), "numbers": ("capacity",),
             "texts": ("cache", "pattern")},
    "growth": {"required": ("context", "allocated_mib", "used_mib", "theory_mib"), "numbers": ("active_mib", "peak_mib")},
    "mechanism": {"required": ("new_tokens", "with_cache_s", "without_cache_s"),
                  "numbers": ("with_cache_step_ms", "without_cache_step_ms"),
                  "texts": ("token",)},  # token: the new token's text (a real model's run)
    # a real model's next-token log-probabilities through a KV format vs the unquantized cache (kvcore.quality);
    # tokens: positions scored; rows of one format at several token counts show the price against context
    "quality": {"required": ("tokens", "perplexity", "kl_vs_baseline", "top1_agreement"),
                "numbers": ("bits", "group_size", "quantized_kv_start", "bytes_per_token", "seconds", "first_divergence"),
                "texts": ("kv_format", "label"), "required_texts": ("kv_format",)},
    # the same chat prompt answered greedily through each cache; first_divergence: the first token that differs;
    # margin: how many nats the baseline preferred its own token there
    "answers": {"required": ("tokens",), "numbers": ("first_divergence", "margin"),
                "texts": ("kv_format", "label", "prompt", "answer", "agreed_text"),
                "required_texts": ("kv_format", "prompt", "answer")},
    "benchmark": {"required": ("tokens_per_s",), "numbers": ("peak_memory_gb", "prompt_tokens", "generation_tokens"),
                  "texts": ("name",), "required_texts": ("name",)},
    # prompt processing: tokens_per_s = prompt_tokens / prefill time (of all `batch` sequences, when given); a
    # llama-bench pp/tg pair keeps its tg beside it (tg_tokens_per_s, over generation_tokens at the same depth)
    "prefill": {"required": ("prompt_tokens", "tokens_per_s"),
                "numbers": ("depth", "batch", "prefill_s", "repeats", "min_s", "max_s", "q1_s", "q3_s", "spread_s",
                            "tg_tokens_per_s", "generation_tokens", "peak_memory_gb"),
                "texts": ("series",), "lists": ("pass_s",)},  # series: which model, when one source has several
    # batched decode: `batch` sequences at `context` tokens each; tokens_per_s_total counts every sequence's tokens,
    # tokens_per_s (when given) is one sequence's
    "batch": {"required": ("batch", "context", "tokens_per_s_total"),
              "numbers": ("tokens_per_s", "ms_per_step", "repeats", "min_ms", "max_ms", "q1_ms", "q3_ms", "spread_ms",
                          "prompt_tokens", "generation_tokens", "peak_memory_gb"),
              "texts": ("series",), "lists": ("pass_ms",)},
}
# Counts that must be whole and at least 1 (a batch of 0.5 sequences or a prompt of 0 tokens is not a run)
COUNTS = {"prefill": ("prompt_tokens", "batch"), "batch": ("batch",)}
SECTIONS = {name: (f["required"], f.get("numbers", ())) for name, f in ROW_FIELDS.items()}
TEXT_FIELDS = {name: f.get("texts", ()) for name, f in ROW_FIELDS.items()}
REQUIRED_TEXT = {name: f["required_texts"] for name, f in ROW_FIELDS.items() if "required_texts" in f}
LIST_FIELDS = {name: f["lists"] for name, f in ROW_FIELDS.items() if "lists" in f}
GRADES = ("A", "A-", "B", "C")  # A: model, quantization, chip, runtime and depths all stated; C: unusual or 2 points
CITATION_TEXT = ("url", "note", "author", "date", "command", "settings", "context_rule")
MAX_LIST = 10_000


def schema_rows() -> str:
    """ROW_FIELDS written out, one line per section: required fields, then [optional ones], texts in quotes.

    Example: schema_rows().splitlines()[0] -> 'decode: context, tokens_per_s [, ms_per_token, ..., "kv_format", pass_ms[]]'.
    """
    lines = []
    for name, f in ROW_FIELDS.items():
        required = [*f["required"], *(f'"{t}"' for t in f.get("required_texts", ()))]
        optional = [*f.get("numbers", ()), *(f'"{t}"' for t in f.get("texts", ()) if t not in f.get("required_texts", ())),
                    *(f"{t}[]" for t in f.get("lists", ()))]
        lines.append(f"{name}: {', '.join(required)}" + (f" [, {', '.join(optional)}]" if optional else ""))
    return "\n".join(lines)


def known_fields(section: str) -> set[str]:
    """Every field a row of `section` may carry (numbers, texts and lists of numbers).

    Example: "pass_ms" in known_fields("decode") -> True.
    """
    required, optional = SECTIONS[section]
    return set(required) | set(optional) | set(TEXT_FIELDS[section]) | set(LIST_FIELDS.get(section, ()))


class RecordingError(KvError):
    """A recording that cannot be used; str() is one sentence naming the file and the problem.

    A reader's upload can cause every one of them, so each carries a code (errors.CODES, `rec_*`) and the
    values it quotes, with `label` (the file's name) among them: the site says it in the reader's language.
    """


@dataclass
class Recording:
    path: Path | None
    data: dict = field(repr=False)
    name: str | None = None  # the id of a recording that has no file (a reader's upload on the site)

    @property
    def id(self) -> str:
        return self.path.stem if self.path else self.name or self.data.get("title", "unsaved")

    @functools.cached_property
    def key(self) -> str:
        """Its content as one string, computed once (a recording is never edited in place: a changed file is a new
        Recording): what caches key on."""
        return f"{self.path}|{self.name}|{self.data!r}"

    @property
    def kind(self) -> str:
        return self.data["kind"]

    @property
    def title(self) -> str:
        return self.data["title"]

    @property
    def label(self) -> str:
        return self.data.get("label", self.title)

    @property
    def short_name(self) -> str:
        """A name that fits a legend on a phone or the site's sidebar (at most SHORT_NAME_MAX characters): the
        file's short_label, else chip and model (its repository's name, without the owner); made short here,
        at a word, rather than cut by whatever draws it."""
        if "short_label" in self.data:
            return _shorten(self.data["short_label"])
        hw = self.data.get("hardware") or {}
        machine = (self.data.get("provenance") or {}).get("machine") or {}
        chip = re.sub(r"\((R|TM)\)|\b(Processor|CPU)\b", "", str(machine.get("chip") or hw.get("chip") or ""))
        model = str((self.data.get("model") or {}).get("name", "")).split("/")[-1].split(" (")[0]
        return _shorten(" · ".join(filter(None, (" ".join(chip.split()), model))))

    @property
    def short_label(self) -> str:
        """A name for tight places (a legend on a phone): short_label when the file has one, else label."""
        return self.data.get("short_label", self.label)

    @property
    def bundled(self) -> bool:
        return self.path is not None and self.path.parent.resolve() == BUNDLED_DIR

    def rows(self, section: str) -> list[dict]:
        return self.data["sections"].get(section, [])

    def has(self, section: str) -> bool:
        return bool(self.rows(section))


def is_apple_silicon(provenance: dict) -> bool:
    """Whether a measured run's provenance says Apple Silicon: an Apple chip under macOS (Darwin). A run on any
    other machine is a demonstration of the mechanism and is never labelled as Apple Silicon.

    Example: is_apple_silicon({"machine": {"chip": "Apple M3 Max", "os": "Darwin 24.6.0"}}) -> True.
    """
    machine = provenance.get("machine", {}) if isinstance(provenance, dict) else {}
    return "apple" in str(machine.get("chip", "")).lower() and str(machine.get("os", "")).lower().startswith(("mac", "darwin"))


def read_only() -> bool:
    """True when the explicit read-only switch is set (the hosted demo sets KVCORE_READ_ONLY=1)."""
    return os.environ.get(READ_ONLY_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def recordings_dir() -> Path:
    """The bundled recordings folder: $KVCORE_RECORDINGS_DIR when set, else the repository's recordings/."""
    override = os.environ.get(DIR_ENV, "").strip()
    return Path(override).resolve() if override else BUNDLED_DIR


def local_dir() -> Path:
    """Where runs made on this machine are saved: local/ inside recordings_dir()."""
    return recordings_dir() / "local"


def writable(folder: Path = LOCAL_DIR) -> bool:
    """Can a recording be saved in `folder`? False in read-only mode or when the disk refuses."""
    if read_only():
        return False
    probe = folder if folder.exists() else folder.parent
    return os.access(probe, os.W_OK)


# ---------------------------------------------------------------- validation


def _short(value) -> str:
    """A quoted value, cut to 60 characters (a reader's file may hold anything)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


SHORT_NAME_MAX = 35  # characters: about 210 px of an 11 px legend label, the sidebar picker's width


def _shorten(text: str, limit: int = SHORT_NAME_MAX) -> str:
    """text up to `limit` characters, ended at a word with "…" when it is longer. _shorten("Intel Xeon Processor", 12)
    -> "Intel Xeon…"."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space >= limit // 3 else cut).rstrip(" ·,—-") + "…"


def _fail(label: str, code: str, problem: str, **params):
    raise RecordingError(f"{label}: {problem}", code, label=label, **params) from None


def _number(value, where: str, label: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not math.isfinite(value)):
        _fail(label, "rec_number", f"{where} must be a number, not {_short(value)}", field=where, value=_short(value))
    if abs(value) > MAX_NUMBER:  # a huge int is compared exactly, never converted to float
        _fail(label, "rec_range", f"{where} is out of range", field=where)
    if value < 0:
        _fail(label, "rec_negative", f"{where} must not be negative", field=where)
    return value


def _mapping(data: dict, key: str, label: str, where: str = "") -> dict:
    value = data.get(key)
    if not isinstance(value, dict):
        if value is None:
            _fail(label, "rec_missing", f"{where}{key!r} must be a mapping (missing)", field=f"{where}{key}")
        _fail(label, "rec_not_mapping", f"{where}{key!r} must be a mapping", field=f"{where}{key}")
    return value


def _text(data: dict, key: str, label: str, where: str = "") -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        if value is None:
            _fail(label, "rec_missing", f"{where}{key!r} must be a non-empty text (missing)", field=f"{where}{key}")
        _fail(label, "rec_not_text", f"{where}{key!r} must be a non-empty text", field=f"{where}{key}")
    return value


NOT_STATED = ("unknown", "various")  # the source does not say which format, or its rows mix several
FORMAT_FIELDS = {"kv_format": "a KV cache format", "weights_format": "a weights format"}


def model_format(model: dict, key: str, default: str) -> str | None:
    """A recording's model.kv_format or model.weights_format as the engine names it (`default` when absent), or None
    when the source does not say: "unknown", "various", or a description in words ("IQ2_XXS (llama.cpp GGUF)").
    A one-word name the engine does not know (a misspelling: "fp61") is a KvError naming it, never a default.

    Example: model_format({"kv_format": "f16"}, "kv_format", "fp16") -> "fp16".
    """
    value = model.get(key, default)
    if not isinstance(value, str) or value in NOT_STATED or " " in value.strip():
        return None if isinstance(value, str) else _not_a_format(key, value)
    try:
        return get_format(value).name if key == "kv_format" else _weights(value)
    except KvError:
        return _not_a_format(key, value)


def _weights(name: str) -> str:
    if name not in ALL_WEIGHT_FORMATS:
        raise KvError(name)
    return name


def _not_a_format(key: str, value) -> None:
    known = ", ".join(FORMATS) if key == "kv_format" else ", ".join(ALL_WEIGHT_FORMATS)
    raise KvError(f"model.{key} {_short(value)} is not {FORMAT_FIELDS[key]} kvcore knows (known: {known}); "
                  f"write 'unknown' if the source does not say", "rec_format", field=f"model.{key}", value=_short(value),
                  known=known)


def _formats(model: dict, label: str) -> None:
    """Refuse a misspelled model.kv_format / model.weights_format in one sentence (a fit would read other bytes)."""
    for key in FORMAT_FIELDS:
        if key in model:
            try:
                model_format(model, key, "")
            except KvError as e:
                _fail(label, "rec_format", str(e), **e.params)


def _published_extras(data: dict, label: str) -> None:
    """A published run's citation (source required; url, author, date, command... optional but texts),
    grade, runtime and model flags."""
    citation = _mapping(data, "citation", label)
    _text(citation, "source", label, "citation.")
    for key in CITATION_TEXT:
        if key in citation:
            _text(citation, key, label, "citation.")
    if "url" in citation and not citation["url"].startswith("https://"):
        _fail(label, "rec_url", f"citation.url must be an https:// address, not {_short(citation['url'])}", value=_short(citation["url"]))
    if "grade" in citation and citation["grade"] not in GRADES:
        _fail(label, "rec_grade", f"citation.grade must be one of {', '.join(GRADES)}, not {_short(citation['grade'])}",
              grades=", ".join(GRADES), value=_short(citation["grade"]))
    if "runtime" in data:
        _text(_mapping(data, "runtime", label), "name", label, "runtime.")
    model = data.get("model")
    for key in ("hybrid", "unusual"):
        if isinstance(model, dict) and key in model and not isinstance(model[key], bool):
            _fail(label, "rec_flag", f"model.{key} must be true or false", field=f"model.{key}")


def validate(data, label: str = "recording") -> dict:
    """Check a recording's structure; return it unchanged or raise RecordingError ("<label>: <problem>")."""
    if not isinstance(data, dict):
        _fail(label, "rec_not_recording", "the file must hold a YAML mapping")
    for key in data:
        if key not in TOP_LEVEL:
            _fail(label, "rec_top_key", f"unknown top-level key {_short(key)} (known: {', '.join(TOP_LEVEL)})",
                  key=_short(key), known=", ".join(TOP_LEVEL))
    if data.get("schema") != SCHEMA_VERSION:
        _fail(label, "rec_schema", f"'schema' must be {SCHEMA_VERSION}, not {_short(data.get('schema'))}",
              version=SCHEMA_VERSION, value=_short(data.get("schema")))
    kind = data.get("kind")
    if kind not in ("measured", "published"):
        _fail(label, "rec_kind", f"'kind' must be 'measured' or 'published', not {_short(kind)}", value=_short(kind))
    _text(data, "title", label)
    for key in ("label", "short_label"):
        if key in data:
            _text(data, key, label)
    if kind == "published":
        _published_extras(data, label)
    else:
        prov = _mapping(data, "provenance", label)
        for key in ("backend", "date", "command"):
            _text(prov, key, label, "provenance.")
        machine = _mapping(prov, "machine", label, "provenance.")
        _text(machine, "os", label, "provenance.machine."), _text(machine, "chip", label, "provenance.machine.")
        versions = _mapping(prov, "versions", label, "provenance.")
        for key in ("python", "mlx", "mlx_lm"):
            _text(versions, key, label, "provenance.versions.")
        _mapping(data, "method", label)
    _text(_mapping(data, "model", label), "name", label, "model.")
    _formats(data["model"], label)
    sections = _mapping(data, "sections", label)
    if not sections:
        _fail(label, "rec_no_sections", "'sections' is empty")
    for name, rows in sections.items():
        if name not in SECTIONS:
            _fail(label, "rec_section", f"unknown section {_short(name)} (known: {', '.join(SECTIONS)})",
                  name=_short(name), known=", ".join(SECTIONS))
        if not isinstance(rows, list) or not rows:
            _fail(label, "rec_rows", f"section {name!r} must be a non-empty list of rows", name=name)
        required, optional = SECTIONS[name]
        for i, row in enumerate(rows):
            where = f"sections.{name}[{i}]"
            if not isinstance(row, dict):
                _fail(label, "rec_row", f"{where} must be a mapping", field=where)
            for key in (*required, *REQUIRED_TEXT.get(name, ())):
                if key not in row:
                    _fail(label, "rec_missing", f"{where} is missing {key!r}", field=f"{where}.{key}")
            for key, value in row.items():
                if key in required or key in optional:
                    _number(value, f"{where}.{key}", label)
                    if key in COUNTS.get(name, ()) and (value < 1 or value != int(value)):
                        _fail(label, "rec_count", f"{where}.{key} must be a whole number of at least 1, not {_short(value)}",
                              field=f"{where}.{key}", value=_short(value))
                elif key in LIST_FIELDS.get(name, ()):
                    if not isinstance(value, list) or not value or len(value) > MAX_LIST:
                        _fail(label, "rec_list", f"{where}.{key} must be a non-empty list of numbers", field=f"{where}.{key}")
                    for j, item in enumerate(value):
                        _number(item, f"{where}.{key}[{j}]", label)
                elif key in TEXT_FIELDS[name]:
                    if not isinstance(value, str):
                        _fail(label, "rec_not_text", f"{where}.{key} must be text", field=f"{where}.{key}")
                else:
                    _fail(label, "rec_field", f"{where} has an unknown field {_short(key)}", field=where, key=_short(key))
    return data


# ---------------------------------------------------------------- load / save


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML has it (its wheels do)
_NODE_EVENTS = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)
_END_EVENTS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def check_events(text: str, label: str = "recording") -> int:
    """Read the YAML's events one at a time (nothing kept) and refuse, at the first event past a limit, what no
    recording holds: an alias (*name, which expands to a copy of what its anchor holds: a 35 kB file can expand
    to millions of values), more than MAX_NODES values, lists or mappings nested deeper than MAX_DEPTH, a value
    longer than MAX_SCALAR characters. The work done is bounded by the limits, not by what the file would expand to.
    Returns the number of values. Example: check_events("a: &x [1]\\nb: *x") -> RecordingError code "rec_alias".
    """
    nodes = depth = 0
    events = yaml.parse(text, Loader=_LOADER)
    try:
        for event in events:
            line = event.start_mark.line + 1 if event.start_mark else 0
            if isinstance(event, yaml.AliasEvent):
                _fail(label, "rec_alias", f"line {line} uses a YAML alias (*{event.anchor}); a recording never needs one",
                      line=line, alias=event.anchor[:60])
            if isinstance(event, _END_EVENTS):
                depth -= 1
            elif isinstance(event, _NODE_EVENTS):
                nodes, depth = _count(event, nodes, depth, line, label)
    finally:
        events.close()  # the parser is let go at once, also when a limit stopped the walk
    return nodes


def _count(event, nodes: int, depth: int, line: int, label: str) -> tuple[int, int]:
    """One more value (and one more level for a list or mapping): (values, depth), or the limit's RecordingError."""
    nodes += 1
    if nodes > MAX_NODES:
        _fail(label, "rec_nodes", f"holds more than {MAX_NODES:,} values; a recording has far fewer", n=f"{MAX_NODES:,}")
    if isinstance(event, yaml.ScalarEvent):
        if len(event.value) > MAX_SCALAR:
            _fail(label, "rec_scalar", f"line {line} holds a value longer than {MAX_SCALAR:,} characters",
                  line=line, n=f"{MAX_SCALAR:,}")
        return nodes, depth
    if depth + 1 > MAX_DEPTH:
        _fail(label, "rec_depth", f"line {line} is nested deeper than {MAX_DEPTH} levels", line=line, n=MAX_DEPTH)
    return nodes, depth + 1


def read_yaml(text: str, label: str = "recording"):
    """The data of a YAML text that check_events accepts (aliases, size and depth refused first); RecordingError
    otherwise, one sentence naming the file and the problem."""
    try:
        check_events(text, label)
        return yaml.load(text, Loader=_LOADER)  # noqa: S506 (a safe loader: CSafeLoader or SafeLoader)
    except RecordingError:  # a limit check_events refused (a RecordingError is a ValueError too)
        raise
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        if mark and "nesting depth" in str(getattr(e, "problem", "")):  # libyaml's own limit, read ahead of the events
            _fail(label, "rec_depth", f"line {mark.line + 1} is nested deeper than {MAX_DEPTH} levels", line=mark.line + 1,
                  n=MAX_DEPTH)
        if mark:
            _fail(label, "rec_yaml_at", f"not valid YAML at line {mark.line + 1}", line=mark.line + 1)
        _fail(label, "rec_yaml", "not valid YAML")
    except (ValueError, OverflowError):  # e.g. a date such as 2026-13-45, or an integer of 5,000 digits
        _fail(label, "rec_yaml_value", "holds a value YAML cannot read (a date or a number out of range)")


def parse_text(text: str, label: str = "recording") -> Recording:
    return Recording(None, validate(read_yaml(text, label), label))


def parse_bytes(raw: bytes, label: str = "recording") -> Recording:
    """A recording from a file's bytes (a bundled file, or one a reader uploads): size, UTF-8, YAML, schema.

    Example: parse_bytes(Path("recordings/x.yaml").read_bytes(), "x.yaml").title
    """
    if len(raw) > MAX_FILE_BYTES:
        _fail(label, "rec_too_large", f"is larger than {MAX_FILE_BYTES // 1_000_000} MB", mb=MAX_FILE_BYTES // 1_000_000)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        _fail(label, "rec_not_utf8", "is not UTF-8 text")
    return parse_text(text, label)


def load(path: Path) -> Recording:
    """One recording file, validated; RecordingError names the file and the problem. The same checks as an upload's
    (parse_bytes), on at most the size limit's bytes of a regular file (textfile.read_file_bytes)."""
    path = Path(path)
    try:
        raw = read_file_bytes(path, MAX_FILE_BYTES, path.name)
    except KvError as e:  # "<name> is ..." -> "<name>: is ..." like every RecordingError
        raise RecordingError(f"{path.name}:{str(e)[len(path.name):].rstrip('.')}", e.code, **e.params) from None
    rec = parse_bytes(raw, path.name)
    rec.path = path
    return rec


def load_all(folders: list[Path] | None = None) -> tuple[list[Recording], list[str]]:
    """Every *.yaml in the folders (default: bundled, then local): (recordings, one error line per broken file)."""
    folders = folders if folders is not None else [BUNDLED_DIR, LOCAL_DIR]
    recordings, errors = [], []
    for folder in folders:
        for path in sorted(Path(folder).glob("*.yaml")) if Path(folder).is_dir() else []:
            try:
                recordings.append(load(path))
            except RecordingError as e:
                errors.append(str(e))
    return recordings, errors


def dump_text(data: dict) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def _slug(text: str, limit: int = 60) -> str:
    """A file stem from a title: lower-case words joined by '-', at most `limit` characters, cut between words."""
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-").split("-")
    stem = words[0][:limit]
    for word in words[1:]:
        if len(stem) + 1 + len(word) > limit:
            break
        stem += "-" + word
    return stem or "run"


def save(data: dict, folder: Path = LOCAL_DIR, stem: str | None = None) -> Path:
    """Validate and write a recording atomically into `folder`; never overwrites an existing file.

    Raises RecordingError in read-only mode or when the folder cannot be written.
    """
    if read_only():
        raise RecordingError(f"read-only mode ({READ_ONLY_ENV}=1): nothing is saved")
    validate(data)
    folder = Path(folder)
    text = dump_text(data)
    base = stem or _slug(f"{data.get('provenance', {}).get('date', '')}-{data['title']}")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".yaml")
        try:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; a recording is an ordinary file
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            for n in range(1000):
                path = folder / (f"{base}.yaml" if n == 0 else f"{base}-{n + 1}.yaml")
                try:
                    os.link(tmp, path)  # fails if the name exists: never overwrite
                    return path
                except FileExistsError:
                    continue
            raise RecordingError(f"{folder}: too many recordings named {base}")
        finally:
            os.unlink(tmp)
    except OSError as e:
        raise RecordingError(f"{folder}: cannot save the recording ({e.strerror or e})") from None
