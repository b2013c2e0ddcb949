"""BLT patch boundaries, masks and hash n-grams against hand-worked examples."""

from __future__ import annotations

import random

import pytest
import torch

from encoders.blt.layers import CrossAttention, decoder_mask, max_pool_patches, pooling_mask
from encoders.blt.ngrams import (
    HASH_BASE,
    HASH_MOD,
    PAD,
    hash_ngram,
    hash_ngram_ids,
    hash_ngram_ids_multi,
)
from encoders.blt.patching import (
    _patch_sizes_torch,
    fit_threshold,
    limit_patch_length,
    patch_ids,
    patch_sizes,
    patch_starts,
    space_patch_starts,
    static_patch_starts,
)

H = torch.tensor([[3.0, 2.5, 0.5, 2.0, 2.2, 0.1]])


def as_list(x: torch.Tensor) -> list[int]:
    return x.int().flatten().tolist()


def test_global_rule_hand_example() -> None:
    # H_t > 1.0 at t = 0, 1, 3, 4; byte 0 starts regardless.
    assert as_list(patch_starts(H, 1.0)) == [1, 1, 0, 1, 1, 0]
    # A high threshold leaves only byte 0.
    assert as_list(patch_starts(H, 10.0)) == [1, 0, 0, 0, 0, 0]


def test_monotonic_rule_hand_example() -> None:
    # H_t - H_{t-1}: -0.5, -2.0, 1.5, 0.2, -2.1 -> only t = 3 exceeds 1.0.
    assert as_list(patch_starts(H, 1.0, monotonic=True)) == [1, 0, 0, 1, 0, 0]
    # Byte 0 starts even when H_0 is low.
    assert as_list(patch_starts(torch.tensor([[0.0, 0.0]]), 1.0, monotonic=True)) == [1, 0]


def test_max_patch_bytes_hand_example() -> None:
    # Natural starts 0, 3; patches capped at 2 bytes force starts at 2 and 5.
    assert as_list(patch_starts(H, 1.0, monotonic=True, max_patch_bytes=2)) == [1, 0, 1, 1, 0, 1]


def test_limit_patch_length_matches_sequential_rule() -> None:
    g = torch.Generator().manual_seed(0)
    starts = torch.rand(20, 40, generator=g) < 0.1
    starts[:, 0] = True
    for m in (1, 2, 3, 7):
        got = limit_patch_length(starts, m)
        for b in range(starts.shape[0]):
            run, want = 0, []
            for t in range(starts.shape[1]):
                s = bool(starts[b, t]) or run >= m
                run = 1 if s else run + 1
                want.append(int(s))
            assert as_list(got[b]) == want


def test_space_rule_hand_example() -> None:
    data = torch.tensor([list(b"ab  c\nd")])
    # byte t starts a patch when byte t-1 is whitespace: t = 3, 4 (after spaces), 6 (after \n).
    # Byte 2 is a space itself and does not start one.
    assert as_list(space_patch_starts(data)) == [1, 0, 0, 1, 1, 0, 1]


def test_static_rule() -> None:
    assert as_list(static_patch_starts(1, 7, 3)) == [1, 0, 0, 1, 0, 0, 1]


def test_patch_sizes_respect_length_and_score_from() -> None:
    starts = torch.tensor([[1, 0, 1, 0, 0, 1, 1, 0], [1, 0, 1, 1, 0, 0, 0, 0]], dtype=torch.bool)
    lengths = torch.tensor([8, 4])
    assert patch_sizes(starts, lengths) == [[2, 3, 1, 2], [2, 1, 1]]
    # the patch holding the first scored byte counts with its scored bytes, so the sizes tile
    # [score_from, length): row 0 [2,5) -> 2 scored bytes, row 1 [0,2) -> 1
    assert patch_sizes(starts, lengths, torch.tensor([3, 1])) == [[2, 1, 2], [1, 1, 1]]
    assert patch_sizes(starts, lengths, torch.tensor([7, 4])) == [[1], []]


def patch_sizes_ref(
    starts: torch.Tensor, lengths: torch.Tensor, score_from: torch.Tensor | None = None
) -> list[list[int]]:
    """The host path ``patch_sizes`` replaced (one window at a time), kept as its reference."""
    starts, lengths = starts.cpu(), lengths.cpu()
    sf = score_from.cpu() if score_from is not None else torch.zeros_like(lengths)
    out: list[list[int]] = []
    for b in range(starts.shape[0]):
        n, s0 = int(lengths[b]), int(sf[b])
        pos = starts[b, :n].nonzero().squeeze(1)
        ends = torch.cat([pos[1:], torch.tensor([n])])
        keep = ends > s0
        out.append((ends[keep] - pos[keep].clamp(min=s0)).tolist())
    return out


def test_patch_sizes_equal_the_per_window_reference() -> None:
    g = torch.Generator().manual_seed(0)
    for trial in range(30):
        B, T = int(torch.randint(1, 9, (1,), generator=g)), int(torch.randint(1, 40, (1,), generator=g))
        starts = torch.rand(B, T, generator=g) < [0.0, 0.2, 0.5, 1.0][trial % 4]
        starts[:, 0] = True
        if trial % 3 == 0:  # capped patches, as the model makes them
            starts = limit_patch_length(starts, 1 + trial % 5)
        lengths = torch.randint(1, T + 1, (B,), generator=g)
        lengths[0] = T  # one window fills the batch; one-byte windows come up at random
        starts &= torch.arange(T)[None] < lengths[:, None]  # the model clears padding
        sf = (torch.rand(B, generator=g) * (lengths + 1).float()).long()  # 0 .. length
        for score_from in (None, sf, lengths.clone()):  # whole, partly scored, nothing scored
            got = patch_sizes(starts, lengths, score_from)  # host tensors: the numpy path
            assert got == patch_sizes_ref(starts, lengths, score_from), (trial, score_from)
            # the device path's tensor ops, run here on the CPU, agree
            assert _patch_sizes_torch(starts, lengths, score_from) == got
            want_total = lengths - (score_from if score_from is not None else 0)
            assert [sum(w) for w in got] == want_total.tolist()
            assert all(s >= 1 for w in got for s in w)


def test_patch_sizes_edge_cases() -> None:
    one = torch.ones(1, 1, dtype=torch.bool)
    assert patch_sizes(one, torch.tensor([1])) == [[1]]  # a one-byte window
    assert patch_sizes(one, torch.tensor([1]), torch.tensor([1])) == [[]]  # nothing scored
    # an empty window (length 0) has no patches; the per-window reference fails on it
    assert patch_sizes(torch.zeros(2, 3, dtype=torch.bool) | (torch.arange(3) == 0), torch.tensor([3, 0])) == [
        [3], []
    ]
    assert patch_sizes(torch.zeros(0, 5, dtype=torch.bool), torch.zeros(0, dtype=torch.long)) == []


def test_threshold_ties_do_not_start_a_patch() -> None:
    # strict >: H_t equal to θ (or H_t - H_{t-1} equal to θ) leaves byte t in the open patch
    ent = torch.tensor([[2.0, 2.0, 2.5, 2.0, 4.5]])
    assert as_list(patch_starts(ent, 2.0)) == [1, 0, 1, 0, 1]
    assert as_list(patch_starts(ent, 0.5, monotonic=True)) == [1, 0, 0, 0, 1]
    assert as_list(patch_starts(ent, 2.5, monotonic=True)) == [1, 0, 0, 0, 0]


def test_fit_threshold_hits_a_quantile() -> None:
    # 1 window of 101 bytes, H_t = t: θ = 75 leaves starts at 0 and 76..100 -> 26 patches.
    ent = torch.arange(101, dtype=torch.float32)[None]
    valid = torch.ones_like(ent, dtype=torch.bool)
    theta, size = fit_threshold(ent, valid, 101 / 26)
    assert theta == 75.0 and size == pytest.approx(101 / 26)
    # monotonic rule: H_t = t(t+1)/2 has H_t - H_{t-1} = t, so the same θ and sizes
    tri = (ent * (ent + 1) / 2).double()
    theta, size = fit_threshold(tri, valid, 101 / 26, monotonic=True)
    assert theta == 75.0 and size == pytest.approx(101 / 26)
    with pytest.raises(ValueError, match="target_patch_size"):
        fit_threshold(ent, valid, 0.5)


def test_pooling_mask_hand_example() -> None:
    starts = torch.tensor([[1, 0, 1, 0, 0], [1, 1, 0, 0, 0]], dtype=torch.bool)
    valid = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    mask = pooling_mask(patch_ids(starts), valid, 3)
    assert mask[0].int().tolist() == [
        [1, 1, 0, 0, 0],
        [0, 0, 1, 1, 1],
        [1, 0, 0, 0, 0],
    ]  # row 2: padded patch
    assert mask[1].int().tolist() == [
        [1, 0, 0, 0, 0],
        [0, 1, 1, 0, 0],
        [1, 0, 0, 0, 0],
    ]  # padding bytes unseen


def test_pooled_patch_depends_only_on_its_bytes() -> None:
    torch.manual_seed(0)
    starts = torch.tensor([[1, 0, 0, 1, 0, 1, 0, 0]], dtype=torch.bool)
    pid, valid = patch_ids(starts), torch.ones(1, 8, dtype=torch.bool)
    attn = CrossAttention(16, 16, 4)

    def pooled(x: torch.Tensor) -> torch.Tensor:
        q0 = max_pool_patches(x, pid, valid, 3)
        return q0 + attn(q0, x, pooling_mask(pid, valid, 3))

    x = torch.randn(1, 8, 16)
    y = x.clone()
    y[0, 3:5] = torch.randn(2, 16)  # change patch 1's bytes only
    a, b = pooled(x), pooled(y)
    assert torch.equal(a[0, 0], b[0, 0]) and torch.equal(a[0, 2], b[0, 2])
    assert not torch.allclose(a[0, 1], b[0, 1])
    # max pooling: hand check on patch 0 = bytes 0..2
    assert torch.equal(max_pool_patches(x, pid, valid, 3)[0, 0], x[0, :3].max(0).values)


def test_decoder_mask_hand_example() -> None:
    pid = patch_ids(torch.tensor([[1, 0, 1, 1, 0]], dtype=torch.bool))  # patches {0,1} {2} {3,4}
    # slot 0 = "no patch yet"; slot p+1 = patch p, visible once the byte's own patch has begun after it.
    assert decoder_mask(pid, 3)[0].int().tolist() == [
        [1, 0, 0, 0],
        [1, 0, 0, 0],
        [1, 1, 0, 0],
        [1, 1, 1, 0],
        [1, 1, 1, 0],
    ]


def test_decoder_never_sees_a_patch_holding_a_later_byte() -> None:
    g = torch.Generator().manual_seed(1)
    starts = torch.rand(16, 30, generator=g) < 0.3
    starts[:, 0] = True
    pid = patch_ids(starts)
    N = int(starts.sum(1).max())
    mask = decoder_mask(pid, N)[:, :, 1:]  # (B, T, N)
    pos = torch.arange(30).expand(16, 30)
    # last byte of each patch (B, N); -1 for patches a window lacks
    last = torch.full((16, N), -1).scatter_reduce(1, pid, pos, "amax")
    for b, t, p in mask.nonzero().tolist():
        assert last[b, p] < t, (b, t, p)
    # and it sees every patch that did end before byte t (nothing useful is hidden)
    want = (last[:, None, :] < pos[:, :, None]) & (last[:, None, :] >= 0)
    assert torch.equal(mask, want)


def test_hash_ngram_ids_match_reference_and_stay_in_range() -> None:
    rng = random.Random(0)
    stream = torch.tensor([[256] + [rng.randrange(256) for _ in range(40)] for _ in range(3)])
    for n in (1, 3, 5, 8):
        for size in (7, 4096, 100_003):
            ids = hash_ngram_ids(stream, n, size)
            assert ids.shape == stream.shape and int(ids.min()) >= 0 and int(ids.max()) < size
            for b in range(3):
                for t in (0, 1, n - 1, 20, 40):
                    window = [PAD] * max(0, n - 1 - t) + stream[
                        b, max(0, t - n + 1) : t + 1
                    ].tolist()
                    assert int(ids[b, t]) == hash_ngram(window, size)
                    # closed form, independent of the Horner loop
                    closed = (
                        sum((s + 1) * HASH_BASE**j for j, s in enumerate(reversed(window)))
                        % HASH_MOD
                    )
                    assert int(ids[b, t]) == closed % size


def test_hash_ngram_ids_are_stable() -> None:
    # Frozen values: changing the hash would silently invalidate every cached BLT model.
    stream = torch.tensor([[256, *b"abc"]])
    assert hash_ngram_ids(stream, 3, 4096).tolist() == [
        [hash_ngram([PAD, PAD, 256], 4096), 3844, 2061, 258]
    ]
    # An n-gram's id depends on its n symbols only, not on its row or what precedes it.
    other = torch.tensor([[256, 7, 7, *b"abc"]])
    assert hash_ngram_ids(other, 3, 4096)[0, -1] == hash_ngram_ids(stream, 3, 4096)[0, -1]


def test_hash_ngram_ids_multi_equals_one_size_at_a_time() -> None:
    stream = torch.randint(0, 257, (2, 30), generator=torch.Generator().manual_seed(3))
    multi = hash_ngram_ids_multi(stream, (3, 8, 5), 1000)
    assert multi.shape == (2, 30, 3)
    for k, n in enumerate((3, 8, 5)):
        assert torch.equal(multi[..., k], hash_ngram_ids(stream, n, 1000))
