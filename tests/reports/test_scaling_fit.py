"""reports/scaling.py: synthetic sweeps from L(N, D) = E + A/N^a + B/D^b fitted back.

Truth: frontier exponent α = ab/(a+b), N_opt ∝ C^(b/(a+b)), D_opt ∝ C^(a/(a+b)), the shared E,
and the C where the two true frontiers cross (bisection on the closed-form frontier).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from synthetic_scaling import Law, crossing_true, sweep_results  # noqa: E402

from reports.scaling import (  # noqa: E402
    Group,
    base_label,
    budget_tag,
    fit_scaling,
    profile_optimum,
    sweep_label,
)

# Byte-level: steeper frontier, worse at small compute; BPE ahead until ~3e16 FLOPs (half
# convention). Attention adds 25 % (bytes) / 5 % (bpe) to the FLOPs under the full convention.
BYTES = Law(E=0.6, A=40.0, a=0.34, B=80.0, b=0.30, attn=0.25)
BPE = Law(E=0.6, A=20.0, a=0.30, B=25.0, b=0.24, attn=0.05)
BUDGETS = [1e15 * 10 ** (k / 2) for k in range(7)]  # 1e15 … 1e18, half a decade apart
LAWS = {"bytes": (BYTES, "byte"), "bpe-1024": (BPE, "token")}
ROB = {"bytes": (0.10, -0.02), "bpe-1024": (0.30, 0.015)}  # ΔBPB = Δ0 + slope·log10(C/1e15)


def _row(df: pd.DataFrame, **kw: object) -> pd.Series:
    m = np.ones(len(df), bool)
    for k, v in kw.items():
        m &= (df[k] == v).to_numpy()
    assert m.sum() == 1, kw
    return df[m].iloc[0]


@pytest.fixture(scope="module")
def exact():
    return fit_scaling(sweep_results(LAWS, BUDGETS, perturbation=ROB), n_boot=60, seed=0)


@pytest.fixture(scope="module")
def noisy():
    return fit_scaling(sweep_results(LAWS, BUDGETS, noise=0.002, seed=3, perturbation=ROB), n_boot=200, seed=0)


def test_labels_round_trip() -> None:
    assert budget_tag(3e14) == "3e14" and budget_tag(1.25e15) == "1.25e15"
    lab = sweep_label("bpe-4096", 3e14, "s2")
    assert lab == "bpe-4096@3e14:s2" and base_label(lab) == "bpe-4096"
    assert base_label("runA/bytes@1e15:s0") == "runA/bytes"


def test_noise_free_recovers_the_law(exact) -> None:
    for enc, (law, _) in LAWS.items():
        for conv in ("half", "full"):
            r = _row(exact.exponents, encoder=enc, convention=conv)
            assert r.alpha == pytest.approx(law.alpha, rel=0.01)          # ab/(a+b)
            assert r.a == pytest.approx(law.b / (law.a + law.b), abs=0.01)  # N_opt ∝ C^a
            assert r.b == pytest.approx(law.a / (law.a + law.b), abs=0.01)  # D_opt ∝ C^b
    for conv in ("half", "full"):
        assert _row(exact.irreducible, convention=conv).E == pytest.approx(0.6, abs=0.005)
    assert (exact.optima.edge == "").all()


def test_noise_free_parity_point_both_conventions(exact) -> None:
    half = _row(exact.parity, convention="half")
    full = _row(exact.parity, convention="full")
    true_half = crossing_true(BYTES, BPE)
    true_full = crossing_true(BYTES, BPE, 1 + BYTES.attn, 1 + BPE.attn)
    assert half.status == "crossing" and full.status == "crossing"
    assert half.c_star == pytest.approx(true_half, rel=0.05)
    assert full.c_star == pytest.approx(true_full, rel=0.05)
    # Counting attention at full cost taxes the long byte sequences more: parity moves up.
    assert full.c_star > 2 * half.c_star
    assert half.leader_low == "bpe-1024"
    assert "reaches bpe-1024" in half.statement


def test_noisy_fit_within_tolerance_and_cis_cover_truth(noisy) -> None:
    for enc, (law, _) in LAWS.items():
        r = _row(noisy.exponents, encoder=enc, convention="half")
        assert r.alpha == pytest.approx(law.alpha, rel=0.10)
        assert r.alpha_lo <= law.alpha <= r.alpha_hi
        assert r.a == pytest.approx(law.b / (law.a + law.b), abs=0.05)
    irr = _row(noisy.irreducible, convention="half")
    assert irr.E == pytest.approx(0.6, abs=0.05) and irr.E_lo <= 0.6 <= irr.E_hi
    par = _row(noisy.parity, convention="half")
    true_c = crossing_true(BYTES, BPE)
    assert par.status == "crossing"
    assert abs(math.log10(par.c_star / true_c)) < 0.5          # within half a decade
    assert par.c_lo <= true_c <= par.c_hi


def test_robustness_slope_per_decade(exact, noisy) -> None:
    for fit in (exact, noisy):
        for enc, (_, slope) in ROB.items():
            r = _row(fit.robustness, encoder=enc, perturbation="typo@0.1")
            assert r.slope == pytest.approx(slope, abs=1e-3)
            assert r.slope_lo <= slope + 1e-9 and slope - 1e-9 <= r.slope_hi


def test_no_crossing_in_range_is_said_plainly() -> None:
    # BPE ahead at every budget; the fitted frontiers would only meet decades above them.
    far = Law(E=0.6, A=20.0, a=0.30, B=15.0, b=0.24)
    fit = fit_scaling(sweep_results({"bytes": (BYTES, "byte"), "bpe": (far, "token")}, BUDGETS), n_boot=20)
    par = _row(fit.parity, convention="half")
    true_c = crossing_true(BYTES, far)
    assert true_c > 1e20
    assert par.status == "outside" and par.decades_outside > 2
    assert par.c_star == pytest.approx(true_c, rel=0.3)
    assert par.statement.startswith("No crossing within the fitted range")
    assert "extrapolation" in par.statement and par.frac_inside == 0.0


def test_minimum_on_the_ladder_edge_is_flagged() -> None:
    # One fixed ladder for every budget: the optimum of the largest budgets lies above it.
    lad = list(BYTES.n_opt(1e15) * np.exp(np.linspace(-1.5, 2.0, 6)))
    fit = fit_scaling(sweep_results({"bytes": (BYTES, "byte")}, BUDGETS, ladder="fixed", fixed_ladder=lad),
                      n_boot=0)
    edge = fit.optima.set_index("budget").edge
    assert edge[BUDGETS[0]] == ""
    assert edge[BUDGETS[-1]] == "above"
    top = fit.optima.set_index("budget").n_opt[BUDGETS[-1]]
    assert top == pytest.approx(max(lad))  # clamped into the ladder
    assert any("flagged" in n for n in fit.notes)


def test_profile_without_curvature_is_flagged_flat() -> None:
    # concave profile (c2 < 0): no vertex to trust, the best observed point is kept and flagged
    g = Group("x", 1e15, np.log([1e6, 2e6, 4e6, 8e6]), np.array([1.0, 1.5, 1.6, 1.0]), np.zeros(4),
              {"half": np.zeros(4), "full": np.zeros(4)})
    o = profile_optimum(g)
    assert o.edge == "flat" and o.loss == 1.0


def test_old_results_without_sweep_columns_give_an_empty_fit() -> None:
    df = pd.DataFrame({"encoder": ["bytes"], "seed": [0], "dataset": ["d"], "perturbation_id": ["clean"],
                       "mode": ["full"], "n_bytes": [10.0], "nll_nats": [7.0], "bpb": [1.0]})
    assert fit_scaling(df, n_boot=10).empty


def test_irreducible_loss_on_its_bound_is_said(exact) -> None:
    # Pure power laws (E = 0): the shared E lands on its lower bound and the report says what
    # that leaves unfitted; the E = 0.6 laws above fit E inside its bounds and say nothing.
    zero = {k: (Law(E=0.0, A=v.A, a=v.a, B=v.B, b=v.b), kind) for k, (v, kind) in LAWS.items()}
    fit = fit_scaling(sweep_results(zero, BUDGETS), n_boot=0)
    assert float(fit.irreducible.E.max()) < 1e-3
    said = [n for n in fit.notes if "irreducible loss E sits on its lower bound, 0" in n]
    assert len(said) == 2  # both FLOP conventions
    assert not any("irreducible" in n for n in exact.notes)


def test_law_over_every_point_recovers_the_truth(exact, noisy) -> None:
    # L(N, D) = E + A/N^a + B/D^b fitted to every ladder point (one E shared): the synthetic
    # points are drawn from exactly that law, so E, a and b come back; with noise, inside the CI.
    for fit, tol_e, tol_x in ((exact, 1e-3, 1e-3), (noisy, 0.05, 0.05)):
        law = fit.law.set_index("encoder")
        for enc, (truth, _) in LAWS.items():
            r = law.loc[enc]
            assert r.E == pytest.approx(truth.E, abs=tol_e)
            assert r.A == pytest.approx(truth.A, rel=10 * tol_x) and r.B == pytest.approx(truth.B, rel=10 * tol_x)
            assert r.a == pytest.approx(truth.a, abs=tol_x) and r.b == pytest.approx(truth.b, abs=tol_x)
            assert r.n_points == 7 * 7  # seven budgets, seven ladder points each
    r = noisy.law.set_index("encoder").loc["bytes"]
    assert r.E_lo <= BYTES.E <= r.E_hi and r.a_lo <= BYTES.a <= r.a_hi
