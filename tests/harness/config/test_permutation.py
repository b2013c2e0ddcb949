"""Static window permutations: bijections, exact inversion, induced orders, process stability,
block cutting on token boundaries, and the permuted path through the one scoring function."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config.permutation import (
    Permutation,
    WindowPermuter,
    blocks,
    check_scoring,
    fixed_order,
    induced,
    invert,
    permute_window,
    unit_order,
    unpermute,
    unpermute_segments,
    variant_label,
)

ROOT = Path(__file__).resolve().parents[3]
PERMS = [Permutation(kind="none"), Permutation(kind="global"),
         Permutation(kind="inter_block", block_bytes=4), Permutation(kind="intra_block", block_bytes=4),
         Permutation(kind="inter_block", block_bytes=1), Permutation(kind="intra_block", block_bytes=64)]


@pytest.mark.parametrize("perm", PERMS, ids=lambda p: p.label)
@pytest.mark.parametrize("lengths", [[1] * 37, [1] * 64, [3, 1, 2, 5, 1, 1, 4, 2, 7, 1], [], [9], [2] * 32])
def test_bijection_and_exact_inversion(perm: Permutation, lengths: list[int]) -> None:
    window = bytes((17 * i + 3) % 256 for i in range(sum(lengths)))
    pw = permute_window(window, lengths, perm, context=64, seed=5)
    assert sorted(pw.order) == list(range(len(lengths)))  # every unit exactly once
    assert sorted(pw.source) == list(range(len(window)))  # every byte exactly once
    assert len(pw.data) == len(window)
    assert bytes(window[s] for s in pw.source) == pw.data  # source maps fed bytes to the window
    assert unpermute(list(pw.data), pw.source) == list(window)  # and inverts exactly
    inv = invert(pw.order)
    assert [pw.order[inv[i]] for i in range(len(lengths))] == list(range(len(lengths)))
    # units move whole: each fed unit is a unit of the original window
    starts = list(itertools.accumulate([0, *lengths]))[:-1]
    assert list(pw.units) == [window[starts[i] : starts[i] + lengths[i]] for i in pw.order]


def test_kinds_do_what_they_say() -> None:
    n, B = 64, 8
    glob = unit_order([1] * n, Permutation(kind="global"), 64, 0)
    assert glob != list(range(n))
    inter = unit_order([1] * n, Permutation(kind="inter_block", block_bytes=B), 64, 0)
    chunks = [inter[i : i + B] for i in range(0, n, B)]
    assert all(c == list(range(c[0], c[0] + B)) for c in chunks)  # blocks kept whole
    assert [c[0] // B for c in chunks] != list(range(n // B))  # block order shuffled
    intra = unit_order([1] * n, Permutation(kind="intra_block", block_bytes=B), 64, 0)
    chunks = [intra[i : i + B] for i in range(0, n, B)]
    assert all(sorted(c) == list(range(k * B, k * B + B)) for k, c in enumerate(chunks))  # order kept
    assert sum(c != sorted(c) for c in chunks) >= n // B - 1  # inside shuffled
    # blocks draw their own shuffles, not one repeated pattern
    assert len({tuple(x - k * B for x in c) for k, c in enumerate(chunks)}) > 1
    assert unit_order([1] * n, Permutation(kind="none"), 64, 0) == list(range(n))


def test_seeded() -> None:
    g = Permutation(kind="global")
    assert unit_order([1] * 50, g, 64, 1) == unit_order([1] * 50, g, 64, 1)
    assert unit_order([1] * 50, g, 64, 1) != unit_order([1] * 50, g, 64, 2)


def test_shorter_window_takes_the_induced_order() -> None:
    full = list(fixed_order(16, 3, "global"))
    short = unit_order([1] * 6, Permutation(kind="global"), 16, 3)
    assert short == [i for i in full if i < 6]  # entries < 6 in the order they appear
    assert induced([3, 0, 4, 1, 2], 3) == [0, 1, 2]
    assert induced([3, 0, 4, 1, 2], 4) == [3, 0, 1, 2]
    # inter_block: a window with 3 of the 4 blocks orders them as the 4-block permutation induces
    p = Permutation(kind="inter_block", block_bytes=4)
    rho = fixed_order(16, 3, "inter_block", 4)
    order = unit_order([1] * 10, p, 16, 3)  # blocks [0,4) [4,8) [8,10)
    want = [u for k in rho if k < 3 for u in range(4 * k, min(4 * k + 4, 10))]
    assert order == want
    # intra_block: the short last block takes the order its block's permutation induces
    q = Permutation(kind="intra_block", block_bytes=4)
    order = unit_order([1] * 6, q, 16, 3)
    assert order[4:] == [4 + i for i in fixed_order(4, 3, "intra_block", 4, 1) if i < 2]
    with pytest.raises(ValueError, match="exceeds context_bytes"):
        unit_order([1] * 17, q, 16, 3)


def test_blocks_end_on_token_boundaries() -> None:
    # token lengths; blocks of <= 8 bytes, greedy; an over-long token is a block on its own
    lengths = [3, 4, 2, 5, 1, 12, 2, 2, 2, 2, 1]
    bl = blocks(lengths, 8)
    assert bl == [(0, 2), (2, 5), (5, 6), (6, 10), (10, 11)]
    sizes = [sum(lengths[a:b]) for a, b in bl]
    assert sizes == [7, 8, 12, 8, 1]
    assert blocks([1] * 10, 4) == [(0, 4), (4, 8), (8, 10)]  # bytes: fixed-size blocks
    # the permutation never splits a token: inter_block moves blocks of whole tokens
    window = b"".join(bytes([65 + i]) * ln for i, ln in enumerate(lengths))
    pw = permute_window(window, lengths, Permutation(kind="inter_block", block_bytes=8), 64, 0)
    assert sorted(pw.units) == sorted(bytes([65 + i]) * ln for i, ln in enumerate(lengths))


def test_bad_specs_and_scoring_settings() -> None:
    with pytest.raises(ValueError, match="block_bytes must be a positive integer"):
        Permutation(kind="inter_block")
    with pytest.raises(ValueError, match="does not apply"):
        Permutation(kind="global", block_bytes=4)
    with pytest.raises(ValueError, match="is not one of"):
        Permutation(kind="reverse")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"eval.modes: \[full\]"):
        check_scoring(["full", "clean_target"], 64, 64)
    with pytest.raises(ValueError, match="stride_bytes"):
        check_scoring(["full"], None, 64)
    check_scoring(["full"], 64, 64)
    assert variant_label("bytes", Permutation(kind="inter_block", block_bytes=16)) == "bytes~inter_block-16"
    assert variant_label("bpe-512", Permutation()) == "bpe-512"


def test_stable_across_processes() -> None:
    code = ("import json; from harness.config.permutation import Permutation, unit_order;"
            "print(json.dumps([unit_order([1]*100, Permutation(kind=k, block_bytes=b), 128, 7)"
            " for k, b in [('global', None), ('inter_block', 8), ('intra_block', 8)]]))")
    here = [unit_order([1] * 100, Permutation(kind=k, block_bytes=b), 128, 7)
            for k, b in [("global", None), ("inter_block", 8), ("intra_block", 8)]]
    for hashseed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True, cwd=ROOT)
        assert json.loads(out.stdout) == here


def test_module_needs_no_torch() -> None:
    code = "import sys, harness.config.permutation, harness.data.compressors; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


class _Recorder:
    """A fake encoder with BPE-like units (2-byte 'tokens'): records what it is fed."""

    def unit_lengths(self, window: bytes) -> list[int]:
        return [2] * (len(window) // 2) + [1] * (len(window) % 2)

    def collate_units(self, fed: list) -> list[tuple[bytes, ...]]:
        return [w.units for w in fed]


def test_window_permuter_feeds_whole_units() -> None:
    wp = WindowPermuter(Permutation(kind="global"), context=16, seed=0)
    windows = [b"abcdefghij", b"0123456"]
    fed, pws = wp.collate(_Recorder(), windows)
    for w, units, pw in zip(windows, fed, pws):
        assert sorted(units) == sorted(w[i : i + 2] for i in range(0, len(w), 2))
        assert bytes(w[s] for s in pw.source) == b"".join(units)
        lengths = [len(u) for u in units]  # segments = the fed units: back in window order
        assert unpermute_segments(lengths, pw) == _Recorder().unit_lengths(w)
        assert unpermute_segments([len(pw.data)], pw) == [len(pw.data)]  # other segments: as given
