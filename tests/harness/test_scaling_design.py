"""benchmarks/scaling_design.py: the L(N, D) fit recovers a known law, and the IsoFLOP optimum
matches the closed form."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "scaling_design.py"
_spec = importlib.util.spec_from_file_location("scaling_design", _PATH)
assert _spec is not None and _spec.loader is not None
sd = importlib.util.module_from_spec(_spec)
sys.modules["scaling_design"] = sd  # dataclasses resolve their module while it executes
_spec.loader.exec_module(sd)


def synthetic_points(laws: dict[str, object]) -> list:
    """Three IsoFLOP lines x four sizes per encoder (C = 6 N D), BPB drawn from the laws."""
    pts = []
    for enc, law in laws.items():
        for c in (1e14, 4e14, 1.6e15):
            for n in (1e6, 3e6, 1e7, 3e7):
                d = c / (6 * n)
                pts.append(sd.Point(enc, c, f"n{n:g}", n, d, float(law(n, d))))
    return pts


def test_fit_recovers_a_noise_free_law_with_shared_e() -> None:
    truth = {"bytes": sd.Law(0.9, math.log(0.5), 0.4, math.log(0.8), 0.3),
             "bpe": sd.Law(0.9, math.log(0.3), 0.5, math.log(0.6), 0.35)}
    fit = sd.fit_law(synthetic_points(truth), "shared_E")
    assert fit.rms() < 1e-4
    for enc, t in truth.items():
        got = fit.laws[enc]
        assert got.e == pytest.approx(t.e, abs=0.01)
        assert got.a == pytest.approx(t.a, abs=0.02) and got.b == pytest.approx(t.b, abs=0.02)


def test_fixed_exponents_are_held_and_e_is_shared() -> None:
    truth = {"bytes": sd.Law(0.9, math.log(0.5), 0.4, math.log(0.8), 0.3),
             "bpe": sd.Law(0.9, math.log(0.3), 0.5, math.log(0.6), 0.35)}
    fit = sd.fit_law(synthetic_points(truth), "fixed_exp")
    assert {(w.a, w.b) for w in fit.laws.values()} == {(sd.CHINCHILLA_A, sd.CHINCHILLA_B)}
    assert fit.laws["bytes"].e == fit.laws["bpe"].e
    assert fit.n_params == 5


def test_isoflop_optimum_matches_the_closed_form() -> None:
    # FLOPs per byte = k N exactly, so D = C / (k N) and
    # N_opt = (a A / (b B)) ** (1 / (a + b)) * (C / k) ** (b / (a + b)) in the law's units.
    law = sd.Law(1.0, math.log(0.4), 0.35, math.log(0.9), 0.3)
    k = 8.0
    ns = np.array([1e5, 1e6, 1e7])
    for c in (1e13, 1e15):
        n_opt, d_opt, l_opt = sd.optimum(law, c, ns, k * ns)
        a_coef = math.exp(law.log_a_coef) * sd.N0 ** law.a
        b_coef = math.exp(law.log_b_coef) * sd.D0 ** law.b
        want = (law.a * a_coef / (law.b * b_coef)) ** (1 / (law.a + law.b)) * (c / k) ** (law.b / (law.a + law.b))
        assert n_opt == pytest.approx(want, rel=0.01)
        assert d_opt == pytest.approx(c / (k * n_opt), rel=1e-9)
        assert l_opt == pytest.approx(float(law(n_opt, d_opt)), rel=1e-12)
