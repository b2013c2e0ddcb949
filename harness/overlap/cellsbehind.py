"""Work the run's thread hands to background threads, landing in the order submitted: a model's
cells made while the next model scores, a trained model's files written while the next one
trains (suite ``overlap.cells_behind``)."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Literal


def cells_behind_wanted(setting: Literal["auto"] | bool, device_type: str) -> bool:
    """``overlap.cells_behind``: make a model's cells in the background while the next model
    scores, and write a trained model's files while the next one trains (true), or each in turn
    (false). auto: on CUDA only — on a CPU the cell processes and the scoring forwards would
    share the same cores."""
    return device_type == "cuda" if setting == "auto" else bool(setting)


class CellsBehind:
    """Up to ``jobs`` jobs in background threads: ``submit(job, landed)`` first waits for the
    oldest job while ``jobs`` are under way (re-raising its error, else calling its ``landed``
    here, in the caller's thread), then starts ``job``; ``join`` waits for them all, oldest
    first. Jobs land in the order they were submitted. Disabled, ``submit`` runs both at once, in
    turn. The caller's thread keeps the run's bookkeeping (run.json, the progress bar): a job
    only makes and writes cell files. ``wait_seconds``: how long the caller waited for jobs."""

    def __init__(self, enabled: bool, name: str = "tokbench-cells", jobs: int = 1) -> None:
        self.enabled = enabled
        self.name = name  # the threads' (model files are written behind the run the same way)
        self.jobs = max(1, jobs)
        self.wait_seconds = 0.0
        # under way, oldest first: (thread, its landing, where its error goes)
        self._running: collections.deque[tuple[threading.Thread, Callable[[], None], list[BaseException]]] = \
            collections.deque()

    def submit(self, job: Callable[[], None], landed: Callable[[], None]) -> None:
        while len(self._running) >= self.jobs:
            self._join_oldest(quiet=False)
        if not self.enabled:
            job()
            landed()
            return
        errors: list[BaseException] = []

        def run() -> None:
            try:
                job()
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(e)

        # The job's worker processes are forked from its thread and die with it
        # (PR_SET_PDEATHSIG): it lives until they are done.
        thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._running.append((thread, landed, errors))
        thread.start()

    def _join_oldest(self, quiet: bool) -> None:
        thread, landed, errors = self._running.popleft()
        t0 = time.perf_counter()
        thread.join()
        self.wait_seconds += time.perf_counter() - t0
        if quiet:
            return
        if errors:
            self.join(quiet=True)  # the rest finish (their files are whole) and land nothing
            raise errors[0]
        landed()

    def join(self, quiet: bool = False) -> None:
        """Wait for every job under way, oldest first; re-raise the first error (the others then
        finish and land nothing; ``quiet``: drop errors and land nothing), else call each
        ``landed`` in turn."""
        while self._running:
            self._join_oldest(quiet)
