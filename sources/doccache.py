"""A sealed cache of a source's documents: one xz-compressed JSON-lines file per source config.

A mixture that takes minutes to build (HTML parsing, near-duplicate removal over 200 MB) is built
once; later runs, and a GPU machine it is carried to (``tokbench data pack``), read the file.
The file's name is a hash of everything its documents depend on (the config, the packages'
versions and .deb hashes, the code of ``sources/``); a sidecar ``.json`` holds the file's sha256
and the build's statistics. A file whose hash does not match (damaged, truncated) is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from sources.base import Document

# A line longer than this is damage (documents are packed to a few KB), not a document.
MAX_LINE_BYTES = 64 << 20
_CODE_DIR = Path(__file__).resolve().parent


def _code_hash() -> str:
    """sha256 over the ``sources/`` package's Python files (a change there rebuilds the cache)."""
    h = hashlib.sha256()
    for p in sorted(_CODE_DIR.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def document_cache_path(cache_dir: Path, name: str, config: dict[str, Any]) -> Path:
    """``<cache>/documents/<name>-<hash>.jsonl.xz`` for this config and the current code."""
    blob = json.dumps({"config": config, "code": _code_hash()}, sort_keys=True, default=str)
    return cache_dir / "documents" / f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:24]}.jsonl.xz"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def write_document_cache(path: Path, docs: Iterable[Document], stats: Any) -> None:
    """Write the documents (consuming ``docs``), then the sidecar with the file's sha256 and
    ``stats.as_dict()``; each written to a temporary name and renamed, the sidecar last."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with lzma.open(tmp, "wt", encoding="utf-8", errors="surrogatepass", preset=6) as f:
        for d in docs:
            f.write(json.dumps({"id": d.id, "text": d.data.decode("utf-8", "surrogateescape"),
                                "language": d.language, "script": d.script, "meta": d.meta},
                               ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    side = {"sha256": _sha256(path), "stats": stats.as_dict()}
    stmp = _sidecar(path).with_name(f".{_sidecar(path).name}.{os.getpid()}.tmp")
    stmp.write_text(json.dumps(side, indent=1), encoding="utf-8")
    os.replace(stmp, _sidecar(path))


def read_cached_stats(path: Path) -> dict[str, Any] | None:
    """The statistics the sidecar of ``path`` records (None if there is none)."""
    try:
        return json.loads(_sidecar(path).read_text(encoding="utf-8"))["stats"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_document_cache(path: Path, log: Callable[[str], None] = print) -> Iterator[Document] | None:
    """The cached documents, or None when the file is missing or does not match its sidecar's
    sha256 (then it is removed, and the caller rebuilds it)."""
    try:
        want = json.loads(_sidecar(path).read_text(encoding="utf-8"))["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not path.is_file() or _sha256(path) != want:
        log(f"[data] {path.name}: damaged document cache, rebuilding it")
        path.unlink(missing_ok=True)
        return None
    return _read_lines(path)


def _read_lines(path: Path) -> Iterator[Document]:
    with lzma.open(path, "rt", encoding="utf-8", errors="surrogatepass") as f:
        while line := f.readline(MAX_LINE_BYTES):
            if not line.endswith("\n"):
                raise ValueError(f"{path}: a line over {MAX_LINE_BYTES} bytes or a truncated file")
            r = json.loads(line)
            yield Document(id=r["id"], data=r["text"].encode("utf-8", "surrogateescape"),
                           language=r["language"], script=r["script"], meta=r["meta"])
