"""harness.config.checks: value ranges and cross-field rules."""

from __future__ import annotations

from pathlib import Path

from config_fixtures import BASE, err, write

from harness.config import (
    load_suite,
)


def test_eval_ranges(tmp_path: Path) -> None:
    assert err(tmp_path, BASE + "eval: {context_fraction: 1.5}\n") == (
        "suite.yaml:24: eval.context_fraction: must be > 0 and < 1, got 1.5"
    )
    assert err(tmp_path, BASE + "eval:\n  target_bytes: 128\n") == (
        "suite.yaml:25: eval.target_bytes: target_bytes (128) must be < budget.context_bytes (128) "
        "so the scored window keeps some prefix context"
    )
    # target_bytes only matters for clean_target
    s = load_suite(write(tmp_path, BASE + "eval:\n  modes: [full]\n  target_bytes: 128\n").name)
    assert s.eval.modes == ("full",)
    assert err(tmp_path, BASE + "eval: {modes: [full, ful]}\n") == (
        "suite.yaml:24: eval.modes[1]: expected one of 'full', 'clean_target', got 'ful' (did you mean 'full'?)"
    )
    assert (
        err(tmp_path, BASE + "data_x: 1\n")
        == "suite.yaml:24: unknown key 'data_x' (did you mean 'data'?)"
    )


def test_fractions_leave_training_data(tmp_path: Path) -> None:
    text = BASE.replace("data:\n", "data:\n  valid_fraction: 0.5\n  test_fraction: 0.5\n")
    assert err(tmp_path, text) == (
        "suite.yaml:5: data.test_fraction: valid_fraction + test_fraction = 1 leaves no training documents"
    )
