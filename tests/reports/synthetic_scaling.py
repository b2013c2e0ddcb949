"""Synthetic scaling-sweep results drawn from L(N, D) = E + A/N^a + B/D^b (tests only).

With C = 6·N·D the compute-optimal loss is exactly L*(C) = E + G·C^(−ab/(a+b)) and
N_opt ∝ C^(b/(a+b)), D_opt ∝ C^(a/(a+b)) (the closed forms below), so a fit can be checked
against known truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from reports.scaling import sweep_label


@dataclass(frozen=True)
class Law:
    """L(N, D) = E + A/N^a + B/D^b; ``attn`` = extra fraction of FLOPs under the full-attention
    convention (train_flops_full_attn = (1 + attn) · train_flops)."""

    E: float
    A: float
    a: float
    B: float
    b: float
    attn: float = 0.0

    def loss(self, n: np.ndarray, d: np.ndarray) -> np.ndarray:
        return self.E + self.A / n**self.a + self.B / d**self.b

    @property
    def alpha(self) -> float:
        return self.a * self.b / (self.a + self.b)

    def n_opt(self, c: float) -> float:
        """argmin_N L(N, C/(6N)): a·A·N^(−a) = b·B·(6N/C)^b."""
        a, b = self.a, self.b
        return ((a * self.A) / (b * self.B) * (c / 6) ** b) ** (1 / (a + b))

    def frontier(self, c: float) -> float:
        n = self.n_opt(c)
        return float(self.loss(np.array(n), np.array(c / (6 * n))))


def crossing_true(x: Law, y: Law, scale_x: float = 1.0, scale_y: float = 1.0) -> float:
    """C where the true frontiers cross, with compute counted as scale·C (bisection in ln C)."""
    def f(lc: float) -> float:
        c = math.exp(lc)
        return x.frontier(c / scale_x) - y.frontier(c / scale_y)
    lo, hi = math.log(1e6), math.log(1e40)
    assert f(lo) * f(hi) < 0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(lo) * f(mid) > 0 else (lo, mid)
    return math.exp(0.5 * (lo + hi))


def sweep_results(laws: dict[str, tuple[Law, str]], budgets: list[float], *, ladder: str = "centred",
                  n_sizes: int = 7, span: float = 3.0, noise: float = 0.0, seed: int = 0,
                  fixed_ladder: list[float] | None = None,
                  perturbation: dict[str, tuple[float, float]] | None = None,
                  fingerprint: str = "synthetic:heldout") -> pd.DataFrame:
    """Results rows (clean, full mode + clean_target; optional one perturbation) of a sweep.

    laws: encoder → (law, token_unit). ladder "centred": n_sizes sizes log-spaced over ×/÷ span
    around each encoder's true N_opt(C); "fixed": ``fixed_ladder`` for every budget.
    perturbation: encoder → (Δ0, slope): ΔBPB = Δ0 + slope·log10(C/1e15) at every size (clean_target).
    noise: Gaussian sd (BPB) added to every clean loss. fingerprint: the eval set's fingerprint
    column, as the harness writes it (runs that merge must show the same eval text)."""
    rng = np.random.default_rng(seed)
    rows = []
    for enc, (law, unit) in laws.items():
        for c in budgets:
            if ladder == "centred":
                ns = law.n_opt(c) * np.exp(np.linspace(-math.log(span), math.log(span), n_sizes))
            else:
                ns = np.array(fixed_ladder or [])
            for i, n in enumerate(ns):
                d = c / (6 * n)
                loss = float(law.loss(np.array(n), np.array(d))) + (rng.normal(0, noise) if noise else 0.0)
                label = sweep_label(enc, c, f"s{i}")
                base = dict(encoder=label, encoder_name="bpe" if unit == "token" else enc, seed=0,
                            dataset="heldout", fingerprint=fingerprint, token_unit=unit,
                            flop_budget=c, model_size=f"s{i}",
                            params_non_embedding=n, train_bytes=d, train_flops=c,
                            train_flops_full_attn=c * (1 + law.attn), severity=0.0)
                for mode in ("full", "clean_target"):
                    rows.append(dict(base, perturbation_id="clean", perturbation="identity", mode=mode, bpb=loss))
                if perturbation and enc in perturbation:
                    d0, s = perturbation[enc]
                    rows.append(dict(base, perturbation_id="typo", perturbation="typo.keyboard", severity=0.1,
                                     mode="clean_target", bpb=loss + d0 + s * math.log10(c / 1e15)))
    df = pd.DataFrame(rows)
    df["n_bytes"] = 1000.0
    df["nll_nats"] = df["bpb"] * math.log(2) * df["n_bytes"]
    return df


# The project's scaling design (suites/scaling.yaml): five budgets ×2 apart, each encoder's
# 10-rung ladder of non-embedding parameters, and the harness's refusals — a point may read its
# 43.3 MB of training text at most 4 times and must train at least 200 steps of 32 KB.
PROJECT_BUDGETS = [8e12 * 2**k for k in range(5)]
PROJECT_LADDERS = {
    "byte": [0.010e6, 0.020e6, 0.033e6, 0.068e6, 0.12e6, 0.17e6, 0.25e6, 0.43e6, 0.62e6, 1.3e6],
    "token": [0.072e6, 0.11e6, 0.16e6, 0.25e6, 0.36e6, 0.48e6, 0.61e6, 0.92e6, 1.1e6, 1.9e6],
}
PROJECT_MAX_BYTES = 4 * 43.3e6
PROJECT_MIN_BYTES = 200 * 32768


def law_with_optimum(e: float, a: float, b: float, n_at: float, c_at: float, loss_at: float,
                     attn: float = 0.0) -> Law:
    """The law with exponents a, b and irreducible e whose compute-optimal N at compute
    ``c_at`` is ``n_at`` and whose frontier there is ``loss_at`` (C = 6ND)."""
    d_at = c_at / (6 * n_at)
    # at the optimum a·A·N^(−a) = b·B·D^(−b): the two terms split (loss_at − e) as b : a
    t_n = (loss_at - e) * b / (a + b)
    t_d = (loss_at - e) * a / (a + b)
    return Law(E=e, A=t_n * n_at**a, a=a, B=t_d * d_at**b, b=b, attn=attn)


# Byte-level behind at these budgets and steeper: the true frontiers cross near 1.6e16 FLOPs,
# two decades past the largest budget (an extrapolation, like the project's measured one)
PROJECT_LAWS = {
    "bytes": (law_with_optimum(0.8, 0.40, 0.34, 0.05e6, 8e12, 2.9), "byte"),
    "bpe-4096": (law_with_optimum(0.8, 0.30, 0.26, 0.2e6, 8e12, 2.3), "token"),
}


def project_results(laws: dict[str, tuple[Law, str]], noise_rel: float, seed: int,
                    budgets: list[float] | None = None) -> pd.DataFrame:
    """Clean results rows of the project's sweep design drawn from ``laws`` (C = 6ND), each
    loss times (1 + N(0, noise_rel²)); rungs the harness would refuse are left out."""
    rng = np.random.default_rng(seed)
    rows = []
    for enc, (law, unit) in laws.items():
        for c in budgets or PROJECT_BUDGETS:
            for i, n in enumerate(PROJECT_LADDERS[unit]):
                d = c / (6 * n)
                if not PROJECT_MIN_BYTES <= d <= PROJECT_MAX_BYTES:
                    continue
                loss = float(law.loss(np.array(n), np.array(d))) * (1 + rng.normal(0, noise_rel))
                base = dict(encoder=sweep_label(enc, c, f"s{i}"),
                            encoder_name="bpe" if unit == "token" else enc, seed=0,
                            dataset="heldout", fingerprint="synthetic:heldout", token_unit=unit,
                            flop_budget=c, model_size=f"s{i}", params_non_embedding=n,
                            train_bytes=d, train_flops=c, train_flops_full_attn=c * (1 + law.attn),
                            severity=0.0, perturbation_id="clean", perturbation="identity")
                rows += [dict(base, mode=m, bpb=loss) for m in ("full", "clean_target")]
    df = pd.DataFrame(rows)
    df["n_bytes"] = 1000.0
    df["nll_nats"] = df["bpb"] * math.log(2) * df["n_bytes"]
    return df


def project_truth(laws: dict[str, tuple[Law, str]] | None = None) -> dict[str, float]:
    """The quantities ``project_estimates`` reads, under PROJECT_LAWS (or ``laws``, same keys):
    frontier exponent α = ab/(a+b), N_opt exponent b/(a+b), the shared E, log10 of the C* where
    the frontiers cross."""
    laws = laws or PROJECT_LAWS
    (bl, _), (tl, _) = laws["bytes"], laws["bpe-4096"]
    return {"alpha bytes": bl.alpha, "alpha bpe-4096": tl.alpha, "a bytes": bl.b / (bl.a + bl.b),
            "a bpe-4096": tl.b / (tl.a + tl.b), "E": bl.E,
            "log10 C*": math.log10(crossing_true(bl, tl))}


def project_estimates(fit) -> dict[str, tuple[float, float, float]]:
    """name → (estimate, lo, hi) of ``fit`` (a ``reports.scaling.ScalingFit``) under the headline
    convention, for the names of ``project_truth``."""
    ex = fit.exponents[fit.exponents.convention == "half"].set_index("encoder")
    out = {}
    for enc in ("bytes", "bpe-4096"):
        r = ex.loc[enc]
        out[f"alpha {enc}"] = (r.alpha, r.alpha_lo, r.alpha_hi)
        out[f"a {enc}"] = (r.a, r.a_lo, r.a_hi)
    e = fit.irreducible[fit.irreducible.convention == "half"].iloc[0]
    out["E"] = (e.E, e.E_lo, e.E_hi)
    p = fit.parity[fit.parity.convention == "half"].iloc[0]
    out["log10 C*"] = tuple(math.log10(v) if v > 0 else math.nan
                            for v in (p.c_star, p.c_lo, p.c_hi))
    return out
