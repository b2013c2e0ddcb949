"""Autouse fixtures of the harness.config tests: fake plugins registered, cwd = tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_fixtures import (
    FakeAnalysis,
    FakeEncoder,
    FakeSource,
    FakeTypo,
)

from encoders.registry import REGISTRY as ENCODERS
from harness.analyses.registry import REGISTRY as ANALYSES
from perturbations.registry import REGISTRY as PERTURBATIONS
from sources.registry import REGISTRY as SOURCES


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENCODERS, "fake", FakeEncoder)
    monkeypatch.setitem(SOURCES, "fake_src", FakeSource)
    monkeypatch.setitem(PERTURBATIONS, "fake.typo", FakeTypo)
    monkeypatch.setitem(ANALYSES, "fake_an", FakeAnalysis)



@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # messages show paths relative to the working directory
    monkeypatch.chdir(tmp_path)


