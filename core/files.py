"""Atomic file writes: the one implementation, for the harness (cells, models, results,
run.json, cached plans) and the reports (report.html / .md, figures), which may not import
``harness``. A temporary file in the same directory, fsync, rename: a full disk or a kill never
leaves a file cut short (a report.html cut mid-tag, a half cell); the previous file, if any,
stays whole, and the error propagates to the caller. A kill can leave the temporary file
``.<name>.<random>.tmp`` behind; ``harness.infra.cache.remove_stale_tmp`` removes those.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO

_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: mkstemp creates 0600 files; ours get the usual 0666 & ~umask


def _write_atomic(path: Path, fill: Callable[[BinaryIO], None], make_parents: bool = False) -> None:
    """``path`` written by ``fill(f)`` into a temporary file beside it, fsynced, then renamed
    over it. A failed write leaves no temporary file and its OSError names ``path``."""
    path = Path(path)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and e.filename is None:
            e.filename = str(path)  # a failed write(fd) names no file; the message must
        raise


def write_bytes_atomic(path: Path, data: bytes, make_parents: bool = False) -> None:
    """Write ``data`` to ``path`` atomically; ``make_parents`` creates its folder first. A failed
    write leaves no temporary file and its OSError names ``path``."""
    _write_atomic(path, lambda f: f.write(data), make_parents)


def write_text_atomic(path: Path, text: str, errors: str = "backslashreplace", make_parents: bool = False) -> None:
    """``text`` as UTF-8, atomically. ``errors``: what becomes of characters UTF-8 cannot encode
    (lone surrogates): backslash escapes by default (a report must be valid UTF-8);
    ``"surrogateescape"`` gives back the raw bytes they stand for (results files: a corpus's
    undecodable bytes)."""
    write_bytes_atomic(path, text.encode("utf-8", errors), make_parents)


def part_file(path: Path) -> tuple[int, str]:
    """(open descriptor, name) of a new temporary file beside ``path`` named as the atomic
    writes name theirs (``.<name>.<random>.tmp``, so a kill's leftovers are removed alike): a
    part that ``write_parts_atomic`` puts into ``path``. The caller writes and closes it."""
    path = Path(path)
    return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.part.", suffix=".tmp")


def write_parts_atomic(path: Path, parts: Sequence[str | Path]) -> None:
    """``path`` made of the files ``parts`` in order, atomically (temporary file, fsync, rename,
    as ``write_bytes_atomic``), the parts deleted once it is in place. Why: forked processes
    that each render a part write it to disk; handing it back through a pipe cost the parent a
    pickled copy, a join and an encoding of every byte (a standard seed's samples.jsonl is
    hundreds of MB)."""
    def fill(f: BinaryIO) -> None:
        for part in parts:
            with open(part, "rb") as src:
                shutil.copyfileobj(src, f, 1 << 22)

    _write_atomic(path, fill)
    for part in parts:
        os.unlink(part)


class NotRegularFile(ValueError):
    """``open_regular`` refused a path that is not a regular file; ``kind`` says what it is."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


def open_regular(path: Path) -> BinaryIO:
    """``path`` opened for binary reading, or ``NotRegularFile`` ("a directory", "a FIFO", "a
    device or socket"); ``OSError`` if it cannot be opened. O_NONBLOCK on the open, and the check
    on the open descriptor: a FIFO neither hangs nor is read, a device is refused before a byte."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegularFile("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                             else "a device or socket")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")
