"""The report's two resampling kernels in isolation: ``reports.stats.paired_permutation_test`` and
``reports.stats.resample_sums`` at a run's sizes; optionally against an older ``stats.py``,
interleaved call by call in one process (the VM is shared: alternating keeps both sides under
the same load).

    PYTHONPATH=$PWD python benchmarks/bench_report_stats.py [--before OLD/reports/stats.py] \
        [--n 300 600] [--reps 15]

Per document count n: one paired permutation test (``--perm`` sign patterns, default 10,000) of
n per-document BPB differences with log-normal byte weights, and one-seed bootstraps
(``--boot`` resamples, default 1,000) of an ``(n, K)`` unit matrix for K = 2 (a group's
[NLL, bytes]), 3 (a clean comparison, a group's ΔBPB) and 5 (a perturbed comparison), plus a
two-seed K = 2 one (hierarchical). Each call gets a fresh generator with the same seed, so
every repeat does the same work; one untimed round first. Prints the median and minimum wall
milliseconds of ``--reps`` calls and the ratio of the medians. BLAS threads are as the
environment leaves them: the old ``resample_sums`` multiplied by BLAS, so time it with
``OPENBLAS_NUM_THREADS=1`` too (what each of the report's worker processes uses).
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


def _cases(mod: ModuleType, n: int, n_perm: int, n_boot: int
           ) -> dict[str, Callable[[], object]]:
    """name -> a call of ``mod``'s kernels on n synthetic documents (the same data for every
    module: the data generator is seeded by n)."""
    data = np.random.default_rng(n)
    w = np.round(data.lognormal(6.0, 1.0, n)) + 1.0  # bytes per document
    d = data.normal(0.002, 0.05, n)  # bits/byte: a small effect, p of a few percent
    nll = data.gamma(4.0, 0.5, n) * w  # nats
    cases: dict[str, Callable[[], object]] = {
        f"perm n={n}": lambda: mod.paired_permutation_test(d, w, n_perm,
                                                           np.random.default_rng(1))}
    for k in (2, 3, 5):
        g = np.column_stack([nll * (1.0 + 0.01 * j) for j in range(k - 1)] + [w])
        cases[f"boot n={n} K={k}"] = (
            lambda g=g: mod.resample_sums([g], n_boot, np.random.default_rng(2)))
    two = [np.column_stack([nll, w])[: n // 2], np.column_stack([nll, w])[n // 2:]]
    cases[f"boot n={n} K=2, 2 seeds"] = (
        lambda: mod.resample_sums(two, n_boot, np.random.default_rng(2)))
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, help="an older reports/stats.py to time alongside")
    ap.add_argument("--n", type=int, nargs="+", default=[300, 600], help="documents per test")
    ap.add_argument("--perm", type=int, default=10000, help="sign patterns per test")
    ap.add_argument("--boot", type=int, default=1000, help="bootstrap resamples")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    sides = {"after": stats}
    if args.before:
        sides = {"before": _load(args.before), **sides}
    print("# " + ", ".join(f"{k}: {m.__file__}" for k, m in sides.items()))
    print(f"# wall ms, median (min) of {args.reps} calls, sides alternated call by call")
    for n in args.n:
        cases = {side: _cases(m, n, args.perm, args.boot) for side, m in sides.items()}
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
