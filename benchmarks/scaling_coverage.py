"""Coverage of the scaling fit's intervals on synthetic laws of known truth, on the project's own
design (suites/scaling.yaml: five budgets 8e12–1.28e14, each encoder's 10-rung ladder, the
4-pass and 200-step refusals): how often each 95 % interval of ``reports.scaling.fit_scaling``
holds the true value, the intervals' median width against the estimates' real spread, and the
estimates' bias (the table docs/scaling.md cites).

    PYTHONPATH=$PWD python benchmarks/scaling_coverage.py [--seeds 40] [--boot 200] [--noise 0.005]

Truth (``tests/reports/synthetic_scaling.py``, PROJECT_LAWS, C = 6ND): the frontier exponent
α = ab/(a+b), the N_opt exponent b/(a+b), the shared E, and the C* where the two frontiers cross.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "reports"))

from synthetic_scaling import (  # noqa: E402
    PROJECT_LAWS,
    project_estimates,
    project_results,
    project_truth,
)

from reports.scaling import fit_scaling  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=40, help="noise seeds (synthetic sweeps)")
    ap.add_argument("--boot", type=int, default=200, help="bootstrap resamples per fit")
    ap.add_argument("--noise", type=float, default=0.005, help="relative noise sd of each BPB")
    args = ap.parse_args()
    truth = project_truth()
    got: dict[str, list[tuple[float, float, float]]] = {k: [] for k in truth}
    for s in range(args.seeds):
        fit = fit_scaling(project_results(PROJECT_LAWS, args.noise, seed=s), n_boot=args.boot,
                          seed=s)
        for k, v in project_estimates(fit).items():
            got[k].append(v)
    print(f"{args.seeds} noise seeds, noise {100 * args.noise:g} %, {args.boot} resamples")
    print("| quantity | truth | coverage | median CI width | spread (sd) | bias |")
    print("|---|---|---|---|---|---|")
    for k, t in truth.items():
        v = np.array(got[k], float)
        ok = np.isfinite(v).all(axis=1)
        cover = np.mean((v[ok, 1] <= t) & (t <= v[ok, 2])) if ok.any() else math.nan
        width = np.median(v[ok, 2] - v[ok, 1]) if ok.any() else math.nan
        print(f"| {k} | {t:.4g} | {100 * cover:.0f} % ({ok.sum()}) | {width:.3g} | "
              f"{np.std(v[ok, 0], ddof=1):.3g} | {np.mean(v[ok, 0]) - t:+.3g} |")


if __name__ == "__main__":
    main()
