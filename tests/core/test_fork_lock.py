"""``core.forkpool``: pools started from several threads at once fork one worker at a time, so a
worker's end of its pipe is held by that worker alone (its death reads as end-of-file at once);
a worker, forked while the lock was held, can start a pool of its own; and a worker never
collects (nor finalizes) the objects it inherited."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from core import forkpool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, PR_SET_PDEATHSIG")


def _echo(x: int) -> int:
    return x


def _start_from_threads(n_threads: int, per_thread: int, done: threading.Event) -> list[tuple[object, object]]:
    """Workers started by ``n_threads`` threads at once; the threads live until ``done`` (workers
    die with the thread that forked them: PR_SET_PDEATHSIG)."""
    got: list[list[tuple[object, object]]] = [[] for _ in range(n_threads)]
    go = threading.Barrier(n_threads + 1)

    def start(i: int) -> None:
        go.wait()
        for _ in range(per_thread):
            got[i] += forkpool.start_workers(_echo, 1, "test pool")
        go.wait()
        done.wait(60)

    for i in range(n_threads):
        threading.Thread(target=start, args=(i,), daemon=True).start()
    go.wait()  # all start together
    go.wait()  # all have started their workers
    return [w for ws in got for w in ws]


def test_a_killed_worker_reads_as_end_of_file_at_once_when_pools_start_together() -> None:
    for _ in range(3):
        done = threading.Event()
        workers = _start_from_threads(4, 3, done)
        try:
            for _proc, conn in workers:  # all alive and answering
                conn.send((7,))
                assert conn.poll(10) and conn.recv() == (True, 7)
            for proc, conn in workers:
                os.kill(proc.pid, signal.SIGKILL)
                t0 = time.monotonic()
                # readable at its end: no other process holds the worker's end of the pipe
                assert conn.poll(5), "another process holds the killed worker's end of its pipe"
                with pytest.raises((EOFError, OSError)):
                    conn.recv()
                proc.join(timeout=5)  # multiprocessing's exit sentinel is not held elsewhere either
                assert not proc.is_alive() and time.monotonic() - t0 < 4
        finally:
            forkpool.stop_workers(workers, finished=False)
            done.set()


def _nested(n: int) -> list[int]:
    """In a worker: a pool of its own (the worker was forked while ``_FORK_LOCK`` was held)."""
    return forkpool.pool_map(_echo, list(range(n)), 2, "inner pool", limit=20)


def _may_have_children() -> None:
    multiprocessing.current_process().daemon = False  # as harness.overlap.planahead.allow_children


def test_a_worker_starts_a_pool_of_its_own() -> None:
    assert forkpool.pool_map(_nested, [3, 4], 2, "outer pool", limit=60, setup=_may_have_children) == [
        [0, 1, 2], [0, 1, 2, 3]]


class _Finalized:
    """A reference cycle whose finalizer notes the pid that ran it."""

    def __init__(self, note: str) -> None:
        self.note = note
        self.me = self

    def __del__(self) -> None:
        with open(self.note, "a") as f:
            f.write(f"{os.getpid()}\n")


def _collect(_: int) -> int:
    gc.collect()
    return gc.get_freeze_count()


def test_a_worker_never_collects_what_it_inherited(tmp_path: Path) -> None:
    """The parent's unreachable cycles (they may hold CUDA or pinned tensors) are finalized by the
    parent, never by a forked worker's collection; the parent's objects stay collectable."""
    note = tmp_path / "finalized"
    gc.disable()  # keep the cycle uncollected until the workers are forked
    try:
        _Finalized(str(note))  # unreachable at once: garbage only a collection frees
        workers = forkpool.start_workers(_collect, 2, "test pool")
        assert gc.get_freeze_count() == 0  # the parent unfroze right after the fork
        try:
            frozen = []
            for _proc, conn in workers:
                conn.send((0,))
                assert conn.poll(20)
                ok, n = conn.recv()
                assert ok
                frozen.append(n)
        finally:
            forkpool.stop_workers(workers, finished=True)
        assert min(frozen) > 1000  # the workers hold the inherited objects frozen
        assert not note.exists()  # no worker ran the parent's finalizer
    finally:
        gc.enable()
    gc.collect()
    assert note.read_text().split() == [str(os.getpid())]  # the parent did, once


class _NeedsLock:
    """A reference cycle whose finalizer takes a lock, as freeing a CUDA tensor takes the CUDA
    caching allocator's mutex."""

    lock = threading.Lock()

    def __init__(self) -> None:
        self.me = self

    def __del__(self) -> None:
        if self.lock.acquire(timeout=60):  # in a child forked while another thread held it: never
            self.lock.release()


def test_a_lock_held_at_the_fork_cannot_hang_a_worker_through_an_inherited_finalizer() -> None:
    """Another thread of the parent holds the lock while the workers fork, so in a child it is
    held for ever; a child that collected the inherited cycle would wait on it (without the
    freeze this test ends in the pool's stall error)."""
    release, holding = threading.Event(), threading.Event()

    def hold() -> None:
        with _NeedsLock.lock:
            holding.set()
            release.wait(60)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    assert holding.wait(10)
    gc.disable()
    try:
        _NeedsLock()  # unreachable at once
        assert forkpool.pool_map(_collect, [0, 1], 2, "test pool", limit=10) is not None
    finally:
        release.set()
        holder.join(10)
        gc.enable()
        gc.collect()  # the parent finalizes it, the lock free again
