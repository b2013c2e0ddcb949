"""Atomic file writes for reports (``reports`` may not import ``harness``): a temporary file in
the same directory, fsync, rename. A full disk or a kill never leaves a report.html cut mid-tag;
the previous file, if any, stays whole, and the error propagates to the caller."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    """UTF-8; characters UTF-8 cannot encode (lone surrogates) are written as backslash escapes."""
    write_bytes_atomic(path, text.encode("utf-8", "backslashreplace"))
