"""Compressor baseline cells: bits per byte match a by-hand computation with the stdlib
compressors on the very windows (and permutations) the models are fed."""

from __future__ import annotations

import bz2
import lzma
import math
import zlib

import pytest

from harness.config.permutation import Permutation, fixed_order
from harness.score.fragility import BaselineDoc, baseline_metrics, fed_windows, permutation_columns
from harness.score.items import plan_full, plan_partition

DOC = (b"In the beginning the Universe was created. This has made a lot of people very angry "
       b"and been widely regarded as a bad move. ") * 6


def deflate_len(b: bytes) -> int:
    c = zlib.compressobj(9, zlib.DEFLATED, -15, 9)
    return len(c.compress(b) + c.flush())


def lzma_len(b: bytes) -> int:
    f = [{"id": lzma.FILTER_LZMA2, "preset": 9, "dict_size": max(4096, len(b))}]
    return len(lzma.compress(b, format=lzma.FORMAT_RAW, filters=f))


HAND = {"deflate": deflate_len, "bz2": lambda b: len(bz2.compress(b, 9)), "lzma": lzma_len}


@pytest.mark.parametrize("name", sorted(HAND))
def test_identity_cell_with_context_matches_by_hand(name: str) -> None:
    item = plan_full(DOC, 128, 64)  # overlapping windows: each has left context
    assert any(w.score_from for w in item.windows)
    bits = 0
    for w in item.windows:
        ctx, x = DOC[w.start : w.score_start], DOC[w.score_start : w.end]
        bits += 8 * (HAND[name](ctx + x) - HAND[name](ctx))
    m = baseline_metrics(name, Permutation(), [BaselineDoc(item, len(DOC), 40, 0.0)], 128, 0, b"", "Latn")
    assert m["n_bytes"] == len(DOC) and m["n_tokens"] == len(DOC) and m["n_segments"] == len(DOC)
    assert m["bpb"] == pytest.approx(bits / len(DOC), rel=1e-12)
    assert m["nll_nats"] == pytest.approx(bits * math.log(2), rel=1e-12)


@pytest.mark.parametrize("name", sorted(HAND))
def test_permuted_cell_with_dictionary_matches_by_hand(name: str) -> None:
    item = plan_partition(DOC, 64)
    perm = Permutation(kind="inter_block", block_bytes=8)
    d = b"a lot of people were angry about the Universe. " * 4
    bits = 0
    for w in item.windows:
        win = DOC[w.start : w.end]
        blocks = [win[i : i + 8] for i in range(0, len(win), 8)]
        fed = b"".join(blocks[k] for k in fixed_order(64, 3, "inter_block", 8) if k < len(blocks))
        bits += 8 * (HAND[name](d + fed) - HAND[name](d))
    m = baseline_metrics(name, perm, [BaselineDoc(item, len(DOC), 40, 0.0)], 64, 3, d, "Latn")
    assert m["bpb"] == pytest.approx(bits / len(DOC), rel=1e-12)


def test_permuting_costs_a_compressor_bits() -> None:
    item = plan_partition(DOC, 256)
    docs = [BaselineDoc(item, len(DOC), 40, 0.0)]
    orig = baseline_metrics("deflate", Permutation(), docs, 256, 0, b"", None)["bpb"]
    glob = baseline_metrics("deflate", Permutation(kind="global"), docs, 256, 0, b"", None)["bpb"]
    assert glob > orig + 1.0  # repeated phrases are no longer repeated byte strings


def test_fed_windows_refuses_context_under_a_permutation_and_columns() -> None:
    with pytest.raises(ValueError, match="scored whole"):
        fed_windows(plan_full(DOC, 128, 64), Permutation(kind="global"), 128, 0)
    assert permutation_columns(Permutation()) == {"permutation": "none", "block_bytes": ""}
    assert permutation_columns(Permutation(kind="intra_block", block_bytes=4)) == {
        "permutation": "intra_block", "block_bytes": 4}
