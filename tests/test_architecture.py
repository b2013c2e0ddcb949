"""The import rule, checked for every module: which of our packages may import which.

``core`` is the bottom layer and imports none of ours; the wings (``encoders``, ``perturbations``,
``sources``, ``reports``) may import ``core`` only (never ``harness`` or each other); ``harness``
wires them together. ``reports`` never imports torch, so ``tokbench report`` runs without it.
Imports are read from the source with ``ast`` (those inside functions included), so nothing is
executed.
"""

from __future__ import annotations

import ast
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
