"""Plugins are code, and a broken one is named on one line: sys.exit() at import, an exception in
perturb() or fit(); ``module:Class`` is resolved only from sys.path and the folders the suite
declares in ``plugin_paths`` (default: the suite's own folder), never the working directory."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from harness.cli import main

HEADER = """\
from dataclasses import dataclass
import random, sys
from perturbations.base import Perturbation

"""
EXIT_AT_IMPORT = HEADER + "sys.exit(0)\n"
RAISES = HEADER + """\
@dataclass(kw_only=True)
class Boom(Perturbation):
    def perturb(self, text: str, rng: random.Random) -> str:
        raise RuntimeError("kaboom in perturb")


@dataclass(kw_only=True)
class BadFit(Perturbation):
    def fit(self, texts):
        raise KeyError("kaboom in fit")

    def perturb(self, text: str, rng: random.Random) -> str:
        return text


@dataclass(kw_only=True)
class Quits(Perturbation):
    def perturb(self, text: str, rng: random.Random) -> str:
        sys.exit(3)
"""


@pytest.fixture
def suite_with(tmp_path: Path):  # type: ignore[no-untyped-def]
    from reliability_suite import SUITE, make_suite

    def make(module: str, source: str, target: str) -> Path:
        (tmp_path / f"{module}.py").write_text(source)
        text = SUITE.replace("  - {name: case.upper, severity: 1.0}", f"  - {{name: '{module}:{target}', severity: 1.0}}")
        return make_suite(tmp_path, text)

    yield make
    for m in ("tb_rel_exit", "tb_rel_raises", "tb_rel_killed"):
        sys.modules.pop(m, None)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("tokbench: error:")]
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("command", ["validate", "run"])
def test_sys_exit_at_import_is_one_line(command: str, suite_with, tmp_path: Path,  # type: ignore[no-untyped-def]
                                        capsys: pytest.CaptureFixture[str]) -> None:
    suite = suite_with("tb_rel_exit", EXIT_AT_IMPORT, "X")
    args = [command, str(suite)] + (["--out", str(tmp_path / "o"), "--quiet"] if command == "run" else [])
    assert main(args) == 2
    line = _one_line(capsys)
    assert "'tb_rel_exit:X'" in line and "called sys.exit(0)" in line


@pytest.mark.parametrize("target,needle", [
    ("Boom", "plugin 'Boom' (tb_rel_raises:Boom) failed in perturb() on document"),
    ("BadFit", "plugin 'BadFit' (tb_rel_raises:BadFit) failed in fit(): KeyError"),
    ("Quits", "plugin 'Quits' (tb_rel_raises:Quits) failed in perturb() on document"),
])
@pytest.mark.parametrize("ahead", ["0", "1"])
def test_plugin_raising_is_one_line(target: str, needle: str, ahead: str, suite_with, tmp_path: Path,  # type: ignore[no-untyped-def]
                                    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The same one line whether the perturbations are fitted and tried here or in the
    plan-ahead process (``harness.overlap.planahead``), which hands its exception back with its type."""
    suite = suite_with("tb_rel_raises", RAISES, target)
    capsys.readouterr()
    on = "true" if ahead == "1" else "false"
    assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--quiet", "--no-report",
                 "--set", f"overlap.plan_ahead={on}"]) == 2
    assert needle in _one_line(capsys)
    if ahead == "0":  # caught before training (harness.pipeline.plans.try_perturbations)
        assert not list((tmp_path / "o").glob("models/*.pt"))
    else:  # caught at the latest when the first model is trained, before any scoring
        assert not list((tmp_path / "o").glob("cells/*.json"))


KILLED = HEADER + """\
import os, signal

MAIN = os.getpid()  # imported by the run itself, before the perturbation processes fork


@dataclass(kw_only=True)
class Killed(Perturbation):
    def perturb(self, text: str, rng: random.Random) -> str:
        if os.getpid() != MAIN:  # in a perturbation process: killed, as by the out-of-memory killer
            os.kill(os.getpid(), signal.SIGKILL)
        return text
"""


def test_a_killed_perturbation_process_is_one_line(suite_with, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.data.batchscore

    monkeypatch.setattr(harness.data.batchscore, "usable_cpus", lambda: 2)  # processes even on one CPU
    monkeypatch.setenv("TOKBENCH_STALL_SECONDS", "60")  # a death gone unnoticed fails, not hangs
    suite = suite_with("tb_rel_killed", KILLED, "Killed")
    capsys.readouterr()
    assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--quiet", "--no-report"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("tokbench: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert re.fullmatch(r"tokbench: error: perturbation: worker \d \(pid \d+\) died \(exit code -9\) "
                        r"before sending its result", lines[0]), lines[0]


def test_working_directory_is_not_searched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from reliability_suite import SUITE, make_suite

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "tb_rel_cwd.py").write_text(RAISES.replace("kaboom", "planted"))
    suite_dir = tmp_path / "suite"
    suite_dir.mkdir()
    text = SUITE.replace("  - {name: case.upper, severity: 1.0}", "  - {name: 'tb_rel_cwd:Boom', severity: 1.0}")
    suite = make_suite(suite_dir, text)
    monkeypatch.chdir(cwd)
    try:
        assert main(["validate", str(suite)]) == 2
        line = _one_line(capsys)
        assert f"not in the folders searched: {suite_dir.resolve()};" in line
        assert "plugin_paths" in line
        suite.write_text(text + "plugin_paths: [../cwd]\n")  # declared: now it is found
        assert main(["validate", str(suite), "--no-memory-check"]) == 0
    finally:
        sys.modules.pop("tb_rel_cwd", None)
