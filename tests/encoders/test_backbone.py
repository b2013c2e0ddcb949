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


# -- the step's op diet (issue #16): same numbers as the textbook forms, fewer ops ------------

def _textbook_rope(x: torch.Tensor, n: int, head_dim: int, base: float) -> torch.Tensor:
    """RoPE as the backbone computed it before the op diet: (n, hd/2) tables made per call,
    channels (2j, 2j+1) rotated as x₁·c − x₂·s, x₁·s + x₂·c and interleaved back."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(n, dtype=torch.float32), inv)
    c, s = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)


def _textbook_forward(m: Backbone, x: torch.Tensor) -> torch.Tensor:
    """The causal backbone's forward as written before: q, k, v split and viewed one by one, q
    and k rotated one by one, RoPE tables made per forward; the modules' own weights."""
    B, N, C = x.shape
    H = m.cfg.heads
    for blk in m.blocks:
        h = blk.norm1(x)
        q, k, v = blk.attn.qkv(h).split(C, dim=2)
        q, k, v = (t.view(B, N, H, C // H).transpose(1, 2) for t in (q, k, v))
        q, k = (_textbook_rope(t, N, C // H, m.cfg.rope_base) for t in (q, k))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + blk.attn.proj(y.transpose(1, 2).reshape(B, N, C))
        x = x + blk.out(torch.nn.functional.gelu(blk.fc(blk.norm2(x))))
    return m.norm(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("shape", [(2, 3, 17, 16), (2, 4, 4, 128, 16), (1, 1, 1, 2), (3, 2, 33, 64)])
def test_apply_rope_is_the_textbook_rotation_bit_for_bit(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    from encoders.backbone import apply_rope, rope_cache

    g = torch.Generator().manual_seed(len(shape) * 100 + shape[-2])
    x = torch.randn(shape, generator=g).to(dtype)
    n, hd = shape[-2], shape[-1]
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = _textbook_rope(a, n, hd, 10000.0)
    got = apply_rope(b, *rope_cache(n, hd, 10000.0, torch.device("cpu")))
    grad = torch.randn(shape, generator=g).to(dtype)
    want.backward(grad)
    got.backward(grad)
    assert torch.equal(got, want) and torch.equal(b.grad, a.grad)


def test_rope_rotates_a_pair_by_the_position_angle() -> None:
    from encoders.backbone import apply_rope, rope_cache

    # head_dim 4: pair 0 turns by t rad, pair 1 by t / 100 rad (base 10000) at position t
    cos, sin = rope_cache(3, 4, 10000.0, torch.device("cpu"))
    x = torch.tensor([[1.0, 0.0, 0.0, 1.0]]).expand(3, 4)
    y = apply_rope(x, cos, sin)
    t = torch.arange(3, dtype=torch.float32)
    want = torch.stack([t.cos(), t.sin(), -(t / 100).sin(), (t / 100).cos()], dim=1)
    assert torch.allclose(y, want, atol=1e-6)


@pytest.mark.parametrize("layers,dim,heads", [(2, 64, 4), (3, 48, 3), (1, 32, 1)])
def test_backbone_forward_and_gradients_equal_the_textbook_forward(layers: int, dim: int, heads: int) -> None:
    torch.manual_seed(0)
    m = Backbone(BackboneConfig(layers=layers, dim=dim, heads=heads))
    for B, N in [(4, 32), (3, 129), (1, 1), (2, 40)]:  # 129 after 32: a longer table; 1, 40: views
        g = torch.Generator().manual_seed(B * 1000 + N)
        x = torch.randn(B, N, dim, generator=g)
        grad = torch.randn(B, N, dim, generator=g)
        runs = []
        for forward in (_textbook_forward, Backbone.forward):
            m.zero_grad(set_to_none=True)
            xi = x.clone().requires_grad_()
            y = forward(m, xi)
            y.backward(grad)
            runs.append((y, xi.grad, [p.grad for p in m.parameters()]))
        (y0, gx0, gp0), (y1, gx1, gp1) = runs
        assert torch.equal(y1, y0) and torch.equal(gx1, gx0)
        assert all(torch.equal(a, b) for a, b in zip(gp1, gp0))


def test_rope_tables_are_made_once_and_sliced_for_shorter_lengths() -> None:
    from encoders.backbone import rope_cache

    m = Backbone(BackboneConfig(layers=1, dim=32, heads=2))
    cpu = torch.device("cpu")
    with torch.inference_mode():  # first made while scoring ...
        c40, s40 = m.rope(40, cpu)
    c10, _ = m.rope(10, cpu)
    assert m.rope(40, cpu)[0] is c40 and m.rope(10, cpu)[0] is c10  # cached, not remade
    assert c10.untyped_storage().data_ptr() == c40.untyped_storage().data_ptr()  # a view
    for n in (10, 40, 41):
        want = rope_cache(n, 16, 10000.0, cpu)
        assert all(torch.equal(a, b) for a, b in zip(m.rope(n, cpu), want))
    # ... and still usable in training: not inference tensors, so autograd can save them
    assert not c40.is_inference()
    x = torch.randn(1, 40, 32, requires_grad=True)
    m(x).sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())


def test_a_replaced_rope_table_stays_alive() -> None:
    """A CUDA graph captured at one length reads that table's memory on every replay without
    holding it: a longer length later must not free it (BPE stacks crashed with an illegal memory
    access when it did)."""
    import gc
    import weakref

    m = Backbone(BackboneConfig(layers=1, dim=32, heads=2))
    cpu = torch.device("cpu")
    c40, _ = m.rope(40, cpu)
    ptr, table = c40.untyped_storage().data_ptr(), weakref.ref(c40)
    del c40
    m.rope(100, cpu)
    m.rope(300, cpu)
    gc.collect()
    assert table() is not None and table().untyped_storage().data_ptr() == ptr  # type: ignore[union-attr]
    assert len(m._rope_superseded) == 2  # the 40- and 100-row tables


def test_cudnn_first_attention_is_the_same_call_and_traces_without_a_break() -> None:
    """``_sdpa_cudnn_first`` only reorders the backends: where cuDNN cannot run (here: CPU) the
    same math kernel gives the same numbers, and the priority context stays inside one graph."""
    from encoders.backbone import _sdpa, _sdpa_cudnn_first

    g = torch.Generator().manual_seed(5)
    qkv = torch.randn(2, 24, 3, 2, 8, generator=g)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))  # the backbone's layout
    assert torch.equal(_sdpa_cudnn_first(q, k, v, None, True, 0.0), _sdpa(q, k, v, None, True, 0.0))
    ex = torch._dynamo.explain(_sdpa_cudnn_first)(q, k, v, None, True, 0.0)
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_fixed_mode_leaves_cudnn_out_of_every_other_attention_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the "fixed" mode the plain path (scoring, varying lengths) runs with cuDNN excluded —
    the same numbers where cuDNN cannot run anyway (CPU) — and still traces into one graph."""
    import torch.nn.attention as attention

    import encoders.backbone as backbone

    g = torch.Generator().manual_seed(6)
    qkv = torch.randn(2, 24, 3, 2, 8, generator=g)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    plain = backbone._sdpa(q, k, v, None, True, 0.0)
    asked: list[list[SDPBackend]] = []
    real = attention.sdpa_kernel

    def spy(backends, *a, **kw):  # type: ignore[no-untyped-def]
        asked.append(list(backends))
        return real(backends, *a, **kw)

    monkeypatch.setattr(attention, "sdpa_kernel", spy)
    monkeypatch.setattr(backbone, "CUDNN_FIXED", True)
    assert torch.equal(backbone._sdpa(q, k, v, None, True, 0.0), plain)
    assert asked and SDPBackend.CUDNN_ATTENTION not in asked[-1] and SDPBackend.FLASH_ATTENTION in asked[-1]
    monkeypatch.setattr(attention, "sdpa_kernel", real)
    ex = torch._dynamo.explain(backbone._sdpa)(q, k, v, None, True, 0.0)
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_the_backbone_asks_for_cudnn_only_in_compiled_training_on_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    import encoders.backbone as backbone

    seen: list[object] = []
    real = backbone.CausalSelfAttention.forward

    def spy(self, x, cos, sin, valid=None, in_graph=True):  # type: ignore[no-untyped-def]
        seen.append(in_graph)
        return real(self, x, cos, sin, valid, in_graph)

    monkeypatch.setattr(backbone.CausalSelfAttention, "forward", spy)
    monkeypatch.setattr(backbone, "CUDNN_FIXED", True)
    monkeypatch.setattr(backbone, "_FIRST_TRAINED_LENGTH", [])  # this test's first length stays its own
    monkeypatch.setattr(backbone, "FIRST_LENGTH_LISTENERS", [])
    m = Backbone(BackboneConfig(layers=1, dim=16, heads=2))
    m(torch.randn(1, 4, 16))
    m.dynamic_shapes = True  # as compile_backbones marks it; on CPU the tensors are not CUDA
    m(torch.randn(1, 4, 16))
    assert seen == [True, True]  # never "cudnn" off CUDA


@pytest.mark.parametrize("causal", [True, False])
def test_both_attention_layouts_give_the_same_numbers(causal: bool) -> None:
    """``split_qkv``'s two layouts (position-major inside compiled graphs, head-major eager):
    the same attention output and gradients bit for bit (CPU, the math backend)."""
    from encoders.backbone import split_qkv

    m = Backbone(BackboneConfig(dim=48, heads=3))
    cos, sin = m.rope(37, torch.device("cpu"))
    g = torch.Generator().manual_seed(9)
    base = torch.randn(3, 37, 3, 3, 16, generator=g)
    valid = torch.ones(3, 37, dtype=torch.bool)
    valid[1, 30:] = False
    mask = None if causal else valid[:, None, None, :]
    grad = torch.randn(3, 3, 37, 16, generator=g)
    runs = []
    for position_major in (True, False):
        qkv = base.clone().requires_grad_()
        q, k, v = split_qkv(qkv, cos, sin, position_major)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        y.backward(grad)
        runs.append((y, qkv.grad))
    (y0, g0), (y1, g1) = runs
    assert torch.equal(y0, y1) and torch.equal(g0, g1)


def test_compiled_blocks_use_the_position_major_layout_and_agree_with_eager() -> None:
    """Traced, attention takes the position-major layout (eager: head-major); the compiled
    block's output and gradients equal the eager block's within float rounding (CPU inductor)."""
    import encoders.backbone as backbone

    seen: list[bool] = []
    real = backbone.split_qkv

    def spy(qkv, cos, sin, position_major):  # type: ignore[no-untyped-def]
        seen.append(position_major)
        return real(qkv, cos, sin, position_major)

    torch.manual_seed(1)
    blk = backbone.Block(BackboneConfig(dim=32, heads=2))
    cos, sin = Backbone(BackboneConfig(dim=32, heads=2)).rope(16, torch.device("cpu"))
    x = torch.randn(2, 16, 32)
    try:
        backbone.split_qkv = spy
        ye = blk(x, cos, sin)
        torch._dynamo.reset()
        yc = torch.compile(blk, backend="aot_eager")(x, cos, sin)
    finally:
        backbone.split_qkv = real
        torch._dynamo.reset()
    assert seen[0] is False and seen[-1] is True
    assert torch.allclose(ye, yc, atol=1e-6)
