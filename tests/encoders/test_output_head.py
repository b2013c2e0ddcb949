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


def test_scoring_under_autocast_is_float32_exactly() -> None:
    head, x = _head()
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
