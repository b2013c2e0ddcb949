"""Values that used to pass ``validate`` and then crash or lie at run time are refused at validate
time on one line naming their key: a permutation block larger than a window, Monte Carlo samples
that cannot be scored in memory, non-finite numbers, learning rates that resolve to nothing,
dictionaries and FLOP budgets beyond any corpus, ladders too long to dry-run."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main

SCALING = """\
scaling:
  budgets: [1e6, 2e6, 4e6, 8e6, 1.6e7]
  ladder:
    - {name: s0, layers: 1, dim: 8, heads: 2}
    - {name: s1, layers: 1, dim: 12, heads: 2}
    - {name: s2, layers: 1, dim: 16, heads: 2}
    - {name: s3, layers: 2, dim: 8, heads: 2}
    - {name: s4, layers: 2, dim: 12, heads: 2}
  lr_ref_dim: 16
"""


def _line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines()
           if ln.startswith("tokbench: error:")]
    assert len(err) == 1, err
    return err[0]


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    from reliability_suite import make_suite

    return make_suite(tmp_path)


@pytest.fixture
def scaling_suite(tmp_path: Path) -> Path:
    from reliability_suite import SUITE, make_suite

    return make_suite(tmp_path, SUITE + SCALING)


def test_a_block_larger_than_a_window_is_refused(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # intra_block drew a fixed order of block_bytes positions: 1e9 took 24 GB before any check
    assert main(["validate", str(suite), "--set",
                 "permutations=[{kind: intra_block, block_bytes: 1000000000}]"]) == 2
    line = _line(capsys)
    assert "permutations[0].block_bytes: block_bytes (1,000,000,000) must be <= budget.context_bytes (64)" in line


def test_mc_samples_that_cannot_be_scored_are_refused(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 32 windows x 100,000 samples x 64 positions in one forward: ~560 GiB (a 26.6 GB allocation
    # traceback before); the memory guard covers scoring, not only training
    assert main(["validate", str(suite), "--set", "encoders[0]={name: bytes, objective: mdm}",
                 "--set", "eval.mc_samples=100000"]) == 2
    line = _line(capsys)
    assert "encoders[0] (bytes): scoring needs about" in line
    assert "eval.batch_windows 32 x eval.mc_samples 100000" in line and "lower eval.mc_samples" in line


def test_scoring_estimate_by_hand() -> None:
    from encoders.backbone import BackboneConfig
    from harness.infra.memory import score_estimate

    bb = BackboneConfig(layers=2, dim=32, heads=4, mlp_ratio=4)
    # weights 4 B x 1000 + 4 B x 8 rows x 64 positions x [(6 + 8)·32 + 2·256]
    assert score_estimate(1000, bb, 64, 8) == 4000 + 4 * 8 * 64 * (14 * 32 + 512)


def test_permutations_that_cannot_fit_are_refused(suite: Path) -> None:
    import torch

    from harness.config import load_suite
    from harness.infra.memory import MemoryTooLarge, check_suite_memory

    s = load_suite(suite, ["permutations=[global, {kind: inter_block, block_bytes: 8}]", "eval.modes=[full]",
                           "eval.stride_bytes=64"])
    with pytest.raises(MemoryTooLarge, match=r"permutations: 2 fixed order\(s\) of budget.context_bytes = 64"):
        check_suite_memory(s, torch.device("cpu"), limit=36 * 64 * 2 - 1)
    check_suite_memory(s, torch.device("cpu"), limit=10**9)


@pytest.mark.parametrize("override,key", [
    ("budget.lr=.nan", "budget.lr"),
    ("budget.lr=.inf", "budget.lr"),
    ("budget.grad_clip=1e400", "budget.grad_clip"),
    ("eval.context_fraction=.nan", "eval.context_fraction"),
    ("backbone.dropout=-.inf", "backbone.dropout"),
])
def test_non_finite_numbers_are_refused(override: str, key: str, suite: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(suite), "--set", override]) == 2
    assert f"{key}: expected a finite number, got " in _line(capsys)


def test_a_learning_rate_that_trains_nothing_is_refused(suite: Path, scaling_suite: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(suite), "--set", "budget.lr=1e-300"]) == 2
    assert "budget.lr: the learning rate is 1e-300; it must be finite and >= 1e-10" in _line(capsys)
    assert main(["validate", str(scaling_suite), "--set", "scaling.lr_width_power=.nan"]) == 2
    assert "scaling.lr_width_power: expected a finite number, got nan" in _line(capsys)
    # (16 / 8) ** -1e6 underflows to 0: trained silently to an untrained 8.0 bpb before
    assert main(["validate", str(scaling_suite), "--set", "scaling.lr_width_power=-1e6"]) == 2
    line = _line(capsys)
    assert "scaling.lr_width_power: the learning rate of ladder size 's0' (dim 8)" in line and "is 0;" in line
    # and the other way, (16 / 12) ** 1e6 overflows: refused, not an OverflowError
    assert main(["validate", str(scaling_suite), "--set", "scaling.lr_width_power=1e6"]) == 2
    assert "is inf; it must be finite" in _line(capsys)


def test_the_optimizer_refuses_a_dead_learning_rate() -> None:
    import dataclasses

    from torch import nn

    from harness.config.suite import BudgetConfig
    from harness.train.loop import make_optimizer

    b = dataclasses.replace(BudgetConfig(train_bytes=1000, context_bytes=8, batch_bytes=64), lr=0.0)
    with pytest.raises(ValueError, match="budget.lr: the learning rate is 0"):
        make_optimizer(nn.Linear(2, 2), b)


def test_a_dictionary_beyond_the_data_is_refused_with_its_key(suite: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(suite), "--set", "baselines={compressors: [deflate], dictionary_bytes: 1e12}"]) == 2
    assert "baselines.dictionary_bytes: must be <= 16,777,216, got 1e+12" in _line(capsys)
    # within the bound but 4,388 times the 3,646-byte train part: refused when the data is loaded,
    # before anything trains (it said "training data too small" after training)
    assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--quiet", "--no-report",
                 "--set", "baselines={compressors: [deflate], dictionary_bytes: 16000000}"]) == 2
    line = _line(capsys)
    assert "baselines.dictionary_bytes: the train part holds 3,646 bytes" in line
    assert not (tmp_path / "o" / "models").exists() or not any((tmp_path / "o" / "models").iterdir())


def test_absurd_flop_budgets_and_long_ladders_are_refused(scaling_suite: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(scaling_suite), "--set", "scaling.budgets=[1e40, 1e41, 1e42, 1e43, 1e44]"]) == 2
    assert "scaling.budgets: must be <= 1e+30, got 1e+40" in _line(capsys)
    ladder = ", ".join(f"{{name: s{i}, layers: 1, dim: {8 + 2 * i}, heads: 2}}" for i in range(2000))
    assert main(["validate", str(scaling_suite), "--set", f"scaling.ladder=[{ladder}]"]) == 2
    assert "scaling: ladder: at most 32 entries, got 2000" in _line(capsys)


def test_a_sweep_whose_every_point_is_refused_is_an_error(scaling_suite: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # 1e6-1.6e7 FLOPs buy at most one 512-byte step of these models: exit 0 with "(no results)" before
    assert main(["run", str(scaling_suite), "--out", str(tmp_path / "o"), "--quiet", "--no-report"]) == 2
    line = _line(capsys)
    assert "scaling: every point of the selected budgets was refused" in line
    assert "(first, bytes@1e6:s0: 1e+06 FLOPs buy" in line


def test_the_memory_guard_sizes_every_ladder_rung(scaling_suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the suite's own backbone is tiny; one rung of the sweep is ~8e11 parameters
    assert main(["validate", str(scaling_suite), "--set",
                 "scaling.ladder[4]={name: big, layers: 16, dim: 65536, heads: 512}"]) == 2
    line = _line(capsys)
    assert "encoders[0] (bytes@big): training needs about" in line and "but the CPU has" in line
