"""What a forked pool worker's garbage collection costs when the parent's objects are frozen
(``gc.freeze()`` around the fork, as ``core.forkpool.start_workers`` does) and when they are not.

A run forks its pool workers (collation, cells, perturbation) from a process that holds millions
of Python objects (plans, texts, per-window results). A collection in a worker walks the inherited
objects of the generations it collects and writes to each one's header, so the pages holding them
are copied (copy-on-write); it may also finalize the parent's unreachable cycles, which can hold
CUDA or pinned tensors that a forked child must not free. Frozen, the inherited objects are left
out of the child's collections. This times the worst case, a full collection (``gc.collect()``),
first thing in the worker; automatic ones in a worker are mostly young-generation collections,
which walk only what was young in the parent at the fork, so a run's workers pay less than this.

    PYTHONPATH=$PWD python benchmarks/bench_fork_gc.py [--objects 3000000] [--reps 3]

Prints per mode the child's ``gc.collect()`` seconds and its private dirty memory after it
(``/proc/self/smaps_rollup``), medians over ``--reps`` forks. Linux only.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import statistics
import time

from core import forkpool


def private_dirty_mb() -> float:
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def child_collect(_: int) -> tuple[float, float]:
    """In the worker: one full collection; (its seconds, private dirty MB after it - before it)."""
    before = private_dirty_mb()
    t0 = time.perf_counter()
    gc.collect()
    return time.perf_counter() - t0, private_dirty_mb() - before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=int, default=3_000_000, help="container objects the parent holds")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    # lists of small tuples: objects the collector tracks, as a run's plans and rows are
    heap = [[(i, str(i))] for i in range(args.objects)]
    print(f"parent: {len(heap):,} lists held, {len(gc.get_objects()):,} tracked objects, "
          f"private dirty {private_dirty_mb():.0f} MB")
    frozen = forkpool.gc_frozen
    for mode in ("frozen", "not frozen"):
        # "not frozen": what start_workers did before, no freeze around the fork
        forkpool.gc_frozen = frozen if mode == "frozen" else contextlib.nullcontext
        secs, mbs = [], []
        try:
            for _ in range(args.reps):
                # two tasks, two workers: each worker collects once, first thing
                for s, mb in forkpool.pool_map(child_collect, [0, 1], 2, "fork gc bench"):
                    secs.append(s)
                    mbs.append(mb)
        finally:
            forkpool.gc_frozen = frozen
        print(f"{mode:>10}: child gc.collect {statistics.median(secs) * 1e3:8.1f} ms, "
              f"private dirty after it +{statistics.median(mbs):7.1f} MB (median of {len(secs)} workers)")
    del heap


if __name__ == "__main__":
    if not os.path.exists("/proc/self/smaps_rollup"):
        raise SystemExit("Linux only (/proc/self/smaps_rollup)")
    main()
