"""``stdlib``: English text harvested from the running Python's standard library (docstrings and
comment blocks). Zero-install: it is the embedded default data of the smoke suite.

Documents are docstrings and runs of comment lines of at least ``min_bytes`` bytes, in sorted module
order, id ``module.py:line``. The text depends on the Python version; run.json records it.
"""

from __future__ import annotations

import ast
import collections
import io
import sys
import sysconfig
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sources.base import Document, Source, SourceContext, check_positive, field_error
from sources.registry import register

_SKIP_DIRS = {"test", "tests", "idlelib", "site-packages", "dist-packages", "lib2to3", "ensurepip", "turtledemo", "__pycache__", "tkinter", "pydoc_data"}


@register("stdlib")
@dataclass(frozen=True, kw_only=True)
class StdlibSource(Source):
    """Docstrings and comments of the Python standard library.

    min_bytes: shortest block kept (>= 0); max_bytes: stop after this many bytes (> 0; None = all,
    ~5-10 MB);
    kinds: which blocks to take (docstring, comment).
    """

    language: str | None = "en"
    min_bytes: int = 200
    max_bytes: int | None = None
    kinds: tuple[str, ...] = ("docstring", "comment")

    def __post_init__(self) -> None:
        check_positive("stdlib", self, "max_bytes")
        if self.min_bytes < 0:
            raise field_error("stdlib", "min_bytes", f"must be >= 0, got {self.min_bytes}")

    def documents(self, ctx: SourceContext) -> Iterator[Document]:
        root = Path(sysconfig.get_paths()["stdlib"])
        total = 0
        for path, blocks in _module_blocks(_modules(root), self.kinds, parallel=self.max_bytes is None):
            rel = path.relative_to(root).as_posix()
            used: set[str] = set()
            for line, text in blocks:
                data = text.encode("utf-8", "surrogateescape")
                if len(data) < self.min_bytes:
                    continue
                # A docstring and a comment can start on the same line (seen on Python 3.12).
                doc_id = f"{rel}:{line}"
                k = 1
                while doc_id in used:
                    k += 1
                    doc_id = f"{rel}:{line}.{k}"
                used.add(doc_id)
                yield Document(id=doc_id, data=data, language=self.language)
                total += len(data)
                if self.max_bytes is not None and total >= self.max_bytes:
                    return

    def provenance(self, ctx: SourceContext) -> dict[str, Any]:
        return {"python": sys.version.split()[0], "stdlib": sysconfig.get_paths()["stdlib"], "licence": "PSF-2.0"}


def _modules(root: Path) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*.py")):
        parts = set(p.relative_to(root).parts[:-1])
        if parts & _SKIP_DIRS or p.name.startswith("test_"):
            continue
        out.append(p)
    return out


PARALLEL_CHUNK = 16  # modules a task, when the modules are parsed in forked processes


def _module_blocks(paths: list[Path], kinds: tuple[str, ...], parallel: bool) -> Iterator[tuple[Path, list[tuple[int, str]]]]:
    """(path, ``_blocks(path)``) in ``paths`` order. ``parallel``: parsed in forked processes (one
    per usable CPU, ``core.forkpool.pool_map``), for a source read whole; else one module at a
    time here, so a ``max_bytes`` cut parses no more than it keeps. The same blocks either way:
    each module is parsed on its own. Why: parsing and tokenizing ~560 modules was 15 of the
    standard suite's 19 s of data loading on the 2-core VM (BENCHMARKS.md), and
    every run pays it."""
    from core.forkpool import pool_map, usable_cpus

    if not parallel or usable_cpus() < 2:
        for p in paths:
            yield p, _blocks(p, kinds)
        return
    chunks = [paths[i : i + PARALLEL_CHUNK] for i in range(0, len(paths), PARALLEL_CHUNK)]
    done = pool_map(lambda ps: [_blocks(p, kinds) for p in ps], chunks, usable_cpus(), "stdlib source",
                    unit="parsed modules")
    for ps, bl in zip(chunks, done):
        yield from zip(ps, bl)


_BLOCKS = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(tree: ast.AST) -> Iterator[ast.AST]:
    """The module, its statements, except handlers and match cases, in ``ast.walk``'s order
    (breadth first, children in field order) without the expressions: only statements can hold a
    definition (and so a docstring), and every ancestor of a statement is one of these, so the
    order among them is ``ast.walk``'s (tests/sources/test_stdlib_blocks.py). ``ast.walk`` spent
    most of its time on expression nodes."""
    todo = collections.deque([tree])
    while todo:
        node = todo.popleft()
        yield node
        for name in node._fields:
            v = getattr(node, name, None)
            if isinstance(v, list):
                todo.extend(x for x in v if isinstance(x, _BLOCKS))


def _blocks(path: Path, kinds: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line, text) of docstrings and comment runs of one module, in line order."""
    try:
        src = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return []
    out: list[tuple[int, str]] = []
    if "docstring" in kinds:
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError):
            tree = None
        if tree is not None:
            for node in _statements(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node, clean=True)
                    if doc:
                        out.append((getattr(node, "lineno", 1), doc))
    if "comment" in kinds:
        run: list[str] = []
        start = prev = 0
        try:
            for tok in tokenize.generate_tokens(io.StringIO(src).readline):
                if tok.type != tokenize.COMMENT:
                    continue
                line = tok.start[0]
                text = tok.string.lstrip("#").strip()
                if run and line != prev + 1:
                    out.append((start, "\n".join(run)))
                    run = []
                if not run:
                    start = line
                if text and not text.startswith(("!", "-*-", "type:", "noqa", "pragma")):
                    run.append(text)
                prev = line
        except (tokenize.TokenError, SyntaxError, IndentationError):
            pass
        if run:
            out.append((start, "\n".join(run)))
    out.sort(key=lambda x: x[0])
    return [(ln, t) for ln, t in out if t.strip()]
