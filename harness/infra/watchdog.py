"""A loop that stops making progress ends the run with one line instead of hanging.

The pools' waits are bounded (``TOKBENCH_STALL_SECONDS``: a worker that sends nothing is a
named error), but the loops that drive the device are not: a training step or a scoring
forward that never returns — a deadlock between threads, a GPU that stopped — left the run
waiting until something outside killed it, with nothing said about where. On an H100 one standard
seed once sat in scoring from about 150 s until a 400 s timeout killed it, with no
error and no stack. ``Watchdog`` guards such a loop: the loop calls ``beat()`` once per step or
batch; when no beat comes for the stall limit, every thread's Python stack goes to a file, one
line naming the stage, the limit and that file goes to stderr, and the process exits with code
2 at once (a thread cannot interrupt another that is blocked in C). Finished models and cells
are on disk (atomic writes), so the same command resumes; forked workers die with the process
(``PR_SET_PDEATHSIG``), and the run directory's lock goes with it.
"""

from __future__ import annotations

import faulthandler
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

# Where a firing watchdog writes the stacks (the run directory, set by the run); None: the
# system's temporary directory
STACKS_DIR: Path | None = None


def stall_limit() -> float:
    """``TOKBENCH_STALL_SECONDS`` (default 600): how long a consumer waits for one batch, or a
    pool worker for one result (a collated batch, a perturbation task) before the run fails with
    a one-line error naming the stage — one step's collation takes well under a second, one
    perturbation task seconds. Not a positive number: a ``ValueError`` naming it."""
    raw = os.environ.get("TOKBENCH_STALL_SECONDS", "600")
    try:
        limit = float(raw)
    except ValueError:
        limit = float("nan")
    if not limit > 0 or limit == float("inf"):
        raise ValueError(f"TOKBENCH_STALL_SECONDS={raw!r}: expected a positive number of seconds")
    return limit


def loop_limit() -> float:
    """Twice ``stall_limit()``: the longest a guarded loop goes without a beat, and the wait for
    the plan-ahead process. Twice, so that a wait the pools bound fails first with its own named
    error; what nothing else bounds ends here."""
    return 2 * stall_limit()


class Watchdog:
    """``with Watchdog("scoring bytes") as dog: for b in batches: ...; dog.beat()``.

    ``limit`` defaults to ``loop_limit()``: a loop waiting for its next batch gets the prefetch
    thread's or the pool's own named error first (they fire at ``stall_limit()``). A daemon thread checks every
    ``min(1, limit / 4)`` s; the first beat is the context's entry, so a loop's first step (its
    cold compile included) gets the whole limit too. ``fire``: what happens when the limit
    passes (default ``fail``, which never returns); tests pass their own.
    """

    def __init__(self, stage: str, limit: float | None = None,
                 fire: Callable[[float], None] | None = None) -> None:
        self.stage = stage
        self.limit = loop_limit() if limit is None else float(limit)
        self._fire = fire if fire is not None else self.fail
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        """One step or batch done (a float store: cheap enough for every batch)."""
        self._last = time.monotonic()

    def start(self) -> Watchdog:
        """Start watching (the first beat); returns self."""
        self._last = time.monotonic()
        self._thread = threading.Thread(target=self._watch, name=f"watchdog {self.stage}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (at once: the thread waits on an event, not a sleep)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def __enter__(self) -> Watchdog:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def _watch(self) -> None:
        poll = min(1.0, self.limit / 4)
        while not self._stop.wait(poll):
            idle = time.monotonic() - self._last
            if idle > self.limit:
                self._fire(idle)
                return

    def fail(self, idle: float) -> None:
        """Write every thread's stack, say so in one line, exit with code 2."""
        where = write_stacks()
        sys.stderr.write(f"tokbench: error: {self.stage}: no progress in {idle:.0f} s (stuck; the limit, "
                         f"{self.limit:g} s, is set by TOKBENCH_STALL_SECONDS); every thread's stack is in {where}; finished "
                         "models and cells are kept — run the same command to resume\n")
        sys.stderr.flush()
        os._exit(2)


def stacks_name() -> str:
    """``stacks.txt``; ``stacks-rank2.txt`` on rank 2 of a data-parallel job (every rank's run
    shares the run directory, and each writes its own file)."""
    rank = os.environ.get("RANK", "0")
    return "stacks.txt" if rank in ("", "0") else f"stacks-rank{int(rank) if rank.isdigit() else 'x'}.txt"


def write_stacks() -> str:
    """Every thread's Python stack into ``STACKS_DIR/stacks_name()`` (a fresh file in the
    temporary directory when that is unset or cannot be written); returns its path."""
    for folder in (STACKS_DIR, None):
        try:
            if folder is not None:
                path = Path(folder) / stacks_name()
                f = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed below
            else:
                fd, name = tempfile.mkstemp(prefix="tokbench-stacks-", suffix=".txt")
                path, f = Path(name), os.fdopen(fd, "w", encoding="utf-8")
            with f:
                f.write(f"tokbench pid {os.getpid()}, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
                f.flush()
                faulthandler.dump_traceback(file=f, all_threads=True)
            return str(path)
        except OSError:
            continue
    faulthandler.dump_traceback(file=sys.__stderr__, all_threads=True)
    return "stderr (no file could be written)"
