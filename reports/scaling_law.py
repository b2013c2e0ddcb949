"""L(N, D) = E + A/N^a + B/D^b over every ladder point (Hoffmann et al.'s approach 3): a
cross-check of the frontier's E, and the bootstrap world the intervals resample from
(``reports.scaling_boot``)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from reports.scaling_data import Group

N0, D0 = 1e6, 1e7  # units of N and D inside the law fit (conditioning only)
CHINCHILLA_A, CHINCHILLA_B = 0.34, 0.28  # Hoffmann et al. 2022, approach 3 (alpha, beta)


@dataclass(frozen=True)
class Law:
    """One encoder's fitted law; N in parameters, D in bytes, L in bits per byte."""

    e: float
    log_a_coef: float  # ln A with N in units of N0
    a: float
    log_b_coef: float  # ln B with D in units of D0
    b: float

    def __call__(self, n: np.ndarray | float, d: np.ndarray | float) -> np.ndarray:
        n, d = np.asarray(n, float), np.asarray(d, float)
        return (self.e + np.exp(self.log_a_coef - self.a * np.log(n / N0))
                + np.exp(self.log_b_coef - self.b * np.log(d / D0)))


@dataclass
class LawFit:
    variant: str
    laws: dict[str, Law]
    residuals: dict[str, np.ndarray]
    n_params: int
    se: dict[str, dict[str, float]]  # per encoder, per parameter: Jacobian standard error
    x: np.ndarray  # the solution vector (a warm start for refits)

    def rms(self, enc: str | None = None) -> float:
        r = np.concatenate(list(self.residuals.values())) if enc is None else self.residuals[enc]
        return float(np.sqrt(np.mean(r ** 2)))


def fit_law(data: dict[str, np.ndarray], variant: str, x0: np.ndarray | None = None) -> LawFit:
    """Least squares in BPB of E + A/N^a + B/D^b over every encoder's points at once
    (Hoffmann et al.'s approach 3: every ladder point, not only the IsoFLOP vertices).

    data: encoder → (P, 3) array of (N non-embedding parameters, D training bytes, BPB).
    variant ``free``: E, A, a, B, b per encoder; ``shared_E``: one E (same text, same
    irreducible entropy); ``shared_Ea``: one E and one a; ``fixed_exp``: one E and a, b fixed at
    Hoffmann et al.'s 0.34, 0.28. Started from a grid (the surface has flat directions with so
    few points), or from ``x0`` alone (a previous solution: the bootstrap's refits); E is
    bounded to [0, min BPB)."""
    encs = sorted(data)
    data = {e: np.asarray(data[e], float) for e in encs}
    shared_e = variant in ("shared_E", "shared_Ea", "fixed_exp")
    shared_a = variant == "shared_Ea"
    free_exp = variant in ("free", "shared_E")
    # per encoder: lnA, a, lnB, b | lnA, lnB, b (a shared) | lnA, lnB (both fixed)
    per = 4 if free_exp else (3 if shared_a else 2)
    n_e = (1 if shared_e else len(encs)) + (1 if shared_a else 0)  # leading shared parameters
    lmin = min(float(v[:, 2].min()) for v in data.values())

    def unpack(x: np.ndarray) -> dict[str, Law]:
        out = {}
        for i, e in enumerate(encs):
            ee = x[0] if shared_e else x[i]
            q = x[n_e + per * i: n_e + per * (i + 1)]
            if free_exp:
                out[e] = Law(ee, q[0], q[1], q[2], q[3])
            elif shared_a:
                out[e] = Law(ee, q[0], x[1], q[1], q[2])
            else:
                out[e] = Law(ee, q[0], CHINCHILLA_A, q[1], CHINCHILLA_B)
        return out

    def resid(x: np.ndarray) -> np.ndarray:
        laws = unpack(x)
        return np.concatenate([laws[e](v[:, 0], v[:, 1]) - v[:, 2] for e, v in data.items()])

    def jac(x: np.ndarray) -> np.ndarray:
        # analytic for the variants with free exponents (the bootstrap refits ``shared_E``):
        # r = E + exp(lnA − a·ln n) + exp(lnB − b·ln d) − L per point, n and d in units N0, D0
        out, row = np.zeros((sum(len(v) for v in data.values()), len(x))), 0
        for i, e in enumerate(encs):
            v = data[e]
            ln_n, ln_d = np.log(v[:, 0] / N0), np.log(v[:, 1] / D0)
            q = n_e + per * i
            tn, td = np.exp(x[q] - x[q + 1] * ln_n), np.exp(x[q + 2] - x[q + 3] * ln_d)
            sl = slice(row, row + len(v))
            out[sl, 0 if shared_e else i] = 1.0
            out[sl, q], out[sl, q + 1], out[sl, q + 2], out[sl, q + 3] = tn, -ln_n * tn, td, -ln_d * td
            row += len(v)
        return out

    jac_arg = jac if free_exp else "2-point"
    lo, hi = _law_bounds(per, n_e, shared_a, lmin, len(encs))
    best = None
    if x0 is not None:
        best = least_squares(resid, np.clip(x0, np.array(lo) + 1e-9, np.array(hi) - 1e-9), jac=jac_arg,
                             bounds=(lo, hi))
    for start in _law_starts(per, n_e, shared_a, lmin, len(encs)) if x0 is None else []:
        x0 = np.clip(np.array(start), np.array(lo) + 1e-9, np.array(hi) - 1e-9)
        r = least_squares(resid, x0, jac=jac_arg, bounds=(lo, hi))
        if best is None or r.cost < best.cost:
            best = r
    assert best is not None
    laws = unpack(best.x)
    res = resid(best.x)
    k = len(best.x)
    names = (["E"] if shared_e else [f"E_{e}" for e in encs]) + (["a"] if shared_a else [])
    names += [f"{p}_{e}" for e in encs for p in {4: ["lnA", "a", "lnB", "b"], 3: ["lnA", "lnB", "b"],
                                                  2: ["lnA", "lnB"]}[per]]
    se = _law_se(best.jac, res, names, encs)
    i = 0
    residuals = {}
    for e, v in data.items():
        residuals[e] = res[i: i + len(v)]
        i += len(v)
    return LawFit(variant, laws, residuals, k, se, best.x)


def _law_bounds(per: int, n_e: int, shared_a: bool, lmin: float,
                n_enc: int) -> tuple[list[float], list[float]]:
    """(lo, hi) bounds of ``fit_law``'s solution vector: ``n_e`` leading shared parameters (E in
    [0, lmin), a shared a last), then ``per`` per encoder (lnA, a, lnB, b minus the shared/fixed)."""
    lead_lo = [0.0] * (n_e - shared_a) + [0.02] * shared_a
    lead_hi = [lmin - 1e-6] * (n_e - shared_a) + [3.0] * shared_a
    q_lo = {4: [-20.0, 0.02, -20.0, 0.02], 3: [-20.0, -20.0, 0.02], 2: [-20.0, -20.0]}[per]
    q_hi = {4: [20.0, 3.0, 20.0, 3.0], 3: [20.0, 20.0, 3.0], 2: [20.0, 20.0]}[per]
    return lead_lo + q_lo * n_enc, lead_hi + q_hi * n_enc


def _law_starts(per: int, n_e: int, shared_a: bool, lmin: float, n_enc: int) -> list[list[float]]:
    """``fit_law``'s grid of starting vectors (unclipped, same layout as ``_law_bounds``), in the
    order they are tried: E over (0, 0.4, 0.8)·lmin, then the exponent pairs."""
    out = []
    exps = [(CHINCHILLA_A, CHINCHILLA_B)] if per == 2 else [(0.3, 0.3), (0.6, 0.6), (1.0, 0.5), (0.5, 1.0)]
    for e0 in (0.0, 0.4 * lmin, 0.8 * lmin):
        for a0, b0 in exps:
            q = {4: [0.0, a0, 0.0, b0], 3: [0.0, 0.0, b0], 2: [0.0, 0.0]}[per]
            lead = [e0] * (n_e - shared_a) + [a0] * shared_a
            out.append(lead + q * n_enc)
    return out


def _law_se(jac: np.ndarray, res: np.ndarray, names: list[str],
            encs: list[str]) -> dict[str, dict[str, float]]:
    """Jacobian standard errors of ``fit_law``'s parameters (``names``, one per column of the
    (P, K) ``jac``; ``res`` (P,) residuals in BPB), keyed per encoder → parameter name."""
    dof = max(1, len(res) - len(names))
    try:
        cov = np.linalg.pinv(jac.T @ jac) * float(res @ res) / dof
        se_all = dict(zip(names, np.sqrt(np.clip(np.diag(cov), 0, None))))
    except np.linalg.LinAlgError:
        se_all = {n: math.nan for n in names}
    return {e: {n.rsplit("_", 1)[0] if n.endswith(f"_{e}") else n: s for n, s in se_all.items()
                if n.endswith(f"_{e}") or "_" not in n or n == f"E_{e}"} for e in encs}


def _law_data(groups: dict[str, list[Group]]) -> dict[str, np.ndarray]:
    """encoder → (P, 3) finite (N, D, BPB) of every ladder point of every budget."""
    out = {}
    for enc, gs in groups.items():
        pts = np.concatenate([np.column_stack([np.exp(g.ln_n), np.exp(g.ln_d), g.loss]) for g in gs])
        out[enc] = pts[np.all(np.isfinite(pts), axis=1)]
    return out


def law_point(groups: dict[str, list[Group]]) -> LawFit | None:
    """L(N, D) with one E over every point (``fit_law`` shared_E), or None when the points
    cannot determine it (no more points than parameters, or an encoder under three points)."""
    data = _law_data(groups)
    free = 1 + 4 * len(data)  # shared E, then lnA, a, lnB, b per encoder
    if sum(len(v) for v in data.values()) <= free or any(len(v) < 3 for v in data.values()):
        return None
    return fit_law(data, "shared_E")


