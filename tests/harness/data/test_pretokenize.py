"""BPE training batches cut from windows tokenized in bulk (harness.data.pretokenize) equal the
per-step ``collate`` batches tensor for tensor, and training on them gives the same weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from encoders.backbone import BackboneConfig
from encoders.base import FitContext, TensorBatch
from encoders.bpe import BpeConfig, BpeEncoder
from harness.config.suite import BudgetConfig
from harness.data.load import training_windows
from harness.data.pretokenize import pretokenized_batches
from harness.train.loop import batched, train_encoder
from sources.base import Document

# English code and prose, other scripts, no-break spaces and bytes that are not UTF-8: the
# windows' cuts and the tokenizer's invalid-byte path both get exercised.
TEXTS = [p.read_bytes()[:6_000] for p in sorted(Path(json.__file__).parent.glob("*.py"))] + [
    "Grüße aus Köln;\u00a0 Ελληνικά; русский;\u3000日本語。終わり\n".encode() * 20,
    b"bad \xff\xfe bytes \xc3 cut \xe2\x82 end\n" * 30,
    b"x" * 700,  # one long pre-token: a window must be cut inside it
]
DOCS = [Document(f"d{i}", t) for i, t in enumerate(TEXTS)]
TINY = BackboneConfig(layers=1, dim=16, heads=2)


def encoder(vocab: int = 300) -> BpeEncoder:
    torch.manual_seed(0)
    enc = BpeEncoder(BpeConfig(vocab_size=vocab), TINY)
    enc.fit(FitContext(train_docs=lambda: (d.data for d in DOCS), train_bytes=30_000, context_bytes=128, seed=0,
                       device=torch.device("cpu"), train=lambda e, n: {}, log=lambda s: None))
    return enc


def assert_same(a: TensorBatch, b: TensorBatch) -> None:
    assert a.tensors.keys() == b.tensors.keys()
    for k in a.tensors:
        assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
        assert torch.equal(a[k], b[k]), k
    assert a.scored_bytes == b.scored_bytes
    assert a.meta["units"] == b.meta["units"] == int((a["targets"] >= 0).sum())
    assert list(a.meta["segments"]) == list(b.meta["segments"])


@pytest.mark.parametrize("context", [64, 128])
def test_collate_tokenized_equals_collate(context: int) -> None:
    enc = encoder()
    wins = list(training_windows(DOCS, 60_000, context, 3))
    block = enc.tokenize_windows(wins)
    for lo, hi in [(0, len(wins)), (0, 1), (5, 37), (len(wins) - 3, len(wins)), (7, 7)]:
        assert_same(enc.collate_tokenized(block, lo, hi), enc.collate(wins[lo:hi], [0] * (hi - lo)))
    segs = enc.collate_tokenized(block, 2, 6).meta["segments"]
    assert segs[-1] == segs[3] and segs[1:3] == [segs[1], segs[2]] and len(segs) == 4


def test_collate_tokenized_of_odd_windows() -> None:
    enc = encoder()
    wins = [b"", b"a", b"", "\u00a0\u00a0x  ".encode(), b"\xff", b"hello world " * 9, b""]
    block = enc.tokenize_windows(wins)
    for lo, hi in [(0, len(wins)), (0, 1), (0, 3), (2, 6), (6, 7)]:
        assert_same(enc.collate_tokenized(block, lo, hi), enc.collate(wins[lo:hi], [0] * (hi - lo)))


def test_feed_equals_per_step_collation_with_micro_batches_and_skip() -> None:
    enc = encoder()
    per_step, micro, skip = 10, 4, 3
    old = [[enc.collate(ch[j : j + micro], [0] * len(ch[j : j + micro])) for j in range(0, len(ch), micro)]
           for i, ch in enumerate(batched(training_windows(DOCS, 30_000, 96, 1), per_step)) if i >= skip]
    feed = pretokenized_batches(enc, training_windows(DOCS, 30_000, 96, 1), per_step, micro, skip, 0,
                                steps_per_task=4)
    assert feed is not None
    new = list(feed)
    assert [len(s) for s in new] == [len(s) for s in old] and len(new) > 10
    for s_new, s_old in zip(new, old):
        for a, b in zip(s_new, s_old):
            assert_same(a, b)


def test_feed_in_worker_processes_equals_the_feed_in_this_thread() -> None:
    enc = encoder()
    here = pretokenized_batches(enc, training_windows(DOCS, 20_000, 96, 2), 8, 8, 0, 0, steps_per_task=3)
    forked = pretokenized_batches(enc, training_windows(DOCS, 20_000, 96, 2), 8, 8, 0, 2, steps_per_task=3)
    assert here is not None and forked is not None
    pairs = list(zip(here, forked, strict=True))
    for a, b in pairs:
        assert_same(a[0], b[0])


def test_mdm_and_byte_encoders_collate_per_step() -> None:
    from encoders.byte_baseline import ByteConfig, ByteEncoder

    assert pretokenized_batches(ByteEncoder(ByteConfig(), TINY), iter([b"ab"]), 1, 1, 0, 0) is None
    mdm = BpeEncoder(BpeConfig(vocab_size=300, objective="mdm"), TINY)
    assert pretokenized_batches(mdm, iter([b"ab"]), 1, 1, 0, 0) is None


def test_training_on_the_feed_gives_the_weights_of_per_step_collation(monkeypatch: pytest.MonkeyPatch) -> None:
    budget = BudgetConfig(train_bytes=8_000, context_bytes=64, batch_bytes=512, micro_batch_bytes=256, lr=1e-2,
                          warmup_bytes=1_000)
    dev = torch.device("cpu")
    fast = encoder()
    with monkeypatch.context() as m:  # the fast path never collates per step
        m.setattr(BpeEncoder, "collate", lambda *a: pytest.fail("collate called"))
        s_fast = train_encoder(fast, training_windows(DOCS, 8_000, 64, 0), 8_000, budget, dev)
    slow = encoder()
    monkeypatch.setattr(BpeEncoder, "can_pretokenize", lambda self: False)
    s_slow = train_encoder(slow, training_windows(DOCS, 8_000, 64, 0), 8_000, budget, dev)
    assert s_fast["loss_curve"] == s_slow["loss_curve"] and s_fast["flops"] == s_slow["flops"]
    assert s_fast["steps"] == s_slow["steps"] > 10 and s_fast["bytes"] == s_slow["bytes"] == 8_000
    for (k, a), b in zip(fast.state_dict().items(), slow.state_dict().values()):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b), k
