"""The report's resampled numbers from two checkouts on one run folder: how far a change to the
Monte Carlo draws moved the p-values and CIs, in units of their Monte Carlo error.

    PYTHONPATH=$PWD python benchmarks/compare_report_stats.py RUN_DIR --before OLD_TREE \
        [--processes 2]

Each side runs ``reports.tables.compute_tables`` (defaults: 1,000 resamples, 10,000 sign
patterns, seed 0) in a fresh ``python`` with its tree first on ``PYTHONPATH`` (this tree for
"after"; ``git worktree add OLD_TREE COMMIT`` for "before") and writes the resampled columns to
CSV. Then, per p-value column (groups.p_delta, comparisons.p_perm, mean_tests.p_perm): the
largest |Δp| over its rows, and |Δp| over the standard error of a difference of two independent
Monte Carlo estimates, √(2·p(1 − p)/n_perm) (p the mean of the two; a Hoeffding-bounded p below
1/(1 + n_perm) on either side is left out: it is no Monte Carlo estimate). Per CI column: the
largest |Δ| relative to the interval's width.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

# run in each side's interpreter: tables -> CSV files in the output folder
_DUMP = """
import sys
from pathlib import Path
from reports.load import load_run
from reports.tables import compute_tables
t = compute_tables(load_run(Path(sys.argv[1])), processes=int(sys.argv[3]))
out = Path(sys.argv[2])
for name in ("groups", "comparisons", "mean_tests"):
    getattr(t, name).to_csv(out / f"{name}.csv", index=False)
"""
P_COLUMNS = {"groups": ["p_delta"], "comparisons": ["p_perm"], "mean_tests": ["p_perm"]}
CI_COLUMNS = {"groups": [("ci_lo", "ci_hi"), ("delta_lo", "delta_hi")],
              "comparisons": [("ci_lo", "ci_hi")], "mean_tests": [("ci_lo", "ci_hi")]}
N_PERM = 10000


def _dump(tree: Path, run: Path, out: Path, processes: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-c", _DUMP, str(run), str(out), str(processes)], check=True,
                   cwd=tree, env=env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--before", type=Path, required=True, help="the older checkout's root")
    ap.add_argument("--processes", type=int, default=2)
    args = ap.parse_args()
    here = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        sides = {}
        for side, tree in (("before", args.before.resolve()), ("after", here)):
            out = Path(tmp) / side
            out.mkdir()
            _dump(tree, args.run_dir.resolve(), out, args.processes)
            sides[side] = {n: pd.read_csv(out / f"{n}.csv") for n in P_COLUMNS}
    floor = 1.0 / (1 + N_PERM)
    for name, cols in P_COLUMNS.items():
        a, b = sides["before"][name], sides["after"][name]
        for col in cols:
            pa, pb = a[col].to_numpy(float), b[col].to_numpy(float)
            ok = np.isfinite(pa) & np.isfinite(pb) & (pa >= floor) & (pb >= floor)
            p = (pa[ok] + pb[ok]) / 2
            se = np.sqrt(2 * p * (1 - p) / N_PERM)
            z = np.abs(pa[ok] - pb[ok]) / np.where(se > 0, se, np.inf)
            print(f"{name}.{col}: {ok.sum()} Monte Carlo p-values of {len(pa)} rows "
                  f"(others: NaN or Hoeffding-bounded, same NaNs: "
                  f"{bool(np.array_equal(np.isnan(pa), np.isnan(pb)))}); max |Δp| "
                  f"{np.max(np.abs(pa[ok] - pb[ok]), initial=0):.4f}; |Δp|/se: median "
                  f"{np.median(z) if len(z) else float('nan'):.2f}, max "
                  f"{np.max(z, initial=0):.2f}, share > 3: {np.mean(z > 3) if len(z) else 0:.3f};"
                  f" both < 0.05 or both ≥ 0.05 in {np.mean((pa < 0.05) == (pb < 0.05)):.3f}")
        for lo, hi in CI_COLUMNS[name]:
            width = (a[hi] - a[lo]).to_numpy(float)
            d = np.maximum(np.abs(a[lo] - b[lo]), np.abs(a[hi] - b[hi])).to_numpy(float)
            ok = np.isfinite(d) & (width > 0)
            print(f"{name}.{lo}/{hi}: {ok.sum()} intervals; max |Δ endpoint| / width: median "
                  f"{np.median(d[ok] / width[ok]):.3f}, max {np.max(d[ok] / width[ok]):.3f}")


if __name__ == "__main__":
    main()
