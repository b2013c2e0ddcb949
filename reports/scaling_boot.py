"""The scaling fit's bootstrap: the parametric picture of a sweep (``smooth_sweep``), its
resamples (``_redraw``), and the intervals read off the refits (``_ci``, ``law_rows``)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from reports.scaling_chain import MIN_DISTINCT_SIZES
from reports.scaling_data import Group
from reports.scaling_law import D0, N0, LawFit, _law_data, fit_law


@dataclass
class Smooth:
    """The bootstrap's picture of a sweep: every point's expected BPB and ΔBPB, and the noise
    around them (``smooth_sweep``)."""

    loss: dict[tuple[str, int], np.ndarray]  # (encoder, group number) → (P,) expected BPB
    noise_rel: float  # sd of a point's BPB relative to its expected value
    delta: dict[tuple[str, int, str], np.ndarray]  # … and perturbation → (P,) expected ΔBPB
    delta_sd: dict[str, float]  # perturbation → sd of a point's ΔBPB (BPB)



def smooth_sweep(groups: dict[str, list[Group]], law: LawFit | None) -> Smooth:
    """Every point's expected BPB: the L(N, D) fit where there is one (else each profile's own
    parabola over all its points, else the point itself), and the relative noise sd from the
    residuals (degrees of freedom: points − parameters). ΔBPB: a line in ln N per profile and
    perturbation, its sd pooled over profiles (points − 2 each)."""
    loss: dict[tuple[str, int], np.ndarray] = {}
    rel, dof = [], 0
    for enc, gs in groups.items():
        for i, g in enumerate(gs):
            if law is not None and enc in law.laws:
                m = law.laws[enc](np.exp(g.ln_n), np.exp(g.ln_d))
            elif len(np.unique(g.ln_n)) >= MIN_DISTINCT_SIZES:
                m = np.polyval(np.polyfit(g.ln_n, g.loss, 2), g.ln_n)
                dof -= 3
            else:
                m = g.loss.copy()
            loss[(enc, i)] = m
            ok = np.isfinite(g.loss) & np.isfinite(m) & (m > 0)
            rel.append((g.loss[ok] - m[ok]) / m[ok])
            dof += int(ok.sum())
    if law is not None:
        dof -= law.n_params
    r = np.concatenate(rel) if rel else np.zeros(0)
    noise = float(np.sqrt(np.sum(r * r) / dof)) if dof > 0 else 0.0
    delta: dict[tuple[str, int, str], np.ndarray] = {}
    ss: dict[str, float] = {}
    dd: dict[str, int] = {}
    for enc, gs in groups.items():
        for i, g in enumerate(gs):
            for p, v in g.delta.items():
                ok = np.isfinite(v)
                if len(np.unique(g.ln_n[ok])) >= 2:
                    fit = np.polyval(np.polyfit(g.ln_n[ok], v[ok], 1), g.ln_n)
                    ss[p] = ss.get(p, 0.0) + float(np.sum((v[ok] - fit[ok]) ** 2))
                    dd[p] = dd.get(p, 0) + int(ok.sum()) - 2
                else:
                    fit = v.copy()
                delta[(enc, i, p)] = np.where(ok, fit, np.nan)
    sd = {p: math.sqrt(ss[p] / dd[p]) if dd[p] > 0 else 0.0 for p in ss}
    return Smooth(loss, noise, delta, sd)


def _redraw(groups: dict[str, list[Group]], sm: Smooth, rng: np.random.Generator | None
            ) -> dict[str, list[Group]]:
    """One parametric resample of the sweep: every point's BPB redrawn as its expected value
    times (1 + N(0, noise_rel²)), every ΔBPB as its line plus N(0, sd²); the ladder (N, D, C)
    stays — it is the design, not a sample. rng None: the expected values themselves (the
    bootstrap world's noise-free sweep)."""
    def noise(n: int) -> np.ndarray:
        return np.zeros(n) if rng is None else rng.standard_normal(n)

    out: dict[str, list[Group]] = {}
    for enc, gs in groups.items():
        for i, g in enumerate(gs):
            m = sm.loss[(enc, i)]
            loss = m * (1.0 + sm.noise_rel * noise(len(m)))
            delta = {p: sm.delta[(enc, i, p)] + sm.delta_sd.get(p, 0.0) * noise(len(m))
                     for p in g.delta}
            out.setdefault(enc, []).append(dataclasses.replace(g, loss=loss, delta=delta))
    return out


def _ci(vals: list[float], level: float, est: float, centre: float) -> tuple[float, float]:
    """Basic (pivotal) bootstrap interval of ``est``: the resamples ``vals`` scatter around
    ``centre``, the value the same chain gives on the bootstrap world's own noise-free sweep, as
    the estimate scatters around the truth — so the interval is est − (quantile − centre),
    which also takes out the chain's bias as measured in that world. (A percentile interval would
    sit around ``centre``: the L(N, D) fit's value, not this estimate's.)"""
    v = np.array([x for x in vals if math.isfinite(x)])
    if len(v) < 2 or not (math.isfinite(est) and math.isfinite(centre)):
        return math.nan, math.nan
    q = (1 - level) / 2
    lo, hi = np.quantile(v, [q, 1 - q])
    return float(est - (hi - centre)), float(est - (lo - centre))



def law_rows(dataset: str, law: LawFit | None, groups: dict[str, list[Group]],
             boots: list[dict[str, list[Group]]], level: float) -> list[dict[str, Any]]:
    """The L(N, D) fit of one eval set (``law_point``, one E shared) over every ladder point, as
    table rows per encoder, with percentile intervals from the chain's resampled sweeps
    (``boots``; each refit warm-started from the point fit). A cross-check of the frontier: its E
    uses every point, where the frontier's uses only the IsoFLOP vertices."""
    if law is None:
        return []
    full = _law_data(groups)
    refits = [fit_law(_law_data(b), "shared_E", x0=law.x) for b in boots]
    q = (1 - level) / 2

    def band(enc: str, get: Any) -> tuple[float, float]:
        vals = np.array([get(f.laws[enc]) for f in refits], float)
        vals = vals[np.isfinite(vals)]
        return (float(np.quantile(vals, q)), float(np.quantile(vals, 1 - q))) if len(vals) >= 2 else (math.nan, math.nan)

    out = []
    for enc, w in law.laws.items():
        row: dict[str, Any] = dict(dataset=dataset, encoder=enc, E=w.e, a=w.a, b=w.b,
                                   A=math.exp(w.log_a_coef) * N0 ** w.a, B=math.exp(w.log_b_coef) * D0 ** w.b,
                                   rms=law.rms(enc), n_points=len(full[enc]))
        for name, get in (("E", lambda v: v.e), ("a", lambda v: v.a), ("b", lambda v: v.b)):
            row[f"{name}_lo"], row[f"{name}_hi"] = band(enc, get)
        out.append(row)
    return out


