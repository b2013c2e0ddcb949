"""Encoder segments (BLT patches) tile every scored span — full mode with several rolling windows
and clean_target with a perturbed prefix — so bytes per segment has one meaning (core.segments)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from core.segments import bytes_per_segment, check_tiling, window_segments
from encoders.backbone import BackboneConfig
from encoders.base import UnitNLL
from encoders.blt import BltConfig, BltEncoder
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.score.items import plan_clean_target, plan_full, score_items, split_for_target
from harness.score.metrics import CellTotals, cell_metrics

WORDS = ["tokens", "patch", "a", "byte", "entropy", "of", "the", "quickly", "x"]


def _doc(seed: int, n_words: int) -> bytes:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n_words)).encode()


def _blt(patching: str) -> BltEncoder:
    torch.manual_seed(0)
    cfg = BltConfig(local_dim=16, local_heads=2, ngram_sizes=(3,), ngram_table_size=64,
                    encoder_layers=1, decoder_layers=1, patching=patching,
                    target_patch_size=3.0)
    return BltEncoder(cfg, BackboneConfig(layers=1, dim=16, heads=2))


@pytest.mark.parametrize("patching", ["space", "static"])
def test_blt_segments_tile_every_scored_span(patching: str) -> None:
    torch.set_num_threads(1)
    enc = _blt(patching)
    docs = [_doc(i, 30 + 7 * i) for i in range(3)]  # 150–300 bytes: several 64-byte windows
    full = [plan_full(d, 64, 40) for d in docs]
    assert all(len(it.windows) > 2 for it in full)
    targets = []
    for d in docs:
        prefix, cont = split_for_target(d.decode(), 0.5)
        item = plan_clean_target(prefix.upper().encode(), cont.encode(), 64, 24)
        assert item is not None and item.windows[0].score_from > 0
        targets.append(item)
    for items in (full, targets):
        for it, sc in zip(items, score_items(enc, items, torch.device("cpu"), batch_windows=4)):
            n = len(it.scored_bytes)
            assert sc.segments is not None and sum(sc.segments) == n and min(sc.segments) >= 1
            assert len(sc.byte_nll) == n
    # a clean_target span shorter than the patch holding it still has its one segment
    sc = score_items(enc, [plan_clean_target(b"abcdefgh", b"ij", 64, 24)],
                     torch.device("cpu"))[0]
    assert (sc.segments == [2]) if patching == "space" else (sum(sc.segments) == 2)


def test_segments_that_do_not_tile_are_an_error() -> None:
    class Gappy(ByteEncoder):
        def forward(self, batch):  # type: ignore[override]
            units: UnitNLL = super().forward(batch)
            units.segments = [[1] for _ in range(batch["targets"].shape[0])]  # one byte only
            return units

    enc = Gappy(ByteConfig(dim=16), BackboneConfig(layers=1, dim=16, heads=2))
    with pytest.raises(AssertionError, match="do not tile the 5 scored bytes"):
        score_items(enc, [plan_full(b"hello", 64, 32)], torch.device("cpu"))


def test_one_definition_of_bytes_per_segment() -> None:
    check_tiling([3, 2], 5)
    check_tiling(np.array([3, 2]), 5)  # lengths as numpy or torch integers too
    check_tiling(torch.tensor([4, 1]), 5)
    check_tiling([], 0)
    with pytest.raises(AssertionError):
        check_tiling([3, 0, 2], 5)
    with pytest.raises(AssertionError, match="2 segments summing to 4"):
        check_tiling([3, 1], 5)
    assert bytes_per_segment(10, 4) == 2.5
    assert bytes_per_segment(10, 0) != bytes_per_segment(10, 0)  # NaN
    t = CellTotals()
    t.add(1.0, 7, 7, 3, 1, [3, 4], 0.0)
    t.add(1.0, 5, 5, 5, 1, [2, 2, 1], 0.0)
    assert cell_metrics(t, "Latn")["bytes_per_segment"] == pytest.approx(12 / 5)


class _Flat:
    """Segments handed over flat (``flat()``), as BPE's ``TokenLengths`` hands them."""

    def __init__(self, lists: list[list[int]]) -> None:
        self.lists = lists

    def flat(self) -> tuple[np.ndarray, np.ndarray]:
        offsets = np.concatenate(([0], np.cumsum([len(x) for x in self.lists]))).astype(np.int64)
        return np.array([v for x in self.lists for v in x], dtype=np.int64), offsets


def test_window_segments_flat_and_per_window_agree() -> None:
    lists = [[3, 2], [], [1, 1, 1, 4], [5]]  # an empty scored span among them
    n = [5, 0, 7, 5]
    assert window_segments(lists, n) == lists
    assert window_segments(_Flat(lists), n) == lists
    assert all(type(x) is list and all(type(v) is int for v in x) for x in window_segments(_Flat(lists), n))
    assert window_segments([np.array([2, 3])], [5]) == [[2, 3]]
    # one window's lengths that do not sum to its span: check_tiling's error, for that window
    for segs in (lists, _Flat(lists)):
        with pytest.raises(AssertionError, match="of BPE do not tile the 6 scored bytes: 4 segments summing to 7"):
            window_segments(segs, [5, 0, 6, 5], "BPE")
    # a zero length, even where the sums hold
    bad = [[3, 2], [], [1, 0, 2, 4], [5]]
    for segs in (bad, _Flat(bad)):
        with pytest.raises(AssertionError, match="lengths must be ≥ 1"):
            window_segments(segs, n)
    with pytest.raises(AssertionError, match="4 windows for 3 scored spans"):
        window_segments(_Flat(lists), n[:3])


def test_bpe_token_lengths_flat_matches_its_windows() -> None:
    from encoders.bpe.model import TokenLengths

    lens = np.array([1, 2, 3, 4, 5], dtype=np.int64)  # bytes per token id
    ids = np.array([9, 9, 0, 1, 2, 4, 4, 3, 9], dtype=np.int64)  # 9: outside the windows
    tl = TokenLengths(lens[np.r_[0:5, 0, 0, 0, 0, 0]], ids, np.array([2, 5, 5, 8]))
    flat, offsets = tl.flat()
    assert offsets.tolist() == [0, 3, 3, 6]
    assert [flat[offsets[j]:offsets[j + 1]].tolist() for j in range(3)] == [tl[j] for j in range(3)]
    assert window_segments(tl, [6, 0, 14]) == [[1, 2, 3], [], [5, 5, 4]]
