"""``compile_backbones`` asks for batch and length symbolic from the first call
(``Backbone.dynamic_shapes``; ``TOKBENCH_COMPILE_DYNAMIC=0`` keeps torch's static-first). Marking
is a hint to the compiler only: the eager forward computes the same numbers with it on. Compiling
itself is not run here (minutes on CPU); benchmarks/compile_reuse.py measures what it saves."""

from __future__ import annotations

import pytest
import torch

from encoders.backbone import Backbone, BackboneConfig
from harness.accel import compile_backbones


def test_compile_backbones_sets_dynamic_shapes_and_the_switch_keeps_static(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKBENCH_COMPILE_DYNAMIC", raising=False)
    m = torch.nn.Sequential(Backbone(BackboneConfig(layers=1, dim=16, heads=2)))
    assert m[0].dynamic_shapes is False  # eager until compiled
    assert compile_backbones(m) == 2  # one block and the final norm
    assert m[0].dynamic_shapes is True
    monkeypatch.setenv("TOKBENCH_COMPILE_DYNAMIC", "0")
    other = Backbone(BackboneConfig(layers=1, dim=16, heads=2))
    compile_backbones(other)
    assert other.dynamic_shapes is False


@pytest.mark.parametrize("causal", [True, False])
def test_marking_changes_no_number_in_eager(causal: bool) -> None:
    torch.manual_seed(0)
    m = Backbone(BackboneConfig(layers=2, dim=16, heads=2), causal=causal)
    x = torch.randn(3, 11, 16)
    valid = torch.arange(11)[None, :] < torch.tensor([11, 7, 4])[:, None]
    plain = m(x, valid)
    m.dynamic_shapes = True
    assert torch.equal(m(x, valid), plain)
