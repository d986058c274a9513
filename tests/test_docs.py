"""The README and docs/: a README a newcomer reads in five minutes, links that lead somewhere, its
two commands naming files that exist, every table a script writes (between marker comments)
being what that script makes now from the bundled data, and every file and module named for readers
(docs, README, requirements, code comments) still there."""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path

import pytest
from test_module_graph import _defined as defined_names

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BEGIN = re.compile(r"^<!-- (\w+): written by benchmarks/(\w+)\.py --markdown (\S+) -->$", re.M)


def fenced_blocks(text: str) -> list[list[str]]:
    return [
        block.splitlines()[1:-1] for block in re.findall(r"^```[^\n]*\n.*?^```", text, re.M | re.S)
    ]


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short_and_narrow():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) < 200
    commands = {
        line for block in fenced_blocks(text)[:2] for line in block
    }  # the two set-up commands
    wide = [line for line in lines if len(line) > 100 and line not in commands]
    assert not wide, wide


def test_the_two_commands_name_files_that_exist():
    site, tests = fenced_blocks((ROOT / "README.md").read_text(encoding="utf-8"))[:2]
    (run,) = site
    named = re.findall(r"-r (\S+)", run) + re.findall(r"streamlit run (\S+)", run)
    assert len(named) == 3 and all((ROOT / name).is_file() for name in named), named
    assert tests == ["bash scripts/test.sh"] and (ROOT / "scripts" / "test.sh").is_file()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_leads_to_a_file_and_heading_that_exist(page):
    headings = {}
    for path in PAGES:
        text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.M | re.S)
        headings[path] = {anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    broken = []
    for target, fragment in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", page.read_text("utf-8")):
        if target.startswith(("http://", "https://")):
            continue
        path = (page.parent / target).resolve() if target else page
        if not path.exists() or (fragment and fragment not in headings.get(path, set())):
            broken.append(f"{target}#{fragment}")
    assert not broken, broken


def test_every_written_section_is_closed_and_its_script_writes_it():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for name, writer, path in BEGIN.findall(text):
            assert (ROOT / path).resolve() == page, f"{name} names {path}, not {page.name}"
            assert text.count(f"<!-- {name}: end -->") == 1, name
            source = (ROOT / "benchmarks" / f"{writer}.py").read_text(encoding="utf-8")
            assert "Section(" in source and f'"{name}"' in source, (
                f"{writer}.py does not write {name}"
            )


MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
DATED = re.compile(rf"\b\d{{1,2}}\s+(?:{MONTHS})\s+\d{{4}}\b")
COMMITTED = re.compile(r"\bcommit\s+`?[0-9a-f]{7,40}\b")


def test_every_written_table_carries_its_date_and_commit():
    """Each benchmark's table says when and on which commit it was measured (the history of its
    runs is git's), and the writer stamps both on every table it writes."""
    undated = [
        f"{page.name}: {name}"
        for page in PAGES
        for name, _, _ in BEGIN.findall(page.read_text(encoding="utf-8"))
        if not (
            DATED.search(body := section(str(page.relative_to(ROOT)), name))
            and COMMITTED.search(body)
        )
    ]
    assert len(BEGIN.findall((ROOT / "docs" / "benchmarks.md").read_text("utf-8"))) >= 8
    assert undated == []
    import datetime

    tables = script("doc_tables")
    started = datetime.datetime(2026, 12, 3, 9, 5, tzinfo=datetime.UTC)
    for line in (tables.provenance(started, (1.0, 1.0, 1.0)), tables.computed(started)):
        assert "3 December 2026" in line and COMMITTED.search(line), line


def section(page: str, name: str) -> str:
    text = (ROOT / page).read_text(encoding="utf-8")
    found = re.search(
        rf"^<!-- {name}: written by .*?-->\n(.*?)^<!-- {name}: end -->", text, re.M | re.S
    )
    return found.group(1)


def test_the_quality_tables_are_the_recordings_now():
    """docs/methods.md's tables are what `benchmarks/quality_tables.py --markdown docs/methods.md`
    writes from the bundled recordings: a recording changed without that rerun fails here."""
    tables = script("quality_tables")
    assert section("docs/methods.md", "quality_mlx").startswith(tables.mlx_table() + "\n")
    assert section("docs/methods.md", "quality_llamacpp").startswith(tables.llamacpp_table() + "\n")


def test_the_published_fits_table_is_the_fits_now():
    """docs/methods.md's fit table is what `benchmarks/published_fits.py --markdown docs/methods.md`
    writes now: a published run added or changed without that rerun fails here."""
    fits = script("published_fits")
    assert section("docs/methods.md", "published_fits").startswith(
        fits.markdown(fits.rows()) + "\n"
    )


# A reader is pointed at this repository's files by path (kvcore/timing/hardware.yaml) and at its modules
# by dotted name (kvcore.memory.formats, kvcore.errors.did_you_mean) in the docs, the README, the
# requirements and the code's comments and docstrings: each must still be there.
FOLDERS = (
    "kvcore",
    "kvsite",
    "pages",
    "tests",
    "benchmarks",
    "scripts",
    "harness",
    "deploy",
    "docs",
)
PATH_REF = re.compile(
    rf"(?<![\w/.-])((?:{'|'.join(FOLDERS)})/[\w/.-]*\w\.(?:py|yaml|json|md|txt|sh|js|css|conf))"
    r"(?![\w/-])"
)
MODULE_REF = re.compile(r"(?<![\w/.-])((?:kvcore|kvsite)(?:\.\w+)+)")


COMMENT_OR_DOCSTRING = re.compile(r'#[^\n]*|"""(?:.|\n)*?"""')


def _comments_and_docstrings(source: str) -> str:
    """Python's comments and triple-quoted strings (its docstrings), read as text (a "#" inside
    a string counts too: only more to check)."""
    return "\n".join(COMMENT_OR_DOCSTRING.findall(source))


def prose() -> dict[str, str]:
    """What is written for readers, by file: Markdown and requirements whole, Python's comments and
    docstrings (its code is held by Python and tests/test_module_graph.py)."""
    paths = [*ROOT.glob("*.md"), *ROOT.glob("requirements*.txt"), ROOT / "streamlit_app.py"]
    paths += [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*")) if p.is_file()]
    out = {}
    for path in paths:
        if path.suffix == ".md" or path.name.startswith("requirements"):
            out[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8")
        elif path.suffix == ".py":
            text = _comments_and_docstrings(path.read_text(encoding="utf-8"))
            out[str(path.relative_to(ROOT))] = text
    return out


_defined = functools.cache(defined_names)


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def missing_reference(name: str) -> str | None:
    """Why a path or dotted name of this repository names nothing (None: it does). A dotted name is
    a module, or a module and a name it defines (kvcore.errors.did_you_mean)."""
    if "/" in name:
        return None if (ROOT / name).exists() else "no such file"
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        path = _module_file(parts[:n])
        if path is None:
            continue
        if n == len(parts) or parts[n] in _defined(path) or _module_file(parts[: n + 1]):
            return None
        if path.name == "__init__.py":
            return "no such module"
        return f"{'.'.join(parts[:n])} defines no {parts[n]}"
    return "no such module"


def test_every_file_and_module_named_for_readers_exists():
    """A moved or renamed file leaves no reference behind (the hardware table after it moved into
    kvcore/timing/, the GGUF weights module after it became kvcore.memory.weight_formats); paths in
    folders git ignores (.gitignore: benchmarks/out/) are what a script writes, not references."""
    ignored = [
        line.strip()
        for line in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
        if line.strip().endswith("/") and "/" in line.strip()[:-1]
    ]
    stale, seen = [], 0
    for where, text in prose().items():
        for name in PATH_REF.findall(text) + MODULE_REF.findall(text):
            seen += 1
            if name.startswith(tuple(ignored)):
                continue
            if why := missing_reference(name):
                stale.append(f"{where}: {name} ({why})")
    stale = sorted(set(stale))
    assert seen > 500
    assert not stale, "\n".join(stale)


def test_a_stale_reference_is_found():
    """The check above can fail: a file that moved, a module renamed, a name no longer defined."""
    assert missing_reference("kvcore/hardware.yaml") == "no such file"
    assert missing_reference("kvcore.gguf_weights") == "no such module"
    assert (
        missing_reference("kvcore.errors.no_such_name") == "kvcore.errors defines no no_such_name"
    )
    assert missing_reference("kvcore/timing/hardware.yaml") is None
    assert missing_reference("kvcore.memory.weight_formats") is None
    assert missing_reference("kvcore.errors.did_you_mean") is None
    assert PATH_REF.findall("see kvcore/hardware.yaml, not mlx_lm/models/cache.py") == [
        "kvcore/hardware.yaml"
    ]
