"""``compile_backbones`` asks for batch and length symbolic from the first call
(``Backbone.dynamic_shapes``; ``harness.infra.accel.COMPILE_DYNAMIC = False`` keeps torch's static-first). Marking
is a hint to the compiler only: the eager forward computes the same numbers with it on. One tiny
block is compiled and trained at three lengths (≈ 20 s on 2 cores; the bug it guards against
crashed the first BPE model of an H200 run); benchmarks/compile_reuse.py measures what reuse saves."""

from __future__ import annotations

import shutil
import time

import pytest
import torch

from encoders import backbone
from encoders.backbone import Backbone, BackboneConfig, attention_in_graph
from harness.infra.accel import compile_backbones, compile_clock, compile_since


def test_compile_backbones_sets_dynamic_shapes_and_the_switch_keeps_static(monkeypatch: pytest.MonkeyPatch) -> None:
    m = torch.nn.Sequential(Backbone(BackboneConfig(layers=1, dim=16, heads=2)))
    assert m[0].dynamic_shapes is False  # eager until compiled
    assert compile_backbones(m) == 2  # one block and the final norm
    assert m[0].dynamic_shapes is True
    import harness.infra.accel

    monkeypatch.setattr(harness.infra.accel, "COMPILE_DYNAMIC", False)
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
def test_compiled_blocks_train_at_a_length_other_than_the_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled backbone (symbolic batch and length) trained at N = 64, then 40 and 48, as BPE's
    token counts vary, then at 64 again: with attention inside the graph at every length, the
    compiled backward asserted the attention output's stride of N = 64 and raised at N = 40.
    Attention leaves the graph at lengths other than the first (``attention_in_graph``); the
    gradients must match the eager model's (same weights) at every length."""
    monkeypatch.setattr(backbone, "_FIRST_TRAINED_LENGTH", [])
    torch.manual_seed(0)
    cfg = BackboneConfig(layers=1, dim=64, heads=2)
    eager = Backbone(cfg)
    compiled = Backbone(cfg)
    compiled.load_state_dict(eager.state_dict())
    assert compile_backbones(torch.nn.Sequential(compiled)) == 2
    clock0, t0 = compile_clock(), time.perf_counter()
    for n in (64, 40, 48, 64):
        x = torch.randn(2, n, 64)
        grads = []
        for m in (eager, compiled):
            xi = x.clone().requires_grad_(True)
            m(xi).square().mean().backward()
            grads.append(xi.grad)
        torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-5)
    # the compile clock saw the compiles, and no more time than passed (caches warm or cold)
    spent = compile_since(clock0)
    assert 0.0 < spent["graph"] <= time.perf_counter() - t0
    assert spent["kernels"] == 0.0  # no FuzzyTok kernel here


def test_attention_leaves_the_graph_only_when_training_at_another_length(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backbone, "_FIRST_TRAINED_LENGTH", [])
    with torch.no_grad():
        assert attention_in_graph(40)  # scoring: no backward, no fault; sets nothing
    assert attention_in_graph(1024)  # the first training length is the one the graph keeps
    assert not attention_in_graph(688) and attention_in_graph(1024)
    with torch.no_grad():
        assert attention_in_graph(688)


def test_blt_entropy_model_stays_eager() -> None:
    """BLT's entropy model runs in the collation thread (FLOP counts patch each batch) while the
    main thread may trace a compile; a compiled module called then raises, so it is not compiled."""
    from encoders.blt.model import BltConfig, BltEncoder

    enc = BltEncoder(BltConfig(patching="entropy", entropy_layers=1, entropy_dim=16, entropy_heads=2),
                     BackboneConfig(layers=1, dim=16, heads=2))
    compile_backbones(enc)
    assert enc.entropy_model is not None and enc.entropy_model.backbone is not None
    assert all(getattr(b, "_compiled_call_impl", None) is None for b in enc.entropy_model.backbone.blocks)
    assert enc.entropy_model.backbone.dynamic_shapes is False
    assert any(getattr(m, "_compiled_call_impl", None) is not None for m in enc.modules())


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="inductor on CPU needs a C++ compiler")
def test_attention_out_of_the_graph_compiles_once_for_every_later_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where attention leaves the graph (lengths other than the first), the block's rest compiles
    symbolic at the first such length and serves every later length and batch: no graph is added
    after it. Broken inside the attention module, the rest compiled static first and again at the
    next shape (10 graphs where 4 serve, a 3-4 s recompile at a BPE model's second step on an H200)."""
    from torch._dynamo.utils import counters

    monkeypatch.setattr(backbone, "_FIRST_TRAINED_LENGTH", [])
    torch._dynamo.reset()  # graphs compiled by the tests before serve any Backbone of equal width
    torch.manual_seed(0)
    m = Backbone(BackboneConfig(layers=2, dim=64, heads=2))
    compile_backbones(torch.nn.Sequential(m))
    graphs = []
    for b, n in ((2, 64), (2, 40), (2, 48), (3, 56), (2, 40), (2, 33)):
        m(torch.randn(b, n, 64, requires_grad=True)).square().mean().backward()
        graphs.append(counters["stats"]["unique_graphs"])
    assert graphs[1] > graphs[0]  # the out-of-graph path compiled at its first length ...
    assert graphs[2:] == [graphs[1]] * 4  # ... and nothing after it
