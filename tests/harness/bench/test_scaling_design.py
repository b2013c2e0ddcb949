"""benchmarks/scaling_design.py: the L(N, D) fit recovers a known law, and the IsoFLOP optimum
matches the closed form."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bench_script import load_benchmark

from reports.scaling import CHINCHILLA_A, CHINCHILLA_B

sd = load_benchmark("scaling_design")


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
    assert {(w.a, w.b) for w in fit.laws.values()} == {(CHINCHILLA_A, CHINCHILLA_B)}
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


def _time_model() -> object:
    """A step-time model with hand-set numbers: bytes ms/step = 2 + 4·layers at 16 KB, measured
    rows at 2 and 4 layers (fastest 9 ms), largest positive residual 1.5 ms, 0.5 ms batch wait."""
    return sd.TimeModel(coef={"bytes": (2.0, 4.0)}, resid_ms={"bytes": [1.5, -1.5]},
                        rows={"bytes": [(2, 9.0), (4, 19.0)]}, first_step_s=0.3, setup_s=0.5,
                        steps_factor={"bytes": 1.0}, score_s_per_model=1.0, fixed_s=15.0, data_s=4.0,
                        train_part_bytes=20_000_000, bpe_fit_s=3.0, batch_bytes=16_384,
                        wait_ms={"bytes": 0.5}, gpu_tflops=35.0)


def test_step_time_at_the_measured_batch_is_the_fit() -> None:
    tm = _time_model()
    assert tm.ms("bytes", 3, 1e7, 16_384) == pytest.approx(14.0)
    # a smaller batch saves nothing: the host cost is per step
    assert tm.ms("bytes", 3, 1e7, 8_192) == pytest.approx(14.0)
    # pessimistic at the measured batch: + the 1.5 ms residual; a 1-layer rung floors at 9 ms
    assert tm.ms("bytes", 3, 1e7, 16_384, pessimistic=True) == pytest.approx(15.5)
    assert tm.ms("bytes", 1, 1e7, 16_384, pessimistic=True) == pytest.approx(9.0 + 1.5)


def test_step_time_of_a_larger_batch_adds_the_extra_gpu_work() -> None:
    tm = _time_model()
    # 16 KB more at 1e7 FLOPs/byte = 1.6384e11 FLOPs; at 35 TFLOP/s 4.681 ms, at 17.5 9.362 ms
    assert tm.ms("bytes", 3, 1e7, 32_768) == pytest.approx(14.0 + 1.6384e11 / 35e12 * 1e3)
    # pessimistic: + residual 1.5 + the 0.5 ms wait scaled to the doubled batch (one more 0.5)
    assert tm.ms("bytes", 3, 1e7, 32_768, pessimistic=True) == pytest.approx(
        14.0 + 1.5 + 0.5 + 1.6384e11 / 17.5e12 * 1e3)
    # data loading scales with the train part: 2.2x the text adds 1.2 x 4 s
    assert tm.fixed(44_000_000) == pytest.approx(15.0 + 4.0 * 1.2)
    assert tm.fixed(10_000_000) == pytest.approx(15.0)


def test_optimum_extrapolates_by_the_whole_ladder_slope() -> None:
    # Two first rungs of almost equal N but different FLOPs per byte (BPE's 1 x 32 and 2 x 32,
    # whose N is mostly the output head) must not set the slope below the ladder: FLOPs per byte
    # = k N at the other rungs, so the whole-ladder slope (1.0 here up to the perturbed first
    # rung) extrapolates as k N and the optimum of a law whose optimum lies below the ladder is
    # the closed form's.
    law = sd.Law(1.0, math.log(0.4), 0.35, math.log(0.9), 0.3)
    k = 8.0
    ns = np.array([1e6, 1.02e6, 1e7, 1e8])
    fpb = k * ns
    fpb[1] *= 1.5  # the second rung: 2 % more N, 50 % more FLOPs per byte
    c = 5e12  # optimum below the first rung (inside the searched range, ladder min / 30 up)
    n_opt, _, _ = sd.optimum(law, c, ns, fpb)
    a_coef = math.exp(law.log_a_coef) * sd.N0 ** law.a
    b_coef = math.exp(law.log_b_coef) * sd.D0 ** law.b
    want = (law.a * a_coef / (law.b * b_coef)) ** (1 / (law.a + law.b)) * (c / k) ** (law.b / (law.a + law.b))
    assert ns[0] / 30 < want < ns[0] / 3
    assert n_opt == pytest.approx(want, rel=0.02)
