"""The scaling chain on one eval set's IsoFLOP groups: vertex parabolas → compute-optimal
points → allocation exponents → shared-E frontier → crossings → robustness slopes. Pure
functions of arrays, so the bootstrap (``reports.scaling_boot``) can call them on resampled
sweeps; the method is ``reports.scaling``'s docstring, steps 1–5."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from reports.scaling_data import CONVENTIONS, HEADLINE, Group

MIN_DISTINCT_SIZES = 3  # a parabola needs three distinct ladder points
# Budgets an encoder needs before any fit across budgets is reported for it (allocation exponents
# a, b, its frontier's A and α, robustness slopes). Two vertices fix a line exactly, so the
# straight-line fits would have no residual and nothing could show the power law is wrong; the
# frontier has a third parameter per encoder's share (E), so a lone encoder needs one more (see
# ``frontier_design``). Below it the numbers are reported as missing, never with an interval.
MIN_BUDGETS = 3




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
        """Whether this vertex estimates the optimum (a fit across budgets uses it): not
        flagged. A clamped vertex only bounds the optimum — its N is the ladder's end, its loss
        above the optimum's — so fitting exponents through it bends them toward the ladder. A
        vertex whose lowest observed point is the ladder's first or last rung is not bracketed:
        its parabola extrapolates past the data, and whether noise puts it just inside (kept) or
        just outside (clamped) truncates its distribution; keeping the inside ones biased the
        N_opt exponent by ~0.4 sd and its interval covered ~90 % (docs/scaling.md, "Intervals")."""
        return self.edge == ""


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

    def jac(p: np.ndarray) -> np.ndarray:
        # analytic: ∂r/∂E = 1, ∂r/∂ln A_k = exp(·), ∂r/∂α_k = −c·exp(·) on encoder k's rows (the
        # bootstrap refits this hundreds of times; finite differences cost 2–3× the time)
        rows = []
        for i, k in enumerate(encs):
            c, _ = data[k]
            j = np.zeros((len(c), len(p)))
            t = np.exp(p[1 + 2 * i] - p[2 + 2 * i] * c)
            j[:, 0], j[:, 1 + 2 * i], j[:, 2 + 2 * i] = 1.0, t, -c * t
            rows.append(j)
        return np.concatenate(rows)

    lo = [0.0] + [-np.inf, -1.0] * len(encs)
    hi = [upper] + [np.inf, 10.0] * len(encs)
    x0 = np.clip(np.array(theta0, float), np.array(lo) + 1e-12, np.array(hi) - 1e-12)
    try:
        sol = least_squares(resid, x0, jac=jac, bounds=(lo, hi), method="trf", x_scale="jac",
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
            # a vertex that is no estimate (flagged) takes no part in a fit across budgets
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


