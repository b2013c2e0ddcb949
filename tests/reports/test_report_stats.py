"""Statistics against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from reports import stats

LN2 = math.log(2.0)


def test_ratio_estimator_is_sum_over_sum_not_mean_of_ratios() -> None:
    # doc 1: 1 bit over 1 byte (1 bit/byte); doc 2: 9 bits over 3 bytes (3 bits/byte)
    nll = np.array([1.0, 9.0]) * LN2
    nbytes = np.array([1.0, 3.0])
    assert stats.ratio_bpb(nll, nbytes) == pytest.approx(10 / 4)  # not (1 + 3) / 2 = 2
    assert math.isnan(stats.ratio_bpb(nll[:0], nbytes[:0]))


def test_bootstrap_of_identical_documents_is_degenerate() -> None:
    g = np.column_stack([np.full(7, 2.0 * LN2 * 5), np.full(7, 5.0)])  # every doc 2 bits/byte
    lo, hi = stats.bootstrap_ci([g], stats.ratio_stat(), 300, np.random.default_rng(0))
    assert lo == pytest.approx(2.0) and hi == pytest.approx(2.0)


def test_hierarchical_bootstrap_resamples_seeds_first() -> None:
    # Seed A: every document 1 bit/byte; seed B: 3 bits/byte; equal bytes. Drawing 2 seeds with
    # replacement gives AA (1), AB/BA (2), BB (3) with probabilities 1/4, 1/2, 1/4 whatever the
    # documents drawn inside each seed.
    a = np.column_stack([np.full(5, 1.0 * LN2 * 4), np.full(5, 4.0)])
    b = np.column_stack([np.full(5, 3.0 * LN2 * 4), np.full(5, 4.0)])
    sums = stats.resample_sums([a, b], 4000, np.random.default_rng(1))
    vals = np.round(stats.ratio_stat()(sums), 9)
    freq = {v: np.mean(vals == v) for v in (1.0, 2.0, 3.0)}
    assert set(np.unique(vals)) == {1.0, 2.0, 3.0}
    assert freq[1.0] == pytest.approx(0.25, abs=0.03)
    assert freq[2.0] == pytest.approx(0.50, abs=0.03)
    assert freq[3.0] == pytest.approx(0.25, abs=0.03)
    # each replicate draws one full resample per seed slot: 2 seeds × 5 docs × 4 bytes
    assert np.all(sums[:, 1] == 40.0)


def test_single_seed_resamples_documents_with_replacement() -> None:
    g = np.column_stack([np.array([0.0, 10.0]) * LN2, np.array([1.0, 1.0])])
    vals = stats.ratio_stat()(stats.resample_sums([g], 4000, np.random.default_rng(2)))
    # two docs: {0,0} → 0, {0,10} → 5, {10,10} → 10 bits/byte with probs 1/4, 1/2, 1/4
    assert np.mean(vals == 5.0) == pytest.approx(0.5, abs=0.03)
    assert np.mean(vals == 0.0) == pytest.approx(0.25, abs=0.03)


def test_diff_stat_paired_columns() -> None:
    s = np.array([[4.0 * LN2, 1.0 * LN2, 2.0]])  # A 4 bits, B 1 bit, 2 bytes
    assert stats.diff_stat([0], [1], 2)(s)[0] == pytest.approx(1.5)


@pytest.mark.parametrize(
    ("d", "w", "p"),
    [
        ([1.0, 1.0, 1.0], [1, 1, 1], 2 / 8),  # only all-+ and all-− reach |T| = 1
        ([1.0, -1.0, 2.0], [1, 1, 1], 6 / 8),  # ±1 ±1 ±2: |sum| ≥ 2 in 6 of 8 patterns
        ([1.0, 1.0, -1.0], [3, 1, 1], 6 / 8),  # ±3 ±1 ±1 (×1/5): |sum| ≥ 3 in 6 of 8
        ([0.0, 0.0], [1, 1], 1.0),
    ],
)
def test_permutation_test_exact(d: list[float], w: list[float], p: float) -> None:
    assert stats.paired_permutation_test(np.array(d), np.array(w, float)) == pytest.approx(p)


def test_permutation_test_weights_bytes() -> None:
    d = np.array([1.0, 1.0, 1.0, -1.0])
    # equal weights: sums of four ±1 with |sum| ≥ 2 in 1 + 4 + 4 + 1 = 10 of 16 patterns
    assert stats.paired_permutation_test(d, np.ones(4)) == pytest.approx(10 / 16)
    # the negative document has 9× the bytes: |T| = |1 + 1 + 1 − 9| / 12; every pattern
    # ±1 ±1 ±1 ±9 has |sum| ≥ 6, so p = 1 — weighting changes the answer
    assert stats.paired_permutation_test(d, np.array([1.0, 1.0, 1.0, 9.0])) == pytest.approx(1.0)


def test_permutation_monte_carlo_and_hoeffding_tail() -> None:
    d = np.ones(20)  # exact p = 2 / 2^20; no random pattern reaches it
    p = stats.paired_permutation_test(d, np.ones(20), n_perm=999, rng=np.random.default_rng(0))
    # c_i = 1/20: T = 1, Σc² = 1/20 → Hoeffding 2·exp(−10) < 1/1000, and ≥ the exact p
    assert p == pytest.approx(2 * math.exp(-10))
    assert p >= 2 / 2**20
    # a weak effect: Monte Carlo estimate close to the exact value (normal-theory check)
    rng = np.random.default_rng(5)
    d = rng.normal(0.1, 1.0, 40)
    p_mc = stats.paired_permutation_test(d, np.ones(40), n_perm=20000, rng=rng)
    z = abs(d.sum()) / math.sqrt(np.sum(d * d))
    assert p_mc == pytest.approx(math.erfc(z / math.sqrt(2)), abs=0.03)


def test_holm_hand_computed() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: .005×4=.02, .01×3=.03, .03×2=.06, .04×1=.04 → running max .06
    assert stats.holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    out = stats.holm([math.nan, 0.5, 0.2])
    assert math.isnan(out[0]) and out[1:] == pytest.approx([0.5, 0.4])
    assert stats.holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])


def test_wilcoxon_matches_scipy_and_needs_enough_documents() -> None:
    d = np.array([0.3, -0.1, 0.5, 0.2, 0.7, 0.05, 0.4])
    assert stats.wilcoxon_p(d) == pytest.approx(sps.wilcoxon(d).pvalue)
    assert math.isnan(stats.wilcoxon_p(d[:4]))


def test_slope_and_seed_summary() -> None:
    assert stats.slope([0, 0.1, 0.2], [1.0, 1.5, 2.0]) == pytest.approx(5.0)
    assert math.isnan(stats.slope([0.1, 0.1], [1, 2]))
    mean, sd = stats.seed_mean_sd([1.0, 2.0, 3.0])
    assert (mean, sd) == pytest.approx((2.0, 1.0))
    assert math.isnan(stats.seed_mean_sd([1.0])[1])
