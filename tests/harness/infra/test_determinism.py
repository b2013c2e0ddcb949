"""``budget.deterministic``: the process's kernel switches inside a run and back after it, torch's
refusal of an op as one line (exit code 2), the model cache key, and run.json."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from test_run import make_suite

import encoders.backbone as backbone
from harness.cli import main
from harness.infra.determinism import (
    CUBLAS_ENV,
    CUBLAS_FIXED,
    NotDeterministic,
    deterministic_kernels,
    error_line,
)


def _switches() -> tuple[bool, bool, bool, str | None]:
    return (torch.are_deterministic_algorithms_enabled(), torch.backends.cudnn.deterministic,
            torch.backends.cudnn.benchmark, os.environ.get(CUBLAS_ENV))


def test_inside_on_and_back_after(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CUBLAS_ENV, raising=False)
    monkeypatch.setattr(backbone, "CUDNN_FIXED", True)  # as harness.infra.accel.attention_backends leaves it on CUDA
    torch.backends.cuda.enable_cudnn_sdp(True)
    before = _switches()
    with deterministic_kernels(True):
        assert _switches() == (True, True, False, CUBLAS_FIXED)
        assert not torch.backends.cuda.cudnn_sdp_enabled() and not backbone.CUDNN_FIXED
    assert _switches() == before and torch.backends.cuda.cudnn_sdp_enabled() and backbone.CUDNN_FIXED
    with deterministic_kernels(False):
        assert _switches() == before


def test_cudnn_attention_stays_off_under_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.infra.accel import attention_backends

    monkeypatch.setattr(backbone, "CUDNN_FIXED", False)
    sdp = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        with deterministic_kernels(True):
            assert attention_backends() == "0"  # as the compile-ahead process's runner sets it up
            assert not torch.backends.cuda.cudnn_sdp_enabled() and not backbone.CUDNN_FIXED
        assert attention_backends() == "fixed" and backbone.CUDNN_FIXED
    finally:
        torch.backends.cuda.enable_cudnn_sdp(sdp)


def test_a_workspace_setting_of_the_users_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CUBLAS_ENV, ":16:8")
    with deterministic_kernels(True):
        assert os.environ[CUBLAS_ENV] == ":16:8"
    assert os.environ[CUBLAS_ENV] == ":16:8"


def test_an_op_without_a_deterministic_kernel_is_one_line_naming_it() -> None:
    with pytest.raises(NotDeterministic) as got, deterministic_kernels(True):
        torch.zeros(4).put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))  # refused on the CPU too
    line = str(got.value)
    assert "\n" not in line and line.startswith("budget.deterministic: put_ has no deterministic implementation")
    assert "budget.deterministic: false" in line
    assert not torch.are_deterministic_algorithms_enabled()
    assert error_line(RuntimeError("CUDA out of memory")) is None
    with pytest.raises(RuntimeError, match="other"), deterministic_kernels(True):
        raise RuntimeError("other")  # not a refusal: as it was


def test_a_deterministic_run_keys_its_models_apart_and_says_so(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    suite, out = make_suite(tmp_path), tmp_path / "out"
    base = ["run", str(suite), "--out", str(out), "--quiet", "--no-report"]
    seen: list[bool] = []
    import harness.pipeline.run

    real = harness.pipeline.run.Runner._run

    def spy(self):  # noqa: ANN001, ANN202
        seen.append(torch.are_deterministic_algorithms_enabled())
        return real(self)

    monkeypatch.setattr(harness.pipeline.run.Runner, "_run", spy)
    assert main(base) == 0
    rows = (out / "results.csv").read_text()
    assert main([*base, "--set", "budget.deterministic=true"]) == 0
    assert seen == [False, True] and not torch.are_deterministic_algorithms_enabled()
    assert len(list((out / "models").glob("*.pt"))) == 2  # trained again under its own key
    assert (out / "results.csv").read_text() == rows  # the CPU was deterministic already
    assert json.loads((out / "run.json").read_text())["precision"]["deterministic"] is True


def test_an_op_refused_in_a_run_is_exit_2_and_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import harness.pipeline.run

    def refused(self):  # noqa: ANN001, ANN202
        torch.zeros(4).put_(torch.tensor([0, 0]), torch.tensor([1.0, 2.0]))

    monkeypatch.setattr(harness.pipeline.run.Runner, "_run", refused)
    code = main(["run", str(make_suite(tmp_path)), "--out", str(tmp_path / "o"), "--quiet", "--no-report",
                 "--set", "budget.deterministic=true"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith("tokbench: error: budget.deterministic: put_ has no deterministic implementation")
