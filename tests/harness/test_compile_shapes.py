"""``compile_backbones`` asks for batch and length symbolic from the first call
(``Backbone.dynamic_shapes``; ``TOKBENCH_COMPILE_DYNAMIC=0`` keeps torch's static-first). Marking
is a hint to the compiler only: the eager forward computes the same numbers with it on. One tiny
block is compiled and trained at three lengths (≈ 20 s on 2 cores; the bug it guards against
crashed the first BPE model of an H200 run); benchmarks/compile_reuse.py measures what reuse saves."""

from __future__ import annotations

import shutil

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


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="inductor on CPU needs a C++ compiler")
def test_compiled_blocks_train_at_a_length_other_than_the_first() -> None:
    """A compiled backbone (symbolic batch and length) trained at N = 64, then 40 and 48, as BPE's
    token counts vary: before SDPA was kept out of the graph (``encoders.backbone._sdpa``), the
    compiled backward asserted the attention output's stride of N = 64 and raised at N = 40. The
    gradients must match the eager model's (same weights) at every length."""
    torch.manual_seed(0)
    cfg = BackboneConfig(layers=1, dim=64, heads=2)
    eager = Backbone(cfg)
    compiled = Backbone(cfg)
    compiled.load_state_dict(eager.state_dict())
    assert compile_backbones(torch.nn.Sequential(compiled)) == 2
    for n in (64, 40, 48):
        x = torch.randn(2, n, 64)
        grads = []
        for m in (eager, compiled):
            xi = x.clone().requires_grad_(True)
            m(xi).square().mean().backward()
            grads.append(xi.grad)
        torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-5)
