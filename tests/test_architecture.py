"""The import rules, checked for every module: which of our packages may import which, the
layers inside ``harness``, and no import circle anywhere.

``core`` is the bottom layer and imports none of ours; the wings (``encoders``, ``perturbations``,
``sources``, ``reports``) may import ``core`` only (never ``harness`` or each other); ``harness``
wires them together. ``reports`` never imports torch, so ``tokbench report`` runs without it.
Inside ``harness`` each subpackage imports only its own layer and those below it
(``HARNESS_LAYERS``), and docs/ARCHITECTURE.md lists every subpackage and top-level module.
Imports are read from the source with ``ast`` (those inside functions included; those under
``if TYPE_CHECKING:``, which never run, left out), so nothing is executed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("core", "encoders", "harness", "perturbations", "reports", "sources")
ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "encoders": {"core"},
    "perturbations": {"core"},
    "sources": {"core"},
    "reports": {"core"},
    "harness": {"core", "encoders", "perturbations", "sources", "reports"},
}
FORBIDDEN_THIRD_PARTY: dict[str, set[str]] = {"reports": {"torch", "triton"}, "core": {"torch", "triton"}}


def imported_top_levels(path: Path) -> set[str]:
    """Top-level package names a module imports (absolute imports; relative ones stay inside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


MODULES = sorted(p for pkg in OURS for p in (ROOT / pkg).rglob("*.py"))


def test_every_package_is_checked() -> None:
    assert set(ALLOWED) == set(OURS)
    for pkg in OURS:
        assert (ROOT / pkg / "__init__.py").is_file(), f"{pkg} is not a package"


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_import_rule(path: Path) -> None:
    pkg = path.relative_to(ROOT).parts[0]
    imported = imported_top_levels(path)
    ours = {m for m in imported if m in OURS and m != pkg}
    bad = ours - ALLOWED[pkg]
    assert not bad, f"{path.relative_to(ROOT)} ({pkg}) imports {sorted(bad)}; allowed: {sorted(ALLOWED[pkg])}"
    banned = imported & FORBIDDEN_THIRD_PARTY.get(pkg, set())
    assert not banned, f"{path.relative_to(ROOT)} ({pkg}) imports {sorted(banned)}"


def test_the_rule_catches_a_violation(tmp_path: Path) -> None:
    # the checker itself: a wing module importing the harness inside a function is found
    f = tmp_path / "m.py"
    f.write_text("import os\n\ndef g():\n    from harness.pipeline.run import Runner\n    import reports.load\n")
    assert imported_top_levels(f) == {"os", "harness", "reports"}


# harness's subpackages from the bottom up; "cli" is harness/cli.py. A module imports its own
# layer and the ones below it only.
HARNESS_LAYERS = ("infra", "config", "data", "train", "score", "analyses", "overlap", "pipeline", "sanity", "cli")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def imported_modules(path: Path, known: set[str], root: Path = ROOT) -> set[str]:
    """Our modules that ``path`` imports, at any depth: ``from a.b import c`` is ``a.b.c`` where
    that is a module, else ``a.b``; relative imports resolved; ``if TYPE_CHECKING:`` left out."""
    me = module_name(path, root)
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skip = {id(x) for node in ast.walk(tree) if isinstance(node, ast.If) and _type_checking(node)
            for n in node.body for x in ast.walk(n)}

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(r for a in node.names if (r := resolve(a.name)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
                mod = ".".join(base[: len(base) - node.level + 1] + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for a in node.names:
                full = f"{mod}.{a.name}"
                r = full if full in known else resolve(mod)
                if r:
                    out.add(r)
    out.discard(me)
    return out


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    paths = {module_name(p, root): p for pkg in packages if (root / pkg).is_dir() for p in (root / pkg).rglob("*.py")}
    known = set(paths)
    return {m: imported_modules(p, known, root) for m, p in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (a list of modules, first == last), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if d not in state and (c := visit(d)):
                return c
        state[m] = 2
        stack.pop()
        return None

    for m in sorted(graph):
        if m not in state and (c := visit(m)):
            return c
    return None


GRAPH = import_graph(ROOT, OURS + ("tools",))


def test_no_import_circle_anywhere() -> None:
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def harness_layer(module: str) -> str:
    parts = module.split(".")
    return "harness" if len(parts) == 1 else parts[1]


def test_harness_subpackages_import_only_downward() -> None:
    rank = {name: i for i, name in enumerate(HARNESS_LAYERS)}
    bad = []
    for m, deps in GRAPH.items():
        if not m.startswith("harness.") or harness_layer(m) not in rank:
            continue
        for d in deps:
            if d.startswith("harness.") and rank[harness_layer(d)] > rank[harness_layer(m)]:
                bad.append(f"{m} ({harness_layer(m)}) imports {d} ({harness_layer(d)})")
    assert not bad, "upward imports (layers, bottom up: " + " < ".join(HARNESS_LAYERS) + "):\n" + "\n".join(sorted(bad))


def test_every_harness_module_sits_in_a_layer() -> None:
    here = {harness_layer(m) for m in GRAPH if m.startswith("harness.")}
    assert here == set(HARNESS_LAYERS), f"not in HARNESS_LAYERS: {sorted(here - set(HARNESS_LAYERS))}; gone: {sorted(set(HARNESS_LAYERS) - here)}"


def test_the_cycle_finder_sees_nested_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from p.b import f\n")
    (pkg / "b.py").write_text("def f():\n    from p import c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p.b import f\n"
                              "def g():\n    from .a import x\n")
    graph = import_graph(tmp_path, ("p",))
    assert graph["p.a"] == {"p.b"} and graph["p.b"] == {"p.c"} and graph["p.c"] == {"p.a"}
    assert find_cycle(graph) == ["p.a", "p.b", "p.c", "p.a"]
    (pkg / "c.py").write_text("def g():\n    pass\n")
    assert find_cycle(import_graph(tmp_path, ("p",))) is None


def _architecture_rows() -> dict[str, str]:
    """docs/ARCHITECTURE.md's layer table: folder or module path -> its "may import" cell."""
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Layers of harness", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\|\s*`(harness/[^`]*)`\s*\|[^|]*\|\s*(.*?)\s*\|$", line)
        if m:
            rows[m.group(1)] = m.group(2)
    return rows


def test_architecture_md_lists_every_harness_layer_and_only_those() -> None:
    rows = _architecture_rows()
    existing = {f"harness/{p.name}/" for p in (ROOT / "harness").iterdir() if (p / "__init__.py").is_file()}
    existing |= {f"harness/{p.name}" for p in (ROOT / "harness").glob("*.py") if p.name != "__init__.py"}
    assert set(rows) == existing, f"listed, not there: {sorted(set(rows) - existing)}; there, not listed: {sorted(existing - set(rows))}"
    for path in rows:
        layer = path.removeprefix("harness/").removesuffix("/").removesuffix(".py")
        assert layer in HARNESS_LAYERS, path
        below = HARNESS_LAYERS[: HARNESS_LAYERS.index(layer)]
        named = set(re.findall(r"`([a-z]+)/?`", rows[path]))
        assert named == set(below), f"{path}: may import {sorted(named)}, the layers below it are {list(below)}"


# Small rooms: no file of the project's packages, benchmarks or tests over MAX_FILE_LINES lines,
# no function over MAX_FUNCTION_LINES. The rooms still over a limit are listed with their size
# today: none may grow, none may be added, and one that shrinks under the limit must leave the
# list. The FuzzyTok kernels are one file on purpose: the Triton kernels and their launch code
# read together. bench_fuzzytok.py's parts run only on a GPU, so it is split once a GPU can run
# it after the move.
MAX_FILE_LINES, MAX_FUNCTION_LINES = 600, 80
ROOM_PACKAGES = ("core", "harness", "encoders", "perturbations", "sources", "reports", "benchmarks", "tests")
OVER_FILE_LIMIT = {
    "encoders/fuzzytok/kernels.py": 1383,
    "benchmarks/bench_fuzzytok.py": 939,
}
OVER_FUNCTION_LIMIT = {
}


def _room_sizes() -> tuple[dict[str, int], dict[str, int]]:
    files, functions = {}, {}
    for pkg in ROOM_PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(p.relative_to(ROOT))
            text = p.read_text(encoding="utf-8")
            files[rel] = len(text.splitlines())
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    key = f"{rel}:{node.name}"
                    functions[key] = max(functions.get(key, 0), node.end_lineno - node.lineno + 1)
    return files, functions


def test_rooms_are_small_and_the_big_ones_only_shrink() -> None:
    files, functions = _room_sizes()
    for sizes, limit, known, what in ((files, MAX_FILE_LINES, OVER_FILE_LIMIT, "file"),
                                      (functions, MAX_FUNCTION_LINES, OVER_FUNCTION_LIMIT, "function")):
        over = {k: n for k, n in sizes.items() if n > limit}
        new = sorted(set(over) - set(known))
        assert not new, f"{what}s over {limit} lines: {[(k, over[k]) for k in new]}"
        grown = [(k, over[k], known[k]) for k in over if over[k] > known[k]]
        assert not grown, f"{what}s grown past their listed size (now, listed): {grown}"
        done = sorted(set(known) - set(over))
        assert not done, f"{what}s now within {limit} lines (remove them from the list): {done}"
