"""Statistics for BPB: ratio estimator, the seeds × documents t-interval and test, permutation
test, Holm.

BPB of a set of documents is the *ratio* ΣNLL / (ln 2 · Σbytes), not a mean of per-document
BPB (long documents weigh by their bytes). Its uncertainty has two sources: the documents (the
sampling unit, taken together across seeds) and the seeds (independently trained models: the
training variance). ``crossed_test`` carries both into every interval and p the report calls
significant or not; docs/report.md ("Uncertainty") says why a t on the seeds' degrees of
freedom and not a hierarchical bootstrap.

The estimators work on per-(seed, document) sums of K columns (e.g. [NLL nats, bytes]); pairing
two encoders (or perturbed vs clean) puts their columns side by side on the same documents.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats as sps

from core.metrics import LN2

EXACT_PERMUTATION_MAX_UNITS = 14  # 2^14 sign patterns; above that, Monte Carlo


def ratio_bpb(nll_nats: np.ndarray, n_bytes: np.ndarray) -> float:
    """Bits per byte of a set of documents: ΣNLL (nats) / (ln 2 · Σ bytes)."""
    den = float(np.sum(n_bytes))
    return float(np.sum(nll_nats)) / (LN2 * den) if den > 0 else math.nan


def seed_mean_sd(per_seed_bpb: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1) of per-seed BPB; sd is NaN for one seed."""
    x = np.asarray(per_seed_bpb, dtype=float)
    if len(x) == 0:
        return (math.nan, math.nan)
    return (float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else math.nan)


# Sign patterns a Monte Carlo chunk draws at once: ≤ 4 MiB of pattern bytes per chunk (a test of
# 600 documents draws its 10,000 patterns in one).
_PERM_CHUNK_BYTES = 1 << 22


def _byte_tables(c: np.ndarray) -> np.ndarray:
    """Per 8-unit group, the statistic's part under each of the 256 sign patterns of its units.

    c: ``(n,)`` contributions to T. Returns ``(ceil(n / 8), 256)``: ``[j, b]`` = Σ_k s_k(b) ·
    c[8j + k], summed in order k = 0…7, with s_k(b) = −1 where bit k of b is set (the encoder
    labels of that unit swapped), else +1; units past n count 0. Then a whole pattern's
    T* = Σ_j table[j, byte_j]: one lookup per 8 units instead of 8 products. Built by doubling
    (the entries with bit k set are those without it, minus c_k), elementwise in a fixed order
    and without BLAS, so the floats never depend on threads.
    """
    n_bytes = -(-len(c) // 8)
    c8 = np.zeros(n_bytes * 8)
    c8[:len(c)] = c
    c8 = c8.reshape(n_bytes, 8)
    table = np.column_stack([c8[:, 0], -c8[:, 0]])  # (n_bytes, 2): bit 0 clear, set
    for k in range(1, 8):
        table = np.concatenate([table + c8[:, k, None], table - c8[:, k, None]], axis=1)
    return table


def _pattern_stats(table: np.ndarray, pattern_bytes: np.ndarray) -> np.ndarray:
    """T* of sign patterns given as bytes: ``pattern_bytes`` ``(n_bytes, m)`` uint8, column i the
    i-th pattern (bit k of row j: the sign of unit 8j + k); ``table`` from ``_byte_tables``.
    Returns ``(m,)`` float64, summed over the byte groups in order (deterministic)."""
    t = table[0].take(pattern_bytes[0])
    part = np.empty_like(t)
    for j in range(1, table.shape[0]):
        t += table[j].take(pattern_bytes[j], out=part, mode="clip")  # a byte is always in range
    return t


def _random_bytes(rng: np.random.Generator, size: int) -> np.ndarray:
    """``(size,)`` uint8 of fair random bits: the generator's raw 64-bit words (full-range
    ``integers``: no rejection) as little-endian bytes, the same on every machine. ``rng.bytes``
    (32-bit draws, then a copy to ``bytes``) took 7× as long on the VM."""
    words = rng.integers(0, np.iinfo(np.uint64).max, size=-(-size // 8), dtype=np.uint64,
                         endpoint=True)
    return words.astype("<u8", copy=False).view(np.uint8)[:size]


def paired_permutation_test(
    diff_bits: np.ndarray,
    weights: np.ndarray,
    n_perm: int = 10000,
    rng: np.random.Generator | None = None,
    *,
    exact_max_units: int = EXACT_PERMUTATION_MAX_UNITS,
) -> float:
    """Two-sided byte-weighted paired permutation (sign-flip) test of "no difference".

    diff_bits: (n,) per-unit difference in BPB (bits/byte) between the two encoders on the same
    document; weights: (n,) its bytes. Units of no bytes are left out; a non-finite difference
    or weight among the rest makes the test undefined (NaN, "untested"). The statistic T = Σ w·d / Σ w is exactly the difference of
    the pooled ratios, so the test is about the quantity the report shows. Under H0 the encoder
    labels are exchangeable within a document, i.e. each d flips sign. Exact enumeration of all
    2^n sign patterns for n ≤ ``exact_max_units`` (default EXACT_PERMUTATION_MAX_UNITS), else
    ``n_perm`` random patterns with p = (1 + #{|T*| ≥ |T|}) / (1 + n_perm); when no random pattern
    reaches |T|, the Hoeffding bound 2·exp(−T² / (2 Σ c²)) if it is smaller (a rigorous upper
    bound on the exact p).

    A random pattern is n fair random bits, one a unit (drawing one integer a sign cost most of
    the test's time): chunks of m patterns as ``(ceil(n / 8), m)`` bytes from ``_random_bytes``,
    column i the i-th pattern. Its T* is a sum of one table lookup per 8 units
    (``_byte_tables``), with no BLAS, so the result is the same in any process and thread count.
    """
    d = np.asarray(diff_bits, dtype=float)
    w = np.asarray(weights, dtype=float)
    if d.shape != w.shape or d.ndim != 1:
        raise ValueError("paired_permutation_test: diff_bits and weights must be 1-D, same length")
    keep = w > 0  # a unit of no bytes has no BPB (0/0): it carries no information
    d, w = d[keep], w[keep]
    n = len(d)
    if n == 0 or not (np.isfinite(d).all() and np.isfinite(w).all()):
        # a NaN statistic compares false with every T*, which the exact path would turn into
        # p = 0: an undefined difference is no evidence at all
        return math.nan
    c = d * w / w.sum()  # contribution of each unit to T
    t_obs = abs(c.sum())
    if t_obs == 0:
        return 1.0
    tol = 1e-12 * max(1.0, t_obs)  # equal statistics must count as "as extreme"
    table = _byte_tables(c)
    if n <= exact_max_units:
        # every pattern once: pattern i flips unit u where bit u of i is set
        patterns = np.arange(2**n, dtype=np.uint64)
        shifts = 8 * np.arange(table.shape[0], dtype=np.uint64)
        pattern_bytes = ((patterns[None, :] >> shifts[:, None]) & 0xFF).astype(np.uint8)
        t = np.abs(_pattern_stats(table, pattern_bytes))
        return float(np.mean(t >= t_obs - tol))
    rng = rng or np.random.default_rng(0)
    n_bytes = table.shape[0]
    chunk = max(1, _PERM_CHUNK_BYTES // n_bytes)  # bounded memory for very large n
    hits = 0
    done = 0
    while done < n_perm:
        m = min(chunk, n_perm - done)
        pattern_bytes = _random_bytes(rng, n_bytes * m).reshape(n_bytes, m)
        hits += int(np.count_nonzero(np.abs(_pattern_stats(table, pattern_bytes)) >= t_obs - tol))
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


# --- seeds × documents: the unit of every interval and test the report calls "significant" ------

COVERS_DOCS = "documents"  # one seed: the interval is about the documents, not about training
COVERS_BOTH = "documents and seeds"


def crossed_test(x: np.ndarray, plus: Sequence[int], minus: Sequence[int], den: int,
                 level: float = 0.95) -> dict[str, np.ndarray]:
    """Estimate, CI and two-sided p of a pooled BPB ratio (or difference) over seeds × documents.

    x: ``(..., S, n, K)`` per-(seed, document) sums, the same n documents in every seed (column u
    is one document: its seeds are one unit, drawn or flipped together); any leading axes are
    independent problems (vectorised). The statistic is R = Σ_su (Σ_plus x − Σ_minus x) /
    (ln 2 · Σ_su x[den]) in bits per byte — BPB itself (plus=[nll], minus=[]) or a paired
    difference on shared bytes — pooled over all seeds and documents.

    Its variance treats seeds (trained models) and documents as two crossed random factors. With
    the linearised residuals r_su = (y_su / ln 2 − R · b_su) / Σb (they sum to zero), seed totals
    R_s = Σ_u r_su, document totals C_u = Σ_s r_su and the interaction γ_su = r_su − R_s/n − C_u/S,
    three mean squares (method of moments, unbiased for Var(R)):
    V_seed = S/(S−1) Σ R_s² (between seeds: training variance plus the documents' noise within a
    seed), V_doc = n/(n−1) Σ C_u² (documents resampled jointly across seeds) and
    V_int = nS/((S−1)(n−1)) Σ γ²; Var(R) = V_seed + max(0, V_doc − V_int), the second term being
    the document effects shared by every seed. The training variance is never subtracted from:
    with S − 1 degrees of freedom its estimate would be zero too often. Degrees of freedom by
    Satterthwaite over the mean squares that enter (V_seed with S − 1, V_doc with the effective
    number of documents (Σ C²)² / Σ C⁴, V_int with S − 1 times that), so a difference carried by
    the seeds is judged on about S − 1 degrees of freedom (t_{2, 0.975} = 4.30 with three seeds)
    and, with one seed, Var(R) = V_doc on the effective number of documents.
    CI: R ± t_ν · √Var; p: 2 · P(t_ν > |R| / √Var).

    Returns arrays over the leading axes: ``est``, ``lo``, ``hi``, ``p``, ``se`` (bits/byte),
    ``df``, ``v_seed`` and ``v_doc`` (the two parts of Var(R), (bits/byte)²). With one seed
    v_seed is 0: the interval covers documents only (``COVERS_DOCS``), not the variance of
    training.
    """
    x = np.asarray(x, dtype=float)
    if x.ndim < 3:
        raise ValueError("crossed_test: x must be (..., seeds, documents, columns)")
    n_seeds, n = x.shape[-3], x.shape[-2]
    y = x[..., list(plus)].sum(-1) - x[..., list(minus)].sum(-1)  # (..., S, n) nats
    b = x[..., den]  # (..., S, n) bytes
    btot = b.sum((-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        est = y.sum((-2, -1)) / (LN2 * btot)
        r = (y / LN2 - est[..., None, None] * b) / btot[..., None, None]
    col = r.sum(-2)  # (..., n) document totals
    c2 = col * col
    v_doc = (n / (n - 1) * c2.sum(-1)) if n > 1 else np.full(est.shape, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        # effective number of documents (Welch): a few long documents carry most of the variance
        df_doc = np.minimum(c2.sum(-1) ** 2 / (c2 * c2).sum(-1), n - 1.0)
    if n_seeds > 1:
        row = r.sum(-1)  # (..., S) seed totals
        v_seed = n_seeds / (n_seeds - 1) * (row * row).sum(-1)
        g = r - row[..., None] / n - col[..., None, :] / n_seeds
        v_int = (n * n_seeds / ((n_seeds - 1) * (n - 1)) * (g * g).sum((-2, -1))
                 if n > 1 else np.zeros(est.shape))
        # the seed term keeps the documents' within-seed noise: subtracting it there would leave
        # a training variance estimated from S − 1 degrees of freedom at zero too often
        # Satterthwaite for a sum and difference of mean squares: each brings its own noise
        with np.errstate(invalid="ignore", divide="ignore"):
            terms = v_seed**2 / (n_seeds - 1) + np.where(
                v_doc > v_int, v_doc**2 / df_doc + v_int**2 / ((n_seeds - 1) * df_doc), 0.0)
        v_doc = np.maximum(v_doc - v_int, 0.0)
    else:
        v_seed = np.zeros(est.shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            terms = v_doc**2 / df_doc
    v = v_doc + v_seed
    with np.errstate(invalid="ignore", divide="ignore"):
        df = v**2 / terms
        df = np.where(np.isfinite(df), np.clip(df, 1.0, 1e7), 1e7)  # 0/0: no spread at all
        se = np.sqrt(v)
        tq = sps.t.ppf(0.5 + level / 2.0, df)
        z = np.abs(est) / se
    p = np.where(se > 0, 2.0 * sps.t.sf(z, df), np.where(est == 0, 1.0, 0.0))
    p = np.where(np.isfinite(est) & np.isfinite(se), p, np.nan)
    half = np.where(se > 0, tq * se, 0.0)
    return dict(est=est, lo=est - half, hi=est + half, p=p, se=se, df=df, v_doc=v_doc,
                v_seed=v_seed)


def covers(n_seeds: int) -> str:
    """What a ``crossed_test`` interval over ``n_seeds`` seeds covers (``COVERS_*``)."""
    return COVERS_BOTH if n_seeds > 1 else COVERS_DOCS


def crossed(seed: np.ndarray, doc: np.ndarray, cols: Sequence[np.ndarray]) -> np.ndarray:
    """Per-unit columns arranged as ``(S, n, K)`` for ``crossed_test``: seed s's row u is
    document ``doc`` u (documents ascending); only documents present in every seed are kept (a
    document is one unit across seeds). seed, doc: ``(m,)`` integer codes; cols: K ``(m,)``."""
    m = np.column_stack([np.asarray(c, dtype=float) for c in cols])
    seeds = np.unique(seed)
    common = np.unique(doc[seed == seeds[0]])
    for s in seeds[1:]:
        common = np.intersect1d(common, doc[seed == s], assume_unique=False)
    out = np.empty((len(seeds), len(common), m.shape[1]))
    for i, s in enumerate(seeds):
        sel = np.flatnonzero(seed == s)
        d = doc[sel]
        order = np.argsort(d, kind="stable")
        pos = np.searchsorted(d[order], common)
        out[i] = m[sel[order[pos]]]
    return out
