"""Synthetic runs of known truth for the report's significance rule: E encoders × S seeds × n
documents with heavy-tailed lengths, many replicates at once (numpy, no files).

A document's BPB under encoder e and seed s is
    base_u + shift_e + model_es + doc_eu + noise_esu
with base_u shared by all encoders (it cancels in a difference), ``shift_e`` the true
difference, ``model_es`` ~ N(0, model_sd²) the trained model's offset (seed-to-seed variation),
``doc_eu`` ~ N(0, doc_sd²) a document × encoder effect that is the same in every seed, and
``noise_esu`` ~ N(0, noise_sd² · 1000 / b_u) the document's own noise (shorter documents noisier).
Lengths b_u are Pareto (α = 1.5) from 50 bytes, so a few long documents carry much of Σbytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from reports import stats
from reports.comparisons import significant

LN2 = float(np.log(2.0))


@dataclass(frozen=True)
class Scenario:
    """One synthetic design (BPB in bits per byte)."""

    name: str
    n_encoders: int = 2
    n_seeds: int = 3
    n_docs: int = 300
    model_sd: float = 0.0
    doc_sd: float = 0.0
    noise_sd: float = 0.05
    shift: float = 0.0  # true BPB difference of encoder 0 against the others (0: a null)


def draw(sc: Scenario, reps: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``reps`` replicates: NLL ``(reps, E, S, n)`` in nats and bytes ``(reps, n)``."""
    e, s, n = sc.n_encoders, sc.n_seeds, sc.n_docs
    nbytes = np.ceil(50.0 * (1.0 + rng.pareto(1.5, size=(reps, n))))
    base = 2.0 + 0.3 * rng.standard_normal((reps, 1, 1, n))
    shift = np.zeros((1, e, 1, 1))
    shift[0, 0] = sc.shift
    model = sc.model_sd * rng.standard_normal((reps, e, s, 1))
    doc = sc.doc_sd * rng.standard_normal((reps, e, 1, n))
    noise = (sc.noise_sd * np.sqrt(1000.0 / nbytes)[:, None, None, :]
             * rng.standard_normal((reps, e, s, n)))
    bits = base + shift + model + doc + noise
    return bits * LN2 * nbytes[:, None, None, :], nbytes


def pair_calls(nll: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The report's rule on every encoder pair of every replicate: ``crossed_test`` per pair,
    Holm over the pairs of a replicate, then ``reports.comparisons.significant``. Returns (called,
    diff): ``(reps, pairs)`` booleans and the pooled differences a − b (bits/byte)."""
    reps, e, s, n = nll.shape
    pairs = list(combinations(range(e), 2))
    b = np.broadcast_to(nbytes[:, None, :], (reps, s, n))
    p = np.empty((reps, len(pairs)))
    lo, hi, diff = np.empty_like(p), np.empty_like(p), np.empty_like(p)
    for j, (a, c) in enumerate(pairs):
        x = np.stack([nll[:, a], nll[:, c], b], axis=-1)  # (reps, S, n, 3)
        r = stats.crossed_test(x, [0], [1], 2)
        p[:, j], lo[:, j], hi[:, j], diff[:, j] = r["p"], r["lo"], r["hi"], r["est"]
    adj = np.stack([stats.holm(row) for row in p])
    return significant(adj, lo, hi), diff


def family_rate(sc: Scenario, reps: int, seed: int = 0) -> float:
    """Share of replicates where any pair is called significant (the family-wise rate under a
    null; under an alternative, see ``power``)."""
    called, _ = pair_calls(*draw(sc, reps, np.random.default_rng(seed)))
    return float(called.any(axis=1).mean())


def power(sc: Scenario, reps: int, seed: int = 0) -> float:
    """Share of replicates where the pair (0, 1) is called significant with the true sign."""
    called, diff = pair_calls(*draw(sc, reps, np.random.default_rng(seed)))
    return float((called[:, 0] & (np.sign(diff[:, 0]) == np.sign(sc.shift))).mean())


def binomial_upper(k: int, n: int, level: float = 0.99) -> float:
    """One-sided Clopper–Pearson upper bound of a rate seen k times in n."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(level, k + 1, n - k))
