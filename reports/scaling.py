"""Compute-matched scaling fits from results files alone (numpy + scipy; no torch, no harness).

    fit = fit_scaling(results_frame, n_boot=200, seed=0)
    fit.parity            # byte-level vs BPE: where the compute-optimal frontiers cross
    fit.exponents         # per encoder: N_opt ∝ C^a, D_opt ∝ C^b, L(C) = E + A·C^(−α)

The chain, per eval set and FLOP convention (docs/scaling.md):

1. IsoFLOP profile: for each encoder and FLOP budget, BPB vs non-embedding parameters N is fitted
   by a parabola in ln N over the VERTEX_RUNGS rungs nearest its minimum; its vertex is the
   compute-optimal point (N_opt, L_opt). D_opt (training
   bytes) and the compute C at the optimum are read off a straight line through the budget's
   points in ln N (they vary smoothly along the ladder). A vertex outside the ladder, an observed
   minimum on the first or last rung, or a profile without curvature is *flagged* (``edge``); a
   vertex off the ladder is clamped to it, so L_opt is an upper bound there, and a flagged vertex
   (clamped, flat, or with its lowest point on the ladder's end: not bracketed) takes no part in
   the fits across budgets (``Optimum.estimate``).
2. Allocation exponents: least squares of ln N_opt and ln D_opt on ln C over the budgets.
3. Frontier: L(C) = E + A·C^(−α), one irreducible E shared by every encoder on the same text, A
   and α per encoder (scipy ``least_squares`` in BPB, started from a grid over E).
4. Parity: between a byte-level encoder and a BPE encoder, E cancels and the frontiers cross at
   ln C* = (ln A_byte − ln A_bpe) / (α_byte − α_bpe); inside the fitted compute range it is the
   parity point, outside it is reported as an extrapolation with its distance in decades.
5. Robustness: each perturbation's clean_target ΔBPB (perturbed − clean, same model, same scored
   bytes) interpolated at the fitted ln N_opt of each budget, and its slope against log10 C.

Fits across budgets (2–5) need ≥ MIN_BUDGETS budgets per encoder, and the frontier more vertices
than parameters (``frontier_design``); short of that they are NaN with a note, never a number
with an interval. Rows from several runs pool only as one grid (``pool_points``): the same grid
point with two different results, or points on different text, raise PoolingError.

Confidence intervals: a parametric bootstrap. The ladder is a fixed design, so the resamples keep
every (N, D, C) and redraw the losses: each point's expected BPB from the L(N, D) fit over every
point (``smooth_sweep``), times 1 + N(0, σ²) with σ the fit's relative residual sd; each ΔBPB from
a line in ln N per profile plus its residual noise. Every resample refits the whole chain —
vertices → exponents → frontier → crossing → robustness slopes — and the interval is the basic
(pivotal) one around the estimate (``_ci``). Measured coverage on the project's own design:
docs/scaling.md, "Intervals".

Units: BPB in bits per UTF-8 byte; N in parameters; D in training bytes; C in training FLOPs.
FLOP conventions: ``half`` counts causal attention at half the dense QK^T/AV cost (``train_flops``,
the headline: it is what a causal kernel that skips the masked half spends), ``full`` at full cost
(``train_flops_full_attn``). Attention is the one term that grows with sequence length, so the
convention moves byte-level encoders (long sequences) more than BPE and can move the parity point.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from reports.scaling_boot import _ci, _redraw, law_rows, smooth_sweep
from reports.scaling_chain import (
    MIN_BUDGETS,
    ChainResult,
    Frontier,
    Optimum,
    _finite_points,
    e_at_bound,
    frontier_design,
    profile_optimum,
    run_chain,
)
from reports.scaling_data import (
    CONVENTIONS,
    HEADLINE,
    Group,
    PoolingError,
    base_label,
    budget_tag,
    build_groups,
    encoder_kinds,
    fmt_flops,
    pool_points,
    sweep_label,
    sweep_rows,
    with_train_part_bytes,
)
from reports.scaling_law import CHINCHILLA_A, CHINCHILLA_B, D0, N0, Law, LawFit, fit_law, law_point

# The names other modules, benchmarks and tests import from here (one public entry point).
__all__ = [
    "CHINCHILLA_A", "CHINCHILLA_B", "CONVENTIONS", "D0", "HEADLINE", "MAX_CI_DECADES", "N0",
    "Frontier", "Group", "Law", "LawFit", "PoolingError", "ScalingFit", "base_label", "budget_tag",
    "fit_law", "fit_scaling", "fmt_flops", "frontier_design", "pool_points", "profile_optimum",
    "sweep_label", "sweep_rows", "with_train_part_bytes",
]

# Passes over the training text beyond which repetition stops being nearly free (Muennighoff et
# al. 2023, "Scaling Data-Constrained Language Models": up to ~4 epochs cost about as much as new
# data); a compute-optimal D past it is flagged, since that vertex's loss may sit high.
FREE_PASSES = 4.0


# ---------------------------------------------------------------------------------------------
# The public fit


@dataclass
class ScalingFit:
    """Fitted scaling results for every eval set, as tables (pandas) ready for the report.

    optima: dataset, encoder, budget, n_opt, d_opt, loss_opt, c_half, c_full, edge, n_points.
    profiles: dataset, encoder, budget, size, n, loss, c2, c1, c0 (ladder points + parabola).
    exponents: dataset, convention, encoder, a, b, alpha, A (with ``_lo``/``_hi`` CI bounds; NaN
        for alpha and A where E is not identified, see ``irreducible``).
    irreducible: dataset, convention, E, E_lo, E_hi, identified (False: E sits on a bound of its
        fit; then E, α, A and C* have no interval — NaN bounds).
    parity: dataset, convention, byte, bpe, status (crossing | outside | parallel | missing),
        c_star, c_lo, c_hi, range_lo, range_hi, decades_outside, frac_inside, leader_low, statement,
        ci_decades, e_identified (False: no interval for C*, see ``irreducible``).
    robustness: dataset, encoder, perturbation, slope (ΔBPB per decade of C), slope_lo, slope_hi,
        plus ``points`` (budget, c, delta at N_opt) for the figure.
    frontier: dataset → convention → Frontier (point fit), for the figure's curves.
    bands: dataset → convention → encoder → (ln C grid, lo, hi) of bootstrap prediction bands.
    """

    optima: pd.DataFrame
    profiles: pd.DataFrame
    exponents: pd.DataFrame
    irreducible: pd.DataFrame
    parity: pd.DataFrame
    robustness: pd.DataFrame
    robustness_points: pd.DataFrame
    frontier: dict[str, dict[str, Frontier]]
    bands: dict[str, dict[str, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]]]
    n_boot: int
    level: float
    headline: str = HEADLINE
    notes: list[str] = field(default_factory=list)
    # law: dataset, encoder, E, a, b (each with _lo/_hi), A, B, rms, n_points — L(N, D) = E +
    # A/N^a + B/D^b over every ladder point, one E shared (``fit_law``, variant shared_E)
    law: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def empty(self) -> bool:
        return not len(self.optima)


# Column order of each ScalingFit table (``fit_scaling``'s working lists are keyed the same).
_COLS: dict[str, list[str]] = {
    "opt": ["dataset", "encoder", "budget", "n_opt", "d_opt", "loss_opt", "c_half", "c_full",
            "edge", "n_points", "passes"],
    "prof": ["dataset", "encoder", "budget", "size", "n", "loss", "c2", "c1", "c0"],
    "exp": ["dataset", "convention", "encoder"] + [f"{n}{s}" for n in ("a", "b", "alpha", "lnA")
                                                  for s in ("", "_lo", "_hi")],
    "irr": ["dataset", "convention", "E", "E_lo", "E_hi", "identified"],
    "par": ["dataset", "convention", "byte", "bpe", "status", "c_star", "c_lo", "c_hi", "range_lo",
            "range_hi", "decades_outside", "frac_inside", "leader_low", "statement", "ci_decades",
            "e_identified"],
    "rob": ["dataset", "encoder", "perturbation", "slope", "slope_lo", "slope_hi"],
    "robp": ["dataset", "encoder", "perturbation", "budget", "c", "delta"],
    "law": ["dataset", "encoder"] + [f"{n}{s}" for n in ("E", "a", "b") for s in ("", "_lo", "_hi")]
           + ["A", "B", "rms", "n_points"],
}

Tabs = dict[str, list[dict[str, Any]]]  # table key of _COLS → its rows, appended in order
CiFn = Callable[[str], tuple[float, float]]  # scalar key → basic bootstrap interval (lo, hi)


def fit_scaling(results: pd.DataFrame, *, n_boot: int = 200, seed: int = 0, level: float = 0.95,
                band_points: int = 40, intervals_on_bound: bool = False) -> ScalingFit:
    """Fit every eval set of a (merged) results table; see the module docstring.

    results: results.csv rows (several runs concatenated is fine: the grid may be run budget by
    budget; ``pool_points`` says what may not be pooled and raises PoolingError for it). Rows
    without ``flop_budget`` are ignored. Same seed → same intervals. Fits across budgets that the
    points cannot determine (``MIN_BUDGETS``, ``frontier_design``) are NaN, with a note.
    intervals_on_bound: give E, α, A and C* their intervals even where E is not identified (for
    benchmarks/scaling_coverage.py, which measures why the report withholds them); the
    ``identified`` columns still say which they are."""
    rows, notes = pool_points(sweep_rows(results))
    kinds = encoder_kinds(rows) if len(rows) else {}
    tabs: Tabs = {k: [] for k in _COLS}
    frontiers: dict[str, dict[str, Frontier]] = {}
    bands: dict[str, Any] = {}
    rng = np.random.default_rng(seed)
    for dataset in sorted(rows["dataset"].unique()) if len(rows) else []:
        groups = build_groups(rows, dataset)
        if not groups:
            continue
        frontiers[dataset], bands[dataset] = _fit_dataset(
            dataset, groups, kinds, rng, tabs, notes, n_boot=n_boot, level=level,
            band_points=band_points, intervals_on_bound=intervals_on_bound)
    df = {k: pd.DataFrame(v, columns=_COLS[k]) for k, v in tabs.items()}
    return ScalingFit(df["opt"], df["prof"], df["exp"], df["irr"], df["par"], df["rob"], df["robp"],
                      frontiers, bands, n_boot, level, HEADLINE, notes, df["law"])


def _fit_dataset(dataset: str, groups: dict[str, list[Group]], kinds: dict[str, str],
                 rng: np.random.Generator, tabs: Tabs, notes: list[str], *, n_boot: int, level: float,
                 band_points: int, intervals_on_bound: bool) -> tuple[dict[str, Frontier], dict[str, Any]]:
    """One eval set: point chain, ``n_boot`` redrawn chains (drawing from ``rng``), rows appended to
    ``tabs`` and notes to ``notes``. Returns (convention → point Frontier, convention → encoder →
    band), the ScalingFit's ``frontier`` and ``bands`` entries for this dataset."""
    encs = sorted(groups)
    pairs = [(a, b) for a in encs for b in encs if kinds.get(a) == "byte" and kinds.get(b) == "bpe"]
    point = run_chain(groups, pairs)
    law = law_point(groups)
    smooth = smooth_sweep(groups, law)
    sweeps = [_redraw(groups, smooth, rng) for _ in range(n_boot)]
    boots: list[ChainResult] = [run_chain(g, pairs, point) for g in sweeps]
    tabs["law"] += law_rows(dataset, law, groups, sweeps, level)

    centre = run_chain(_redraw(groups, smooth, None), pairs, point)

    def ci(key: str) -> tuple[float, float]:
        return _ci([b.scalars.get(key, math.nan) for b in boots], level,
                   point.scalars.get(key, math.nan), centre.scalars.get(key, math.nan))

    for enc, opts in point.optima.items():
        _vertex_rows(dataset, enc, groups[enc], opts, tabs)
        notes += _vertex_notes(dataset, enc, groups[enc], opts)
    notes += _underdetermined_notes(dataset, point)
    bands: dict[str, Any] = {}
    for conv, fr in point.frontier.items():
        bands[conv] = _convention_rows(dataset, conv, fr, encs, pairs, point, boots, centre, ci, tabs,
                                       notes, level=level, band_points=band_points,
                                       intervals_on_bound=intervals_on_bound)
    for enc in encs:
        for p in sorted({p for o in point.optima[enc] for p in o.delta}):
            key = f"rob|{enc}|{p}"
            lo, hi = ci(key)
            tabs["rob"].append(dict(dataset=dataset, encoder=enc, perturbation=p,
                                    slope=point.scalars.get(key, math.nan), slope_lo=lo, slope_hi=hi))
    return point.frontier, bands


def _vertex_rows(dataset: str, enc: str, groups: list[Group], opts: list[Optimum], tabs: Tabs) -> None:
    """Append one encoder's IsoFLOP vertices (``opt``), ladder points with their parabola
    (``prof``) and ΔBPB at N_opt (``robp``) to ``tabs``; groups and opts pair up budget by budget."""
    for g, o in zip(groups, opts):
        tabs["opt"].append(dict(
            dataset=dataset, encoder=enc, budget=g.budget, n_opt=math.exp(o.ln_n),
            d_opt=math.exp(o.ln_d), loss_opt=o.loss, c_half=math.exp(o.ln_c["half"]),
            c_full=math.exp(o.ln_c["full"]), edge=o.edge, n_points=len(g.loss),
            passes=math.exp(o.ln_d) / g.part_bytes))
        for k in range(len(g.loss)):
            tabs["prof"].append(dict(
                dataset=dataset, encoder=enc, budget=g.budget, size=g.sizes[k],
                n=math.exp(g.ln_n[k]), loss=g.loss[k], c2=o.coef[0], c1=o.coef[1], c0=o.coef[2]))
        for p, v in o.delta.items():
            tabs["robp"].append(dict(dataset=dataset, encoder=enc, perturbation=p, budget=g.budget,
                                     c=math.exp(o.ln_c[HEADLINE]), delta=v))


def _vertex_notes(dataset: str, enc: str, groups: list[Group], opts: list[Optimum]) -> list[str]:
    """Notes on one encoder's vertices: flagged (edge) minima, and compute-optimal D past
    FREE_PASSES passes over the training text (D in bytes, ``part_bytes`` per pass)."""
    out: list[str] = []
    edges = [o for o in opts if o.edge]
    if edges:
        out.append(f"{dataset}: {enc}: {len(edges)} of {len(opts)} IsoFLOP minima flagged "
                   f"({', '.join(sorted({o.edge for o in edges}))}), left out of the fits across "
                   "budgets: widen the ladder there.")
    repeated = [(g.budget, math.exp(o.ln_d) / g.part_bytes) for g, o in zip(groups, opts)
                if math.exp(o.ln_d) > FREE_PASSES * g.part_bytes]  # False when NaN
    if repeated:
        at = ", ".join(f"{b:.3g} ({p:.1f} passes)" for b, p in repeated)
        out.append(f"{dataset}: {enc}: the compute-optimal D reads the training text more than "
                   f"{FREE_PASSES:g} times at {at}; past ~{FREE_PASSES:g} passes repetition is no "
                   "longer nearly free (Muennighoff et al. 2023), so these vertices' BPB may "
                   "sit high. More text would remove this.")
    return out


def _convention_rows(dataset: str, conv: str, fr: Frontier, encs: list[str],
                     pairs: list[tuple[str, str]], point: ChainResult, boots: list[ChainResult],
                     centre: ChainResult, ci: CiFn, tabs: Tabs, notes: list[str], *, level: float,
                     band_points: int, intervals_on_bound: bool) -> dict[str, Any]:
    """One FLOP convention of one eval set: append its ``irr``, ``exp`` and ``par`` rows (and the
    note when E sits on a bound); return encoder → (ln C grid, lo, hi) bands (BPB)."""
    # E is identified when its estimate lies inside the fit's range (0, lowest vertex
    # loss). On a bound the estimator has an atom there and the basic bootstrap interval
    # is not valid (a parameter on the boundary: Andrews 2000); measured on the project's
    # design, such intervals rarely hold the truth (docs/scaling.md, "Intervals"). Those of
    # E, and of what moves with E (α, A, the crossing C*), are then not given: the report
    # says why.
    bound = e_at_bound(fr, point.optima)
    identified = not bound  # (a frontier not fitted has E NaN, no bound, no intervals)
    gate = identified or intervals_on_bound  # whether E, α, A, C* get intervals
    lo_e, hi_e = ci(f"E|{conv}") if gate else (math.nan, math.nan)
    lo_e = max(lo_e, 0.0) if math.isfinite(lo_e) else lo_e  # E ≥ 0 (fit_frontier's bound)
    tabs["irr"].append(dict(dataset=dataset, convention=conv, E=fr.e, E_lo=lo_e, E_hi=hi_e,
                            identified=identified))
    if bound:
        where = ("lower bound, 0 (each frontier is then a pure power law)" if bound == "lower" else
                 f"upper bound, the lowest compute-optimal loss ({fr.e:.3g} BPB)")
        notes.append(f"{dataset}, FLOPs at {conv} attention: the shared irreducible loss E sits on its "
                     f"{where}: these budgets do not identify E, and the frontier exponents α, A "
                     "and any crossing rest on that bound, so no interval is given for E, α, A or "
                     "C* (one would not hold the truth at its stated level). The allocation "
                     "exponents a and b do not depend on E. Less noise per point, or more or "
                     "larger budgets, are needed to fit E.")
    bands: dict[str, Any] = {}
    for enc in encs:
        row: dict[str, Any] = dict(dataset=dataset, convention=conv, encoder=enc)
        for name in ("a", "b", "alpha", "lnA"):
            key = f"{name}|{conv}|{enc}"
            row[name] = point.scalars.get(key, math.nan)
            row[f"{name}_lo"], row[f"{name}_hi"] = (ci(key) if gate or name in ("a", "b")
                                                     else (math.nan, math.nan))
        tabs["exp"].append(row)
        if enc in fr.alpha:
            band = _band(enc, conv, fr, point, boots, centre, level, band_points)
            if band is not None:
                bands[enc] = band
    for a, b in pairs:
        tabs["par"].append(_parity_row(dataset, conv, a, b, point, boots, level, centre,
                                         identified, gate))
    return bands


def _band(enc: str, conv: str, fr: Frontier, point: ChainResult, boots: list[ChainResult],
          centre: ChainResult, level: float,
          band_points: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Bootstrap prediction band of one encoder's frontier: (ln C grid of ``band_points``, lo, hi
    in BPB), the basic interval of ``_ci`` point by point; None with under two usable resamples."""
    lnc = np.array([o.ln_c[conv] for o in point.optima[enc]])
    grid = np.linspace(lnc.min() - 0.5, lnc.max() + 0.5, band_points)
    preds = np.array([b.frontier[conv].predict(enc, grid) for b in boots
                      if enc in b.frontier[conv].alpha and np.isfinite(b.frontier[conv].e)])
    cf = centre.frontier[conv]
    if len(preds) >= 2 and enc in cf.alpha and np.isfinite(cf.e):
        # the basic interval of ``_ci``, point by point along the grid
        q = (1 - level) / 2
        est, mid = fr.predict(enc, grid), cf.predict(enc, grid)
        return (grid, est - (np.quantile(preds, 1 - q, axis=0) - mid),
                est - (np.quantile(preds, q, axis=0) - mid))
    return None


def _vertex_counts(point: ChainResult, conv: str) -> dict[str, int]:
    """encoder → its finite compute-optimal points under one FLOP convention."""
    return _finite_points({enc: (np.array([o.ln_c[conv] for o in opts]),
                                 np.array([o.loss for o in opts]))
                           for enc, opts in point.optima.items()})


def _underdetermined_notes(dataset: str, point: ChainResult) -> list[str]:
    """Notes for the fits across budgets that are left out: per encoder with fewer than
    MIN_BUDGETS budgets (no a, b, frontier or robustness slope), and for the frontier as a whole
    when ``frontier_design`` admits no encoder. Vertex counts do not depend on the FLOP
    convention, so one set of notes covers both (duplicates are dropped)."""
    out: list[str] = []
    for conv in CONVENTIONS:
        counts = _vertex_counts(point, conv)
        short = {k: n for k, n in counts.items() if n < MIN_BUDGETS}
        for enc, n in short.items():
            out.append(f"{dataset}: {enc}: {n} budget(s) with a compute-optimal point, fewer than "
                       f"the {MIN_BUDGETS} a fit across budgets needs: its allocation exponents a "
                       "and b, its frontier (A, α), any parity point with it and its robustness "
                       "slopes are reported as missing. Run more budgets.")
        encs, why = frontier_design(counts)
        if not encs and len(short) < len(counts):
            out.append(f"{dataset}: no compute-optimal frontier fitted: {why}. E, A, α and the "
                       "parity points are reported as missing. Run more budgets.")
    return list(dict.fromkeys(out))


# A parity interval wider than this many decades of compute says nothing a reader can use: it is
# printed as "unbounded" (its ends stay in the table's c_lo, c_hi).
MAX_CI_DECADES = 3.0


def _exp(x: float) -> float:
    """exp(x), inf past the float range (an extrapolated crossing can lie hundreds of decades out)."""
    return math.exp(x) if x < 709.0 else math.inf


def _parity_row(dataset: str, conv: str, a: str, b: str, point: ChainResult, boots: list[ChainResult],
                level: float, centre: ChainResult, identified: bool = True,
                interval: bool = True) -> dict[str, Any]:
    """One byte-vs-BPE parity entry with its plain-language statement. identified: whether the
    shared E is (``fit_scaling``); interval: whether the crossing gets one (not where E is not
    identified, unless ``fit_scaling``'s intervals_on_bound)."""
    fr = point.frontier[conv]
    key = f"cross|{conv}|{a}|{b}"
    row: dict[str, Any] = dict(dataset=dataset, convention=conv, byte=a, bpe=b, c_star=math.nan,
                               c_lo=math.nan, c_hi=math.nan, range_lo=math.nan, range_hi=math.nan,
                               decades_outside=math.nan, frac_inside=math.nan, leader_low="",
                               ci_decades=math.nan, e_identified=identified)
    if a not in fr.alpha or b not in fr.alpha:
        counts = _vertex_counts(point, conv)
        _, why = frontier_design(counts)
        why = why or ", ".join(f"{k}: {counts.get(k, 0)} budget(s)" for k in (a, b)
                               if counts.get(k, 0) < MIN_BUDGETS)
        return {**row, "status": "missing", "statement":
                f"{a} vs {b}: too few budgets to fit both frontiers — {why}. Each encoder needs "
                f"≥ {MIN_BUDGETS} budgets and the joint fit more points than parameters; no "
                "parity point."}
    ca = [o.ln_c[conv] for o in point.optima[a]]
    cb = [o.ln_c[conv] for o in point.optima[b]]
    lo, hi = max(min(ca), min(cb)), min(max(ca), max(cb))
    row["range_lo"], row["range_hi"] = math.exp(lo), math.exp(hi)
    ahead = a if fr.predict(a, lo) < fr.predict(b, lo) else b
    row["leader_low"] = ahead
    lnx = point.scalars.get(key, math.nan)
    vals = [bt.scalars.get(key, math.nan) for bt in boots]
    inside = [lo <= v <= hi for v in vals if math.isfinite(v)]
    row["frac_inside"] = float(np.mean(inside)) if boots else math.nan
    c_lo, c_hi = (_ci(vals, level, lnx, centre.scalars.get(key, math.nan)) if interval
                  else (math.nan, math.nan))
    row["c_lo"], row["c_hi"] = (_exp(c_lo), _exp(c_hi)) if math.isfinite(c_lo) else (math.nan, math.nan)
    row["ci_decades"] = (c_hi - c_lo) / math.log(10) if math.isfinite(c_lo) else math.nan
    rng_txt = f"{fmt_flops(math.exp(lo))}–{fmt_flops(math.exp(hi))} FLOPs"
    ci_txt = (f" ({level:.0%} CI not given: the shared E sits on a bound of its fit)" if not interval
              else "" if not math.isfinite(c_lo) else
              f" ({level:.0%} CI unbounded: wider than {MAX_CI_DECADES:g} decades)"
              if row["ci_decades"] > MAX_CI_DECADES else
              f" ({level:.0%} CI {fmt_flops(row['c_lo'])}–{fmt_flops(row['c_hi'])})")
    other = b if ahead == a else a
    if not math.isfinite(lnx):
        return {**row, "status": "parallel", "statement":
                f"{a} vs {b}: equal frontier exponents, no crossing at any compute; {ahead} stays ahead."}
    row["c_star"] = _exp(lnx)
    if lo <= lnx <= hi:
        return {**row, "status": "crossing", "statement":
                f"{other} reaches {ahead} at C* ≈ {fmt_flops(row['c_star'])} training FLOPs{ci_txt}, "
                f"inside the fitted range {rng_txt}; below it {ahead} has the lower BPB."}
    dec = (lnx - hi if lnx > hi else lo - lnx) / math.log(10)
    row["decades_outside"] = dec
    side = "above the largest" if lnx > hi else "below the smallest"
    return {**row, "status": "outside", "statement":
            f"No crossing within the fitted range {rng_txt}: {ahead} has the lower BPB throughout. "
            f"Extrapolated, the fitted frontiers would cross at C* ≈ {fmt_flops(row['c_star'])}{ci_txt}, "
            f"{dec:.1f} decade(s) {side} budget — an extrapolation, not a measurement."}
