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
