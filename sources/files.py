"""``files``: documents from local files, directories or globs, read as bytes (any encoding)."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from sources.base import Document, Source, SourceContext
from sources.registry import register

_PARA = re.compile(rb"\r?\n[ \t]*\r?\n+")


@register("files")
@dataclass(frozen=True, kw_only=True)
class FilesSource(Source):
    """Local text files.

    paths: files, directories (read recursively, sorted) or glob patterns; relative paths are
    resolved from the suite file's directory, then from the working directory. Inside a
    directory or below a pattern's fixed part no symbolic link is followed (a link loop or a
    link out of the tree reads nothing); a path named whole may itself be a link.
    docs: how a file is cut into documents — ``file`` (one per file), ``paragraph`` (split at blank
    lines) or ``line`` (one per non-empty line).
    extensions: when a directory is given, only files with these suffixes (empty = all files).
    Bytes are never decoded here, so undecodable files cannot crash a run.
    """

    paths: tuple[str, ...]
    docs: Literal["file", "paragraph", "line"] = "paragraph"
    extensions: tuple[str, ...] = ()

    def _files(self, ctx: SourceContext) -> list[tuple[Path, str]]:
        out: list[tuple[Path, str]] = []
        for p in self.paths:
            is_glob = any(ch in p for ch in "*?[")
            found: list[Path] = []
            for base in _bases(ctx):
                cand = Path(p).expanduser()
                cand = cand if cand.is_absolute() else base / cand
                if is_glob:
                    found, root = _glob_files(cand), base
                elif cand.is_dir():
                    found, root = [f for f in _tree_files(cand)
                                   if not self.extensions or f.suffix in self.extensions], cand
                elif cand.is_file():
                    found, root = [cand], cand.parent
                if found:
                    # ids are relative to what the user named, so they are the same on every machine
                    out.extend((f, _rel(f, root)) for f in found)
                    break
            if not found:
                where = " and ".join(str(b) for b in _bases(ctx))  # each folder once
                raise ValueError(f"files source: path '{p}' matches no file (looked in {where})")
        return out

    def check(self, ctx: SourceContext) -> None:
        self._files(ctx)  # resolves every path (names only), raising on one that matches nothing

    def documents(self, ctx: SourceContext) -> Iterator[Document]:
        for f, rel in self._files(ctx):
            data = f.read_bytes()
            if self.docs == "file":
                pieces = [data]
            elif self.docs == "line":
                pieces = data.splitlines()
            else:
                pieces = _PARA.split(data)
            k = 0
            for piece in pieces:
                piece = piece.strip(b"\r\n") if self.docs != "file" else piece
                if not piece.strip():
                    continue
                yield Document(id=f"{rel}#{k}", data=piece, language=self.language)
                k += 1

    def provenance(self, ctx: SourceContext) -> dict[str, Any]:
        """How many files, their bytes, a sha256 of the whole list of ids (one per line) and the
        first ``LISTED_FILES`` ids: run.json and the report stay small for a million files, and
        the hash still tells whether two runs read the same list (the data fingerprint covers
        the bytes)."""
        found = self._files(ctx)
        rels = [rel for _, rel in found]
        return {"n_files": len(rels), "bytes": sum(f.stat().st_size for f, _ in found),
                "files_sha256": hashlib.sha256("\n".join(rels).encode("utf-8", "surrogateescape")).hexdigest(),
                "files": rels[:LISTED_FILES]}


LISTED_FILES = 20  # ids listed by name in run.json's provenance; the rest are counted and hashed


def _tree_files(top: Path, depth: int | None = None) -> list[Path]:
    """Regular files below ``top``, sorted, reached without following a symbolic link: a linked
    file or folder inside the tree is skipped, so a loop (``d/self -> .``) or a link out of the
    tree (``d/etc -> /etc``) reads nothing. ``depth``: the most path parts a file may have
    below ``top`` (None: any). ``top`` itself may be a link: the user named it."""
    out: list[Path] = []
    for folder, dirs, files in os.walk(top, followlinks=False):
        level = len(Path(folder).relative_to(top).parts)
        if depth is not None and level + 1 >= depth:  # files here have level + 1 parts: the deepest wanted
            dirs.clear()
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(folder, d))]
        out.extend(Path(folder, f) for f in files
                   if not os.path.islink(os.path.join(folder, f)) and os.path.isfile(os.path.join(folder, f)))
    return sorted(out, key=str)


def _glob_files(pattern: Path) -> list[Path]:
    """Files matching a glob pattern (``*``, ``?``, ``[..]``; ``**`` for any folders, as in
    ``glob.glob(recursive=True)``: names starting with '.' only where the pattern says so), by
    the same rule as a folder (``_tree_files``): no symbolic link below the pattern's fixed part
    is followed, so a loop is read once and a link out of the tree not at all."""
    parts = pattern.parts
    fixed = next(i for i, c in enumerate(parts) if any(ch in c for ch in "*?["))
    top, rest = Path(*parts[:fixed]), parts[fixed:]
    if not top.is_dir():
        return []
    depth = None if "**" in rest else len(rest)
    return [f for f in _tree_files(top, depth) if _matches(rest, f.relative_to(top).parts)]


def _matches(pattern: tuple[str, ...], name: tuple[str, ...]) -> bool:
    """Whether path components ``name`` match glob components ``pattern`` (``**``: zero or more
    folders not starting with '.'; a '*' or '?' never matches a leading '.')."""
    if not pattern:
        return not name
    head = pattern[0]
    if head == "**":
        return any(_matches(pattern[1:], name[i:]) for i in range(len(name) + 1)
                   if not any(n.startswith(".") for n in name[:i]))
    if not name or (name[0].startswith(".") and not head.startswith(".")):
        return False
    return fnmatch.fnmatchcase(name[0], head) and _matches(pattern[1:], name[1:])


def _bases(ctx: SourceContext) -> list[Path]:
    """Folders a relative path is looked up in: the suite's, then the working directory (once,
    when they are the same folder)."""
    return list(dict.fromkeys(p.resolve() for p in (ctx.base_dir, Path.cwd())))


def _rel(f: Path, root: Path) -> str:
    """A file's path relative to ``root`` (its name when it lies elsewhere)."""
    try:
        return f.relative_to(root).as_posix()
    except ValueError:
        return f.name
