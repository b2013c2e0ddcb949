"""What the report calls significant: Holm-adjusted p < ALPHA *and* a 95 % CI without zero, both
from one test over seeds × documents (``reports.stats.crossed_test``).

A test over documents alone (the permutation p) sees only the documents' spread around the
trained models; the report's test also carries the seeds' spread. Two seeds that disagree in sign
must give a tie. ``test_report_calibration`` checks the rule's false-positive rate."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic_run import write_simple_run

from reports.comparisons import ALPHA, pair_matrix, significant
from reports.load import load_run
from reports.report_tables import clean_matrix
from reports.tables import anomaly_table, compute_tables


def test_the_rule_hand_checked() -> None:
    p = np.array([0.001, 0.001, 0.001, 0.2, np.nan, 0.001])
    lo = np.array([0.1, -0.3, -0.5, 0.1, 0.1, np.nan])
    hi = np.array([0.4, 0.1, -0.2, 0.4, 0.4, np.nan])
    # CI without zero above, CI holding zero, CI without zero below, p too large, untested, no CI
    assert significant(p, lo, hi).tolist() == [True, False, True, False, False, True]
    assert bool(significant(0.01, -0.2, -0.1)) and not bool(significant(0.01, -0.2, 0.0))
    assert not bool(significant(ALPHA, 0.1, 0.2))  # "p < ALPHA", strictly


@pytest.fixture(scope="module")
def split_seeds(tmp_path_factory: pytest.TempPathFactory):
    """B is 0.3 bits/byte worse than A under seed 0 and 0.1 better under seed 1; documents
    scatter by 0.02 around that, so each seed alone is decisive."""
    rng = random.Random(0)

    def bpb(enc: str, seed: int, pid: str, doc: int) -> float:
        shift = 0.0 if enc == "A" else (0.3 if seed == 0 else -0.1)
        return 2.0 + shift + rng.gauss(0.0, 0.02)

    path = write_simple_run(tmp_path_factory.mktemp("seeds") / "run", ["A", "B"], [0, 1], 100, bpb)
    return compute_tables(load_run(path), n_boot=400, n_perm=2000)


def test_seeds_that_disagree_make_a_tie(split_seeds) -> None:
    c = split_seeds.comparisons
    row = c[c.perturbation_id == "clean"].iloc[0]
    # the premise: the test over documents alone (these two trained models) would call it; the
    # test over seeds × documents does not, and its CI holds zero
    assert row.p_perm < ALPHA and row.p_holm >= ALPHA and row.ci_lo < 0 < row.ci_hi
    assert row.covers == "documents and seeds" and row.n_seeds == 2
    lowest = next(f for f in split_seeds.verdict_lines if f.text.startswith("Lowest clean BPB"))
    assert lowest.status == "not distinguishable"
    assert "significantly" not in lowest.text
    matrix = clean_matrix(split_seeds)
    assert "not distinguishable" in matrix.rows[0][2] and matrix.classes[0][2] == "tie"


def test_one_seed_still_finds_a_clear_difference(tmp_path: Path) -> None:
    rng = random.Random(1)

    def bpb(enc: str, seed: int, pid: str, doc: int) -> float:
        return 2.0 + (0.1 if enc == "B" else 0.0) + rng.gauss(0.0, 0.02)

    t = compute_tables(load_run(write_simple_run(tmp_path / "run", ["A", "B"], [0], 30, bpb)),
                       n_boot=400, n_perm=2000)
    lowest = next(f for f in t.verdict_lines if f.text.startswith("Lowest clean BPB"))
    assert lowest.status == "significant" and "significantly lower than B" in lowest.text


def test_matrix_and_anomalies_apply_the_rule() -> None:
    # the degradation matrix: two cells with tiny p, one whose CI holds zero → 1 win, 1 tie
    cmp = pd.DataFrame(dict(
        a=["A", "A"], b=["B", "B"], mode=["full", "full"], quantity=["ΔBPB", "ΔBPB"],
        diff=[-0.2, -0.1], ci_lo=[-0.3, -0.4], ci_hi=[-0.1, 0.2], p_holm=[0.001, 0.001]))
    m = pair_matrix(cmp, ["A", "B"], "full").set_index(["row", "col"])
    assert (m.loc[("A", "B")].wins, m.loc[("A", "B")].ties) == (1, 1)
    assert (m.loc[("B", "A")].losses, m.loc[("B", "A")].ties) == (1, 1)
    # an anomaly (ΔBPB significantly below zero) needs its paired CI below zero as well
    groups = pd.DataFrame(dict(
        encoder=["A", "A"], mode=["full", "full"], perturbation_id=["p", "q"], severity=[0.1, 0.1],
        delta=[-0.05, -0.05], delta_lo=[-0.08, -0.09], delta_hi=[-0.01, 0.02],
        p_delta_holm=[0.001, 0.001], n_docs=[30, 30]))
    assert list(anomaly_table(groups, ["full"]).perturbation_id) == ["p"]
