"""Fake plugins, the base suite text and helpers shared by the harness.config tests."""

from __future__ import annotations

import random
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from encoders.base import Encoder
from harness.analyses.base import Analysis
from harness.config import (
    ConfigError,
    load_suite,
)
from perturbations.base import Perturbation
from sources.base import Source

# ---------------------------------------------------------------------------------------------
# Fake plugins, registered per test (the real encoders are written in parallel)


@dataclass(frozen=True, kw_only=True)
class FakeConfig:
    """vocab_size: tokens. dilations: conv dilations. kind: a or b. scale: a float knob."""

    vocab_size: int = 256
    dilations: tuple[int, ...] = (1, 2)
    kind: Literal["a", "b"] = "a"
    scale: float = 1.0
    tag: str | None = None

    def __post_init__(self) -> None:
        if any(d <= 0 for d in self.dilations):
            raise ValueError(f"dilations must be positive, got {list(self.dilations)}")


class FakeEncoder(Encoder):
    Config = FakeConfig


@dataclass(frozen=True, kw_only=True)
class FakeSource(Source):
    """text: the one document. repeat: copies."""

    text: str = "hello"
    repeat: int = 1


@dataclass(kw_only=True)
class FakeTypo(Perturbation):
    """severity: fraction of words. keys: keyboard layout."""

    keys: Literal["qwerty", "azerty"] = "qwerty"
    words: tuple[str, ...] = ()

    def perturb(self, text: str, rng: random.Random) -> str:
        return text

    def __post_init__(self) -> None:
        if self.severity > 1:
            raise ValueError(f"severity is a fraction of words, at most 1, got {self.severity}")


@dataclass(frozen=True, kw_only=True)
class FakeAnalysis(Analysis):
    bins: int = 3




# Line numbers below refer to this text: keep it in step with the assertions.
BASE = """\
name: demo
seeds: [0, 1]
data:
  train: {source: fake_src, text: abc}
  eval:
    - {name: same, source: fake_src}
    - name: other
      source: fake_src
      language: de
budget:
  train_bytes: 100000
  context_bytes: 128
  batch_bytes: 1024
  lr: 3e-4
backbone: {layers: 1, dim: 32, heads: 2}
encoders:
  - bytes
  - name: fake
    vocab_size: [512, 1024]
    dilations: [1, 2, 4]
perturbations:
  - name: fake.typo
    severity: [0.1, 0.5]
"""


def write(tmp_path: Path, text: str, name: str = "suite.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p



def err(tmp_path: Path, text: str, *overrides: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_suite(path.name, overrides)
    msg = str(e.value)
    assert "\n" not in msg
    return msg

