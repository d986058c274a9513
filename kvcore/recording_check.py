"""The check that a recording holds only what kvcore.recording_schema allows: validate() refuses
anything else in one sentence naming the file, the field and the problem (RecordingError, with its
code), and model_format() reads a stated format or says it is not stated (never a default).

Example: validate({"schema": 1, ...}, "run.yaml") -> the data; a misspelled kv_format "fp61" ->
RecordingError "run.yaml: model.kv_format 'fp61' is not a KV cache format kvcore knows ...".
"""

from __future__ import annotations

import math

from .errors import KvError, quote
from .formats import FORMATS, get_format
from .formulas import ACTIVATION_DTYPES, ALL_WEIGHT_FORMATS
from .recording_schema import (
    CITATION_TEXT,
    COUNTS,
    GRADES,
    LIST_FIELDS,
    MAX_LIST,
    MAX_NUMBER,
    REQUIRED_TEXT,
    SCHEMA_VERSION,
    SECTIONS,
    TEXT_FIELDS,
    TOP_LEVEL,
    RecordingError,
)


def _short(value) -> str:
    """A quoted value, cut to a short prefix (a reader's file may hold anything): kvcore.errors.quote."""
    return quote(value)


def fail(label: str, code: str, problem: str, **params):
    raise RecordingError(f"{label}: {problem}", code, label=label, **params) from None


def _unknown(label: str, code: str, what: str, param: str, value, known) -> None:
    """Refuse a name the schema does not know, listing the ones it does (`param`: the name's i18n placeholder)."""
    fail(
        label,
        code,
        f"unknown {what} {_short(value)} (known: {', '.join(known)})",
        **{param: _short(value)},
        known=", ".join(known),
    )


def _number(value, where: str, label: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (isinstance(value, float) and not math.isfinite(value))
    ):
        fail(
            label,
            "rec_number",
            f"{where} must be a number, not {_short(value)}",
            field=where,
            value=_short(value),
        )
    if abs(value) > MAX_NUMBER:  # a huge int is compared exactly, never converted to float
        fail(label, "rec_range", f"{where} is out of range", field=where)
    if value < 0:
        fail(label, "rec_negative", f"{where} must not be negative", field=where)
    return value


def _mapping(data: dict, key: str, label: str, where: str = "") -> dict:
    value = data.get(key)
    if not isinstance(value, dict):
        if value is None:
            fail(
                label,
                "rec_missing",
                f"{where}{key!r} must be a mapping (missing)",
                field=f"{where}{key}",
            )
        fail(label, "rec_not_mapping", f"{where}{key!r} must be a mapping", field=f"{where}{key}")
    return value


def _text(data: dict, key: str, label: str, where: str = "") -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        if value is None:
            fail(
                label,
                "rec_missing",
                f"{where}{key!r} must be a non-empty text (missing)",
                field=f"{where}{key}",
            )
        fail(
            label, "rec_not_text", f"{where}{key!r} must be a non-empty text", field=f"{where}{key}"
        )
    return value


NOT_STATED = ("unknown", "various")  # the source does not say which format, or its rows mix several
# the model's fields that name a format: what each names, and the names kvcore knows (read when asked)
FORMAT_FIELDS = {
    "kv_format": ("a KV cache format", lambda: tuple(FORMATS)),
    "weights_format": ("a weights format", lambda: tuple(ALL_WEIGHT_FORMATS)),
    "activation_dtype": ("an activation dtype", lambda: ACTIVATION_DTYPES),
}


def model_format(model: dict, key: str) -> str | None:
    """A recording's model.kv_format, model.weights_format or model.activation_dtype as the engine names it,
    or None when the source does not say: the field absent (never fp16 or bf16 in its place), "unknown", "various", or
    a description in words ("IQ2_XXS (llama.cpp GGUF)"). A one-word name the engine does not know (a
    misspelling: "fp61") is a KvError naming it, never a default.

    Example: model_format({"kv_format": "f16"}, "kv_format") -> "fp16"; model_format({}, "kv_format")
    -> None.
    """
    if key not in model:
        return None
    value = model[key]
    if not isinstance(value, str) or value in NOT_STATED or " " in value.strip():
        return None if isinstance(value, str) else _not_a_format(key, value)
    try:
        if key == "kv_format":
            return get_format(value).name
        if value not in FORMAT_FIELDS[key][1]():
            raise KvError(value)
        return value
    except KvError:
        return _not_a_format(key, value)


def _not_a_format(key: str, value) -> None:
    what, names = FORMAT_FIELDS[key]
    known = ", ".join(names())
    raise KvError(
        f"model.{key} {_short(value)} is not {what} kvcore knows (known: {known}); "
        f"write 'unknown' if the source does not say",
        "rec_format",
        field=f"model.{key}",
        value=_short(value),
        known=known,
    )


def _formats(model: dict, label: str) -> None:
    """Refuse a misspelled model.kv_format / weights_format / activation_dtype in one sentence (a fit would read
    other bytes)."""
    for key in FORMAT_FIELDS:
        if key in model:
            try:
                model_format(model, key)
            except KvError as e:
                fail(label, "rec_format", str(e), **e.params)


def _published_extras(data: dict, label: str) -> None:
    """A published run's citation (source required; url, author, date, command... optional but texts),
    grade, runtime and model flags."""
    citation = _mapping(data, "citation", label)
    _text(citation, "source", label, "citation.")
    for key in CITATION_TEXT:
        if key in citation:
            _text(citation, key, label, "citation.")
    if "url" in citation and not citation["url"].startswith("https://"):
        fail(
            label,
            "rec_url",
            f"citation.url must be an https:// address, not {_short(citation['url'])}",
            value=_short(citation["url"]),
        )
    if "grade" in citation and citation["grade"] not in GRADES:
        fail(
            label,
            "rec_grade",
            f"citation.grade must be one of {', '.join(GRADES)}, not {_short(citation['grade'])}",
            grades=", ".join(GRADES),
            value=_short(citation["grade"]),
        )
    if "runtime" in data:
        _text(_mapping(data, "runtime", label), "name", label, "runtime.")
    model = data.get("model")
    for key in ("hybrid", "unusual"):
        if isinstance(model, dict) and key in model and not isinstance(model[key], bool):
            fail(label, "rec_flag", f"model.{key} must be true or false", field=f"model.{key}")


def validate(data, label: str = "recording") -> dict:
    """Check a recording's structure; return it unchanged or raise RecordingError ("<label>: <problem>")."""
    if not isinstance(data, dict):
        fail(label, "rec_not_recording", "the file must hold a YAML mapping")
    for key in data:
        if key not in TOP_LEVEL:
            _unknown(label, "rec_top_key", "top-level key", "key", key, TOP_LEVEL)
    if data.get("schema") != SCHEMA_VERSION:
        fail(
            label,
            "rec_schema",
            f"'schema' must be {SCHEMA_VERSION}, not {_short(data.get('schema'))}",
            version=SCHEMA_VERSION,
            value=_short(data.get("schema")),
        )
    kind = data.get("kind")
    if kind not in ("measured", "published"):
        fail(
            label,
            "rec_kind",
            f"'kind' must be 'measured' or 'published', not {_short(kind)}",
            value=_short(kind),
        )
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
        (
            _text(machine, "os", label, "provenance.machine."),
            _text(machine, "chip", label, "provenance.machine."),
        )
        versions = _mapping(prov, "versions", label, "provenance.")
        for key in ("python", "mlx", "mlx_lm"):
            _text(versions, key, label, "provenance.versions.")
        _mapping(data, "method", label)
    _text(_mapping(data, "model", label), "name", label, "model.")
    _formats(data["model"], label)
    sections = _mapping(data, "sections", label)
    if not sections:
        fail(label, "rec_no_sections", "'sections' is empty")
    for name, rows in sections.items():
        if name not in SECTIONS:
            _unknown(label, "rec_section", "section", "name", name, SECTIONS)
        if not isinstance(rows, list) or not rows:
            fail(label, "rec_rows", f"section {name!r} must be a non-empty list of rows", name=name)
        required, optional = SECTIONS[name]
        for i, row in enumerate(rows):
            where = f"sections.{name}[{i}]"
            if not isinstance(row, dict):
                fail(label, "rec_row", f"{where} must be a mapping", field=where)
            for key in (*required, *REQUIRED_TEXT.get(name, ())):
                if key not in row:
                    fail(
                        label, "rec_missing", f"{where} is missing {key!r}", field=f"{where}.{key}"
                    )
            for key, value in row.items():
                if key in required or key in optional:
                    _number(value, f"{where}.{key}", label)
                    if key in COUNTS.get(name, ()) and (value < 1 or value != int(value)):
                        fail(
                            label,
                            "rec_count",
                            f"{where}.{key} must be a whole number of at least 1, not {_short(value)}",
                            field=f"{where}.{key}",
                            value=_short(value),
                        )
                elif key in LIST_FIELDS.get(name, ()):
                    if not isinstance(value, list) or not value or len(value) > MAX_LIST:
                        fail(
                            label,
                            "rec_list",
                            f"{where}.{key} must be a non-empty list of numbers",
                            field=f"{where}.{key}",
                        )
                    for j, item in enumerate(value):
                        _number(item, f"{where}.{key}[{j}]", label)
                elif key in TEXT_FIELDS[name]:
                    if not isinstance(value, str):
                        fail(
                            label,
                            "rec_not_text",
                            f"{where}.{key} must be text",
                            field=f"{where}.{key}",
                        )
                else:
                    fail(
                        label,
                        "rec_field",
                        f"{where} has an unknown field {_short(key)}",
                        field=where,
                        key=_short(key),
                    )
    return data
