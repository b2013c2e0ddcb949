"""One writer per run directory: an exclusive lock on ``<run dir>/.lock``.

    with RunLock(run_dir):          # raises RunLocked (one line: pid, host, since) if held
        ...train, score, write...

Decision: a second ``tokbench run`` on the same ``--out`` does not wait; it stops at once with
exit code 2 and says who holds the directory (``pid 1234 on host since 2026-12-01T03:00:00Z``),
so nobody trains the same models twice or shares a partial checkpoint with a live process.

The lock is a POSIX record lock (``fcntl.lockf``) on the file, so the kernel releases it when the
holder dies (kill -9 included): a lock left by a dead process is simply taken over (the stale
holder is logged). A POSIX lock belongs to the process, not to the file descriptor, so worker
processes a run forks (perturbation pools) never inherit it and cannot keep a killed run's
directory locked (``flock`` would). Two consequences handled here: the holder never opens and
closes the lock file through another descriptor (that would drop the lock), and a second lock of
the same directory inside one process is refused by a per-process table. The file records the
holder (pid, host, start time) for the message; it is left in place after the run (removing it
would race with a process that opened it already).
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType
from typing import Any

LOCK_NAME = ".lock"


class RunLocked(ValueError):
    """Another live process holds the run directory (a ValueError: the CLI prints one line)."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def read_holder(path: Path) -> dict[str, Any]:
    """The holder recorded in a lock file ({} if none or unreadable)."""
    try:
        info = json.loads(Path(path).read_text(encoding="utf-8"))
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}


def describe_holder(info: dict[str, Any]) -> str:
    return (f"pid {info.get('pid', '?')} on {info.get('host', '?')} "
            f"since {info.get('since', '?')}")


class RunLock:
    """Exclusive, non-blocking lock on a run directory (created if missing). Use as a context
    manager or call ``acquire`` / ``release``."""

    _held: set[str] = set()  # run directories locked by this process (POSIX locks are per process)

    def __init__(self, root: Path, log: Callable[[str], None] | None = None) -> None:
        self.root = Path(root)
        self.path = self.root / LOCK_NAME
        self.log = log or (lambda s: None)
        self._fd: int | None = None

    def _refuse(self, holder: dict[str, Any]) -> RunLocked:
        return RunLocked(
            f"{self.root}: run directory is in use by {describe_holder(holder)}; wait for "
            "it to finish (or stop it), or choose another --out"
        )

    def acquire(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        key = str(self.path.resolve())
        if key in RunLock._held:  # this process holds it: do not open the file (that drops the lock)
            raise self._refuse({"pid": os.getpid(), "host": socket.gethostname(), "since": "earlier in this process"})
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EACCES, errno.EAGAIN):
                raise self._refuse(read_holder(self.path)) from None
            raise
        try:  # read through our own descriptor: closing another one would drop the lock
            previous = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        except ValueError:
            previous = {}
        if isinstance(previous, dict) and previous and previous.get("pid") != os.getpid():
            alive = isinstance(previous.get("pid"), int) and previous.get("host") == socket.gethostname() \
                and _pid_alive(previous["pid"])
            state = "still running but not holding it" if alive else "no longer running"
            self.log(f"[lock] taking over {self.path} from {describe_holder(previous)} ({state})")
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "since": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        self._fd = fd
        RunLock._held.add(key)

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)  # an empty file: nobody holds it
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None
            RunLock._held.discard(str(self.path.resolve()))

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
