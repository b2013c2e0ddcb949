"""Scoring: modes, windows, and exact BPB with an encoder whose answer is known by hand."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
import torch
from torch import nn

from encoders.base import Encoder, TensorBatch, UnitNLL, byte_unit_nll, collate_bytes
from harness.score.items import plan_clean_target, plan_full, score_items, split_for_target


class UniformBytes(Encoder):
    """Predicts every byte with probability 1/256: exactly 8 bits per byte."""

    Config = dict

    def __init__(self) -> None:
        super().__init__({}, None)
        self.dummy = nn.Parameter(torch.zeros(()))

    def collate(self, windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
        return collate_bytes(windows, score_from)

    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        B, T = batch["inputs"].shape
        return byte_unit_nll(torch.zeros(B, T, 256) + self.dummy, batch["targets"])

    def flops(self, batch: TensorBatch) -> float:
        return 0.0  # constant logits: no multiply-adds

    def predict_logprobs(self, data: bytes, positions: Sequence[int]) -> dict[int, torch.Tensor]:
        return {p: torch.full((256,), -math.log(256)) for p in positions if 0 <= p < len(data)}


class TwoByteTokens(Encoder):
    """A 'tokenizer' with 2-byte units (split separately before/after score_from), each at
    log(65536) nats: still exactly 8 bits per byte, but half as many prediction units."""

    Config = dict
    unit = "token"

    def __init__(self) -> None:
        super().__init__({}, None)

    def collate(self, windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
        spans = []
        for i, (w, s) in enumerate(zip(windows, score_from)):
            for a in range(s, len(w), 2):
                spans.append((i, a, min(a + 2, len(w))))
        t = torch.tensor(spans, dtype=torch.long).reshape(-1, 3)
        return TensorBatch({"spans": t}, {}, sum(len(w) - s for w, s in zip(windows, score_from)))

    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        sp = batch["spans"]
        n = sp[:, 2] - sp[:, 1]
        return UnitNLL(
            nll=n.double() * math.log(256),
            window=sp[:, 0],
            start=sp[:, 1],
            end=sp[:, 2],
            segments=None,
        )

    def flops(self, batch: TensorBatch) -> float:
        return 0.0  # fixed NLL per unit: no multiply-adds

    def predict_logprobs(self, data: bytes, positions: Sequence[int]) -> dict[int, torch.Tensor]:
        # units start at every even offset; each is one of 65536 two-byte values, equally likely
        return {p: torch.full((65536,), -math.log(65536)) for p in positions if 0 <= p < len(data) and p % 2 == 0}


def test_split_for_target_cuts_at_first_whitespace_after_fraction() -> None:
    assert split_for_target("abcd efgh ijkl", 0.5) == ("abcd efgh", " ijkl")  # k=7 -> space at 9
    assert split_for_target("漢字漢字漢字", 0.5) == ("漢字漢", "字漢字")  # no whitespace: cut at k
    assert split_for_target("", 0.5) == ("", "")


def test_plan_clean_target_window() -> None:
    prefix = b"one two three four five"
    item = plan_clean_target(prefix, b" six seven eight", context=20, target_bytes=10)
    assert item is not None
    (w,) = item.windows
    assert item.scored_bytes == b" six seven"  # first 10 bytes of the continuation
    assert len(item.data) <= 20 and item.data.endswith(b" six seven")
    assert item.data[: w.score_from] == b" four five"  # 10-byte tail of the prefix, at a word start
    assert plan_clean_target(prefix, b"", 20, 10) is None


@pytest.mark.parametrize("enc_cls", [UniformBytes, TwoByteTokens])
def test_score_items_is_exactly_eight_bits_per_byte(enc_cls: type) -> None:
    enc = enc_cls()
    docs = [b"hello world " * 40, "naïve café — 漢字 ".encode() * 9, b"\xff\xfe\x00 invalid"]
    items = [plan_full(d, 64, 32) for d in docs]
    scores = score_items(enc, items, torch.device("cpu"), batch_windows=5)
    for d, s in zip(docs, scores):
        assert s.byte_nll.shape == (len(d),)
        assert s.nll / (math.log(2) * len(d)) == pytest.approx(8.0)
    if enc_cls is TwoByteTokens:
        assert scores[0].n_units < len(docs[0])  # token units, fewer than bytes
