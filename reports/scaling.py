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
   vertex off the ladder is clamped to it, so L_opt is an upper bound there, and a clamped or flat
   vertex takes no part in the fits across budgets (``Optimum.estimate``).
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

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from core.metrics import bpb
from reports.fmt import num

CONVENTIONS = {"half": "train_flops", "full": "train_flops_full_attn"}
HEADLINE = "half"
SWEEP_COLUMNS = ["flop_budget", "model_size", "params_non_embedding", "train_bytes", "train_flops",
                 "train_flops_full_attn"]
MIN_DISTINCT_SIZES = 3  # a parabola needs three distinct ladder points
# Budgets an encoder needs before any fit across budgets is reported for it (allocation exponents
# a, b, its frontier's A and α, robustness slopes). Two vertices fix a line exactly, so the
# straight-line fits would have no residual and nothing could show the power law is wrong; the
# frontier has a third parameter per encoder's share (E), so a lone encoder needs one more (see
# ``frontier_design``). Below it the numbers are reported as missing, never with an interval.
MIN_BUDGETS = 3
# Passes over the training text beyond which repetition stops being nearly free (Muennighoff et
# al. 2023, "Scaling Data-Constrained Language Models": up to ~4 epochs cost about as much as new
# data); a compute-optimal D past it is flagged, since that vertex's loss may sit high.
FREE_PASSES = 4.0


# ---------------------------------------------------------------------------------------------
# Labels: a sweep model's encoder label is "<encoder>@<budget>:<size>" (unique per results row).


def budget_tag(budget: float) -> str:
    """A short, exact-enough label of a FLOP budget: 3e+14 → "3e14", 1.25e15 → "1.25e15"."""
    mant, exp = f"{budget:.3e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(exp)}"


def sweep_label(base: str, budget: float, size: str) -> str:
    """Encoder label of one sweep model: ``bytes@3e14:s2``."""
    return f"{base}@{budget_tag(budget)}:{size}"


def base_label(label: str) -> str:
    """The encoder a sweep label belongs to (``bytes@3e14:s2`` → ``bytes``; ``run/bytes@…`` →
    ``run/bytes``, so the same encoder in two compared runs stays two encoders)."""
    return re.sub(r"@[^@/]*$", "", label)


# ---------------------------------------------------------------------------------------------
# Data


@dataclass
class Group:
    """One encoder at one FLOP budget: the ladder points of its IsoFLOP profile.

    ln_n, loss, ln_d: (P,) ln non-embedding params, BPB, ln training bytes.
    ln_c: convention → (P,) ln training FLOPs of each run. delta: perturbation → (P,) ΔBPB (NaN if
    that model was not scored under it).
    """

    encoder: str
    budget: float
    ln_n: np.ndarray
    loss: np.ndarray
    ln_d: np.ndarray
    ln_c: dict[str, np.ndarray]
    delta: dict[str, np.ndarray] = field(default_factory=dict)
    sizes: list[str] = field(default_factory=list)
    part_bytes: float = math.nan  # bytes of the training text the points read (NaN: not known)


def sweep_rows(results: pd.DataFrame) -> pd.DataFrame:
    """The rows of a results table that come from a scaling sweep (``flop_budget`` set), with
    numeric sweep columns and a ``base`` column (the encoder the row's model belongs to). Older
    results files without the sweep columns give an empty frame."""
    if "flop_budget" not in results.columns or not len(results):
        return results.iloc[0:0].assign(base=pd.Series(dtype=str))
    df = results.copy()
    for col in SWEEP_COLUMNS:
        if col == "model_size":
            df[col] = df[col].astype(str) if col in df.columns else ""
            continue
        df[col] = pd.to_numeric(df[col].replace("", np.nan), errors="coerce") if col in df.columns \
            else np.nan
    df = df[np.isfinite(df["flop_budget"].to_numpy(dtype=float))].copy()
    if "train_flops_full_attn" in df.columns:
        df["train_flops_full_attn"] = df["train_flops_full_attn"].fillna(df["train_flops"])
    labels = df["encoder"].astype(str)
    if "run" in df.columns:  # tokbench compare prefixes "<run>/": pieces of one grid merge back
        labels = [lb[len(r) + 1:] if lb.startswith(f"{r}/") else lb for lb, r in zip(labels, df["run"])]
    df["base"] = [base_label(lb) for lb in labels]
    if "bpb" not in df.columns:
        df["bpb"] = bpb(df["nll_nats"], df["n_bytes"])
    return df


def build_groups(rows: pd.DataFrame, dataset: str) -> dict[str, list[Group]]:
    """encoder → its IsoFLOP groups (ascending budget) for one eval set.

    Loss: clean BPB in ``full`` mode if the run scored it (whole documents), else clean_target.
    ΔBPB per perturbation (``<id>@<severity>``): clean_target rows minus the same model's clean
    clean_target row (identical scored bytes; the robustness metric of docs/report.md)."""
    d = rows[rows["dataset"] == dataset]
    clean = d[d["perturbation_id"] == "clean"]
    mode = "full" if (clean["mode"] == "full").any() else "clean_target"
    clean = clean[clean["mode"] == mode]
    ct = d[d["mode"] == "clean_target"]
    ct_clean = ct[ct["perturbation_id"] == "clean"].set_index(["encoder", "seed"])["bpb"]
    perts = ct[ct["perturbation_id"] != "clean"]
    deltas: dict[str, dict[tuple[str, int], float]] = {}
    for r in perts.itertuples():
        key = (r.encoder, r.seed)
        if key in ct_clean.index:
            name = f"{r.perturbation_id}@{float(r.severity):g}"
            deltas.setdefault(name, {})[key] = float(r.bpb) - float(ct_clean.loc[key])
    out: dict[str, list[Group]] = {}
    for (enc, budget), g in clean.groupby(["base", "flop_budget"], sort=True):
        g = g.sort_values(["params_non_embedding", "seed"])
        keys = list(zip(g["encoder"], g["seed"]))
        grp = Group(
            encoder=str(enc), budget=float(budget),
            ln_n=np.log(g["params_non_embedding"].to_numpy(float)),
            loss=g["bpb"].to_numpy(float),
            ln_d=np.log(g["train_bytes"].to_numpy(float)),
            ln_c={c: np.log(g[col].to_numpy(float)) for c, col in CONVENTIONS.items()},
            delta={p: np.array([v.get(k, np.nan) for k in keys]) for p, v in sorted(deltas.items())},
            sizes=[str(s) for s in g["model_size"]],
            part_bytes=_part_bytes(g),
        )
        out.setdefault(str(enc), []).append(grp)
    return out


def _part_bytes(g: pd.DataFrame) -> float:
    """The training text's size in bytes for one IsoFLOP group, from the optional
    ``train_part_bytes`` column (``with_train_part_bytes``); NaN when absent."""
    if "train_part_bytes" not in g.columns:
        return math.nan
    v = pd.to_numeric(g["train_part_bytes"], errors="coerce").to_numpy(float)
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.median(v)) if len(v) else math.nan


def with_train_part_bytes(results: pd.DataFrame, encoders: dict[str, Any]) -> pd.DataFrame:
    """``results`` with the run.json facts the scaling fit needs per sweep row (``encoders``:
    label → entry, as ``reports.load`` gives them, merged runs' labels prefixed alike):

    - ``train_part_bytes``: the training text's size, ``scaling.train_part_bytes`` where run.json
      has it, else (older runs) the point's ``train_bytes`` ÷ its ``scaling.passes``. Older runs
      stored the *planned* passes next to the bytes actually read, so their derived size is high
      by actual/planned (up to ~1.1×); newer ones store both sizes consistently.
    - ``train_fingerprint``: ``scaling.train_fingerprint`` (which text the point trained on).
    - ``model_key``: the model's cache key for the row's seed (the same point trained twice has
      the same key).

    NaN / None where run.json lacks a fact; the fit then skips the checks that need it."""
    def facts(label: Any) -> dict[str, Any]:
        return (encoders.get(str(label)) or {}).get("scaling") or {}

    def part(label: Any, train_bytes: Any) -> float:
        f = facts(label)
        stored = _positive(f.get("train_part_bytes"))
        if math.isfinite(stored):
            return stored
        tb, ps = _positive(train_bytes), _positive(f.get("passes"))
        return tb / ps if math.isfinite(tb) and math.isfinite(ps) else math.nan

    def key(label: Any, seed: Any) -> str | None:
        try:
            seeds = (encoders.get(str(label)) or {}).get("seeds") or {}
            k = (seeds.get(str(int(float(seed)))) or {}).get("key")
        except (TypeError, ValueError):
            return None
        return str(k) if k else None

    if not len(results):
        return results.assign(train_part_bytes=np.nan, train_fingerprint=None, model_key=None)
    labels = results["encoder"] if "encoder" in results.columns else pd.Series([""] * len(results))
    tbs = results["train_bytes"] if "train_bytes" in results.columns else [math.nan] * len(results)
    seeds = results["seed"] if "seed" in results.columns else [None] * len(results)
    return results.assign(
        train_part_bytes=[part(e, t) for e, t in zip(labels, tbs)],
        train_fingerprint=[(str(facts(e).get("train_fingerprint") or "") or None) for e in labels],
        model_key=[key(e, sd) for e, sd in zip(labels, seeds)],
    )


def _positive(x: Any) -> float:
    """float(x) if it is a finite positive number, else NaN."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) and v > 0 else math.nan


# ---------------------------------------------------------------------------------------------
# Pooling: which sweep rows may be fitted together


class PoolingError(ValueError):
    """Sweep rows that must not be fitted together: the same grid point twice with different
    results, or points measured on different eval text or trained on different training text."""


# One grid point (of one eval set, under one perturbation and mode) is this key; the run it came
# from is not part of it, so pieces of a grid run budget by budget merge back into one grid.
POINT_KEY = ["dataset", "base", "flop_budget", "model_size", "seed"]
ROW_KEY = POINT_KEY + ["perturbation_id", "severity", "mode"]
PROVENANCE = {"fingerprint": "eval-set fingerprint",
              "train_fingerprint": "training-text fingerprint", "model_key": "model key"}
MAX_LISTED = 4  # points named in a message; the rest are counted


def _text_values(col: pd.Series) -> set[str]:
    """The non-empty text values of a provenance column (NaN, None and "" are "not known")."""
    return {str(v) for v in col if isinstance(v, str) and v}


def _point_name(r: Any) -> str:
    return (f"{r['base']} at {fmt_flops(float(r['flop_budget']))} FLOPs, size {r['model_size']}, "
            f"seed {r['seed']}" + (f" ({r['dataset']})" if "dataset" in r else ""))


def _runs_of(g: pd.DataFrame) -> str:
    runs = sorted({str(r) for r in g["run"]}) if "run" in g.columns else []
    return f"runs {', '.join(runs)}" if runs else "the same results table"


def pool_points(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Check that the sweep rows (``sweep_rows``) may be pooled into one set of fits.

    Distinct seeds and distinct budgets from several runs pool: that is how a grid is run piece by
    piece. What does not:

    - rows of one eval set with different eval-set ``fingerprint`` s, or sweep rows with different
      ``train_fingerprint`` s (``with_train_part_bytes``): the points measure different text, and
      one shared E across them would be meaningless — PoolingError;
    - the same (dataset, encoder, budget, size, seed, perturbation, mode) more than once with
      different BPB or different provenance: the same label names two different measurements
      (another text, a re-run that came out differently), and averaging them would blend
      incomparable points — PoolingError;
    - the same point more than once with identical BPB and no contrary provenance (the same
      directory given twice, a re-run served from the model cache): kept once, with a note, since
      counting it twice would shrink every interval for no new information.

    Returns (rows, notes)."""
    if not len(rows):
        return rows, []
    problems: list[str] = []
    if "train_fingerprint" in rows.columns:
        fps = _text_values(rows["train_fingerprint"])
        if len(fps) > 1:
            short = ", ".join(sorted(f[:12] for f in fps))
            problems.append(f"the sweep points were trained on {len(fps)} different training texts "
                            f"(training-text fingerprints {short})")
    if "fingerprint" in rows.columns:
        for ds, g in rows.groupby("dataset", sort=True):
            fps = _text_values(g["fingerprint"])
            if len(fps) > 1:
                problems.append(f"eval set {ds} has {len(fps)} different fingerprints across the "
                                "sweep points (the runs scored different text under one name)")
    key = [c for c in ROW_KEY if c in rows.columns]
    kstr = rows[key].astype(str).agg("\x1f".join, axis=1)
    dup = kstr.duplicated(keep=False).to_numpy()
    notes: list[str] = []
    if dup.any():
        same_pts, diff_pts = [], []
        pkey = [c for c in POINT_KEY if c in rows.columns]
        for _, g in rows[dup].groupby(kstr[dup], sort=True):
            vals = g["bpb"].to_numpy(float)
            same = bool(np.allclose(vals, vals[0], rtol=1e-9, atol=1e-12, equal_nan=True))
            same &= all(len(_text_values(g[c])) <= 1 for c in PROVENANCE if c in g.columns)
            rec = (tuple(str(g.iloc[0][c]) for c in pkey), g, vals)
            (same_pts if same else diff_pts).append(rec)
        if diff_pts:
            seen: dict[tuple[str, ...], str] = {}
            for pk, g, vals in diff_pts:
                if pk not in seen:
                    seen[pk] = (f"{_point_name(g.iloc[0])} in {_runs_of(g)} (BPB "
                                f"{' vs '.join(f'{v:.4g}' for v in vals[:3])})")
            listed = list(seen.values())
            more = f" and {len(listed) - MAX_LISTED} more" if len(listed) > MAX_LISTED else ""
            problems.append(f"{len(listed)} grid point(s) appear more than once with different "
                            f"results: {'; '.join(listed[:MAX_LISTED])}{more}")
        if same_pts and not diff_pts:
            pts = {pk: g for pk, g, _ in same_pts}
            first = next(iter(pts.values()))
            notes.append(f"{len(pts)} grid point(s) appear more than once with identical results "
                         f"(e.g. {_point_name(first.iloc[0])} in {_runs_of(first)}): each is "
                         "counted once. Give each grid point's run directory once.")
            rows = rows[~kstr.duplicated(keep="first").to_numpy()]
    if problems:
        raise PoolingError(
            "Scaling fits refused: " + "; ".join(problems) + ". Pooling these would fit one "
            "frontier through incomparable points. Merge only run directories of one grid on the "
            "same data: a point re-run into a second directory is the same point — give one of the "
            "directories, not both. Distinct seeds and distinct budgets of one grid may be merged.")
    return rows, notes


# ---------------------------------------------------------------------------------------------
# The chain (pure functions of arrays, so the bootstrap can call it on resampled points)


@dataclass
class Optimum:
    """The compute-optimal point of one IsoFLOP profile (all logs natural)."""

    ln_n: float
    loss: float
    ln_d: float
    ln_c: dict[str, float]
    edge: str  # "" | "below" | "above" | "flat" (see ``profile_optimum``)
    coef: tuple[float, float, float]  # parabola (c2, c1, c0) in ln N; NaNs when none
    delta: dict[str, float] = field(default_factory=dict)
    clamped: bool = False  # the vertex lay off the ladder and was moved onto its end

    @property
    def estimate(self) -> bool:
        """Whether this vertex estimates the optimum (a fit across budgets uses it): not flat,
        not clamped. A clamped vertex only bounds the optimum — its N is the ladder's end, its
        loss above the optimum's — so fitting exponents through it bends them toward the ladder."""
        return self.edge != "flat" and not self.clamped


def _line_at(x: np.ndarray, y: np.ndarray, x0: float) -> float:
    """Least-squares line through (x, y) evaluated at x0 (the mean when x has one value)."""
    ok = np.isfinite(y)
    x, y = x[ok], y[ok]
    if len(y) == 0:
        return math.nan
    if np.ptp(x) == 0:
        return float(np.mean(y))
    s, c = np.polyfit(x, y, 1)
    return float(s * x0 + c)


def _interp(x: np.ndarray, y: np.ndarray, x0: float) -> float:
    """Piecewise-linear y(x0) through the per-x means of finite y (held flat beyond the ends)."""
    ok = np.isfinite(y)
    if not ok.any():
        return math.nan
    ux = np.unique(x[ok])
    uy = np.array([y[ok][x[ok] == v].mean() for v in ux])
    return float(np.interp(x0, ux, uy))


# Rungs the vertex parabola is fitted to: the ones nearest the minimum. A profile is a sum of
# power laws in N, parabolic in ln N only near its minimum; over a whole 130× ladder the parabola
# is lopsided and moves the vertex (by ~0.08 decades of C* on the project's design).
VERTEX_RUNGS = 5


def _nearest(x: np.ndarray, x0: float, k: int) -> np.ndarray:
    """Indices of the points whose distinct x are the k nearest to x0 (all when there are fewer)."""
    ux = np.unique(x)
    keep = ux[np.argsort(np.abs(ux - x0), kind="stable")[:k]]
    return np.flatnonzero(np.isin(x, keep))


def profile_optimum(g: Group) -> Optimum:
    """Fit one IsoFLOP profile: BPB = c2·x² + c1·x + c0 with x = ln N over the VERTEX_RUNGS
    rungs nearest its minimum (first the lowest observed point, then the fitted vertex, once),
    vertex x* = −c1 / (2·c2).

    Flags (``edge``): ``below``/``above`` when the vertex lies outside the ladder or the lowest
    observed BPB sits on its first/last rung — the true optimum may be off the ladder, so widen it
    there; ``flat`` when the parabola has no upward curvature (c2 ≤ 0) or fewer than three distinct
    sizes. A flagged vertex is clamped into the ladder (flat: the best observed point)."""
    x, y = g.ln_n, g.loss
    lo, hi = float(x.min()), float(x.max())
    edge = ""
    coef = (math.nan, math.nan, math.nan)
    best = float(x[int(np.argmin(y))])
    if len(np.unique(x)) >= MIN_DISTINCT_SIZES:
        win = _nearest(x, best, VERTEX_RUNGS)
        coef = tuple(float(v) for v in np.polyfit(x[win], y[win], 2))
        if c2_positive(coef):  # recentre the window on the vertex, once
            win = _nearest(x, min(max(-coef[1] / (2 * coef[0]), lo), hi), VERTEX_RUNGS)
            coef = tuple(float(v) for v in np.polyfit(x[win], y[win], 2))
    if not c2_positive(coef):
        xs, edge = best, "flat"
    else:
        xs = -coef[1] / (2 * coef[0])
        if xs < lo or best == lo:
            edge = "below"
        elif xs > hi or best == hi:
            edge = "above"
        clamped = not lo <= xs <= hi
        xs = min(max(xs, lo), hi)
    loss = (coef[0] * xs * xs + coef[1] * xs + coef[2]) if edge != "flat" else float(np.min(y))
    return Optimum(
        ln_n=float(xs), loss=float(loss), ln_d=_line_at(x, g.ln_d, xs),
        ln_c={c: _line_at(x, v, xs) for c, v in g.ln_c.items()}, edge=edge, coef=coef,  # type: ignore[arg-type]
        delta={p: _interp(x, v, xs) for p, v in g.delta.items()},
        clamped=edge in ("below", "above") and clamped,
    )


def c2_positive(coef: tuple[float, float, float]) -> bool:
    return math.isfinite(coef[0]) and coef[0] > 0


def power_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line y = slope·x + intercept (NaN if < 2 x's)."""
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2 or np.ptp(x[ok]) == 0:
        return math.nan, math.nan
    s, c = np.polyfit(x[ok], y[ok], 1)
    return float(s), float(c)


@dataclass
class Frontier:
    """L(C) = E + exp(ln_a[k] − alpha[k]·(ln C − ln_c0)) per encoder k, E shared.

    ln_c0 centres ln C (conditioning); A in the usual form is exp(ln_a + alpha·ln_c0)."""

    e: float
    ln_a: dict[str, float]
    alpha: dict[str, float]
    ln_c0: float
    ok: bool

    def predict(self, enc: str, ln_c: np.ndarray | float) -> np.ndarray:
        return self.e + np.exp(self.ln_a[enc] - self.alpha[enc] * (np.asarray(ln_c) - self.ln_c0))

    def big_a(self, enc: str) -> float:
        return math.exp(self.ln_a[enc] + self.alpha[enc] * self.ln_c0)


def frontier_design(n_points: dict[str, int]) -> tuple[list[str], str]:
    """Which encoders a joint frontier can be fitted to, and why none can.

    n_points: encoder → its number of finite compute-optimal points (one per budget). The rule:
    an encoder takes part only with at least MIN_BUDGETS points, and the joint fit needs more
    points than parameters (one shared E, plus A and α per encoder: 1 + 2k). With as many points
    as parameters or fewer, some E, A, α pass through the vertices exactly (or a whole curve of
    them does), so α and E would be artefacts of the starting point and the bootstrap interval
    would only measure profile noise. With two or more encoders of ≥ 3 budgets each the second
    condition always holds (3k > 1 + 2k); a lone encoder needs 4.

    Returns (encoders fitted, in order; "" or the reason no frontier is fitted)."""
    encs = [k for k, n in n_points.items() if n >= MIN_BUDGETS]
    if not encs:
        return [], (f"no encoder has the {MIN_BUDGETS} budgets a frontier needs "
                    f"({', '.join(f'{k}: {n}' for k, n in n_points.items())})")
    n, free = sum(n_points[k] for k in encs), 1 + 2 * len(encs)
    if n <= free:
        return [], (f"{n} compute-optimal points for {free} parameters (a shared E, and A and α "
                    "per encoder): the frontier is underdetermined")
    return encs, ""


def fit_frontier(points: dict[str, tuple[np.ndarray, np.ndarray]],
                 start: Frontier | None = None) -> Frontier:
    """Joint least squares (in BPB) of L = E + A_k·C^(−α_k) over encoders k, one E.

    points: encoder → (ln C (B,), L (B,)) of its compute-optimal points. Only the encoders
    ``frontier_design`` admits are fitted; when it admits none, the frontier is empty (E NaN):
    an underdetermined fit is not reported. E is bounded to [0, min L) — it is a floor under
    every observed loss. Started from the best point of a grid over E (for a fixed E the rest is
    a straight line in log-log), then refined jointly; or from ``start`` (the point fit, for the
    bootstrap's refits) when it has the same encoders."""
    encs, _ = frontier_design(_finite_points(points))
    if not encs:
        return Frontier(math.nan, {}, {}, 0.0, False)
    all_c = np.concatenate([points[k][0] for k in encs])
    all_y = np.concatenate([points[k][1] for k in encs])
    ok = np.isfinite(all_c) & np.isfinite(all_y)
    c0 = float(np.mean(all_c[ok]))
    y_min = float(np.min(all_y[ok]))
    data = {k: (points[k][0] - c0, points[k][1]) for k in encs}
    data = {k: (c[np.isfinite(c) & np.isfinite(y)], y[np.isfinite(c) & np.isfinite(y)])
            for k, (c, y) in data.items()}

    def lines(e: float) -> tuple[float, list[float]]:
        sse, theta = 0.0, []
        for k in encs:
            c, y = data[k]
            s, b = power_slope(c, np.log(np.maximum(y - e, 1e-12)))
            if not math.isfinite(s):
                s, b = 0.0, float(np.log(max(np.mean(y) - e, 1e-12)))
            theta += [b, -s]
            sse += float(np.sum((e + np.exp(b + s * c) - y) ** 2))
        return sse, theta

    upper = y_min * (1 - 1e-6) if y_min > 0 else 1e-9
    if start is not None and start.ok and list(start.alpha) == encs and math.isfinite(start.e):
        shift = {k: start.alpha[k] * (c0 - start.ln_c0) for k in encs}  # re-centre ln A at c0
        theta0 = [start.e] + [v for k in encs for v in (start.ln_a[k] - shift[k], start.alpha[k])]
    else:
        grid = np.linspace(0.0, upper, 41)[:-1]
        e0 = min(grid, key=lambda e: lines(e)[0])
        theta0 = [e0] + lines(e0)[1]

    def resid(p: np.ndarray) -> np.ndarray:
        e, out = p[0], []
        for i, k in enumerate(encs):
            c, y = data[k]
            out.append(e + np.exp(p[1 + 2 * i] - p[2 + 2 * i] * c) - y)
        return np.concatenate(out)

    lo = [0.0] + [-np.inf, -1.0] * len(encs)
    hi = [upper] + [np.inf, 10.0] * len(encs)
    x0 = np.clip(np.array(theta0, float), np.array(lo) + 1e-12, np.array(hi) - 1e-12)
    try:
        sol = least_squares(resid, x0, bounds=(lo, hi), method="trf", x_scale="jac",
                            xtol=1e-12, ftol=1e-12, gtol=1e-12, max_nfev=2000)
        p, ok_fit = sol.x, bool(sol.success)
    except (ValueError, FloatingPointError):
        p, ok_fit = x0, False
    return Frontier(
        e=float(p[0]), ln_a={k: float(p[1 + 2 * i]) for i, k in enumerate(encs)},
        alpha={k: float(p[2 + 2 * i]) for i, k in enumerate(encs)}, ln_c0=c0, ok=ok_fit,
    )


def _finite_points(points: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, int]:
    """encoder → how many of its (ln C, L) points are both finite."""
    return {k: int((np.isfinite(c) & np.isfinite(y)).sum()) for k, (c, y) in points.items()}


def determined_slope(x: np.ndarray, y: np.ndarray) -> float:
    """``power_slope``'s slope when at least MIN_BUDGETS finite points carry it, else NaN: a line
    through two points has no residual, so its slope is not reported as an estimate."""
    ok = np.isfinite(x) & np.isfinite(y)
    return power_slope(x, y)[0] if ok.sum() >= MIN_BUDGETS else math.nan


def e_at_bound(fr: Frontier, optima: dict[str, list[Any]], rel: float = 1e-3) -> str:
    """"lower" or "upper" when the fitted E sits on a bound of ``fit_frontier`` (0, or the lowest
    compute-optimal loss), within ``rel`` of that loss; "" when it is inside (or not fitted)."""
    losses = [o.loss for opts in optima.values() for o in opts if math.isfinite(o.loss)]
    if not fr.ok or not math.isfinite(fr.e) or not losses:
        return ""
    y_min = min(losses)
    if fr.e <= rel * y_min:
        return "lower"
    return "upper" if fr.e >= (1 - rel) * y_min else ""


def crossing(fr: Frontier, a: str, b: str) -> float:
    """ln C where the frontiers of encoders a and b cross (E cancels); NaN if they are parallel
    (equal α: one stays ahead at every compute)."""
    if a not in fr.alpha or b not in fr.alpha:
        return math.nan
    da = fr.alpha[a] - fr.alpha[b]
    if abs(da) < 1e-9:
        return math.nan
    return fr.ln_c0 + (fr.ln_a[a] - fr.ln_a[b]) / da


# ---------------------------------------------------------------------------------------------
# L(N, D) = E + A/N^a + B/D^b over every point (a cross-check of the frontier's E)

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

    lead_lo = [0.0] * (n_e - shared_a) + [0.02] * shared_a
    lead_hi = [lmin - 1e-6] * (n_e - shared_a) + [3.0] * shared_a
    q_lo = {4: [-20.0, 0.02, -20.0, 0.02], 3: [-20.0, -20.0, 0.02], 2: [-20.0, -20.0]}[per]
    q_hi = {4: [20.0, 3.0, 20.0, 3.0], 3: [20.0, 20.0, 3.0], 2: [20.0, 20.0]}[per]
    lo, hi = lead_lo + q_lo * len(encs), lead_hi + q_hi * len(encs)
    best = None
    if x0 is not None:
        best = least_squares(resid, np.clip(x0, np.array(lo) + 1e-9, np.array(hi) - 1e-9), bounds=(lo, hi))
    exps = [(CHINCHILLA_A, CHINCHILLA_B)] if per == 2 else [(0.3, 0.3), (0.6, 0.6), (1.0, 0.5), (0.5, 1.0)]
    for e0 in (0.0, 0.4 * lmin, 0.8 * lmin) if x0 is None else ():
        for a0, b0 in exps:
            q = {4: [0.0, a0, 0.0, b0], 3: [0.0, 0.0, b0], 2: [0.0, 0.0]}[per]
            lead = [e0] * (n_e - shared_a) + [a0] * shared_a
            x0 = np.clip(np.array(lead + q * len(encs)), np.array(lo) + 1e-9, np.array(hi) - 1e-9)
            r = least_squares(resid, x0, bounds=(lo, hi))
            if best is None or r.cost < best.cost:
                best = r
    assert best is not None
    laws = unpack(best.x)
    res = resid(best.x)
    k = len(best.x)
    names = (["E"] if shared_e else [f"E_{e}" for e in encs]) + (["a"] if shared_a else [])
    names += [f"{p}_{e}" for e in encs for p in {4: ["lnA", "a", "lnB", "b"], 3: ["lnA", "lnB", "b"],
                                                  2: ["lnA", "lnB"]}[per]]
    dof = max(1, len(res) - k)
    try:
        cov = np.linalg.pinv(best.jac.T @ best.jac) * float(res @ res) / dof
        se_all = dict(zip(names, np.sqrt(np.clip(np.diag(cov), 0, None))))
    except np.linalg.LinAlgError:
        se_all = {n: math.nan for n in names}
    se = {e: {n.rsplit("_", 1)[0] if n.endswith(f"_{e}") else n: s for n, s in se_all.items()
              if n.endswith(f"_{e}") or "_" not in n or n == f"E_{e}"} for e in encs}
    i = 0
    residuals = {}
    for e, v in data.items():
        residuals[e] = res[i: i + len(v)]
        i += len(v)
    return LawFit(variant, laws, residuals, k, se, best.x)



@dataclass
class ChainResult:
    """Everything the chain produces for one eval set, as flat scalars for the bootstrap."""

    optima: dict[str, list[Optimum]]
    frontier: dict[str, Frontier]  # convention → frontier
    scalars: dict[str, float]


def run_chain(groups: dict[str, list[Group]], pairs: list[tuple[str, str]],
              start: ChainResult | None = None) -> ChainResult:
    """Parabolas → optima → exponents → frontier (per convention) → crossings → robustness.

    start: the point fit, whose frontiers start a bootstrap refit's (``fit_frontier``)."""
    optima = {enc: [profile_optimum(g) for g in gs] for enc, gs in groups.items()}
    s: dict[str, float] = {}
    frontiers: dict[str, Frontier] = {}
    for conv in CONVENTIONS:
        pts = {}
        for enc, opts in optima.items():
            # a vertex that is no estimate (clamped, flat) takes no part in a fit across budgets
            ln_c = np.array([o.ln_c[conv] if o.estimate else math.nan for o in opts])
            pts[enc] = (ln_c, np.array([o.loss for o in opts]))
            s[f"a|{conv}|{enc}"] = determined_slope(ln_c, np.array([o.ln_n for o in opts]))
            s[f"b|{conv}|{enc}"] = determined_slope(ln_c, np.array([o.ln_d for o in opts]))
        fr = fit_frontier(pts, start.frontier.get(conv) if start is not None else None)
        frontiers[conv] = fr
        s[f"E|{conv}"] = fr.e
        for enc in fr.alpha:
            s[f"alpha|{conv}|{enc}"] = fr.alpha[enc]
            s[f"lnA|{conv}|{enc}"] = math.log(fr.big_a(enc)) if math.isfinite(fr.ln_a[enc]) else math.nan
        for a, b in pairs:
            s[f"cross|{conv}|{a}|{b}"] = crossing(fr, a, b)
    for enc, opts in optima.items():
        log10_c = np.array([o.ln_c[HEADLINE] if o.estimate else math.nan for o in opts]) / math.log(10)
        for p in sorted({p for o in opts for p in o.delta}):
            s[f"rob|{enc}|{p}"] = determined_slope(
                log10_c, np.array([o.delta.get(p, math.nan) for o in opts]))
    return ChainResult(optima, frontiers, s)


@dataclass
class Smooth:
    """The bootstrap's picture of a sweep: every point's expected BPB and ΔBPB, and the noise
    around them (``smooth_sweep``)."""

    loss: dict[tuple[str, int], np.ndarray]  # (encoder, group number) → (P,) expected BPB
    noise_rel: float  # sd of a point's BPB relative to its expected value
    delta: dict[tuple[str, int, str], np.ndarray]  # … and perturbation → (P,) expected ΔBPB
    delta_sd: dict[str, float]  # perturbation → sd of a point's ΔBPB (BPB)


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


# ---------------------------------------------------------------------------------------------
# The public fit


@dataclass
class ScalingFit:
    """Fitted scaling results for every eval set, as tables (pandas) ready for the report.

    optima: dataset, encoder, budget, n_opt, d_opt, loss_opt, c_half, c_full, edge, n_points.
    profiles: dataset, encoder, budget, size, n, loss, c2, c1, c0 (ladder points + parabola).
    exponents: dataset, convention, encoder, a, b, alpha, A (with ``_lo``/``_hi`` CI bounds).
    irreducible: dataset, convention, E, E_lo, E_hi.
    parity: dataset, convention, byte, bpe, status (crossing | outside | parallel | missing),
        c_star, c_lo, c_hi, range_lo, range_hi, decades_outside, frac_inside, leader_low, statement.
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


def encoder_kinds(rows: pd.DataFrame) -> dict[str, str]:
    """base encoder → "byte" (one prediction per byte: token_unit byte) or "bpe" (registry name
    bpe, or token_unit token) or "other"."""
    out = {}
    for base, g in rows.groupby("base"):
        unit = str(g["token_unit"].iloc[0]) if "token_unit" in g.columns else ""
        name = str(g["encoder_name"].iloc[0]) if "encoder_name" in g.columns else ""
        out[str(base)] = "bpe" if name == "bpe" or unit == "token" else "byte" if unit == "byte" else "other"
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


def fmt_flops(c: float) -> str:
    """A FLOP count with two significant digits ("1.2e+15"); "—" where there is none."""
    return num(c, ".2g")


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


def fit_scaling(results: pd.DataFrame, *, n_boot: int = 200, seed: int = 0, level: float = 0.95,
                band_points: int = 40) -> ScalingFit:
    """Fit every eval set of a (merged) results table; see the module docstring.

    results: results.csv rows (several runs concatenated is fine: the grid may be run budget by
    budget; ``pool_points`` says what may not be pooled and raises PoolingError for it). Rows
    without ``flop_budget`` are ignored. Same seed → same intervals. Fits across budgets that the
    points cannot determine (``MIN_BUDGETS``, ``frontier_design``) are NaN, with a note."""
    rows, notes = pool_points(sweep_rows(results))
    kinds = encoder_kinds(rows) if len(rows) else {}
    tabs: dict[str, list[dict[str, Any]]] = {k: [] for k in
                                             ("opt", "prof", "exp", "irr", "par", "rob", "robp", "law")}
    frontiers: dict[str, dict[str, Frontier]] = {}
    bands: dict[str, Any] = {}
    rng = np.random.default_rng(seed)
    for dataset in sorted(rows["dataset"].unique()) if len(rows) else []:
        groups = build_groups(rows, dataset)
        if not groups:
            continue
        encs = sorted(groups)
        pairs = [(a, b) for a in encs for b in encs if kinds.get(a) == "byte" and kinds.get(b) == "bpe"]
        point = run_chain(groups, pairs)
        law = law_point(groups)
        smooth = smooth_sweep(groups, law)
        sweeps = [_redraw(groups, smooth, rng) for _ in range(n_boot)]
        boots: list[ChainResult] = [run_chain(g, pairs, point) for g in sweeps]
        tabs["law"] += law_rows(dataset, law, groups, sweeps, level)

        centre = run_chain(_redraw(groups, smooth, None), pairs, point)

        def ci(key: str, boots: list[ChainResult] = boots, point: ChainResult = point,
               centre: ChainResult = centre) -> tuple[float, float]:
            return _ci([b.scalars.get(key, math.nan) for b in boots], level,
                       point.scalars.get(key, math.nan), centre.scalars.get(key, math.nan))

        frontiers[dataset] = point.frontier
        for enc, opts in point.optima.items():
            for g, o in zip(groups[enc], opts):
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
            edges = [o for o in opts if o.edge]
            if edges:
                notes.append(f"{dataset}: {enc}: {len(edges)} of {len(opts)} IsoFLOP minima flagged "
                             f"({', '.join(sorted({o.edge for o in edges}))}): widen the ladder there.")
            repeated = [(g.budget, math.exp(o.ln_d) / g.part_bytes) for g, o in zip(groups[enc], opts)
                        if math.exp(o.ln_d) > FREE_PASSES * g.part_bytes]  # False when NaN
            if repeated:
                at = ", ".join(f"{b:.3g} ({p:.1f} passes)" for b, p in repeated)
                notes.append(f"{dataset}: {enc}: the compute-optimal D reads the training text more than "
                             f"{FREE_PASSES:g} times at {at}; past ~{FREE_PASSES:g} passes repetition is no "
                             "longer nearly free (Muennighoff et al. 2023), so these vertices' BPB may "
                             "sit high. More text would remove this.")
        notes += _underdetermined_notes(dataset, point)
        bands[dataset] = {}
        for conv, fr in point.frontier.items():
            lo_e, hi_e = ci(f"E|{conv}")
            lo_e = max(lo_e, 0.0) if math.isfinite(lo_e) else lo_e  # E ≥ 0 (fit_frontier's bound)
            tabs["irr"].append(dict(dataset=dataset, convention=conv, E=fr.e, E_lo=lo_e, E_hi=hi_e))
            bound = e_at_bound(fr, point.optima)
            if bound:
                where = ("lower bound, 0 (each frontier is then a pure power law)" if bound == "lower" else
                         f"upper bound, the lowest compute-optimal loss ({fr.e:.3g} BPB)")
                notes.append(f"{dataset}, FLOPs at {conv} attention: the shared irreducible loss E sits on its "
                             f"{where}: these budgets do not pin E, and the exponents and any extrapolated "
                             "crossing rest on that bound. More or larger budgets are needed to fit E.")
            bands[dataset][conv] = {}
            for enc in encs:
                row: dict[str, Any] = dict(dataset=dataset, convention=conv, encoder=enc)
                for name in ("a", "b", "alpha", "lnA"):
                    key = f"{name}|{conv}|{enc}"
                    row[name] = point.scalars.get(key, math.nan)
                    row[f"{name}_lo"], row[f"{name}_hi"] = ci(key)
                tabs["exp"].append(row)
                if enc in fr.alpha:
                    lnc = np.array([o.ln_c[conv] for o in point.optima[enc]])
                    grid = np.linspace(lnc.min() - 0.5, lnc.max() + 0.5, band_points)
                    preds = np.array([b.frontier[conv].predict(enc, grid) for b in boots
                                      if enc in b.frontier[conv].alpha and np.isfinite(b.frontier[conv].e)])
                    cf = centre.frontier[conv]
                    if len(preds) >= 2 and enc in cf.alpha and np.isfinite(cf.e):
                        # the basic interval of ``_ci``, point by point along the grid
                        q = (1 - level) / 2
                        est, mid = fr.predict(enc, grid), cf.predict(enc, grid)
                        bands[dataset][conv][enc] = (grid, est - (np.quantile(preds, 1 - q, axis=0) - mid),
                                                     est - (np.quantile(preds, q, axis=0) - mid))
            for a, b in pairs:
                tabs["par"].append(_parity_row(dataset, conv, a, b, point, boots, level, centre))
        for enc in encs:
            for p in sorted({p for o in point.optima[enc] for p in o.delta}):
                key = f"rob|{enc}|{p}"
                lo, hi = ci(key)
                tabs["rob"].append(dict(dataset=dataset, encoder=enc, perturbation=p,
                                        slope=point.scalars.get(key, math.nan), slope_lo=lo, slope_hi=hi))
    cols = {
        "opt": ["dataset", "encoder", "budget", "n_opt", "d_opt", "loss_opt", "c_half", "c_full",
                "edge", "n_points", "passes"],
        "prof": ["dataset", "encoder", "budget", "size", "n", "loss", "c2", "c1", "c0"],
        "exp": ["dataset", "convention", "encoder"] + [f"{n}{s}" for n in ("a", "b", "alpha", "lnA")
                                                      for s in ("", "_lo", "_hi")],
        "irr": ["dataset", "convention", "E", "E_lo", "E_hi"],
        "par": ["dataset", "convention", "byte", "bpe", "status", "c_star", "c_lo", "c_hi", "range_lo",
                "range_hi", "decades_outside", "frac_inside", "leader_low", "statement", "ci_decades"],
        "rob": ["dataset", "encoder", "perturbation", "slope", "slope_lo", "slope_hi"],
        "robp": ["dataset", "encoder", "perturbation", "budget", "c", "delta"],
        "law": ["dataset", "encoder"] + [f"{n}{s}" for n in ("E", "a", "b") for s in ("", "_lo", "_hi")]
               + ["A", "B", "rms", "n_points"],
    }
    df = {k: pd.DataFrame(v, columns=cols[k]) for k, v in tabs.items()}
    return ScalingFit(df["opt"], df["prof"], df["exp"], df["irr"], df["par"], df["rob"], df["robp"],
                      frontiers, bands, n_boot, level, HEADLINE, notes, df["law"])


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
                level: float, centre: ChainResult) -> dict[str, Any]:
    """One byte-vs-BPE parity entry with its plain-language statement."""
    fr = point.frontier[conv]
    key = f"cross|{conv}|{a}|{b}"
    row: dict[str, Any] = dict(dataset=dataset, convention=conv, byte=a, bpe=b, c_star=math.nan,
                               c_lo=math.nan, c_hi=math.nan, range_lo=math.nan, range_hi=math.nan,
                               decades_outside=math.nan, frac_inside=math.nan, leader_low="",
                               ci_decades=math.nan)
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
    c_lo, c_hi = _ci(vals, level, lnx, centre.scalars.get(key, math.nan))
    row["c_lo"], row["c_hi"] = (_exp(c_lo), _exp(c_hi)) if math.isfinite(c_lo) else (math.nan, math.nan)
    row["ci_decades"] = (c_hi - c_lo) / math.log(10) if math.isfinite(c_lo) else math.nan
    rng_txt = f"{fmt_flops(math.exp(lo))}–{fmt_flops(math.exp(hi))} FLOPs"
    ci_txt = ("" if not math.isfinite(c_lo) else
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
