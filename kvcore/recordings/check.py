"""The check that a recording holds only what kvcore.recordings.schema allows: validate() refuses
anything else in one sentence naming the file, the field and the problem (RecordingError, with its
code), and model_format() reads a stated format or says it is not stated (never a default).

Example: validate({"schema": 1, ...}, "run.yaml") -> the data; a misspelled kv_format "fp61" ->
RecordingError "run.yaml: model.kv_format 'fp61' is not a KV cache format kvcore knows ...".
"""

from __future__ import annotations

import datetime as dt
from urllib.parse import urlsplit

from kvcore.errors import KvError, quote
from kvcore.inputs.config import parse_config
from kvcore.inputs.preset_files import preset_names
from kvcore.limits import MAX_MEMORY_FIGURES
from kvcore.memory.formats import ACTIVATION_DTYPES, FORMATS, get_format
from kvcore.memory.formulas import ALL_WEIGHT_FORMATS
from kvcore.recordings import schema
from kvcore.recordings.rows import check_rows, fail
from kvcore.recordings.schema import CHIP_NOT_STATED, GRADES, PUBLIC_HOSTS
from kvcore.runtimes.mlx_lm import MLX_LM
from kvcore.timing.hardware import chips, find_chip, variants


def _unknown(label: str, code: str, what: str, param: str, value, known) -> None:
    """Refuse a name the schema does not know, listing the ones it does (`param`: the name's i18n placeholder)."""
    fail(
        label,
        code,
        f"unknown {what} {quote(value)} (known: {', '.join(known)})",
        **{param: quote(value)},
        known=", ".join(known),
    )


def _mapping(data: dict, key: str, label: str, where: str = "") -> dict:
    value = data.get(key)
    if not isinstance(value, dict):
        if value is None:
            fail(
                label,
                "rec_missing",
                f"'{where}{key}' must be a mapping (missing)",
                field=f"{where}{key}",
            )
        fail(label, "rec_not_mapping", f"'{where}{key}' must be a mapping", field=f"{where}{key}")
    return value


def _text(data: dict, key: str, label: str, where: str = "") -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value.strip():
        if value is None:
            fail(
                label,
                "rec_missing",
                f"'{where}{key}' must be a non-empty text (missing)",
                field=f"{where}{key}",
            )
        fail(
            label, "rec_not_text", f"'{where}{key}' must be a non-empty text", field=f"{where}{key}"
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
        f"model.{key} {quote(value)} is not {what} kvcore knows (known: {known}); "
        f"write 'unknown' if the source does not say",
        "rec_format",
        field=f"model.{key}",
        value=quote(value),
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


MAX_SHORT_LABEL = 35  # characters of a run's short name: a phone's legend holds it whole


def _published_extras(data: dict, label: str) -> None:
    """A published run's citation (source required; url, author, date, command... optional but texts),
    grade, runtime and model flags."""
    citation = _mapping(data, "citation", label)
    _text(citation, "source", label, "citation.")
    for key in schema.CITATION_TEXT:
        if key in citation:
            _text(citation, key, label, "citation.")
    if "url" in citation and not citation["url"].startswith("https://"):
        fail(
            label,
            "rec_url",
            f"citation.url must be an https:// address, not {quote(citation['url'])}",
            value=quote(citation["url"]),
        )
    if "url" in citation:
        _cited(data, citation, label)
    if "date" in citation:
        _date(citation["date"], "citation.date", label)
    if "grade" in citation and citation["grade"] not in GRADES:
        fail(
            label,
            "rec_grade",
            f"citation.grade must be one of {', '.join(GRADES)}, not {quote(citation['grade'])}",
            grades=", ".join(GRADES),
            value=quote(citation["grade"]),
        )
    if "runtime" in data:
        _text(_mapping(data, "runtime", label), "name", label, "runtime.")
    if "hardware" in data:
        _hardware(_mapping(data, "hardware", label), label)
    model = data.get("model")
    for key in ("hybrid", "unusual"):
        if isinstance(model, dict) and key in model and not isinstance(model[key], bool):
            fail(label, "rec_flag", f"model.{key} must be true or false", field=f"model.{key}")
        if (
            isinstance(model, dict) and model.get(key) is True
        ):  # what kvcore does not model, in words
            _text(model, "architecture_note", label, "model.")


def _cited(data: dict, citation: dict, label: str) -> None:
    """A run cited by its URL: on a public host, with who, when, grade, settings and context rule stated, its
    runtime and version, its chip (stated or "not stated"); a decode series quotes its command and quantization
    too (kvcore.recordings.schema.CITED)."""
    host = (urlsplit(citation["url"]).hostname or "").lower()
    if host not in PUBLIC_HOSTS and not host.endswith(tuple("." + h for h in PUBLIC_HOSTS)):
        fail(
            label,
            "rec_url_host",
            f"citation.url must be a page on {', '.join(PUBLIC_HOSTS)} (a public page anyone can open), "
            f"not {quote(citation['url'])}",
            hosts=", ".join(PUBLIC_HOSTS),
            value=quote(citation["url"]),
        )
    series = isinstance(data.get("sections"), dict) and "decode" in data["sections"]
    for key in (*schema.CITED, *(schema.CITED_SERIES if series else ())):
        _text(citation, key, label, "citation.")
    runtime = _mapping(data, "runtime", label)
    for key in ("name", "version"):
        _text(runtime, key, label, "runtime.")
    hardware = _mapping(data, "hardware", label)
    if "chip_stated" not in hardware:
        fail(
            label,
            "rec_missing",
            "'hardware.chip_stated' must be true or false (missing)",
            field="hardware.chip_stated",
        )
    if series:
        _text(_mapping(data, "model", label), "quantization", label, "model.")


def _hardware(hardware: dict, label: str) -> None:
    """hardware.chip: a chip of kvcore's table (kvcore/timing/hardware.yaml), a family whose variant the source does not
    state ("M4 Max"), or "not stated" exactly when chip_stated is false; never a guess or a typo."""
    chip = _text(hardware, "chip", label, "hardware.")
    stated = hardware.get("chip_stated", chip != CHIP_NOT_STATED)
    if not isinstance(stated, bool):
        fail(
            label,
            "rec_flag",
            "hardware.chip_stated must be true or false",
            field="hardware.chip_stated",
        )
    if (chip == CHIP_NOT_STATED) == stated:
        fail(
            label,
            "rec_chip_stated",
            f"hardware.chip is {quote(chip)} but chip_stated is {str(stated).lower()}; a chip the source does "
            f"not name is written {CHIP_NOT_STATED!r} with chip_stated false",
            value=quote(chip),
        )
    if chip == CHIP_NOT_STATED or find_chip(chip) or variants(chip):
        return
    known = ", ".join(c.chip for c in chips())
    fail(
        label,
        "rec_chip",
        f"hardware.chip {quote(chip)} is not a chip kvcore knows (known: {known}); write "
        f"{CHIP_NOT_STATED!r} if the source does not say",
        value=quote(chip),
        known=known,
    )


def _date(value, where: str, label: str, timestamp: bool = False) -> None:
    """A real date, YYYY-MM-DD (a measured run's: an ISO timestamp), not after tomorrow (UTC)."""
    try:
        when = (dt.datetime if timestamp else dt.date).fromisoformat(value)
        day = when.date() if timestamp else when
        real = len(value) >= 10 and day <= dt.datetime.now(dt.timezone.utc).date() + dt.timedelta(
            days=1
        )
    except (TypeError, ValueError):
        real = False
    if not real:
        form = "an ISO date and time (2026-01-31T12:00:00Z)" if timestamp else "YYYY-MM-DD"
        fail(
            label,
            "rec_date",
            f"{where} {quote(value)} is not a real date: write {form}, not after today",
            field=where,
            value=quote(value),
        )


def _model(model: dict, label: str) -> None:
    """model.preset a preset kvcore bundles (a misspelling is refused, never read as "no model") and model.config a
    config.json kvcore reads; their geometry is what a fit of the run's points reads."""
    if "preset" in model:
        name = _text(model, "preset", label, "model.")
        if name not in preset_names():
            known = ", ".join(preset_names())
            fail(
                label,
                "rec_preset",
                f"model.preset {quote(name)} is not a preset kvcore knows (known: {known})",
                value=quote(name),
                known=known,
            )
    if "config" in model:
        config = _mapping(model, "config", label, "model.")
        try:
            parse_config(config, str(model.get("name", "model.config")), MLX_LM)
        except KvError as e:
            fail(
                label,
                "rec_config",
                f"model.config cannot be read: {str(e).rstrip('.')}",
                detail=str(e).rstrip("."),
            )


def validate(data, label: str = "recording") -> dict:
    """Check a recording's structure; return it unchanged or raise RecordingError ("<label>: <problem>")."""
    if not isinstance(data, dict):
        fail(label, "rec_not_recording", "the file must hold a YAML mapping")
    for key in data:
        if key not in schema.TOP_LEVEL:
            _unknown(label, "rec_top_key", "top-level key", "key", key, schema.TOP_LEVEL)
    if data.get("schema") != schema.SCHEMA_VERSION:
        fail(
            label,
            "rec_schema",
            f"'schema' must be {schema.SCHEMA_VERSION}, not {quote(data.get('schema'))}",
            version=schema.SCHEMA_VERSION,
            value=quote(data.get("schema")),
        )
    kind = data.get("kind")
    if kind not in ("measured", "published"):
        fail(
            label,
            "rec_kind",
            f"'kind' must be 'measured' or 'published', not {quote(kind)}",
            value=quote(kind),
        )
    _text(data, "title", label)
    for key in ("label", "short_label"):
        if key in data:
            _text(data, key, label)
    if (
        len(data.get("short_label", "")) > MAX_SHORT_LABEL
    ):  # a phone's legend: never cut without a word
        fail(
            label,
            "rec_short_label",
            f"short_label must be at most {MAX_SHORT_LABEL} characters, not {len(data['short_label'])}",
            limit=MAX_SHORT_LABEL,
            n=len(data["short_label"]),
        )
    if kind == "published":
        _published_extras(data, label)
    else:
        prov = _mapping(data, "provenance", label)
        for key in ("backend", "date", "command"):
            _text(prov, key, label, "provenance.")
        _date(prov["date"], "provenance.date", label, timestamp=True)
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
    _model(data["model"], label)
    sections = _mapping(data, "sections", label)
    if not sections:
        fail(label, "rec_no_sections", "'sections' is empty")
    for name, rows in sections.items():
        if name not in schema.SECTIONS:
            _unknown(label, "rec_section", "section", "name", name, schema.SECTIONS)
        check_rows(name, rows, label)
    _figures(sections, label)
    return data


def _figures(sections: dict, label: str) -> None:
    """At most MAX_MEMORY_FIGURES memory figures (`memory` rows and `benchmark` peaks): each costs a memory plan
    when kvcore.views.published_memory sets it beside kvcore's, so an upload of thousands is refused here."""
    benchmark = sections.get("benchmark", [])
    n = len(sections.get("memory", [])) + sum("peak_memory_gb" in row for row in benchmark)
    if n > MAX_MEMORY_FIGURES:
        fail(
            label,
            "rec_figures",
            f"holds {n:,} memory figures (memory rows and benchmark peaks); a recording holds at most "
            f"{MAX_MEMORY_FIGURES}",
            n=f"{n:,}",
            limit=MAX_MEMORY_FIGURES,
        )
