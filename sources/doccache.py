"""A sealed cache of a source's documents: one xz-compressed JSON-lines file per source config.

A mixture that takes minutes to build (HTML parsing, near-duplicate removal over 200 MB) is built
once; later runs, and a GPU machine the file is carried to, read it. The file's name is a hash of
the config and the code of the modules that make the documents; a sidecar ``.json`` holds the file's sha256, the build's
statistics and the provenance of the packages it was built from (so a machine that has only this
file can still say what it trained on; where the packages are in the cache, the caller checks
their versions against it). A file whose hash does not match (damaged, truncated) is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from sources.base import Document

# A line longer than this is damage (documents are packed to a few KB), not a document.
MAX_LINE_BYTES = 64 << 20


def _code_hash(modules: Iterable[str]) -> str:
    """sha256 over the named modules' files and this one's (a change there rebuilds the cache;
    a change elsewhere, such as to the ``files`` source, does not)."""
    h = hashlib.sha256()
    for name in sorted({*modules, __name__}):
        path = Path(sys.modules[name].__file__ or "")
        h.update(name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def document_cache_path(cache_dir: Path, name: str, config: dict[str, Any], modules: Iterable[str]) -> Path:
    """``<cache>/documents/<name>-<hash>.jsonl.xz`` for this config and the current code of the
    (imported) ``modules`` that make its documents."""
    blob = json.dumps({"config": config, "code": _code_hash(modules)}, sort_keys=True, default=str)
    return cache_dir / "documents" / f"{name}-{hashlib.sha256(blob.encode()).hexdigest()[:24]}.jsonl.xz"


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def cache_files(path: Path) -> list[Path]:
    """The two files of one document cache, in the order they must be installed: the documents,
    then the sidecar that seals them (a reader trusts the file only once the sidecar matches)."""
    return [path, _sidecar(path)]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def write_document_cache(path: Path, docs: Iterable[Document], stats: Any,
                         provenance: Callable[[], Any] = lambda: None) -> None:
    """Write the documents (consuming ``docs``), then the sidecar with the file's sha256,
    ``stats.as_dict()`` and ``provenance()`` (called once the documents are written); each
    written to a temporary name and renamed, the sidecar last."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with lzma.open(tmp, "wt", encoding="utf-8", errors="surrogatepass", preset=6) as f:
        for d in docs:
            f.write(json.dumps({"id": d.id, "text": d.data.decode("utf-8", "surrogateescape"),
                                "language": d.language, "script": d.script, "meta": d.meta},
                               ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    side = {"sha256": _sha256(path), "stats": stats.as_dict(), "provenance": provenance()}
    stmp = _sidecar(path).with_name(f".{_sidecar(path).name}.{os.getpid()}.tmp")
    stmp.write_text(json.dumps(side, indent=1), encoding="utf-8")
    os.replace(stmp, _sidecar(path))


def read_sidecar(path: Path) -> dict[str, Any] | None:
    """What the sidecar of ``path`` records (``sha256``, ``stats``, ``provenance``), or None."""
    try:
        side = json.loads(_sidecar(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return side if isinstance(side, dict) else None


def read_document_cache(path: Path, log: Callable[[str], None] = print) -> Iterator[Document] | None:
    """The cached documents, or None when the file is missing or does not match its sidecar's
    sha256 (then it is removed, and the caller rebuilds it)."""
    want = (read_sidecar(path) or {}).get("sha256")
    if not isinstance(want, str):
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
