"""Atomic file writes for reports (``reports`` may not import ``harness``): a temporary file in
the same directory, fsync, rename. A full disk or a kill never leaves a report.html cut mid-tag;
the previous file, if any, stays whole, and the error propagates to the caller."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: mkstemp creates 0600 files; reports get the usual 0666 & ~umask


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename is None:
            e.filename = str(path)  # a failed write(fd) names no file; the message must
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """UTF-8; characters UTF-8 cannot encode (lone surrogates) are written as backslash escapes."""
    write_bytes_atomic(path, text.encode("utf-8", "backslashreplace"))
