"""How long the first result of ``harness.accel.ordered_pool_map`` takes to come back — the
wait before a scoring job's (or a training loop's) first collated batch — from a parent holding
``--resident-mb`` of memory (forking a large process is what costs: the run's process holds GBs
of CUDA mappings on a GPU host), with ``fn`` a stand-in collation of ``--work-ms``.

    PYTHONPATH=$PWD python benchmarks/bench_pool_start.py [--processes 1 4 8] [--resident-mb 2048]

Prints per worker count the median over ``--reps`` of: seconds to the first result, and to all
``--items`` results. Run it with PYTHONPATH at two checkouts to compare (it calls only the
public function).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from harness.accel import ordered_pool_map


def busy(ms: float) -> int:
    """Spin ``ms`` milliseconds of pure CPU (a collation's tokenizing)."""
    end = time.perf_counter() + ms / 1e3
    n = 0
    while time.perf_counter() < end:
        n += 1
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 4, 8])
    ap.add_argument("--resident-mb", type=int, default=2048)
    ap.add_argument("--work-ms", type=float, default=50.0)
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    ballast = np.ones(args.resident_mb * 2**20, dtype=np.uint8)  # resident pages the fork must map
    print(f"parent resident ballast {ballast.nbytes / 2**20:.0f} MB, fn {args.work_ms:.0f} ms of CPU, "
          f"{args.items} items; median of {args.reps}")
    for p in args.processes:
        first, total = [], []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            gen = ordered_pool_map(lambda _x: busy(args.work_ms), iter(range(args.items)), p)
            next(gen)
            first.append(time.perf_counter() - t0)
            for _ in gen:
                pass
            total.append(time.perf_counter() - t0)
        print(f"processes {p}: first result {statistics.median(first):.3f} s, all {statistics.median(total):.3f} s")


if __name__ == "__main__":
    main()
