"""Fixtures: a small synthetic run directory and one report rendered from it (shared, so the
figures are drawn once per test session)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # synthetic_run, report_cdp

from synthetic_run import write_synthetic_run  # noqa: E402

FAST = dict(n_boot=200, n_perm=2000)  # enough resamples to exercise the code, quick on 2 cores


@pytest.fixture(scope="session")
def synthetic_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_synthetic_run(tmp_path_factory.mktemp("run") / "synthetic")


@pytest.fixture(scope="session")
def rendered(synthetic_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from reports import render_run

    return render_run(synthetic_run, tmp_path_factory.mktemp("report"), **FAST)


@pytest.fixture
def make_run(tmp_path: Path):
    """make_run(name, **options) -> a fresh synthetic run directory (see write_synthetic_run)."""

    def make(name: str = "run", **kw) -> Path:
        return write_synthetic_run(tmp_path / name, **kw)

    return make
