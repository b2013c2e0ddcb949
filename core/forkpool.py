"""The parts of a forked worker pool that the harness (collation, perturbation:
``harness.infra.accel``) and the report (figures, tables: ``reports.pool``) share: workers forked with
a pipe each, that die with their parent, hand exceptions back, and whose death is a one-line
``WorkerDied`` naming them, never a hang. No torch here (the report must not import it); what
each pool puts on the pipe and how it waits for results stay with it.

Protocol: the parent sends ``(item,)`` and reads ``(True, result)`` or ``(False, exception)``;
``None`` (or the end of the pipe) ends the worker. ``pool_map`` is the whole pool for a finite
list of tasks; ``harness.infra.accel.ordered_pool_map`` builds a streaming one from the same parts.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any


class WorkerDied(ChildProcessError):
    """A pool worker ended (killed, out of memory, ``os._exit``) before sending its result.

    An ``OSError`` (as ``TimeoutError``, the stall error, is): the CLI reports it on one line,
    exit code 2, like a full disk — something outside the run's code stopped it, and the same
    command resumes (``TOKBENCH_DEBUG=1`` shows the traceback)."""


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def die_with_parent(parent: int) -> None:
    """Initializer of forked worker processes: a worker ends when the process that forked it
    dies, SIGKILL included, so a killed run leaves no idle workers behind holding its files
    (Linux's PR_SET_PDEATHSIG; elsewhere only the check below)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _worker_main(conn: Any, fn: Callable[[Any], Any], parent: int, what: str,
                 encode: Callable[[Any], Any] | None, setup: Callable[[], Any] | None) -> None:
    """A pool worker: ``(item,)`` in, ``(True, encode(fn(item)))`` or ``(False, error)`` out,
    until ``None`` or the end of its pipe. ``setup`` runs once, first."""
    import pickle
    import signal
    import traceback

    die_with_parent(parent)
    if setup is not None:
        setup()
    # Ctrl-C reaches the whole process group: the parent handles it and ends the workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        try:
            got = fn(msg[0])
            out: tuple[bool, Any] = (True, encode(got) if encode is not None else got)
        except BaseException as e:  # handed to the parent, which re-raises it
            if hasattr(e, "add_note"):  # Python >= 3.11: the worker's traceback goes along
                e.add_note(f"(in {what} worker pid {os.getpid()})\n{traceback.format_exc()}")
            try:
                pickle.dumps(e)
            except Exception:  # an exception that cannot travel: its type and message can
                e = RuntimeError(f"{type(e).__name__}: {e}")
            out = (False, e)
        try:
            conn.send(out)
        except OSError:  # the parent closed the pipe: it no longer wants results
            return


def died(what: str, k: int, proc: Any, unit: str | None = None) -> WorkerDied:
    """The one-line error for worker ``k``, dead (reaped here, so its exit code is known;
    negative: the signal that killed it)."""
    proc.join(timeout=1.0)
    return WorkerDied(f"{what}: worker {k} (pid {proc.pid}) died (exit code {proc.exitcode})"
                      + (f" before sending its {unit}" if unit else ""))


def send(conn: Any, proc: Any, k: int, item: Any, what: str) -> None:
    """Hand ``item`` to worker ``k`` (idle: it is waiting on its pipe), or a one-line error."""
    try:
        conn.send((item,))
    except OSError:
        raise died(what, k, proc) from None


FORK_RETRIES = 200  # tries of a fork refused while another thread holds a file lock (below)


def start_process(proc: Any) -> None:
    """``proc.start()``, tried again (up to ``FORK_RETRIES`` times, 10 ms apart) while the
    ``filelock`` package refuses the fork: it does so while another thread of this process is
    inside one of its locks' short critical sections (torch.compile's caches take them while the
    main thread compiles: on an H200 a scoring job's collation workers were refused once, the run
    died). The refusal comes before any process exists, so trying again is safe."""
    for attempt in range(FORK_RETRIES + 1):
        try:
            proc.start()
            return
        except RuntimeError as e:
            if "fork is unsafe" not in str(e) or attempt == FORK_RETRIES:
                raise
            time.sleep(0.01)


# Held from a worker's pipe to the parent's closing of the worker's end: a run forks pools from
# several threads at once (a model's cells while the next model's collation workers start), and
# a process forked by one thread in the middle of another's set-up inherited that worker's end
# of its pipe — and multiprocessing's exit sentinel — so the worker's death no longer read as
# end-of-file here, and joining it waited out its timeout. A child gets a fresh, free lock (it
# was forked while this one was held, and a plan-ahead process forks pools of its own).
_FORK_LOCK = threading.Lock()


def _fresh_fork_lock() -> None:
    global _FORK_LOCK
    _FORK_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_fork_lock)


@contextlib.contextmanager
def gc_frozen() -> Iterator[None]:
    """``gc.freeze()`` for the length of a fork: the child is born with every object it
    inherits in the permanent generation, so its collections never walk them (no page of the
    parent's heap copied for a header write; ``benchmarks/bench_fork_gc.py``) and never finalize
    the parent's unreachable cycles, which may hold CUDA or pinned tensors a forked child must not
    free. The parent unfreezes at once: its own collections go on as before."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextlib.contextmanager
def one_fork_at_a_time() -> Iterator[None]:
    """Hold the fork lock: around making a child's pipe, starting it and closing the child's end
    in this process, for a process started outside ``start_workers`` too (the compile-ahead
    process), so no pool worker forked meanwhile inherits that end."""
    with _FORK_LOCK:
        yield


def start_workers(fn: Callable[[Any], Any], processes: int, what: str, encode: Callable[[Any], Any] | None = None,
                  setup: Callable[[], Any] | None = None) -> list[tuple[Any, Any]]:
    """``processes`` forked workers running ``fn``, each with a pipe of its own:
    [(process, the parent's end of its pipe)]. Fork, not spawn: the workers inherit ``fn`` and
    everything it reaches without pickling it; only items and results travel. Forks of all
    threads' pools are made one at a time (``_FORK_LOCK``), so a worker's end of its pipe is
    held by that worker alone."""
    ctx = multiprocessing.get_context("fork")
    workers: list[tuple[Any, Any]] = []
    try:
        for _ in range(processes):
            with one_fork_at_a_time():
                mine, theirs = ctx.Pipe(duplex=True)
                proc = ctx.Process(target=_worker_main, args=(theirs, fn, os.getpid(), what, encode, setup),
                                   daemon=True)
                try:
                    with gc_frozen():
                        start_process(proc)
                except BaseException:
                    mine.close()
                    raise
                finally:
                    theirs.close()  # only the worker holds its end: its death reads as end-of-file here
            workers.append((proc, mine))
    except BaseException:
        stop_workers(workers, finished=False)
        raise
    return workers


def stop_workers(workers: list[tuple[Any, Any]], finished: bool) -> None:
    """End every worker. ``finished``: they are idle and leave on ``None``; otherwise (an early
    stop, an error) their pending results are unwanted, so they are killed (nothing is shared
    between workers, so a kill can leave nothing half-done)."""
    for proc, conn in workers:
        if finished:
            try:
                conn.send(None)
            except OSError:
                pass
        else:
            proc.kill()
    for proc, conn in workers:
        proc.join(timeout=5.0)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5.0)
        conn.close()
        # close() only frees the Process object's resources, and it refuses (ValueError) while
        # the child looks alive: a child that another thread's Process.start() reaped first
        # (multiprocessing polls every child there) reads as alive to this thread until that
        # thread has stored its exit code — on an H200 that killed a finished run at its end
        with contextlib.suppress(ValueError):
            proc.close()


def stalled(what: str, k: int, proc: Any, unit: str, limit: float) -> str:
    return (f"{what}: worker {k} (pid {proc.pid}) sent no {unit} in {limit:.0f} s "
            "(stalled; TOKBENCH_STALL_SECONDS)")


def receive(conn: Any, proc: Any, k: int, limit: float | None, what: str, unit: str,
            decode: Callable[[Any], Any] | None = None) -> Any:
    """The next result of worker ``k`` (``decode``d), or a one-line error if it died or, with a
    ``limit``, sent nothing for that many seconds (a run must never hang silently)."""
    t0 = time.monotonic()
    while not conn.poll(1.0):
        if not proc.is_alive() and not conn.poll(0):
            # dead with nothing sent: say so now (a child of the worker may still hold the
            # pipe open, so reading could wait for ever)
            raise died(what, k, proc, unit)
        if limit is not None and time.monotonic() - t0 > limit:
            raise TimeoutError(stalled(what, k, proc, unit, limit))
    try:
        ok, val = conn.recv()
    except (EOFError, OSError):
        raise died(what, k, proc, unit) from None
    if not ok:
        raise val
    return decode(val) if decode is not None else val


def pool_map(fn: Callable[[Any], Any], tasks: Sequence[Any], processes: int, what: str, unit: str = "result",
             limit: float | None = None, encode: Callable[[Any], Any] | None = None,
             decode: Callable[[Any], Any] | None = None, setup: Callable[[], Any] | None = None) -> list[Any]:
    """``[fn(t) for t in tasks]``, computed by ``min(processes, len(tasks))`` forked worker
    processes; in this process when that is 1 or less, or where fork is unavailable. ``fn`` must
    be deterministic per task and touch nothing the parent needs afterwards: then where a task
    runs never changes its result.

    A worker takes the next task as soon as it sent its last result, so tasks of uneven cost
    keep every worker busy; results are put back in task order. A worker that dies is a
    ``WorkerDied`` naming ``what``, the worker, its pid and exit code; with a ``limit``, one with
    no result that many seconds after it got its task is a ``TimeoutError``; an exception raised
    by ``fn`` is re-raised here with its type (when several tasks fail, the first to arrive).
    Either way the other workers are killed at once. ``encode``/``decode``: what a result
    becomes on the pipe and back; ``setup``: run once in each worker. Call it from the thread
    that lives as long as the pool (workers die with their forking thread: PR_SET_PDEATHSIG).
    """
    n = min(processes, len(tasks))
    if n <= 1 or not can_fork():
        return [fn(t) for t in tasks]
    from multiprocessing.connection import wait

    out: list[Any] = [None] * len(tasks)
    todo = iter(range(len(tasks)))
    busy: dict[int, tuple[int, float]] = {}  # worker -> (its task's index, monotonic time it got it)
    workers: list[tuple[Any, Any]] = []
    finished = False

    def give(k: int) -> None:
        i = next(todo, None)
        if i is not None:
            send(workers[k][1], workers[k][0], k, tasks[i], what)
            busy[k] = (i, time.monotonic())

    try:
        workers = start_workers(fn, n, what, encode, setup)
        for k in range(n):
            give(k)
        while busy:
            # a worker's pipe is readable on a result and at its end (the worker died); its
            # sentinel too, in case a child of the worker still holds the pipe open
            waiting = {h: k for k in busy for h in (workers[k][1], workers[k][0].sentinel)}
            for k in sorted({waiting[h] for h in wait(list(waiting), timeout=1.0)}):
                i, _ = busy.pop(k)
                out[i] = receive(workers[k][1], workers[k][0], k, limit, what, unit, decode)
                give(k)
            now = time.monotonic()
            for k, (_, t0) in busy.items():
                if limit is not None and now - t0 > limit:
                    raise TimeoutError(stalled(what, k, workers[k][0], unit, limit))
        finished = True
        return out
    finally:
        stop_workers(workers, finished)
