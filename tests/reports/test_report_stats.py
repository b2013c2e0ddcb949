"""Statistics against hand-computed values, exact enumerations, scipy, and plain-loop references
of the same random draws."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats as sps

from reports import stats
from reports.pool import fork_map

LN2 = math.log(2.0)


def test_ratio_estimator_is_sum_over_sum_not_mean_of_ratios() -> None:
    # doc 1: 1 bit over 1 byte (1 bit/byte); doc 2: 9 bits over 3 bytes (3 bits/byte)
    nll = np.array([1.0, 9.0]) * LN2
    nbytes = np.array([1.0, 3.0])
    assert stats.ratio_bpb(nll, nbytes) == pytest.approx(10 / 4)  # not (1 + 3) / 2 = 2
    assert math.isnan(stats.ratio_bpb(nll[:0], nbytes[:0]))


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


def test_permutation_test_leaves_out_empty_documents_and_refuses_undefined_ones() -> None:
    d, w = np.array([1.0, 1.0, 1.0]), np.ones(3)
    want = stats.paired_permutation_test(d, w)  # 2 / 8: only all-+ and all-− reach |T|
    # a document of no bytes has no BPB (0/0 = NaN): it is left out, not a unit of the test
    with np.errstate(invalid="ignore"):
        nan_diff = np.float64(0.0) / np.float64(0.0)
    assert stats.paired_permutation_test(np.r_[d, nan_diff], np.r_[w, 0.0]) == pytest.approx(want)
    # an undefined difference on a document with bytes is no evidence: NaN ("untested"), on
    # the exact path (≤ 14 units, where a NaN statistic used to give p = 0) and the random one
    for n in (6, 30):
        dd = np.r_[np.linspace(-1.0, 2.0, n - 1), np.nan]
        assert math.isnan(stats.paired_permutation_test(dd, np.full(n, 100.0)))
    assert math.isnan(stats.paired_permutation_test(d, np.array([1.0, np.inf, 1.0])))


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


def _exact_p(d: np.ndarray, w: np.ndarray) -> float:
    """Reference: the two-sided sign-flip p of T = Σ w·d / Σ w over all 2^n patterns, by brute
    force with plain Python floats (no shared code with reports.stats)."""
    c = [float(x) for x in d * w / w.sum()]
    t_obs = abs(sum(c))
    hits = sum(abs(sum(s * x for s, x in zip(signs, c))) >= t_obs - 1e-12
               for signs in itertools.product((1.0, -1.0), repeat=len(c)))
    return hits / 2 ** len(c)


def _weak_effect(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n per-document BPB differences with a small positive shift, on a grid of 1/64 bit, and
    whole-byte log-normal weights: p-values spread over (0, 1), away from the ends where Monte
    Carlo is trivially right; d·w·64 are whole numbers (exact float sums, real ties)."""
    rng = np.random.default_rng(seed)
    return np.round(rng.normal(0.25, 1.0, n) * 64) / 64, np.round(rng.lognormal(5.0, 0.8, n)) + 1.0


@pytest.mark.parametrize("n", [10, 11, 12, 13, 14])
def test_permutation_matches_full_enumeration_and_scipy(n: int) -> None:
    """The exact path, scipy's exact sign-flip test and the Monte Carlo path (forced on the same
    small n) against a brute-force enumeration of all 2^n patterns. Monte Carlo: 10,000 patterns,
    so its p is within 4.5 binomial standard deviations (+ the 1/(1 + n_perm) offset) of the
    exact one; n = 9…13 also exercise byte groups padded with units that do not exist."""
    n_perm = 10000
    for seed in range(3):
        d, w = _weak_effect(n, 100 * n + seed)
        exact = _exact_p(d, w)
        assert stats.paired_permutation_test(d, w) == pytest.approx(exact, abs=1e-12)
        # scipy: one sample, permutation_type="samples" flips signs; every pattern once (exact);
        # its two-sided p (2 × the smaller tail) equals P(|T*| ≥ |T|) since T* is symmetric. It
        # gets T·64·Σw (whole numbers): its tie tolerance is relative 1e-14, tighter than the
        # rounding of the pattern that *is* the data when T is near 0, which it would miss.
        ref = sps.permutation_test((d * 64 * w,), np.sum, permutation_type="samples", vectorized=True,
                                   n_resamples=np.inf, alternative="two-sided", axis=-1).pvalue
        assert exact == pytest.approx(ref, abs=1e-12)
        p_mc = stats.paired_permutation_test(d, w, n_perm, np.random.default_rng(seed),
                                             exact_max_units=0)
        sd = math.sqrt(exact * (1 - exact) / n_perm)
        assert abs(p_mc - exact) <= 4.5 * sd + 1 / (n_perm + 1), (seed, exact, p_mc)


def test_permutation_monte_carlo_is_the_documented_bits() -> None:
    """The Monte Carlo p equals a plain ±1 matrix product over the very patterns the docstring
    describes: the generator's 64-bit words as bytes, (ceil(n / 8), n_perm) of them, pattern i in
    column i, bit k of byte row j set = unit 8j + k flips sign (little-endian bits). Pins the
    table lookups (``_byte_tables``) to the direct statistic and the stream to its description."""
    n, n_perm = 203, 3000  # not a multiple of 8: the last byte's high bits are padding
    d, w = _weak_effect(n, 7)
    d = d * 0.4  # p of a few percent: hits in both tails, but not all patterns
    p = stats.paired_permutation_test(d, w, n_perm, np.random.default_rng(11))
    n_bytes = -(-n // 8)
    words = np.random.default_rng(11).integers(0, 2**64 - 1, size=-(-n_bytes * n_perm // 8),
                                               dtype=np.uint64, endpoint=True)
    raw = words.astype("<u8").view(np.uint8)[:n_bytes * n_perm]
    by_pattern = raw.reshape(n_bytes, n_perm).T  # (n_perm, n_bytes)
    flips = np.unpackbits(by_pattern, axis=1, bitorder="little")[:, :n]  # (n_perm, n)
    c = d * w / w.sum()
    t = (1.0 - 2.0 * flips) @ c
    hits = int(np.sum(np.abs(t) >= abs(c.sum()) - 1e-12))
    assert 0 < hits < n_perm
    assert p == (1 + hits) / (1 + n_perm)


def test_permutation_and_crossed_test_same_in_any_process() -> None:
    """Same generator seed, same numbers: on repeated calls and in forked workers (one BLAS
    thread there, all of them here), bit for bit — the report's tables rely on it."""
    d, w = _weak_effect(600, 3)
    d = d - 0.2  # a shift of about one standard error: p neither ~0 nor ~1
    x = np.column_stack([np.abs(d) * w, d * d * w, w]).reshape(2, 300, 3)

    def task(i: int) -> tuple[float, np.ndarray]:
        r = stats.crossed_test(x if i >= 2 else x[:1], [0], [1], 2)
        return (stats.paired_permutation_test(d, w, 10000, np.random.default_rng(i % 2)),
                np.array([r["lo"], r["hi"], r["p"]]))

    serial = [task(i) for i in range(4)]
    for got in (fork_map(task, 4, 2, "test"), [task(i) for i in range(4)]):
        for (p1, s1), (p2, s2) in zip(serial, got):
            assert p1 == p2 and np.array_equal(s1, s2)
    assert serial[0][0] != serial[1][0]  # another generator: other patterns, another p


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


def test_crossed_test_one_seed_is_the_paired_t_on_documents() -> None:
    # equal bytes: the pooled difference is the mean per-document difference, its variance s²/n
    rng = np.random.default_rng(4)
    d = rng.normal(0.05, 0.2, size=30)  # bits/byte
    x = np.stack([(2.0 + d) * LN2 * 100, np.full(30, 2.0 * LN2 * 100), np.full(30, 100.0)], -1)
    r = stats.crossed_test(x[None], [0], [1], 2)
    assert float(r["est"]) == pytest.approx(d.mean())
    assert float(r["se"]) == pytest.approx(sps.sem(d))
    assert float(r["v_seed"]) == 0.0 and stats.covers(1) == "documents"
    assert 1.0 <= float(r["df"]) <= 29.0  # the effective number of documents, at most n − 1


def test_crossed_test_seed_effect_is_the_t_test_on_seeds() -> None:
    # every document of a seed moves by that seed's offset, nothing else varies: the test is
    # the one-sample t-test of the per-seed differences on S − 1 degrees of freedom
    offsets = np.array([0.03, -0.01, 0.05, 0.02])  # bits/byte
    b = np.array([50.0, 400.0, 120.0])
    a = (2.0 + offsets[:, None] + np.zeros(3)) * LN2 * b
    x = np.stack([a, np.broadcast_to(2.0 * LN2 * b, a.shape), np.broadcast_to(b, a.shape)], -1)
    r = stats.crossed_test(x, [0], [1], 2)
    want = sps.ttest_1samp(offsets, 0.0)
    assert float(r["est"]) == pytest.approx(offsets.mean())
    assert float(r["p"]) == pytest.approx(want.pvalue) and float(r["df"]) == pytest.approx(3.0)
    lo, hi = want.confidence_interval(0.95)
    assert (float(r["lo"]), float(r["hi"])) == pytest.approx((lo, hi))
    assert float(r["v_doc"]) == pytest.approx(0.0, abs=1e-15)


def test_crossed_keeps_documents_present_in_every_seed() -> None:
    seed = np.array([0, 0, 0, 1, 1, 1])
    doc = np.array([5, 2, 9, 9, 5, 7])  # 2 only in seed 0, 7 only in seed 1
    x = stats.crossed(seed, doc, [np.arange(6.0)])
    assert x.shape == (2, 2, 1) and x[:, :, 0].tolist() == [[0.0, 2.0], [4.0, 3.0]]
