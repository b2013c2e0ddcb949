"""Forked worker processes for the report's figures (one figure a task) and the resampling of
its tables (one group or encoder comparison a task); results in task order.

The pool itself is ``core.forkpool`` (shared with the harness's collation and perturbation
pools, which add torch's tensors on the pipe); this module decides how many processes the
report uses and gives each worker one BLAS thread:

* ``report_processes()`` — how many processes: ``TOKBENCH_REPORT_PROCESSES`` when set (1 =
  serial, in this process), else the usable CPUs, at most ``MAX_PROCESSES``.
* ``fork_map(fn, n, processes)`` — ``[fn(0), …, fn(n − 1)]``; ``fn`` runs in forked children,
  which inherit it and everything it reaches (tables, samples, matplotlib's style and font
  caches) without pickling; only the results travel back, through a pipe per worker. A worker
  that dies is a one-line ``WorkerDied`` naming it, never a hang; an exception raised by ``fn``
  is re-raised here with its type.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TypeVar

from core.forkpool import WorkerDied, pool_map, usable_cpus  # noqa: F401 - WorkerDied, usable_cpus: used from here

ENV = "TOKBENCH_REPORT_PROCESSES"
# More processes than figures is pointless, and a report has about eight (the tables have
# hundreds of small tasks, but the figures' cap was kept: not measured above 2 CPUs); each worker
# is a copy of the parent (copy-on-write), so an uncapped 128-CPU host would only add fork and
# exit cost.
MAX_PROCESSES = 8

T = TypeVar("T")


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


def fork_map(fn: Callable[[int], T], n: int, processes: int, what: str = "report figure"
             ) -> list[T]:
    """``[fn(i) for i in range(n)]`` computed by ``min(processes, n)`` forked workers
    (``core.forkpool.pool_map``, each worker with one OpenBLAS thread); in this process (the
    same calls, in order) when that is 1 or less or where fork is unavailable.

    ``fn`` must be deterministic per index and touch nothing the parent needs afterwards (a
    worker's changes to memory stay in the worker): then where a task runs never changes its
    result. A worker takes the next index as soon as it sent its last result, so uneven tasks
    keep every worker busy; results are put back in index order. ``what`` names the work in
    errors (``report figure: worker 1 (pid 1234) died (exit code -9) before sending its
    result``). On any error the other workers are killed at once.
    """
    return pool_map(fn, range(n), processes, what, setup=one_blas_thread)
