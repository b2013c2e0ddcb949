"""Absurd sizes are refused at validate time on one line (harness/config/bounds.py), and a model whose
training cannot fit the device is refused with the numbers (harness/infra/memory.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.infra.memory import (
    MemoryTooLarge,
    check_suite_memory,
    count_params,
    estimate_train_memory,
    train_estimate,
)


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    from reliability_suite import make_suite

    return make_suite(tmp_path)


def _line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not ln.startswith("tokbench: warning:")]
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("override,key", [
    ("backbone.layers=100000000000000000000", "backbone.layers"),
    ("backbone.dim=1000000", "backbone.dim"),
    ("backbone.heads=4096", "backbone.heads"),
    ("budget.train_bytes=1e300", "budget.train_bytes"),
    ("budget.context_bytes=1000000000", "budget.context_bytes"),
    ("budget.batch_bytes=100000000000", "budget.batch_bytes"),
    ("encoders[0]={name: bpe, vocab_size: 100000000}", "encoders[0].vocab_size"),
    ("perturbations[0].severity=1e9", "perturbations[0].severity"),
])
def test_absurd_size_is_one_line(override: str, key: str, suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(suite), "--set", override]) == 2
    line = _line(capsys)
    assert f"{key}: must be <= " in line and "got " in line


def test_model_too_large_for_the_device_is_refused_with_numbers(suite: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # within the schema bounds, but ~8e11 parameters: 13 TB of training state
    assert main(["validate", str(suite), "--set", "backbone.layers=16", "--set", "backbone.dim=65536",
                 "--set", "backbone.heads=512"]) == 2
    line = _line(capsys)
    assert "encoders[0] (bytes): training needs about" in line and "parameters" in line
    assert "but the CPU has" in line and "GiB" in line


def test_dry_run_refuses_too(suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(suite), "--dry-run", "--out", str(tmp_path / "o"), "--set", "backbone.layers=16",
                 "--set", "backbone.dim=65536", "--set", "backbone.heads=512"]) == 2
    assert "training needs about" in _line(capsys)


def test_estimate_by_hand() -> None:
    from encoders.backbone import BackboneConfig
    from harness.config.suite import BudgetConfig

    bb = BackboneConfig(layers=2, dim=32, heads=4, mlp_ratio=4)
    budget = BudgetConfig(train_bytes=10_000, context_bytes=64, batch_bytes=256, warmup_bytes=0)
    est = train_estimate(1000, bb, budget, vocab=256)
    assert (est.weights, est.grads, est.adamw) == (4000, 4000, 8000)
    # 4 windows x [2 layers x (13 + 8)·64·32 + 2·64·32 + 2·64·256] floats x 4 B
    per_window = 2 * 21 * 64 * 32 + 2 * 64 * 32 + 2 * 64 * 256
    assert est.activations == 4 * 4 * per_window
    assert estimate_train_memory(1000, bb, budget) == 16_000 + 16 * per_window


def test_meta_param_count_is_exact() -> None:
    from encoders.backbone import BackboneConfig
    from encoders.byte_baseline.model import ByteEncoder

    bb = BackboneConfig(layers=2, dim=32, heads=4)
    real = sum(p.numel() for p in ByteEncoder(ByteEncoder.Config(), bb).parameters())
    assert count_params(ByteEncoder, ByteEncoder.Config(), bb) == real


def test_check_suite_memory_limit(suite: Path) -> None:
    from harness.config import load_suite

    s = load_suite(suite)
    assert check_suite_memory(s, torch.device("cpu"), limit=10**12)[0].startswith("encoders[0] (bytes)")
    with pytest.raises(MemoryTooLarge, match=r"but the limit is 1\.0 MiB"):
        check_suite_memory(s, torch.device("cpu"), limit=2**20)


def test_catch_all_bound_spares_flop_budgets() -> None:
    from harness.config.bounds import bound_problem

    assert bound_problem("budgets", (1e15, 1.6e18)) is None  # a scaling sweep's FLOP budgets
    assert bound_problem("max_flops", 3e19) is None
    assert "absurdly large" in (bound_problem("window", 1.6e15) or "")
    assert bound_problem("layers", 12) is None and bound_problem("layers", 2048)


def test_micro_batches_shrink_the_activation_estimate() -> None:
    # Only one micro-batch's activations are alive at a time: 256-byte steps in 64-byte
    # micro-batches keep a quarter of the activations, and the same weight/optimizer state.
    from encoders.backbone import BackboneConfig
    from harness.config.suite import BudgetConfig

    bb = BackboneConfig(layers=2, dim=32, heads=4, mlp_ratio=4)
    whole = train_estimate(1000, bb, BudgetConfig(train_bytes=10_000, context_bytes=64, batch_bytes=256,
                                                  warmup_bytes=0))
    micro = train_estimate(1000, bb, BudgetConfig(train_bytes=10_000, context_bytes=64, batch_bytes=256,
                                                  warmup_bytes=0, micro_batch_bytes=64))
    assert micro.activations * 4 == whole.activations
    assert micro.weights + micro.grads + micro.adamw == whole.weights + whole.grads + whole.adamw
