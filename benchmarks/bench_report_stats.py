"""The report's resampling kernel in isolation: ``reports.stats.paired_permutation_test`` at a
run's sizes; optionally against an older ``stats.py``, interleaved call by call in one process
(the VM is shared: alternating keeps both sides under the same load).

    PYTHONPATH=$PWD python benchmarks/bench_report_stats.py [--before OLD/reports/stats.py] \
        [--n 300 600] [--reps 15]

Per document count n: one paired permutation test (``--perm`` sign patterns, default 10,000) of
n per-document BPB differences with log-normal byte weights. Each call gets a fresh generator
with the same seed, so every repeat does the same work; one untimed round first. Prints the
median and minimum wall milliseconds of ``--reps`` calls and the ratio of the medians.
An older checkout: ``git worktree add /tmp/old COMMIT``, then ``--before
/tmp/old/reports/stats.py``.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from reports import stats


def _load(path: Path) -> ModuleType:
    """An older ``stats.py`` as a module of its own (its imports resolve against this tree)."""
    spec = importlib.util.spec_from_file_location("stats_before", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cases(mod: ModuleType, n: int, n_perm: int) -> dict[str, Callable[[], object]]:
    """name -> a call of ``mod``'s kernels on n synthetic documents (the same data for every
    module: the data generator is seeded by n)."""
    data = np.random.default_rng(n)
    w = np.round(data.lognormal(6.0, 1.0, n)) + 1.0  # bytes per document
    d = data.normal(0.002, 0.05, n)  # bits/byte: a small effect, p of a few percent
    return {f"perm n={n}": lambda: mod.paired_permutation_test(d, w, n_perm,
                                                               np.random.default_rng(1))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, help="an older reports/stats.py to time alongside")
    ap.add_argument("--n", type=int, nargs="+", default=[300, 600], help="documents per test")
    ap.add_argument("--perm", type=int, default=10000, help="sign patterns per test")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    sides = {"after": stats}
    if args.before:
        sides = {"before": _load(args.before), **sides}
    print("# " + ", ".join(f"{k}: {m.__file__}" for k, m in sides.items()))
    print(f"# wall ms, median (min) of {args.reps} calls, sides alternated call by call")
    for n in args.n:
        cases = {side: _cases(m, n, args.perm) for side, m in sides.items()}
        times: dict[tuple[str, str], list[float]] = {}
        for rep in range(args.reps + 1):  # round 0: warm-up, not counted
            for name in cases["after"]:
                for side in sides:
                    t0 = time.perf_counter()
                    cases[side][name]()
                    if rep:
                        times.setdefault((name, side), []).append(
                            (time.perf_counter() - t0) * 1e3)
        for name in cases["after"]:
            cols = [f"{side} {statistics.median(times[name, side]):7.2f} "
                    f"({min(times[name, side]):6.2f})" for side in sides]
            if args.before:
                ratio = (statistics.median(times[name, "before"])
                         / statistics.median(times[name, "after"]))
                cols.append(f"×{ratio:.1f}")
            print(f"  {name:<22} " + "   ".join(cols))


if __name__ == "__main__":
    main()
