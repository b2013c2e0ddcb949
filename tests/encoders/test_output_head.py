"""OutputHead: fp32 logits when scoring under autocast, the plain Linear everywhere else."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from encoders.backbone import OutputHead
from encoders.byte_baseline import ByteConfig, ByteEncoder


def _head() -> tuple[OutputHead, torch.Tensor]:
    torch.manual_seed(0)
    head = OutputHead(64, 256, bias=False)
    x = torch.randn(3, 5, 64) * 4.0  # logits of a few units: bf16 rounding is visible there
    return head, x


def test_scoring_under_autocast_is_float32_exactly(monkeypatch) -> None:  # noqa: ANN001
    import encoders.backbone as bb

    head, x = _head()
    monkeypatch.setattr(bb, "SCORE_HEAD", "fp32")
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        y = head(x)
    assert y.dtype == torch.float32
    assert torch.equal(y, F.linear(x, head.weight))  # the fp32 product, not a rounded one


def test_training_under_autocast_keeps_the_autocast_linear() -> None:
    head, x = _head()
    plain = nn.Linear(64, 256, bias=False)
    plain.load_state_dict(head.state_dict())  # same parameters, same keys
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y, ref = head(x), plain(x)
    assert y.dtype == torch.bfloat16 and torch.equal(y, ref)
    y.float().sum().backward()
    assert head.weight.grad is not None


def test_without_autocast_it_is_nn_linear() -> None:
    head, x = _head()
    with torch.inference_mode():
        assert torch.equal(head(x), F.linear(x, head.weight))
    # bf16 rounding of the autocast path is what the fp32 path removes: check it is real here
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        rounded = F.linear(x, head.weight)
    assert (rounded.float() - F.linear(x, head.weight)).abs().max() > 1e-3


def test_encoders_use_it_and_checkpoints_keep_their_keys() -> None:
    enc = ByteEncoder(ByteConfig(dim=32), None)
    assert isinstance(enc.head, OutputHead)
    assert "head.weight" in enc.state_dict()


def test_mixed_head_rounds_the_operands_not_the_logits(monkeypatch) -> None:  # noqa: ANN001
    """"mixed": logits from bf16-rounded x and weights, summed and returned in float32."""
    import encoders.backbone as bb

    head, x = _head()
    monkeypatch.setattr(bb, "SCORE_HEAD", "mixed")
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        y = head(x)
    assert y.dtype == torch.float32 and y.shape == (3, 5, 256)
    ref = x.bfloat16().double() @ head.weight.bfloat16().double().t()  # exact products, f64 sums
    assert (y.double() - ref).abs().max() < 1e-4
    # the logits themselves are not rounded: most are not bf16 numbers (bf16 logits all are)
    assert (y.bfloat16().float() != y).float().mean() > 0.9
    assert not torch.equal(y, F.linear(x, head.weight))  # and it is not the float32 product


def test_bf16_and_unknown_score_heads(monkeypatch) -> None:  # noqa: ANN001
    import pytest

    import encoders.backbone as bb

    head, x = _head()
    monkeypatch.setattr(bb, "SCORE_HEAD", "bf16")
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        y = head(x)
        assert y.dtype == torch.bfloat16 and torch.equal(y, F.linear(x, head.weight))
    monkeypatch.setattr(bb, "SCORE_HEAD", "fp16")
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(ValueError, match="fp16"):
        head(x)
    with torch.inference_mode():  # no autocast: nn.Linear whatever the mode
        assert torch.equal(head(x), F.linear(x, head.weight))


def test_split_head_is_the_default_and_near_float32(monkeypatch) -> None:  # noqa: ANN001
    """"split": three bf16 products of the operands' high and low parts, summed in float32 — about
    16 significant bits per operand: ~100x closer to the exact product than "mixed" rounding."""
    import encoders.backbone as bb

    assert bb.SCORE_HEAD == "split"
    head, x = _head()
    w = head.weight.detach()
    exact = x.double() @ w.double().t()  # float64: the reference
    errs = {}
    for mode in ("split", "mixed", "fp32"):
        monkeypatch.setattr(bb, "SCORE_HEAD", mode)
        with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
            y = head(x)
        assert y.dtype == torch.float32 and y.shape == (3, 5, 256)
        errs[mode] = float((y.double() - exact).abs().max())
    scale = float(exact.abs().max())
    # hand bound: each product's operands carry <= 2^-17 relative error each, the dropped lo·lo
    # term <= 2^-18 — summed over 64 terms of |x||w| <= 64 · max|x| · max|w|
    bound = 64 * float(x.abs().max() * w.abs().max()) * (2**-17 + 2**-17 + 2**-18)
    assert errs["split"] <= bound
    assert errs["split"] < errs["mixed"] / 50  # mixed keeps 8 bits, split about 16
    assert errs["split"] < 1e-5 * scale
    assert errs["fp32"] <= errs["split"]


def test_split_parts_hold_the_value_to_16_bits() -> None:
    from encoders.backbone import _split_bf16, _split_bf16_product_fp32

    torch.manual_seed(1)
    t = torch.randn(1000) * torch.logspace(-3, 3, 1000)
    hi, lo = _split_bf16(t)
    assert hi.dtype == lo.dtype == torch.bfloat16
    assert torch.equal(hi, t.bfloat16())
    rel = ((hi.double() + lo.double()) - t.double()).abs() / t.double().abs()
    assert float(rel.max()) <= 2.0**-16
    assert float(((hi.double() - t.double()).abs() / t.double().abs()).max()) > 2.0**-12  # hi alone is coarse
    # the product of exactly-representable operands (lo parts zero) is the float32 product
    a, b = torch.randn(4, 8).bfloat16().float(), torch.randn(3, 8).bfloat16().float()
    assert torch.allclose(_split_bf16_product_fp32(a, b), a @ b.t(), rtol=0, atol=1e-6)
