"""``scored_index``: the scored positions without ``nonzero``'s host sync, in nonzero's order,
so byte-level and BPE forwards compute the same NLL with the unit count from collation."""

from __future__ import annotations

import pytest
import torch

from encoders.backbone import BackboneConfig
from encoders.base import byte_unit_nll, collate_bytes, scored_index
from encoders.byte_baseline import ByteConfig, ByteEncoder


@pytest.mark.parametrize("shape,p", [((1, 1), 1.0), ((3, 7), 0.5), ((5, 40), 0.1), ((4, 9), 0.0), ((0, 5), 0.5)])
def test_scored_index_is_nonzero(shape: tuple[int, int], p: float) -> None:
    g = torch.Generator().manual_seed(sum(shape))
    mask = torch.rand(shape, generator=g) < p
    b, t = scored_index(mask, int(mask.sum()))
    rb, rt = mask.nonzero(as_tuple=True)
    assert torch.equal(b, rb) and torch.equal(t, rt)
    assert b.dtype == torch.long and t.dtype == torch.long


def test_a_wrong_unit_count_is_an_error_on_cpu() -> None:
    mask = torch.tensor([[True, False, True]])
    with pytest.raises(AssertionError, match="says 3 scored units, its targets hold 2"):
        scored_index(mask, 3)


def test_byte_forward_with_the_unit_count_equals_nonzero() -> None:
    torch.manual_seed(0)
    enc = ByteEncoder(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2))
    batch = collate_bytes([b"hello world", b"abc", b""], [2, 0, 0])
    assert batch.meta["units"] == batch.scored_bytes == 12
    logits = enc.logits(batch["inputs"])
    a = byte_unit_nll(logits, batch["targets"], batch.meta["units"])
    b = byte_unit_nll(logits, batch["targets"])
    for x, y in [(a.nll, b.nll), (a.window, b.window), (a.start, b.start), (a.end, b.end)]:
        assert torch.equal(x, y)
    assert torch.equal(enc(batch).nll, b.nll)
