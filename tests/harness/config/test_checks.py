"""harness.config.checks: value ranges and cross-field rules."""

from __future__ import annotations

from pathlib import Path

import pytest
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


def test_idle_steps_is_a_pair_of_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    with_idle = BASE.replace("  lr: 3e-4\n", "  lr: 3e-4\n  idle_steps: [20, 40]\n")
    assert load_suite(write(tmp_path, with_idle).name).budget.idle_steps == (20, 40)
    assert load_suite(write(tmp_path, BASE).name, ["budget.idle_steps=[0,5]"]).budget.idle_steps == (0, 5)
    assert load_suite(write(tmp_path, BASE).name).budget.idle_steps is None
    for value, message in [
        ("[40, 20]", "must be [first, last] with 0 <= first < last, got a list [40, 20]"),
        ("[-1, 5]", "must be [first, last] with 0 <= first < last, got a list [-1, 5]"),
        ("[20]", "expected a list of 2 items, got 1"),
        ("'20:40'", "expected a list of ints or null, got '20:40'"),
    ]:
        text = BASE.replace("  lr: 3e-4\n", f"  lr: 3e-4\n  idle_steps: {value}\n")
        assert err(tmp_path, text) == f"suite.yaml:15: budget.idle_steps: {message}"
    # from the command line: one line, exit status 2
    write(tmp_path, BASE)
    capsys.readouterr()
    assert main(["validate", str(tmp_path / "suite.yaml"), "--set", "budget.idle_steps=[3,3]"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "tokbench: error: --set budget.idle_steps=[3,3]: budget.idle_steps: must be [first, last] with "
        "0 <= first < last, got a list [3, 3]")
