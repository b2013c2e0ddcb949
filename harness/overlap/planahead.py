"""Perturbation while the models train: a forked process fits the perturbations and writes every
perturbed text of the run into the plan cache, so scoring finds them there.

Why: fitting the perturbations (Morfessor) and perturbing every eval document took ≈ 20 s of a
standard seed on the H200 host (11.0 s of fits, ≈ 9 s of plans: BENCHMARKS.md), CPU work, while the GPU run's
main process spends minutes training with its cores mostly idle. Run ahead, that work leaves the
critical path; scoring then reads the plans from ``<cache>/perturbed`` (keyed by content, the same
rows whoever computed them), and the main process never fits a perturbation unless a plan is
missing (``FitOnDemand``).

The process is forked before the models train and does pure Python string work (it never
touches CUDA). An exception in it (a perturbation plugin that fails) is re-raised in the main
process with its type at the next ``check`` (between two models) or at ``wait`` (before scoring):
so under plan-ahead such an error surfaces when the model in training finishes, not before the
first one starts. ``overlap.plan_ahead``: true on, false off; auto: on when the run trains on a GPU
with the plan cache on and at least 4 CPUs (on a CPU run the cores are busy training).
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

from core.forkpool import can_fork, receive, send, start_workers, stop_workers, usable_cpus
from harness.infra.watchdog import loop_limit

WHAT = "plan-ahead"


def plan_ahead_wanted(setting: Literal["auto"] | bool, device_type: str, plan_cache: bool) -> bool:
    """Whether to perturb ahead of training (see the module docstring): ``overlap.plan_ahead``
    where the plan cache is on and fork is; under auto, on CUDA with at least 4 CPUs."""
    if not plan_cache or not can_fork():
        return False
    if setting != "auto":
        return bool(setting)
    return device_type == "cuda" and usable_cpus() >= 4


def plan_ahead_processes() -> int:
    """Perturbation processes of the plan-ahead process: half the CPUs (the other half collate
    the training batches)."""
    return max(1, usable_cpus() // 2)


def allow_children() -> None:
    """In a forked pool worker: let it fork workers of its own (``perturb_many``). Pool workers
    are daemonic, and multiprocessing refuses children to a daemonic process ("daemonic
    processes are not allowed to have children"), a rule meant for processes the parent cleans
    up at exit; the grandchildren here die with their own parent (PR_SET_PDEATHSIG), which dies
    with the run. Only this process's view of itself changes (the run still sees a daemon)."""
    multiprocessing.current_process().daemon = False


class PlanAhead:
    """One forked process running ``work()`` (returns a dict: seconds, what it made) while the caller
    goes on. ``check`` re-raises its exception, if it has failed, without waiting; ``wait`` waits
    for its result; ``stop`` ends it (killed when unfinished). Start it from the thread that
    lives as long as it (it dies with its forking thread: PR_SET_PDEATHSIG).

    ``check`` and ``wait`` may be called from two threads: one reads the pipe at a time, and an
    error, once received, is raised again at every later call (the process is gone by then)."""

    def __init__(self, work: Callable[[], dict[str, Any]], setup: Callable[[], Any] | None = None) -> None:
        def start() -> None:
            allow_children()
            if setup is not None:
                setup()

        self.workers = start_workers(lambda _: work(), 1, WHAT, setup=start)
        self.proc, self.conn = self.workers[0]
        send(self.conn, self.proc, 0, 0, WHAT)
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self._lock = threading.RLock()

    def check(self) -> None:
        """Re-raise the process's exception (or ``WorkerDied``) if it has ended badly; keep its
        result if it has finished; return at once otherwise."""
        with self._lock:
            if self.error is not None or (self.result is None and (self.conn.poll(0) or not self.proc.is_alive())):
                self.wait()

    def wait(self) -> dict[str, Any]:
        """Its result (waiting for it); its exception re-raised here. Ends the process."""
        with self._lock:
            if self.error is not None:
                raise self.error
            if self.result is None:
                try:
                    # bounded as the guarded loops are (harness.infra.watchdog): a process that
                    # neither answers nor dies is a named error, not a silent hang
                    self.result = receive(self.conn, self.proc, 0, loop_limit(), WHAT, "plans")
                except BaseException as e:
                    self.error = e
                    self.stop(finished=False)
                    raise
                self.stop(finished=True)
            return self.result

    def settle(self, check: Callable[[], None] | None = None, poll: float = 0.25) -> None:
        """Wait until the process has finished or failed, without raising its error (``check``
        and ``wait`` raise it later) and without holding the pipe while it works: the run's
        thread checks between two models at the same time and must not wait here. ``check``,
        called between polls, may raise to stop waiting (the scoring thread being closed)."""
        while self.result is None and self.error is None:
            if check is not None:
                check()
            try:
                self.check()
            except BaseException:  # noqa: BLE001 - kept in self.error, raised by check/wait
                return
            if self.result is None:
                time.sleep(poll)

    def stop(self, finished: bool = False) -> None:
        if self.workers:
            stop_workers(self.workers, finished)
            self.workers = []


class FitOnDemand(Mapping[Any, Any]):
    """The run's perturbation instances ({(id, severity): {language: instance}}), fitted only
    when first read: under plan-ahead the main process needs them only for a plan missing from
    the cache. Membership (``in``) and ``len`` answer from the keys without fitting."""

    def __init__(self, keys: list[tuple[str, float]], fit: Callable[[], Mapping[Any, Any]]) -> None:
        self._keys = set(keys)
        self._fit = fit
        self._got: Mapping[Any, Any] | None = None
        self._lock = threading.Lock()  # the run's thread and the one scoring behind it: one fit

    def fitted(self) -> Mapping[Any, Any]:
        with self._lock:
            if self._got is None:
                self._got = self._fit()
            return self._got

    @property
    def is_fitted(self) -> bool:
        return self._got is not None

    def __getitem__(self, key: Any) -> Any:
        return self.fitted()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fitted())

    def __len__(self) -> int:
        return len(self._keys)
