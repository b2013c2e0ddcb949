"""``core.forkpool.start_process``: a fork that the ``filelock`` package refuses (another thread
is inside a lock's critical section, as torch.compile's caches are while compiling) is tried
again; any other error is not."""

from __future__ import annotations

import pytest

from core import forkpool


class Proc:
    """A process whose ``start`` fails ``fails`` times with ``error`` first."""

    def __init__(self, fails: int, error: str) -> None:
        self.fails, self.error, self.calls, self.started = fails, error, 0, False

    def start(self) -> None:
        self.calls += 1
        if self.calls <= self.fails:
            raise RuntimeError(self.error)
        self.started = True


REFUSAL = "os.fork is unsafe while filelock is changing descriptor ownership"


def test_refused_fork_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forkpool.time, "sleep", lambda s: None)
    p = Proc(3, REFUSAL)
    forkpool.start_process(p)
    assert p.started and p.calls == 4


def test_other_errors_and_endless_refusal_are_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forkpool.time, "sleep", lambda s: None)
    p = Proc(1, "something else")
    with pytest.raises(RuntimeError, match="something else"):
        forkpool.start_process(p)
    assert p.calls == 1
    p = Proc(10**6, REFUSAL)
    with pytest.raises(RuntimeError, match="fork is unsafe"):
        forkpool.start_process(p)
    assert p.calls == forkpool.FORK_RETRIES + 1


def test_workers_start_through_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pool's workers are forked through ``start_process`` (a real fork, refused once)."""
    if not forkpool.can_fork():
        pytest.skip("no fork")
    real = forkpool.start_process
    seen = []

    def once(proc):  # noqa: ANN001, ANN202
        seen.append(proc)
        if len(seen) == 1:
            orig = proc.start
            n = {"k": 0}

            def start() -> None:
                n["k"] += 1
                if n["k"] == 1:
                    raise RuntimeError(REFUSAL)
                orig()

            proc.start = start
        real(proc)

    monkeypatch.setattr(forkpool, "start_process", once)
    assert forkpool.pool_map(lambda x: x * 2, [1, 2, 3], 2, "test") == [2, 4, 6]
    assert len(seen) == 2


def test_stopping_a_worker_another_thread_reaped_first_is_not_an_error() -> None:
    """multiprocessing's Process.start() polls every child of the process, so another thread
    can reap a worker before this one stores its exit code: waitpid then fails (ECHILD), and
    the worker reads as alive here. Stopping the pool must still finish (it once raised
    "Cannot close a process while it is still running" at the end of a run)."""
    import os

    from core.forkpool import start_workers, stop_workers

    workers = start_workers(abs, 1, "test")
    proc, conn = workers[0]
    conn.send(None)  # the worker leaves
    os.waitpid(proc.pid, 0)  # reaped behind the Process object's back, as another thread would
    assert proc.is_alive()  # what this thread now sees
    stop_workers(workers, finished=True)  # no ValueError
