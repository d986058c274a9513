"""The engine's and the site's modules import each other without a circle: every import counts, the ones inside
functions and in `if TYPE_CHECKING:` blocks too (a lazy or type-only import hides a circle from Python, not from
the reader). kvcore's packages import one way, bottom to top (LAYERS), the longest chain of imports stays short,
no module grows past MAX_LINES, and importing the engine loads nothing but itself."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kvcore", "kvsite")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(module: str, path: Path, known: set[str], type_only: bool = True) -> set[str]:
    """The project modules `module` imports anywhere in its file, `if TYPE_CHECKING:` blocks included (type_only:
    False leaves them out: the imports that run)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if not type_only and isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(
                f"{base}.{alias.name}" for alias in node.names
            )  # `from . import x` names module x
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {name for name in found if name in known and name != module}


def import_graph(type_only: bool = True) -> dict[str, set[str]]:
    files = {
        _module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
    }
    known = set(files)
    return {name: _imported(name, path, known, type_only) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, as the path that closes it (depth-first search, each circle reported once)."""
    found, state, stack = [], {}, []

    def walk(node: str) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                walk(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            walk(node)
    return found


def test_no_module_of_the_engine_or_the_site_is_in_an_import_circle():
    graph = import_graph()
    assert {
        "kvcore.memory.formulas",
        "kvcore.memory.allocsim",
        "kvcore.cli.main",
        "kvsite.sections.shared",
    } <= set(graph)  # it read the packages
    assert (
        "kvcore.memory.allocsim" in graph["kvcore.memory.formulas"]
        and "kvcore.limits" in graph["kvcore.memory.allocsim"]
    )
    assert cycles(graph) == []


def test_the_circle_finder_finds_a_circle_through_a_lazy_import(tmp_path):
    """The check above can fail: two modules that import each other, one of them inside a function."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c", "a"]]
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "one.py").write_text("from .two import X\n")
    (package / "two.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .one import Y\n"
        "def f():\n    from . import one\n"
    )
    known = {"pkg.one", "pkg.two"}
    assert _imported("pkg.two", package / "two.py", known) == {"pkg.one"}  # both count
    assert _imported("pkg.one", package / "one.py", known) == {"pkg.two"}


def _defined(path: Path) -> set[str]:
    """The names a module defines at its top level (in `if`/`try` blocks too): what `from it import x` can find."""
    names: set[str] = set()

    def visit(body) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((a.asname or a.name).partition(".")[0] for a in node.names)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, (ast.If, ast.Try, ast.With)):
                visit(getattr(node, "body", []))
                visit(getattr(node, "orelse", []))
                visit(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return names


def test_every_name_imported_from_the_project_exists_there():
    """A moved or renamed function leaves no import behind, the lazy ones inside functions included (Python finds
    those only when the function runs): every `from kvcore.<module> import name` in the engine, the site, the pages, the
    tests, the benchmarks and the scripts names something that module defines, or a module of the package."""
    files = {
        _module_name(p): p
        for package in (*PACKAGES, "harness")
        for p in sorted((ROOT / package).rglob("*.py"))
    }
    defined = {name: _defined(path) for name, path in files.items()}
    users = [
        p
        for folder in (*PACKAGES, "harness", "pages", "tests", "benchmarks", "scripts")
        for p in sorted((ROOT / folder).rglob("*.py"))
    ] + [ROOT / "streamlit_app.py"]
    missing = []
    for path in users:
        module = _module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                missing += [
                    f"{path.relative_to(ROOT)}:{node.lineno} {a.name} (no such module)"
                    for a in node.names
                    if a.name.partition(".")[0] in (*PACKAGES, "harness")
                    and a.name not in files
                    and a.name not in PACKAGES
                    and a.name != "harness"
                ]
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            if base not in defined:
                if base.partition(".")[0] in (*PACKAGES, "harness") and base not in files:
                    missing.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} {base} (no such module)"
                    )
                continue
            for alias in node.names:
                if alias.name not in defined[base] and f"{base}.{alias.name}" not in files:
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno} {base}.{alias.name}")
    assert len(users) > 50 and "kvcore.model.geometry" in defined
    assert missing == []


# kvcore's packages, bottom to top: each imports only those before it (and the base modules, errors, limits, numbers, units).
LAYERS = (
    "model",
    "memory",
    "runtimes",
    "inputs",
    "timing",
    "recordings",
    "fits",
    "capacity",
    "servers",
    "views",
    "measure",
    "cli",
)
BASE = {"kvcore", "kvcore.errors", "kvcore.limits", "kvcore.numbers", "kvcore.units"}
# The design's limits, with room (not today's maxima, so one line more in a module does not fail an unrelated
# test). A chain that climbs the layers one module each is len(LAYERS) + 2 long (a base module below, __main__
# on top); 6 more allow a few steps inside a package. The flat layout this replaced had a chain of 22.
MAX_CHAIN = len(LAYERS) + 2 + 6
# STYLE.md: a module is one concept, ~100-400 lines; past 500 it is telling you it holds two.
MAX_LINES = 500


def _layer(module: str) -> int:
    if module in BASE:
        return -1
    if module == "kvcore.__main__":
        return len(LAYERS)
    return LAYERS.index(module.split(".")[1])


def _engine_graph(type_only: bool = True) -> dict[str, set[str]]:
    return {
        name: {m for m in imports if m.startswith("kvcore")}
        for name, imports in import_graph(type_only).items()
        if name.startswith("kvcore")
    }


def test_the_engine_packages_import_one_way_bottom_to_top():
    graph = _engine_graph()
    assert {m.split(".")[1] for m in graph if m not in BASE and m != "kvcore.__main__"} == set(
        LAYERS
    )
    upward = sorted(
        f"{a} -> {b}" for a, deps in graph.items() for b in deps if _layer(b) > _layer(a)
    )
    assert upward == []


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest path of imports (the graph has no circle: the test above)."""
    memo: dict[str, list[str]] = {}

    def down(node: str) -> list[str]:
        if node not in memo:
            memo[node] = [node] + max((down(m) for m in graph.get(node, ())), key=len, default=[])
        return memo[node]

    return max((down(n) for n in graph), key=len)


def test_the_longest_import_chain_is_short():
    chain = longest_chain(
        _engine_graph(type_only=False)
    )  # the imports that run, lazy ones included
    assert len(chain) <= MAX_CHAIN, f"{len(chain)} modules (at most {MAX_CHAIN}): " + " -> ".join(
        chain
    )
    assert longest_chain({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"c"}}) == ["a", "b", "c"]


def test_no_module_of_the_engine_or_the_site_is_long():
    long = {
        str(p.relative_to(ROOT)): n
        for package in PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}, f"modules over {MAX_LINES} lines (split by concept): {long}"


def test_importing_the_engine_loads_no_library_streamlit_or_mlx():
    """Every engine module outside measurement and the CLI imports without Streamlit, Altair's renderer, mlx,
    llama-cpp-python or a shared library of its own (OpenBLAS is loaded by kvcore.measure, where mlx is)."""
    import subprocess
    import sys

    modules = sorted(
        m
        for m in _engine_graph()
        if not m.startswith(("kvcore.measure", "kvcore.cli", "kvcore.__main__"))
    )
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "maps = open('/proc/self/maps').read() if sys.platform == 'linux' else ''\n"
        + "bad = [m for m in ('streamlit', 'mlx', 'mlx_lm', 'llama_cpp') if m in sys.modules]\n"
        + "print(bad, 'openblas-pthread' in maps)\n"  # Debian's OpenBLAS, not numpy's own
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "False"]
    if Path(
        "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"
    ).exists():  # the check can fail
        code = (
            "import kvcore.measure\nprint('openblas-pthread' in open('/proc/self/maps').read())\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True
        )
        assert done.stdout.split() == ["True"], done.stderr


# kvsite's parts, bottom to top: each imports only those before it (and the base modules); the pages, above all.
SITE_LAYERS = ("i18n", "data", "charts", "inputs", "frame", "sections")
SITE_BASE = {"kvsite", "kvsite.layout"}


def _site_layer(module: str) -> int:
    return -1 if module in SITE_BASE else SITE_LAYERS.index(module.split(".")[1])


def test_the_site_parts_import_one_way_bottom_to_top():
    """Where a chapter's code lives is answerable in one look (sections/), and what it may stand on too: a part
    never reaches up (the frame never into a chapter, the texts never into the layout's callers)."""
    graph = {
        name: {m for m in imports if m.startswith("kvsite")}
        for name, imports in import_graph().items()
        if name.startswith("kvsite")
    }
    parts = {m.split(".")[1] for m in graph if m not in SITE_BASE}
    assert parts == set(SITE_LAYERS), (
        f"a part of kvsite not in SITE_LAYERS: {parts - set(SITE_LAYERS)}"
    )
    upward = sorted(
        f"{a} -> {b}" for a, deps in graph.items() for b in deps if _site_layer(b) > _site_layer(a)
    )
    assert upward == []
