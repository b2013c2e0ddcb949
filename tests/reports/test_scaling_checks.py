"""reports/scaling.py: what the scaling fits refuse to report.

1. Underdetermined fits: a frontier L(C) = E + A·C^(−α) (shared E) is reported only when every
   encoder in it has ≥ 3 budgets and there are more vertices than parameters; allocation
   exponents and robustness slopes need ≥ 3 budgets. Otherwise they are NaN, with a note and a
   "missing" parity row — never a number with an interval.
2. Pooling across runs: the same grid point from two runs with different results (or different
   eval / training text) is refused; identical copies are counted once with a note; distinct seeds
   of one grid pool.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))

from synthetic_scaling import Law, sweep_results  # noqa: E402
from test_scaling_fit import BPE, BYTES  # noqa: E402 - the same laws as the fit's tests

from reports.load import load_run, merge_runs  # noqa: E402
from reports.scaling import (  # noqa: E402
    PoolingError,
    fit_scaling,
    frontier_design,
    pool_points,
    sweep_rows,
    with_train_part_bytes,
)
from reports.scaling_report import scaling_section  # noqa: E402

LAWS = {"bytes": (BYTES, "byte"), "bpe": (BPE, "token")}
BUDGETS = [1e15 * 10 ** (k / 2) for k in range(5)]
ROB = {"bytes": (0.10, -0.02), "bpe": (0.30, 0.015)}


def _all_nan(s: pd.Series) -> bool:
    return bool(np.all(np.isnan(s.to_numpy(float))))


# --- 1. underdetermined fits -------------------------------------------------------------------


def test_frontier_design_rule() -> None:
    encs, why = frontier_design({"a": 2, "b": 2})
    assert encs == [] and "3 budgets" in why
    assert frontier_design({"a": 3, "b": 3})[0] == ["a", "b"]  # 6 points > 5 parameters
    encs, why = frontier_design({"a": 3})  # 3 points, 3 parameters: exactly determined
    assert encs == [] and "underdetermined" in why and "3 compute-optimal points for 3" in why
    assert frontier_design({"a": 4})[0] == ["a"]
    assert frontier_design({"a": 5, "b": 2})[0] == ["a"]  # b left out, a alone has 5 > 3


def test_two_budgets_report_no_frontier_exponents_or_parity() -> None:
    # The audit's case: 4 vertices for 5 parameters gave α with CIs ~2× off the truth.
    df = sweep_results(LAWS, BUDGETS[:2], n_sizes=5, noise=0.002, perturbation=ROB)
    fit = fit_scaling(df, n_boot=20)
    assert len(fit.optima) == 4  # the per-budget vertices are still reported
    for col in ("alpha", "alpha_lo", "alpha_hi", "lnA", "a", "a_lo", "a_hi", "b", "b_lo", "b_hi"):
        assert _all_nan(fit.exponents[col]), col
    for col in ("E", "E_lo", "E_hi"):
        assert _all_nan(fit.irreducible[col]), col
    assert set(fit.parity.status) == {"missing"} and _all_nan(fit.parity.c_star)
    assert _all_nan(fit.parity.c_lo) and _all_nan(fit.parity.c_hi)
    assert all("too few budgets" in s for s in fit.parity.statement)
    assert _all_nan(fit.robustness.slope) and _all_nan(fit.robustness.slope_lo)
    # one note per encoder, not one per FLOP convention
    assert sum("fewer than the 3" in n for n in fit.notes) == 2
    assert not any("irreducible loss E sits" in n for n in fit.notes)
    assert all(not fr.alpha and math.isnan(fr.e) for fr in fit.frontier["heldout"].values())
    assert fit.bands["heldout"] == {"half": {}, "full": {}}


def test_two_budgets_section_shows_dashes(tmp_path: Path) -> None:
    df = sweep_results(LAWS, BUDGETS[:2], n_sizes=5, noise=0.002)
    sec = scaling_section(df, tmp_path / "figures", n_boot=5)
    assert sec is not None
    exps = next(t for t in sec.tables if t.key == "scaling_exponents")
    for row in exps.rows:
        assert row[3].startswith("—"), row  # α
        assert row[5].startswith("—"), row  # E
    assert "too few budgets" in sec.markdown and "fewer than the 3" in sec.markdown


def test_three_budgets_two_encoders_fit() -> None:
    fit = fit_scaling(sweep_results(LAWS, BUDGETS[:3], n_sizes=5), n_boot=0)
    assert np.isfinite(fit.exponents.alpha.to_numpy(float)).all()
    assert np.isfinite(fit.exponents.a.to_numpy(float)).all()
    assert set(fit.parity.status) <= {"crossing", "outside", "parallel"}


def test_lone_encoder_needs_four_budgets() -> None:
    one = {"bytes": LAWS["bytes"]}
    three = fit_scaling(sweep_results(one, BUDGETS[:3], n_sizes=5), n_boot=0)
    assert _all_nan(three.exponents.alpha) and _all_nan(three.irreducible.E)
    assert np.isfinite(three.exponents.a.to_numpy(float)).all()  # a line through 3 points is fine
    assert any("no compute-optimal frontier fitted" in n and "3 compute-optimal points for 3" in n
               for n in three.notes)
    four = fit_scaling(sweep_results(one, BUDGETS[:4], n_sizes=5), n_boot=0)
    assert np.isfinite(four.exponents.alpha.to_numpy(float)).all()


def test_encoder_short_of_budgets_is_left_out_alone() -> None:
    df = sweep_results(LAWS, BUDGETS, n_sizes=5)
    df = df[(df.encoder_name != "bpe") | (df.flop_budget <= BUDGETS[1])]  # bpe: 2 budgets
    fit = fit_scaling(df, n_boot=0)
    exp = fit.exponents[fit.exponents.convention == "half"].set_index("encoder")
    assert math.isfinite(exp.alpha["bytes"]) and math.isnan(exp.alpha["bpe"])
    assert math.isnan(exp.a["bpe"]) and math.isfinite(exp.a["bytes"])
    assert set(fit.parity.status) == {"missing"}
    assert all("bpe: 2 budget(s)" in s for s in fit.parity.statement)


# --- 2. pooling across runs --------------------------------------------------------------------


def _write(root: Path, name: str, df: pd.DataFrame) -> Path:
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    df.to_csv(d / "results.csv", index=False)
    return d


def test_same_grid_different_data_is_refused(tmp_path: Path) -> None:
    # The audit's case: two directories with the same grid labels, E 0.6 vs 1.1, same eval text.
    other = {k: (Law(E=1.1, A=v.A, a=v.a, B=v.B, b=v.b, attn=v.attn), u)
             for k, (v, u) in LAWS.items()}
    a = _write(tmp_path, "runA", sweep_results(LAWS, BUDGETS, n_sizes=5))
    b = _write(tmp_path, "runB", sweep_results(other, BUDGETS, n_sizes=5))
    merged = merge_runs([load_run(a), load_run(b)]).results
    with pytest.raises(PoolingError, match="more than once with different results"):
        fit_scaling(merged, n_boot=0)
    sec = scaling_section(merged, None, n_boot=0)
    assert sec is not None and sec.fit.empty and not sec.tables and not sec.figures
    assert "Scaling fits refused" in sec.markdown and "runA, runB" in sec.markdown
    assert "Scaling fits refused" in str(sec.html)


def test_rerun_of_one_budget_with_other_results_is_refused(tmp_path: Path) -> None:
    df = sweep_results(LAWS, BUDGETS, n_sizes=5, noise=0.002, seed=1)
    # the first budget re-trained into a second directory: same labels, other noise draw
    again = sweep_results(LAWS, BUDGETS[:1], n_sizes=5, noise=0.002, seed=2)
    merged = merge_runs([load_run(_write(tmp_path, "all", df)),
                         load_run(_write(tmp_path, "b0", again))]).results
    with pytest.raises(PoolingError, match="10 grid point"):
        fit_scaling(merged, n_boot=0)


def test_identical_copies_are_counted_once(tmp_path: Path) -> None:
    df = sweep_results(LAWS, BUDGETS, n_sizes=5, noise=0.002)
    a = _write(tmp_path, "x", df)
    b = _write(tmp_path, "y", df[df.flop_budget == BUDGETS[0]])  # one budget given twice
    single = fit_scaling(load_run(a).results, n_boot=0)
    fit = fit_scaling(merge_runs([load_run(a), load_run(b)]).results, n_boot=0)
    assert (fit.optima.n_points == 5).all()
    want = single.exponents.alpha.to_numpy()
    assert fit.exponents.alpha.to_numpy() == pytest.approx(want, rel=1e-12)
    assert any("counted once" in n and "runs x, y" in n for n in fit.notes)


def test_distinct_seeds_of_one_grid_pool(tmp_path: Path) -> None:
    s0 = sweep_results(LAWS, BUDGETS, n_sizes=5, noise=0.002, seed=0)
    s1 = sweep_results(LAWS, BUDGETS, n_sizes=5, noise=0.002, seed=1).assign(seed=1)
    fit = fit_scaling(merge_runs([load_run(_write(tmp_path, "s0", s0)),
                                  load_run(_write(tmp_path, "s1", s1))]).results, n_boot=0)
    assert (fit.optima.n_points == 10).all() and not any("counted once" in n for n in fit.notes)


def test_different_training_text_is_refused() -> None:
    df = sweep_results(LAWS, BUDGETS, n_sizes=5)
    enc = {lb: {"scaling": {"train_fingerprint": "sha256:aaa" if "1e15" in lb else "sha256:bbb"}}
           for lb in df.encoder.unique()}
    with pytest.raises(PoolingError, match="2 different training texts"):
        fit_scaling(with_train_part_bytes(df, enc), n_boot=0)
    same = {lb: {"scaling": {"train_fingerprint": "sha256:aaa"}} for lb in df.encoder.unique()}
    assert not fit_scaling(with_train_part_bytes(df, same), n_boot=0).empty


def test_different_eval_text_under_one_name_is_refused() -> None:
    # Concatenated without merge_runs (which would rename the eval sets apart): the fit checks too.
    a = sweep_results(LAWS, BUDGETS[:3], n_sizes=5, fingerprint="sha256:one")
    b = sweep_results(LAWS, BUDGETS[3:], n_sizes=5, fingerprint="sha256:two")
    with pytest.raises(PoolingError, match="eval set heldout has 2 different fingerprints"):
        fit_scaling(pd.concat([a, b], ignore_index=True), n_boot=0)


def test_model_keys_decide_between_copy_and_different_model() -> None:
    df = sweep_results(LAWS, BUDGETS[:3], n_sizes=5)
    twice = pd.concat([df.assign(run="p", model_key="k1"), df.assign(run="q", model_key="k1")],
                      ignore_index=True)
    rows, notes = pool_points(sweep_rows(twice))
    assert len(rows) == len(df) and len(notes) == 1
    clash = pd.concat([df.assign(run="p", model_key="k1"), df.assign(run="q", model_key="k2")],
                      ignore_index=True)
    with pytest.raises(PoolingError, match="runs p, q"):
        pool_points(sweep_rows(clash))


def test_model_key_from_run_json() -> None:
    res = pd.DataFrame({"encoder": ["r/b@1e15:s0"] * 2, "seed": [0, 1], "train_bytes": [1.0, 1.0]})
    enc = {"r/b@1e15:s0": {"seeds": {"0": {"key": "abc"}, "1": {"key": "def"}}}}
    assert with_train_part_bytes(res, enc)["model_key"].tolist() == ["abc", "def"]
