"""The report's significance rule on synthetic runs of known truth: family-wise false-positive
rate under four nulls and power at three seeds (the table docs/report.md cites).

    PYTHONPATH=$PWD python benchmarks/report_calibration.py [--reps 2000]

Scenarios come from ``tests/reports/synthetic_seeds.py`` (2 or 4 encoders, 3 seeds, 300
documents with Pareto(1.5) lengths from 50 bytes, document noise N(0, 0.05² · 1000 / bytes) BPB);
each replicate goes through ``reports.stats.crossed_test``, Holm over the encoder pairs and
``reports.comparisons.significant`` — the report's rule. A rate's interval is Clopper–Pearson 95 %.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from scipy.stats import beta

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "reports"))

from synthetic_seeds import Scenario, family_rate, power  # noqa: E402

NULLS = [
    ("(a) each trained model off by N(0, 0.01) BPB", Scenario("a", model_sd=0.01)),
    ("(b) document × encoder effect N(0, 0.1), same in every seed", Scenario("b", doc_sd=0.1)),
    ("(c) document noise only", Scenario("c")),
    ("(d) one seed, (b) + noise", Scenario("d", n_seeds=1, doc_sd=0.1)),
    ("(a) with 4 encoders (6 pairs, Holm)", Scenario("a4", n_encoders=4, model_sd=0.01)),
    ("(b) with 4 encoders (6 pairs, Holm)", Scenario("b4", n_encoders=4, doc_sd=0.1)),
]
ALTERNATIVES = [
    ("(a) + (b) + noise", dict(model_sd=0.01, doc_sd=0.1)),
    ("(c) document noise only", dict()),
]


def interval(rate: float, n: int) -> str:
    k = round(rate * n)
    lo = beta.ppf(0.025, k, n - k + 1) if k else 0.0
    hi = beta.ppf(0.975, k + 1, n - k) if k < n else 1.0
    return f"{100 * rate:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000, help="replicates per scenario")
    reps = ap.parse_args().reps
    print(f"| null (no true difference), {reps} replicates | family-wise false-positive rate |")
    print("|---|---|")
    for name, sc in NULLS:
        print(f"| {name} | {interval(family_rate(sc, reps, seed=11), reps)} |")
    print()
    print(f"| 3 seeds, {reps} replicates | power at 0.05 BPB | power at 0.1 BPB |")
    print("|---|---|---|")
    for name, kw in ALTERNATIVES:
        cells = [interval(power(Scenario("p", shift=s, **kw), reps, seed=12), reps)
                 for s in (0.05, 0.1)]
        print(f"| {name} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
