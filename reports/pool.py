"""Forked worker processes for the report's figures (one figure a task) and the resampling of
its tables (one group or encoder comparison a task); results in task order.

The report may not import ``harness`` (whose ``accel.pool_map`` does the same for collation and
perturbation, and imports torch), so this is a small pool of its own:

* ``report_processes()`` — how many processes: ``TOKBENCH_REPORT_PROCESSES`` when set (1 =
  serial, in this process), else the usable CPUs, at most ``MAX_PROCESSES``.
* ``fork_map(fn, n, processes)`` — ``[fn(0), …, fn(n − 1)]``; ``fn`` runs in forked children,
  which inherit it and everything it reaches (tables, samples, matplotlib's style and font
  caches) without pickling; only the results travel back, through a pipe per worker. A worker
  that dies is a one-line ``WorkerDied`` naming it, never a hang; an exception raised by ``fn``
  is re-raised here with its type.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

ENV = "TOKBENCH_REPORT_PROCESSES"
# More processes than figures is pointless, and a report has about eight (the tables have
# hundreds of small tasks, but the figures' cap was kept: not measured above 2 CPUs); each worker
# is a copy of the parent (copy-on-write), so an uncapped 128-CPU host would only add fork and
# exit cost.
MAX_PROCESSES = 8

T = TypeVar("T")


class WorkerDied(ChildProcessError):
    """A worker ended (killed, out of memory, ``os._exit``) before sending its result.

    An ``OSError``: the CLI prints it on one line with exit code 2, and ``tokbench run`` keeps
    the results and says how to re-render — something outside the report's code stopped it."""


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def report_processes() -> int:
    """Processes that resample the report's tables and draw its figures:
    ``TOKBENCH_REPORT_PROCESSES`` (a whole number ≥ 1; 1 = serial, in this process) or else
    ``min(usable CPUs, MAX_PROCESSES)``."""
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return max(1, min(usable_cpus(), MAX_PROCESSES))
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{ENV}={raw!r}: expected a whole number >= 1 (1 = render figures serially)")
    return n


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def _die_with_parent(parent: int) -> None:
    """A worker ends when the process that forked it dies (SIGKILL included), so a killed
    report leaves no workers behind (Linux's PR_SET_PDEATHSIG; elsewhere the check only)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


# OpenBLAS's "set the number of threads" under the names its builds export (plain; numpy's and
# scipy's wheels prefix it with scipy_ and, in the 64-bit-integer build, suffix it with 64_)
_BLAS_SETTERS = ("openblas_set_num_threads", "scipy_openblas_set_num_threads64_",
                 "scipy_openblas_set_num_threads", "openblas_set_num_threads64_")


def one_blas_thread() -> int:
    """Limit every OpenBLAS loaded in this process to one thread; returns how many were limited.

    A worker is one of several processes sharing the CPUs: OpenBLAS would start a thread per CPU
    in each of them for the bootstrap's matrix products, and its threads spin while they wait,
    so two workers on two CPUs ran slower than one process (benchmarks/results/
    report_parallel_cpu_s10.log). OpenBLAS splits a product's output over its threads, not the
    sums, so one thread gives the same numbers (the benchmark's reports: byte-identical). Linux
    only (the libraries are found in /proc/self/maps); elsewhere, or if none is found, nothing
    changes."""
    if not sys.platform.startswith("linux"):
        return 0
    import ctypes

    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            libs = sorted({line.split()[-1] for line in f
                           if "openblas" in line.rsplit("/", 1)[-1].lower()
                           and line.split()[-1].startswith("/")})
    except OSError:
        return 0
    done = 0
    for path in libs:
        try:
            lib = ctypes.CDLL(path)  # already loaded: the same handle, nothing new runs
        except OSError:
            continue
        for name in _BLAS_SETTERS:
            setter = getattr(lib, name, None)
            if setter is not None:
                setter(ctypes.c_int(1))
                done += 1
                break
    return done


def _worker(conn: Any, fn: Callable[[int], Any], parent: int, what: str) -> None:
    """Task indices in, ``(True, fn(i))`` or ``(False, exception)`` out, until ``None`` or the
    end of the pipe."""
    import pickle
    import signal
    import traceback

    _die_with_parent(parent)
    one_blas_thread()  # the workers share the CPUs: one BLAS thread each, not one per CPU each
    # Ctrl-C reaches the whole process group: the parent handles it and ends the workers
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        try:
            i = conn.recv()
        except (EOFError, OSError):
            return
        if i is None:
            return
        try:
            out: tuple[bool, Any] = (True, fn(i))
        except Exception as e:  # handed to the parent, which re-raises it
            if hasattr(e, "add_note"):  # Python >= 3.11: the worker's traceback goes along
                e.add_note(f"(in {what} worker pid {os.getpid()}, task {i})\n{traceback.format_exc()}")
            try:
                pickle.dumps(e)
            except Exception:  # an exception that cannot travel: its type and message can
                e = RuntimeError(f"{type(e).__name__}: {e}")
            out = (False, e)
        try:
            conn.send(out)
        except OSError:  # the parent closed the pipe: it no longer wants results
            return


def fork_map(fn: Callable[[int], T], n: int, processes: int, what: str = "report figure"
             ) -> list[T]:
    """``[fn(i) for i in range(n)]`` computed by ``min(processes, n)`` forked workers; in this
    process (the same calls, in order) when that is 1 or less or where fork is unavailable.

    ``fn`` must be deterministic per index and touch nothing the parent needs afterwards (a
    worker's changes to memory stay in the worker): then where a task runs never changes its
    result. A worker takes the next index as soon as it sent its last result, so uneven tasks
    keep every worker busy; results are put back in index order. ``what`` names the work in
    errors (``report figure: worker 1 (pid 1234) died (exit code -9) before sending its
    result``). On any error the other workers are killed at once.
    """
    procs = min(processes, n)
    if procs <= 1 or not _can_fork():
        return [fn(i) for i in range(n)]
    from multiprocessing.connection import wait

    ctx = multiprocessing.get_context("fork")
    workers: list[tuple[Any, Any]] = []  # (process, the parent's end of its pipe)
    out: list[Any] = [None] * n
    todo = iter(range(n))
    busy: dict[int, int] = {}  # worker -> index of the task it has
    finished = False

    def died(k: int) -> WorkerDied:
        proc = workers[k][0]
        proc.join(timeout=1.0)  # reaped, so its exit code (negative: the signal) is known
        return WorkerDied(f"{what}: worker {k} (pid {proc.pid}) died (exit code {proc.exitcode}) "
                          "before sending its result")

    def give(k: int) -> None:
        i = next(todo, None)
        if i is None:
            return
        try:
            workers[k][1].send(i)
        except OSError:
            raise died(k) from None
        busy[k] = i

    try:
        for _ in range(procs):
            mine, theirs = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=_worker, args=(theirs, fn, os.getpid(), what), daemon=True)
            proc.start()
            theirs.close()  # only the worker holds its end: its death reads as end-of-file here
            workers.append((proc, mine))
        for k in range(procs):
            give(k)
        while busy:
            # a pipe is readable on a result and at its end; the sentinel too, in case something
            # else still holds the worker's end open
            handles = {h: k for k in busy for h in (workers[k][1], workers[k][0].sentinel)}
            for k in sorted({handles[h] for h in wait(list(handles))}):
                proc, conn = workers[k]
                if not conn.poll(0):  # only the sentinel fired: dead with nothing sent
                    raise died(k)
                try:
                    ok, val = conn.recv()
                except (EOFError, OSError):
                    raise died(k) from None
                if not ok:
                    raise val
                out[busy.pop(k)] = val
                give(k)
        finished = True
        return out
    finally:
        for proc, conn in workers:
            if finished:  # idle: they leave on None
                try:
                    conn.send(None)
                except OSError:
                    pass
            else:  # an error: their pending results are unwanted
                proc.kill()
        for proc, conn in workers:
            proc.join(timeout=5.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
            conn.close()
            proc.close()
