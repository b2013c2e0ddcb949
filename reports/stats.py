"""Statistics for BPB: ratio estimator, (hierarchical, paired) bootstrap, permutation test, Holm.

BPB of a set of documents is the *ratio* ΣNLL / (ln 2 · Σbytes), not a mean of per-document
BPB (long documents weigh by their bytes). Its uncertainty comes from resampling documents — and,
with several seeds (independently trained models), first seeds and then documents within each
drawn seed (a two-level bootstrap), so seed-to-seed variance is part of the interval.

Every estimator here works on *unit matrices*: for one seed, an array ``(n_docs, K)`` of per-document
sums (e.g. columns [NLL nats, bytes]); a resample sums rows, and a statistic is a function of the
``K`` column sums. Pairing two encoders (or perturbed vs clean) puts their columns side by side on
the same documents, so one draw of documents serves both — that is the paired bootstrap.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats as sps

from core.metrics import LN2

EXACT_PERMUTATION_MAX_UNITS = 14  # 2^14 sign patterns; above that, Monte Carlo


def ratio_bpb(nll_nats: np.ndarray, n_bytes: np.ndarray) -> float:
    """Bits per byte of a set of documents: ΣNLL (nats) / (ln 2 · Σ bytes)."""
    den = float(np.sum(n_bytes))
    return float(np.sum(nll_nats)) / (LN2 * den) if den > 0 else math.nan


def resample_sums(
    groups: Sequence[np.ndarray], n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """Column sums of ``n_boot`` hierarchical resamples.

    groups: one ``(n_docs_s, K)`` float array per seed (its documents' per-document sums).
    With one group, documents are resampled with replacement; with S > 1 groups, each replicate
    draws S seeds with replacement and, for every drawn seed independently, its documents.
    Returns ``(n_boot, K)``.
    """
    groups = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not groups:
        raise ValueError("resample_sums: no documents")
    k = groups[0].shape[1]
    n_seeds = len(groups)
    if n_seeds == 1:
        slots = np.zeros((n_boot, 1), dtype=int)
    else:
        slots = rng.integers(0, n_seeds, size=(n_boot, n_seeds))
    out = np.zeros((n_boot, k))
    for s, g in enumerate(groups):
        rows, _ = np.nonzero(slots == s)
        if len(rows) == 0:
            continue
        n = g.shape[0]
        # Per replicate, how often each document is drawn (a resample of size n with
        # replacement), built with one bincount per chunk; then counts @ g sums the columns.
        chunk = max(1, 2_000_000 // n)  # bounded memory for large eval sets
        for c0 in range(0, len(rows), chunk):
            r = rows[c0:c0 + chunk]
            draws = rng.integers(0, n, size=(len(r), n))
            flat = (draws + (np.arange(len(r)) * n)[:, None]).ravel()
            counts = np.bincount(flat, minlength=len(r) * n).reshape(len(r), n)
            np.add.at(out, r, counts @ g)
    return out


def bootstrap_ci(
    groups: Sequence[np.ndarray],
    statistic: Callable[[np.ndarray], np.ndarray],
    n_boot: int,
    rng: np.random.Generator,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile CI of ``statistic(column sums)`` (vectorised: ``(n_boot, K) -> (n_boot,)``)."""
    if n_boot <= 0:
        return (math.nan, math.nan)
    vals = statistic(resample_sums(groups, n_boot, rng))
    vals = vals[np.isfinite(vals)]
    if len(vals) == 0:
        return (math.nan, math.nan)
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(vals, [a, 1.0 - a])
    return (float(lo), float(hi))


def ratio_stat(num: int = 0, den: int = 1) -> Callable[[np.ndarray], np.ndarray]:
    """Statistic: BPB = sums[num] / (ln 2 · sums[den])."""
    return lambda s: s[:, num] / (LN2 * s[:, den])


def diff_stat(
    plus: Sequence[int], minus: Sequence[int], den: int
) -> Callable[[np.ndarray], np.ndarray]:
    """Statistic: (Σ_plus columns − Σ_minus columns) / (ln 2 · sums[den]) — a BPB difference on
    shared bytes (paired encoders on the same text, or perturbed minus clean per clean byte)."""
    return lambda s: (s[:, list(plus)].sum(1) - s[:, list(minus)].sum(1)) / (LN2 * s[:, den])


def seed_mean_sd(per_seed_bpb: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1) of per-seed BPB; sd is NaN for one seed."""
    x = np.asarray(per_seed_bpb, dtype=float)
    if len(x) == 0:
        return (math.nan, math.nan)
    return (float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else math.nan)


def paired_permutation_test(
    diff_bits: np.ndarray,
    weights: np.ndarray,
    n_perm: int = 10000,
    rng: np.random.Generator | None = None,
) -> float:
    """Two-sided byte-weighted paired permutation (sign-flip) test of "no difference".

    diff_bits: (n,) per-unit difference in BPB (bits/byte) between the two encoders on the same
    document; weights: (n,) its bytes. The statistic T = Σ w·d / Σ w is exactly the difference of
    the pooled ratios, so the test is about the quantity the report shows. Under H0 the encoder
    labels are exchangeable within a document, i.e. each d flips sign. Exact enumeration of all
    2^n sign patterns for n ≤ EXACT_PERMUTATION_MAX_UNITS, else ``n_perm`` random patterns with
    p = (1 + #{|T*| ≥ |T|}) / (1 + n_perm); when no random pattern reaches |T|, the Hoeffding
    bound 2·exp(−T² / (2 Σ c²)) if it is smaller (a rigorous upper bound on the exact p).
    """
    d = np.asarray(diff_bits, dtype=float)
    w = np.asarray(weights, dtype=float)
    if d.shape != w.shape or d.ndim != 1:
        raise ValueError("paired_permutation_test: diff_bits and weights must be 1-D, same length")
    n = len(d)
    if n == 0 or w.sum() <= 0:
        return math.nan
    c = d * w / w.sum()  # contribution of each unit to T
    t_obs = abs(c.sum())
    if t_obs == 0:
        return 1.0
    tol = 1e-12 * max(1.0, t_obs)  # equal statistics must count as "as extreme"
    if n <= EXACT_PERMUTATION_MAX_UNITS:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))  # (2^n, n)
        t = np.abs(signs @ c)
        return float(np.mean(t >= t_obs - tol))
    rng = rng or np.random.default_rng(0)
    hits = 0
    done = 0
    chunk = 2000  # bounded memory: chunk × n signs at a time
    while done < n_perm:
        m = min(chunk, n_perm - done)
        flips = rng.integers(0, 2, size=(m, n), dtype=np.int8)  # 1 = swap labels in that unit
        t = c.sum() - 2.0 * (flips @ c)  # Σ s·c with s = 1 − 2·flip
        hits += int(np.sum(np.abs(t) >= t_obs - tol))
        done += m
    if hits == 0:
        # The Monte Carlo floor 1/(1 + n_perm) would cap every significant result and, after Holm
        # over hundreds of comparisons, hide all of them. Hoeffding's inequality for Rademacher
        # sums bounds the exact permutation p from above: P(|Σ s·c| ≥ T) ≤ 2·exp(−T² / (2 Σ c²)).
        bound = 2.0 * math.exp(-(t_obs**2) / (2.0 * float(np.sum(c * c))))
        return min(bound, 1.0 / (1 + n_perm))
    return (1 + hits) / (1 + n_perm)


def wilcoxon_p(diff_bits: np.ndarray, min_units: int = 6) -> float:
    """Two-sided Wilcoxon signed-rank p on per-document BPB differences (unweighted), or NaN when
    it does not apply (fewer than ``min_units`` non-zero differences)."""
    d = np.asarray(diff_bits, dtype=float)
    d = d[np.isfinite(d) & (d != 0)]
    if len(d) < min_units:
        return math.nan
    return float(sps.wilcoxon(d).pvalue)


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm step-down adjusted p-values (family = all non-NaN inputs; NaN stays NaN).

    Sorted p_(1) ≤ … ≤ p_(m): adj_(i) = max_{j ≤ i} min(1, (m − j + 1) · p_(j)).
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    running = 0.0
    for i, idx in enumerate(order):
        running = max(running, min(1.0, (m - i) * p[idx]))
        out[idx] = running
    return out


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of y on x (NaN with fewer than two distinct x)."""
    xa = np.asarray(x, dtype=float)
    ya = np.asarray(y, dtype=float)
    ok = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[ok], ya[ok]
    if len(np.unique(xa)) < 2:
        return math.nan
    xc = xa - xa.mean()
    return float(np.sum(xc * (ya - ya.mean())) / np.sum(xc * xc))
