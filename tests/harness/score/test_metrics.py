"""Metrics against hand-computed values, and the per-byte attribution of unit NLL."""

from __future__ import annotations

import math

import pytest
import torch

from encoders.base import UnitNLL
from harness.score.metrics import CellTotals, bpb, cell_metrics, count_words


def test_bpb_is_nats_over_ln2_bytes() -> None:
    # 10 bytes at exactly 8 bits each: NLL = 10 * 8 * ln 2 nats.
    assert bpb(10 * 8 * math.log(2), 10) == pytest.approx(8.0)
    assert math.isnan(bpb(1.0, 0))


def test_cell_metrics_by_hand() -> None:
    t = CellTotals()
    # doc 1: 12 bytes, 3 tokens, 2 words, NLL 6 nats; doc 2: 8 bytes (clean 10), 2 tokens, 1 word, NLL 4.
    t.add(6.0, 12, 12, 3, 2, [4, 4, 4], 0.0)
    t.add(4.0, 8, 10, 2, 1, [4, 4], 0.5)
    m = cell_metrics(t, "Latn")
    assert m["bpb"] == pytest.approx(10 / (math.log(2) * 20))
    assert m["bpb_clean"] == pytest.approx(10 / (math.log(2) * 22))
    assert m["byte_ppl"] == pytest.approx(2 ** m["bpb"])
    assert m["word_ppl"] == pytest.approx(math.exp(10 / 3))
    assert m["token_ppl"] == pytest.approx(math.exp(10 / 5))
    assert m["bytes_per_segment"] == pytest.approx(4.0)
    assert m["edit_rate"] == pytest.approx(0.25)
    assert math.isnan(cell_metrics(t, "Hani")["word_ppl"])  # no spaces between words


def test_count_words() -> None:
    assert count_words(" a  bc\td\n") == 3
    assert count_words("") == 0


def test_byte_nll_spreads_units_evenly_and_sums_exactly() -> None:
    # Two windows: w0 = 6 bytes scored from 2 (units [2,5) and [5,6)), w1 = 3 bytes from 0.
    u = UnitNLL(
        nll=torch.tensor([3.0, 1.0, 0.5, 0.5, 2.0]),
        window=torch.tensor([0, 0, 1, 1, 1]),
        start=torch.tensor([2, 5, 0, 1, 2]),
        end=torch.tensor([5, 6, 1, 2, 3]),
    )
    out = u.byte_nll([6, 3], [2, 0])
    assert out[0].tolist() == [1.0, 1.0, 1.0, 1.0]
    assert out[1].tolist() == [0.5, 0.5, 2.0]


@pytest.mark.parametrize(
    "start,end",
    [
        ([2, 4], [5, 6]),  # overlap
        ([2, 5], [4, 6]),  # gap
        ([0, 5], [5, 6]),
    ],  # unit before score_from
)
def test_byte_nll_rejects_units_that_do_not_tile(start: list[int], end: list[int]) -> None:
    u = UnitNLL(
        nll=torch.ones(2),
        window=torch.zeros(2, dtype=torch.long),
        start=torch.tensor(start),
        end=torch.tensor(end),
    )
    with pytest.raises(AssertionError):
        u.byte_nll([6], [2])


@pytest.mark.parametrize("kind", ["bytes in order", "bytes shuffled", "tokens", "tokens shuffled"])
def test_byte_nll_equals_the_textbook_spread(kind: str) -> None:
    """Random windows and tilings: every byte gets its unit's NLL / the unit's length, in float64,
    exactly — for one-byte units in byte order (the byte-level fast path), one-byte units in any
    other order, multi-byte units in byte order (BPE's tokens: the in-order fast path) and in
    any other order (the general path)."""
    import random

    rng = random.Random(kind)
    lengths = [rng.randint(1, 40) for _ in range(7)]
    score_from = [rng.randint(0, n - 1) for n in lengths]
    units = []  # (window, start, end)
    for w, (n, s) in enumerate(zip(lengths, score_from)):
        t = s
        while t < n:
            e = t + 1 if not kind.startswith("tokens") else min(n, t + rng.randint(1, 6))
            units.append((w, t, e))
            t = e
    if kind.endswith("shuffled"):
        rng.shuffle(units)
    nll = torch.tensor([rng.uniform(0.01, 9.0) for _ in units], dtype=torch.float32)
    u = UnitNLL(nll=nll, window=torch.tensor([x[0] for x in units]), start=torch.tensor([x[1] for x in units]),
                end=torch.tensor([x[2] for x in units]))
    out = u.byte_nll(lengths, score_from)
    want = [[0.0] * (n - s) for n, s in zip(lengths, score_from)]
    for v, (w, st, en) in zip(nll.tolist(), units):
        for b in range(st, en):
            want[w][b - score_from[w]] = float(v) / (en - st)  # v is the float32 value, widened
    assert [o.dtype for o in out] == [torch.float64] * len(lengths)
    assert [o.tolist() for o in out] == want
