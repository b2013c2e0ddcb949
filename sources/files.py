"""``files``: documents from local files, directories or globs, read as bytes (any encoding)."""

from __future__ import annotations

import glob
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
    resolved from the suite file's directory, then from the working directory.
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
                    found, root = [Path(m) for m in sorted(glob.glob(str(cand), recursive=True)) if Path(m).is_file()], base
                elif cand.is_dir():
                    found, root = sorted(
                        f for f in cand.rglob("*")
                        if f.is_file() and (not self.extensions or f.suffix in self.extensions)
                    ), cand
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
        return {"files": [rel for _, rel in self._files(ctx)]}


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
