"""Recordings as files: one YAML file per run (measured by kvcore, or transcribed from a publication), what the
schema allows is kvcore.recordings.schema (checked by kvcore.recordings.check).

Load with a bounded YAML reader (read_yaml: no aliases, at most MAX_NODES values, MAX_DEPTH levels, MAX_SCALAR
characters a value, checked on the parser's events before any data is built) and validate; a broken file gives one
RecordingError naming the file and the problem, and the other files still load. Save atomically (a temporary file,
fsynced, then linked to its name: a save killed at any step leaves either no recording or a whole one, and the
loader never takes the temporary file), never overwriting, and never at all in read-only mode (KVCORE_READ_ONLY=1).
"""

from __future__ import annotations

import functools
import os
import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kvcore.errors import KvError, quote
from kvcore.inputs.textfile import read_file_bytes

# The schema and the checks: its callers also read them from this module.
from kvcore.recordings.check import fail, model_format, validate  # noqa: F401
from kvcore.recordings.schema import (  # noqa: F401
    GRADES,
    ROW_FIELDS,
    SCHEMA_VERSION,
    SECTIONS,
    RecordingError,
    known_fields,
    schema_rows,
)

BUNDLED_DIR = Path(__file__).resolve().parents[2] / "recordings"
LOCAL_DIR = BUNDLED_DIR / "local"  # git-ignored: runs made on this machine
READ_ONLY_ENV = "KVCORE_READ_ONLY"
DIR_ENV = (
    "KVCORE_RECORDINGS_DIR"  # overrides BUNDLED_DIR (tests, other deployments); local/ inside it
)
MAX_FILE_BYTES = 2_000_000
# What a file may hold, checked on the YAML parser's events before anything is built (read_yaml): the largest
# bundled recording has ~3,200 values, 4 levels and 534 characters in its longest value.
MAX_NODES = (
    30_000  # values (scalars, lists and mappings), so that what walks the data later is bounded too
)
MAX_DEPTH = 12  # levels of nested lists and mappings
MAX_SCALAR = 20_000  # characters in one value (a command quoted verbatim is the longest)


@dataclass
class Recording:
    path: Path | None
    data: dict = field(repr=False)
    name: str | None = (
        None  # the id of a recording that has no file (a reader's upload on the site)
    )

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
        chip = re.sub(
            r"\((R|TM)\)|\b(Processor|CPU)\b", "", str(machine.get("chip") or hw.get("chip") or "")
        )
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


SHORT_NAME_MAX = 35  # characters: about 210 px of an 11 px legend label, the sidebar picker's width


def _shorten(text: str, limit: int = SHORT_NAME_MAX) -> str:
    """text up to `limit` characters, ended at a word with "…" when it is longer. _shorten("Intel Xeon Processor", 12)
    -> "Intel Xeon…"."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space >= limit // 3 else cut).rstrip(" ·,—-") + "…"


# ---------------------------------------------------------------- load / save


_LOADER = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader
)  # libyaml when PyYAML has it (its wheels do)
_NODE_EVENTS = (yaml.ScalarEvent, yaml.SequenceStartEvent, yaml.MappingStartEvent)
_END_EVENTS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def check_events(text: str, label: str = "recording") -> int:
    """Read the YAML's events one at a time (nothing kept) and refuse, at the first event past a limit, what no
    recording holds: an alias (*name, which expands to a copy of what its anchor holds: a 35 kB file can expand
    to millions of values), more than MAX_NODES values, lists or mappings nested deeper than MAX_DEPTH, a value
    longer than MAX_SCALAR characters, a key written twice in one mapping (YAML would keep its last value without
    a word). The work done is bounded by the limits, not by what the file would expand to.
    Returns the number of values. Example: check_events("a: &x [1]\\nb: *x") -> RecordingError code "rec_alias".
    """
    nodes = depth = 0
    # one entry per open list (None) or mapping (the keys seen, and whether the next value is a key)
    open_nodes: list[list | None] = []
    events = yaml.parse(text, Loader=_LOADER)
    try:
        for event in events:
            line = event.start_mark.line + 1 if event.start_mark else 0
            if isinstance(event, yaml.AliasEvent):
                fail(
                    label,
                    "rec_alias",
                    f"line {line} uses a YAML alias (*{event.anchor}); a recording never needs one",
                    line=line,
                    alias=event.anchor[:60],
                )
            if isinstance(event, _END_EVENTS):
                depth -= 1
                open_nodes.pop()
            elif isinstance(event, _NODE_EVENTS):
                nodes, depth = _count(event, nodes, depth, line, label)
                _key(open_nodes[-1] if open_nodes else None, event, line, label)
                if not isinstance(event, yaml.ScalarEvent):
                    open_nodes.append(
                        [set(), True] if isinstance(event, yaml.MappingStartEvent) else None
                    )
    finally:
        events.close()  # the parser is let go at once, also when a limit stopped the walk
    return nodes


def _key(mapping: list | None, event, line: int, label: str) -> None:
    """In a mapping (its keys seen, whether this value is a key), refuse a key it has already."""
    if mapping is None:
        return
    keys, is_key = mapping
    mapping[1] = not is_key
    if is_key and isinstance(event, yaml.ScalarEvent):
        if event.value in keys:
            fail(
                label,
                "rec_duplicate_key",
                f"line {line} repeats the key {quote(event.value)} of its mapping (YAML would keep its "
                "last value only)",
                line=line,
                key=quote(event.value),
            )
        keys.add(event.value)


def _count(event, nodes: int, depth: int, line: int, label: str) -> tuple[int, int]:
    """One more value (and one more level for a list or mapping): (values, depth), or the limit's RecordingError."""
    nodes += 1
    if nodes > MAX_NODES:
        fail(
            label,
            "rec_nodes",
            f"holds more than {MAX_NODES:,} values; a recording has far fewer",
            n=f"{MAX_NODES:,}",
        )
    if isinstance(event, yaml.ScalarEvent):
        if len(event.value) > MAX_SCALAR:
            fail(
                label,
                "rec_scalar",
                f"line {line} holds a value longer than {MAX_SCALAR:,} characters",
                line=line,
                n=f"{MAX_SCALAR:,}",
            )
        return nodes, depth
    if depth + 1 > MAX_DEPTH:
        fail(
            label,
            "rec_depth",
            f"line {line} is nested deeper than {MAX_DEPTH} levels",
            line=line,
            n=MAX_DEPTH,
        )
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
        if mark and "nesting depth" in str(
            getattr(e, "problem", "")
        ):  # libyaml's own limit, read ahead of the events
            fail(
                label,
                "rec_depth",
                f"line {mark.line + 1} is nested deeper than {MAX_DEPTH} levels",
                line=mark.line + 1,
                n=MAX_DEPTH,
            )
        if mark:
            fail(
                label, "rec_yaml_at", f"not valid YAML at line {mark.line + 1}", line=mark.line + 1
            )
        fail(label, "rec_yaml", "not valid YAML")
    except (
        ValueError,
        OverflowError,
    ):  # e.g. a date such as 2026-13-45, or an integer of 5,000 digits
        fail(
            label,
            "rec_yaml_value",
            "holds a value YAML cannot read (a date or a number out of range)",
        )


def parse_text(text: str, label: str = "recording") -> Recording:
    return Recording(None, validate(read_yaml(text, label), label))


def parse_bytes(raw: bytes, label: str = "recording") -> Recording:
    """A recording from a file's bytes (a bundled file, or one a reader uploads): size, UTF-8, YAML, schema.

    Example: parse_bytes(Path("recordings/x.yaml").read_bytes(), "x.yaml").title
    """
    if len(raw) > MAX_FILE_BYTES:
        fail(
            label,
            "rec_too_large",
            f"is larger than {MAX_FILE_BYTES // 1_000_000} MB",
            mb=MAX_FILE_BYTES // 1_000_000,
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        fail(label, "rec_not_utf8", "is not UTF-8 text")
    return parse_text(text, label)


def load(path: Path) -> Recording:
    """One recording file, validated; RecordingError names the file and the problem. The same checks as an upload's
    (parse_bytes), on at most the size limit's bytes of a regular file (textfile.read_file_bytes)."""
    path = Path(path)
    try:
        raw = read_file_bytes(path, MAX_FILE_BYTES, path.name)
    except KvError as e:  # "<name> is ..." -> "<name>: is ..." like every RecordingError
        raise RecordingError(
            f"{path.name}:{str(e)[len(path.name) :].rstrip('.')}", e.code, **e.params
        ) from None
    rec = parse_bytes(raw, path.name)
    rec.path = path
    return rec


TEMP_PREFIX = ".tmp-"  # a save's temporary file: never a recording, whole or not
STALE_TEMP_S = (
    3600  # a temporary file this old was left by a save that was killed: save() removes it
)
_STEM = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")  # a stem save() writes as given


def is_recording_name(name: str) -> bool:
    """Whether a file name is one save() writes (and the bundled files have): `<stem>.yaml`, the stem starting with
    a letter or digit. A save's temporary file (.tmp-*.yaml) and any hidden file are not recordings."""
    return name.endswith(".yaml") and bool(_STEM.fullmatch(name[: -len(".yaml")]))


def load_all(folders: list[Path] | None = None) -> tuple[list[Recording], list[str]]:
    """Every recording file in the folders (default: bundled, then local; is_recording_name: a save's leftover
    temporary file is neither loaded nor warned about): (recordings, one error line per broken file)."""
    folders = folders if folders is not None else [BUNDLED_DIR, LOCAL_DIR]
    recordings, errors = [], []
    for folder in folders:
        paths = sorted(Path(folder).glob("*.yaml")) if Path(folder).is_dir() else []
        for path in (p for p in paths if is_recording_name(p.name)):
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


def _remove_stale_temps(folder: Path) -> None:
    """Temporary files a killed save left (older than STALE_TEMP_S: a save in progress is seconds old)."""
    now = time.time()
    for path in folder.glob(f"{TEMP_PREFIX}*.yaml"):
        try:
            if now - path.lstat().st_mtime > STALE_TEMP_S:
                path.unlink()
        except OSError:
            pass  # gone already, or not ours to remove: the loader ignores it either way


def save(data: dict, folder: Path = LOCAL_DIR, stem: str | None = None) -> Path:
    """Validate and write a recording atomically into `folder`; never overwrites an existing file.

    Raises RecordingError in read-only mode or when the folder cannot be written.
    """
    if read_only():
        raise RecordingError(f"read-only mode ({READ_ONLY_ENV}=1): nothing is saved")
    validate(data)
    folder = Path(folder)
    text = dump_text(data)
    base = (
        stem
        if stem and _STEM.fullmatch(stem)
        else _slug(stem or f"{data.get('provenance', {}).get('date', '')}-{data['title']}")
    )  # a name the loader takes (is_recording_name), never a hidden or temporary one, never a path
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(folder)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=TEMP_PREFIX, suffix=".yaml")
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
