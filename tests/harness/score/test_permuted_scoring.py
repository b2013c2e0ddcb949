"""Permutations through the one training loop and the one scoring function, with byte and BPE
encoders: whole units are fed, per-byte NLL comes back in the document's order, and training on
a permuted stream is training on exactly the permuted bytes."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

from encoders.backbone import BackboneConfig
from encoders.base import Encoder, FitContext, TensorBatch, UnitNLL, collate_bytes
from encoders.bpe import BpeConfig, BpeEncoder
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.config.permutation import Permutation, WindowPermuter, permute_window
from harness.config.suite import BudgetConfig
from harness.data.load import training_windows
from harness.score.items import plan_partition, score_items
from harness.train.loop import train_encoder
from sources.base import Document

CPU = torch.device("cpu")
TEXT = b"".join(p.read_bytes()[:3000] for p in sorted(Path(json.__file__).parent.glob("*.py")))
KINDS = [Permutation(kind="global"), Permutation(kind="inter_block", block_bytes=8),
         Permutation(kind="intra_block", block_bytes=8)]


class TargetValue(Encoder):
    """NLL of a byte = its value (nats): per-byte NLL names the byte, so misplacement shows."""

    Config = dict

    def __init__(self) -> None:
        super().__init__({}, None)

    def collate(self, windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
        return collate_bytes(windows, score_from)

    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        t = batch["targets"]
        b, p = (t >= 0).nonzero(as_tuple=True)
        return UnitNLL(nll=t[b, p].double(), window=b, start=p, end=p + 1)

    def flops(self, batch: TensorBatch) -> float:
        return 0.0  # no multiply-adds

    def predict_logprobs(self, data: bytes, positions: Sequence[int]) -> dict[int, torch.Tensor]:
        return {}  # never probed here


@pytest.mark.parametrize("perm", KINDS, ids=lambda p: p.label)
def test_byte_nll_comes_back_in_document_order(perm: Permutation) -> None:
    doc = TEXT[:700]
    item = plan_partition(doc, 64)
    assert all(w.score_from == 0 for w in item.windows) and item.scored_bytes == doc
    wp = WindowPermuter(perm, 64, seed=3)
    (sc,) = score_items(TargetValue(), [item], CPU, batch_windows=4, permuter=wp)
    assert sc.byte_nll.tolist() == list(doc)


def fitted_bpe() -> BpeEncoder:
    torch.manual_seed(0)
    enc = BpeEncoder(BpeConfig(vocab_size=320), None)  # token bigram: context matters, fast
    enc.fit(FitContext(train_docs=lambda: iter([TEXT]), train_bytes=len(TEXT), context_bytes=64,
                       seed=0, device=CPU, train=lambda e, n: {}, log=lambda m: None))
    return enc


def test_bpe_identity_through_units_equals_ordinary_scoring() -> None:
    enc = fitted_bpe()
    item = plan_partition(TEXT[:900], 64)
    plain = score_items(enc, [item], CPU)[0]
    ident = score_items(enc, [item], CPU, permuter=WindowPermuter(Permutation(), 64, 0))[0]
    assert ident.nll == pytest.approx(plain.nll, rel=1e-12)
    assert ident.byte_nll.tolist() == pytest.approx(plain.byte_nll.tolist(), rel=1e-9)


@pytest.mark.parametrize("perm", KINDS, ids=lambda p: p.label)
def test_bpe_feeds_whole_tokens_and_scores_every_byte(perm: Permutation) -> None:
    enc = fitted_bpe()
    tok = enc._tok()
    item = plan_partition(TEXT[:900], 64)
    wins = [item.data[w.start : w.end] for w in item.windows]
    wp = WindowPermuter(perm, 64, seed=1)
    batch, fed = wp.collate(enc, wins)
    for i, (w, src) in enumerate(zip(wins, (pw.source for pw in fed))):
        ids = batch["targets"][i][batch["targets"][i] >= 0].tolist()
        assert ids == [tok.ranks[u] for u in permute_window(w, enc.unit_lengths(w), perm, 64, 1).units]
        assert tok.decode(ids) == bytes(w[s] for s in src)  # the fed stream, token by token
        assert sorted(ids) == sorted(tok.encode(w))  # the window's own tokens, reordered
    (sc,) = score_items(enc, [item], CPU, permuter=wp)
    assert sc.byte_nll.shape == (len(item.scored_bytes),)
    assert sc.n_units == sum(len(tok.encode(w)) for w in wins)
    # token lengths come back in the text's order (the report draws them over scored_text)
    assert sc.segments == [b - a for w in wins for a, b in tok.encode_with_offsets(w)[1]]
    with torch.no_grad():
        direct = float(enc(batch).nll.double().sum())
    assert sc.nll == pytest.approx(direct, rel=1e-9)
    # a token's NLL is spread evenly over its own bytes, at their original places
    off = 0
    for w in wins:
        for a, b in tok.encode_with_offsets(w)[1]:
            seg = sc.byte_nll[off + a : off + b]
            assert seg.max() - seg.min() < 1e-9
        off += len(w)


def test_training_on_a_permuted_stream_is_training_on_the_permuted_bytes() -> None:
    budget = BudgetConfig(train_bytes=3_000, context_bytes=64, batch_bytes=512, lr=1e-2,
                          warmup_bytes=500)
    docs = [Document(f"d{i}", TEXT[i * 500 : (i + 1) * 500]) for i in range(8)]
    perm = Permutation(kind="intra_block", block_bytes=8)
    torch.manual_seed(0)
    a = ByteEncoder(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2))
    torch.manual_seed(0)
    b = ByteEncoder(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2))
    sa = train_encoder(a, training_windows(docs, 3_000, 64, 0), 3_000, budget, CPU,
                       permuter=WindowPermuter(perm, 64, 0))
    fed = (permute_window(w, [1] * len(w), perm, 64, 0).data for w in training_windows(docs, 3_000, 64, 0))
    sb = train_encoder(b, fed, 3_000, budget, CPU)
    assert sa["bytes"] == sb["bytes"] == 3_000
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)


def test_which_encoders_can_be_permuted() -> None:
    class Tokens(TargetValue):
        unit = "token"

    assert ByteEncoder.permutable() and BpeEncoder.permutable() and TargetValue.permutable()
    assert not Tokens.permutable()
    assert BpeEncoder.permutable(BpeConfig(objective="mdm"))
    with pytest.raises(NotImplementedError, match="cannot be permuted"):
        Tokens().unit_lengths(b"abc")


@pytest.mark.parametrize("perm", KINDS[:2], ids=lambda p: p.label)
def test_bpe_mdm_scores_permuted_windows(perm: Permutation) -> None:
    torch.manual_seed(0)
    enc = BpeEncoder(BpeConfig(vocab_size=320, objective="mdm"), None)
    enc.fit(FitContext(train_docs=lambda: iter([TEXT]), train_bytes=len(TEXT), context_bytes=64,
                       seed=0, device=CPU, train=lambda e, n: {}, log=lambda m: None))
    item = plan_partition(TEXT[:400], 64)
    wp = WindowPermuter(perm, 64, seed=2)
    a, b = (score_items(enc, [item], CPU, permuter=wp, mc_samples=4)[0] for _ in range(2))
    assert a.byte_nll.shape == (400,) and math.isfinite(a.nll) and a.nll > 0
    assert a.nll == b.nll  # masks seeded by the fed bytes: the estimate is reproducible
