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


def test_permutation_and_bootstrap_same_in_any_process() -> None:
    """Same generator seed, same numbers: on repeated calls and in forked workers (one BLAS
    thread there, all of them here), bit for bit — the report's tables rely on it."""
    d, w = _weak_effect(600, 3)
    d = d - 0.2  # a shift of about one standard error: p neither ~0 nor ~1
    g = np.column_stack([np.abs(d) * w, w, d * d * w])

    def task(i: int) -> tuple[float, np.ndarray]:
        return (stats.paired_permutation_test(d, w, 10000, np.random.default_rng(i % 2)),
                stats.resample_sums([g[:250], g[250:]] if i >= 2 else [g], 500,
                                    np.random.default_rng(5)))

    serial = [task(i) for i in range(4)]
    for got in (fork_map(task, 4, 2, "test"), [task(i) for i in range(4)]):
        for (p1, s1), (p2, s2) in zip(serial, got):
            assert p1 == p2 and np.array_equal(s1, s2)
    assert serial[0][0] != serial[1][0]  # another generator: other patterns, another p


def _resample_sums_loop(groups: list[np.ndarray], n_boot: int, rng: np.random.Generator
                        ) -> np.ndarray:
    """Reference: ``resample_sums``'s documented draws consumed one replicate at a time, each
    resample's documents summed by a Python loop over rows (no gathers, no chunked sums)."""
    k = groups[0].shape[1]
    slots = (np.zeros((n_boot, 1), dtype=int) if len(groups) == 1
             else rng.integers(0, len(groups), size=(n_boot, len(groups))))
    out = np.zeros((n_boot, k))
    for s, g in enumerate(groups):
        rows = [r for r in range(n_boot) for slot in slots[r] if slot == s]
        n = len(g)
        chunk = max(1, stats._BOOT_CHUNK_CELLS // n)
        for c0 in range(0, len(rows), chunk):
            block = rows[c0:c0 + chunk]
            draws = rng.integers(0, n, size=(len(block), n), dtype=np.uint16)
            for r, idx in zip(block, draws):
                for i in idx:
                    out[r] += g[i]
    return out


@pytest.mark.parametrize("sizes", [[150], [40, 70, 55], [300]])
def test_resample_sums_matches_a_plain_loop(sizes: list[int]) -> None:
    """Same draws, summed one document at a time: the same sums (to rounding). [300]: several
    chunks (2^15 // 300 = 109 resamples a chunk); three seeds: the hierarchical slots."""
    rng = np.random.default_rng(sum(sizes))
    groups = [np.column_stack([rng.gamma(2.0, 300.0, n), rng.integers(50, 900, n).astype(float),
                               rng.normal(0.0, 5.0, n)]) for n in sizes]
    n_boot = 400 if sizes != [300] else 250
    got = stats.resample_sums(groups, n_boot, np.random.default_rng(9))
    ref = _resample_sums_loop(groups, n_boot, np.random.default_rng(9))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-9)
    assert np.all(got[:, 1] == np.rint(got[:, 1]))  # whole bytes stay whole


def test_bootstrap_matches_the_sampling_distribution_of_a_mean() -> None:
    """With every document one byte, BPB is the mean of nll / ln 2: the bootstrap's spread must
    be the plug-in standard error σ̂/√n (4,000 resamples: ±1.1 % sd of its estimate), and 95 %
    percentile CIs of fresh samples must cover the true mean about 95 % of the time."""
    rng = np.random.default_rng(21)
    n = 200
    x = rng.exponential(1.5, n)  # bits per document, skewed
    g = np.column_stack([x * LN2, np.ones(n)])
    vals = stats.ratio_stat()(stats.resample_sums([g], 4000, np.random.default_rng(1)))
    assert vals.std() == pytest.approx(x.std() / math.sqrt(n), rel=0.05)
    assert vals.mean() == pytest.approx(x.mean(), abs=0.2 * x.std() / math.sqrt(n))
    covered = 0
    trials = 300
    for t in range(trials):
        y = rng.normal(2.0, 1.0, 80)
        lo, hi = stats.bootstrap_ci([np.column_stack([y * LN2, np.ones(80)])],
                                    stats.ratio_stat(), 1000, np.random.default_rng(t))
        covered += lo <= 2.0 <= hi
    # binomial sd at 0.95 over 300 trials: 1.3 %; the percentile interval undercovers slightly
    assert 0.90 <= covered / trials <= 0.99


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
