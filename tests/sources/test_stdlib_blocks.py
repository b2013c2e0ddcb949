"""The ``stdlib`` source's block extraction: the statement-only walk finds the same docstrings
in the same order as ``ast.walk``, and parsing in forked processes gives the same documents as
parsing one module at a time."""

from __future__ import annotations

import ast
import sysconfig
from collections.abc import Callable, Iterable
from pathlib import Path

from sources import stdlib
from sources.base import SourceContext


def _docs(src: str, walk: Callable[[ast.AST], Iterable[ast.AST]]) -> list[tuple[int, str]]:
    """(line, docstring) of every definition ``walk`` reaches, in its order."""
    out = []
    for node in walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                out.append((getattr(node, "lineno", 1), doc))
    return out


def _walk_docs(src: str) -> list[tuple[int, str]]:
    """The docstrings as the source found them before: every node of ``ast.walk``."""
    return _docs(src, ast.walk)


def _stmt_docs(src: str) -> list[tuple[int, str]]:
    return _docs(src, stdlib._statements)


NESTED = '''\
"""Module."""
import x
@deco(lambda: 1)
class A:
    """A."""
    def f(self): """f."""
    if x:
        def g(): """g, in an if."""
    else:
        class B: """B, in an else."""
    try:
        def h(): """h, in a try."""
    except E:
        def i(): """i, in a handler."""
    else:
        def j(): """j, in a try's else."""
    finally:
        def k(): """k, in a finally."""
    with c:
        async def m(): """m, async, in a with."""
    for _ in y:
        def n(): """n, in a for."""
    while z:
        def o(): """o, in a while."""
match v:
    case 1:
        def p(): """p, in a match case."""
def q(): """q."""; x = lambda: 0
'''


def test_statement_walk_finds_what_ast_walk_finds_in_its_order() -> None:
    assert _stmt_docs(NESTED) == _walk_docs(NESTED)
    assert len(_walk_docs(NESTED)) == 14  # every def and class above, and the module
    root = Path(sysconfig.get_paths()["stdlib"])
    mods = stdlib._modules(root)
    for path in mods[:: max(1, len(mods) // 40)]:  # 40 real modules across the library
        src = path.read_text(encoding="utf-8")
        assert _stmt_docs(src) == _walk_docs(src), path


def test_forked_parsing_gives_the_same_documents(monkeypatch, tmp_path: Path) -> None:  # noqa: ANN001
    root = Path(sysconfig.get_paths()["stdlib"])
    mods = stdlib._modules(root)[:80]
    monkeypatch.setattr(stdlib, "_modules", lambda r: mods)
    monkeypatch.setattr(stdlib, "PARALLEL_CHUNK", 7)  # several tasks, the last one short
    import core.forkpool

    monkeypatch.setattr(core.forkpool, "usable_cpus", lambda: 3)
    ctx = SourceContext(cache_dir=tmp_path, base_dir=tmp_path)
    src = stdlib.StdlibSource()
    forked = [(d.id, d.data) for d in src.documents(ctx)]
    serial = list(stdlib._module_blocks(mods, src.kinds, parallel=False))
    assert [(p, b) for p, b in stdlib._module_blocks(mods, src.kinds, parallel=True)] == serial
    assert len(forked) > 100
    monkeypatch.setattr(core.forkpool, "usable_cpus", lambda: 1)  # one module at a time, here
    assert [(d.id, d.data) for d in src.documents(ctx)] == forked
