"""``scored_index``: the scored positions without ``nonzero``'s host sync, in nonzero's order,
so byte-level and BPE forwards compute the same NLL with the unit count from collation."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from encoders.backbone import BackboneConfig
from encoders.base import (
    UNIT_POS,
    UNIT_WINDOW,
    TensorBatch,
    byte_unit_nll,
    collate_bytes,
    scored_index,
)
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


# -- the positions made at collation (``unit_index``): the forward finds nothing itself ----------

WINDOWS = [b"hello world, hello bytes", b"abc", b"", b"a longer window of text: tokens and bytes", b"x"]
SCORE_FROM = [2, 0, 0, 9, 1]


def _bpe() -> Any:
    import json
    from pathlib import Path

    from encoders.base import FitContext
    from encoders.bpe import BpeConfig, BpeEncoder

    docs = [p.read_bytes() for p in sorted(Path(json.__file__).parent.glob("*.py"))]
    torch.manual_seed(0)
    enc = BpeEncoder(BpeConfig(vocab_size=300), BackboneConfig(layers=1, dim=16, heads=2))
    enc.fit(FitContext(train_docs=lambda: iter(docs), train_bytes=20_000, context_bytes=64, seed=0,
                       device=torch.device("cpu"), train=lambda e, n: {}, log=lambda m: None))
    return enc


def _encoders() -> list[Any]:
    from encoders.blt import BltConfig, BltEncoder
    from encoders.fuzzytok import FuzzyTokConfig, FuzzyTokEncoder

    bb = BackboneConfig(layers=1, dim=16, heads=2)
    torch.manual_seed(0)
    return [ByteEncoder(ByteConfig(), bb), FuzzyTokEncoder(FuzzyTokConfig(dim=16, blocks=1), bb), _bpe(),
            BltEncoder(BltConfig(patching="space", local_dim=16, local_heads=2, ngram_sizes=(3,),
                                 ngram_table_size=32), bb)]


@pytest.mark.parametrize("enc", _encoders(), ids=lambda e: type(e).__name__)
def test_collated_positions_are_nonzeros_and_give_the_same_nll(enc: Any) -> None:
    batch = enc.collate(WINDOWS, SCORE_FROM)
    b, t = (batch["targets"] >= 0).nonzero(as_tuple=True)
    assert torch.equal(batch[UNIT_WINDOW], b) and torch.equal(batch[UNIT_POS], t)
    assert len(b) == batch.meta.get("units", batch.scored_bytes)
    with_index = enc(batch)
    bare = TensorBatch({k: v for k, v in batch.tensors.items() if k not in (UNIT_WINDOW, UNIT_POS)},
                       batch.meta, batch.scored_bytes)
    without = enc(bare)  # the forward finds them itself (``scored_index``), as before
    for x, y in [(with_index.nll, without.nll), (with_index.window, without.window),
                 (with_index.start, without.start), (with_index.end, without.end)]:
        assert torch.equal(x, y)
    # the same step's gradients, bit for bit
    grads = []
    for bt in (batch, bare):
        enc.zero_grad(set_to_none=True)
        enc(bt).nll.sum().backward()
        grads.append([p.grad for p in enc.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1]) > 0
    assert all(torch.equal(x, y) for x, y in zip(*grads))


def test_the_forward_skips_the_index_ops_when_collation_made_them() -> None:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Names(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.names.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    enc = ByteEncoder(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2))
    batch = collate_bytes(WINDOWS, SCORE_FROM)
    bare = TensorBatch({k: batch[k] for k in ("inputs", "targets")}, batch.meta, batch.scored_bytes)
    enc(batch)  # the first forward makes the RoPE tables
    with Names() as with_index:
        enc(batch)
    with Names() as without:
        enc(bare)
    assert "aten.cumsum" in without.names and "aten.scatter_" in without.names
    assert "aten.cumsum" not in with_index.names and "aten.scatter_" not in with_index.names
    assert len(without.names) - len(with_index.names) >= 10


@pytest.mark.parametrize("B,T", [(1, 1), (3, 17), (8, 64)])
def test_byte_unit_nll_is_the_textbook_log_softmax_pick_bit_for_bit(B: int, T: int) -> None:
    g = torch.Generator().manual_seed(B * T)
    logits = torch.randn(B, T, 256, generator=g) * 4
    targets = torch.randint(0, 256, (B, T), generator=g)
    targets[torch.rand(B, T, generator=g) < 0.3] = -1
    a, b = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    rb, rt = (targets >= 0).nonzero(as_tuple=True)
    want = -torch.log_softmax(a[rb, rt].float(), dim=-1).gather(1, targets[rb, rt].unsqueeze(1)).squeeze(1)
    got = byte_unit_nll(b, targets)
    grad = torch.rand(len(rb), generator=g)
    want.backward(grad)
    got.nll.backward(grad)
    assert torch.equal(got.nll, want) and torch.equal(b.grad, a.grad)
    assert torch.equal(got.window, rb) and torch.equal(got.start, rt) and torch.equal(got.end, rt + 1)
