"""Coverage of the scaling fit's intervals on synthetic laws of known truth, on the project's own
design (suites/scaling.yaml: five budgets 8e12–1.28e14, each encoder's 10-rung ladder, the
4-pass and 200-step refusals): how often each 95 % interval of ``reports.scaling.fit_scaling``
holds the true value, the intervals' median width against the estimates' real spread, and the
estimates' bias (the table docs/scaling.md cites).

    PYTHONPATH=$PWD python benchmarks/scaling_coverage.py [--seeds 100] [--boot 200] \\
        [--noise 0.005 0.02] [--out benchmarks/results/scaling_coverage.md]

Truth (``tests/reports/synthetic_scaling.py``, PROJECT_LAWS, C = 6ND): the frontier exponent
α = ab/(a+b), the N_opt exponent b/(a+b), the shared E, and the C* where the two frontiers cross.

Each fit runs with ``intervals_on_bound``, so the intervals the report withholds where E is not
identified (E on a bound of its fit) are measured too: "reported" counts only the fits whose
interval the report prints, "withheld" the others. Coverage is given with its Clopper–Pearson
95 % interval over the fits (binomial: each fit is one independent trial), so a reader can see
whether a shortfall is more than sampling error.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import beta

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "reports"))

from synthetic_scaling import (  # noqa: E402
    PROJECT_LAWS,
    project_estimates,
    project_results,
    project_truth,
)

from reports.scaling import MAX_CI_DECADES, fit_scaling  # noqa: E402

# the quantities whose interval moves with E (withheld where E is not identified)
WITH_E = ("alpha bytes", "alpha bpe-4096", "E", "log10 C*")
RESAMPLE_SEED = 1_000_000


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval of a proportion k/n."""
    if n == 0:
        return math.nan, math.nan
    q = (1 - level) / 2
    lo = beta.ppf(q, k, n - k + 1) if k > 0 else 0.0
    hi = beta.ppf(1 - q, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def measure(noise: float, seeds: int, boot: int) -> list[dict[str, object]]:
    """One row per quantity: coverage of the reported and the withheld intervals, widths, spread."""
    truth = project_truth()
    got: dict[str, list[tuple[float, float, float, bool]]] = {k: [] for k in truth}
    for s in range(seeds):
        # the resampling seed differs from the noise seed: the same generator would draw the
        # data's own noise again as the first resample
        fit = fit_scaling(project_results(PROJECT_LAWS, noise, seed=s), n_boot=boot,
                          seed=RESAMPLE_SEED + s, intervals_on_bound=True)
        ident = bool(fit.irreducible[fit.irreducible.convention == "half"].identified.iloc[0])
        print(f"  noise {noise:g}: seed {s + 1} of {seeds}", file=sys.stderr, flush=True)
        for k, (v, lo, hi) in project_estimates(fit).items():
            got[k].append((v, lo, hi, ident or k not in WITH_E))
    rows = []
    for k, t in truth.items():
        v = np.array([g[:3] for g in got[k]], float)
        rep = np.array([g[3] for g in got[k]])
        ok = np.isfinite(v).all(axis=1)
        shown, held = ok & rep, ok & ~rep
        hits = (v[:, 1] <= t) & (t <= v[:, 2])
        # the report prints a C* interval wider than MAX_CI_DECADES as "unbounded": it states no
        # range, so it is counted apart, not as a hit or a miss
        wide = (v[:, 2] - v[:, 1] > MAX_CI_DECADES) if k == "log10 C*" else np.zeros(len(v), bool)
        shown &= ~wide
        k_s, n_s = int(hits[shown].sum()), int(shown.sum())
        rows.append(dict(
            quantity=k, truth=t, n=n_s, hits=k_s, ci=clopper_pearson(k_s, n_s),
            width=float(np.median(v[shown, 2] - v[shown, 1])) if n_s else math.nan,
            sd=float(np.std(v[shown, 0], ddof=1)) if n_s > 1 else math.nan,
            bias=float(np.mean(v[shown, 0]) - t) if n_s else math.nan,
            held=int(held.sum()), held_hits=int(hits[held].sum()), missing=int((~ok).sum()),
            unbounded=int((ok & rep & wide).sum())))
    return rows


def table(noise: float, seeds: int, boot: int, rows: list[dict[str, object]]) -> str:
    out = [f"noise {100 * noise:g} % of each BPB, {seeds} noise seeds, {boot} resamples per fit", "",
           "| quantity | truth | reported: coverage [95 % CI] (fits) | median CI width | spread (sd) "
           "| bias | withheld (E on a bound): coverage | printed \"unbounded\" | no estimate |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lo, hi = r["ci"]  # type: ignore[misc]
        cov = (f"{100 * r['hits'] / r['n']:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}] ({r['n']})"  # type: ignore[operator]
               if r["n"] else "— (0)")
        held = f"{r['held_hits']} of {r['held']}" if r["held"] else "—"
        out.append(f"| {r['quantity']} | {r['truth']:.4g} | {cov} | {r['width']:.3g} | {r['sd']:.3g} | "
                   f"{r['bias']:+.3g} | {held} | {r['unbounded']} | {r['missing']} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100, help="noise seeds (synthetic sweeps) per level")
    ap.add_argument("--boot", type=int, default=200, help="bootstrap resamples per fit")
    ap.add_argument("--noise", type=float, nargs="+", default=[0.005, 0.02],
                    help="relative noise sd of each BPB (one table each)")
    ap.add_argument("--out", type=Path, help="also write the tables here (Markdown)")
    args = ap.parse_args()
    parts = [f"`PYTHONPATH=$PWD python benchmarks/scaling_coverage.py --seeds {args.seeds} --boot "
             f"{args.boot} --noise {' '.join(f'{x:g}' for x in args.noise)}`", ""]
    for noise in args.noise:
        t0 = time.perf_counter()
        text = table(noise, args.seeds, args.boot, measure(noise, args.seeds, args.boot))
        parts += [text, f"({time.perf_counter() - t0:.0f} s)", ""]
        print(text, flush=True)
        if args.out:  # written after each level, so a long run leaves what it has measured
            args.out.write_text("\n".join(parts))


if __name__ == "__main__":
    main()
