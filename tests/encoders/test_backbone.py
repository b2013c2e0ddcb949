"""The shared backbone: causal, and its analytic FLOP count equals PyTorch's FLOP counter."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from encoders.backbone import Backbone, BackboneConfig, backbone_flops


@pytest.mark.parametrize("layers,dim,heads,B,N", [(1, 16, 2, 2, 9), (2, 32, 4, 3, 40), (3, 48, 6, 1, 64)])
def test_flops_match_torch_flop_counter(layers: int, dim: int, heads: int, B: int, N: int) -> None:
    cfg = BackboneConfig(layers=layers, dim=dim, heads=heads)
    m = Backbone(cfg)
    x = torch.randn(B, N, dim)
    # The math SDPA path is plain matmuls the counter sees (on CPU the fused SDPA kernel is not
    # counted by torch 2.13's FlopCounterMode; both compute the full QK^T and AV products).
    with FlopCounterMode(display=False) as fc, sdpa_kernel(SDPBackend.MATH):
        m(x)
    assert fc.get_total_flops() == backbone_flops(cfg, B, N)


def test_backbone_is_causal() -> None:
    torch.manual_seed(0)
    m = Backbone(BackboneConfig(layers=2, dim=32, heads=4)).eval()
    x = torch.randn(1, 20, 32)
    y = m(x)
    x2 = x.clone()
    x2[:, 12:] = torch.randn(1, 8, 32)
    y2 = m(x2)
    assert torch.allclose(y[:, :12], y2[:, :12], atol=1e-6)
    assert not torch.allclose(y[:, 12:], y2[:, 12:])


def test_causal_attention_cost_halves_only_the_attention_matmuls() -> None:
    from encoders.backbone import causal_attention_cost

    cfg = BackboneConfig(layers=3, dim=32, heads=4)
    full = backbone_flops(cfg, 2, 50)
    with causal_attention_cost(0.5):
        half = backbone_flops(cfg, 2, 50)
    # QK^T and AV: 2 matmuls x 2 FLOPs per MAC x n^2 x d per layer and sequence; half of it goes
    assert full - half == 0.5 * 3 * 2 * (2 * 2 * 50 * 50 * 32)
    assert backbone_flops(cfg, 2, 50) == full  # the context is restored on exit
