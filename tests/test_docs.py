"""The README and docs/: a README a newcomer reads in five minutes, links that lead somewhere, its
two commands naming files that exist, and every table a script writes (between marker comments)
being what that script makes now from the bundled data."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

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
