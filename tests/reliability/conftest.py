"""Fixtures for the reliability tests: a tiny suite on text files written here (1-layer, 16-dim
byte model; a whole run takes about a second) and one finished run directory to damage."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # reliability_suite

from reliability_suite import make_suite  # noqa: E402


@pytest.fixture(scope="package")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(suite path, run directory) of one finished tiny run."""
    from harness.cli import main

    tmp = tmp_path_factory.mktemp("rel")
    suite = make_suite(tmp)
    assert main(["run", str(suite), "--out", str(tmp / "out"), "--quiet", "--no-report"]) == 0
    return suite, tmp / "out"


@pytest.fixture
def run_copy(finished: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the finished run directory (safe to damage)."""
    suite, out = finished
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    return suite, copy
