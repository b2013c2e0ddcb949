"""Patch boundaries for BLT: where a new patch starts, from entropies (nats), spaces or a fixed size.

All functions work on a batch of windows: ``(B, T)`` tensors, position ``t`` = byte ``t`` of the
window. A result ``starts`` is a bool ``(B, T)`` tensor, True where byte ``t`` opens a new patch;
byte 0 always does. Causality contract: whether byte ``t`` starts a patch depends on bytes ``< t``
only (entropy ``H_t`` is the entropy model's uncertainty about byte ``t`` *before* seeing it; with
space patching byte ``t`` starts a patch because byte ``t-1`` is whitespace, never because byte
``t`` is), so patching a prefix never looks at what follows it.
"""

from __future__ import annotations

import numpy as np
import torch

from core.segments import bytes_per_segment

# ASCII whitespace: \t \n \v \f \r and space (what bytes.isspace() accepts).
WHITESPACE = (9, 10, 11, 12, 13, 32)


def entropy_nats(logits: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of the softmax over the last axis: (..., V) -> (...), computed in fp32."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def limit_patch_length(starts: torch.Tensor, max_patch_bytes: int) -> torch.Tensor:
    """Add starts so that no patch is longer than ``max_patch_bytes`` bytes.

    Same result as the sequential rule "byte t starts a patch if the open patch already holds
    max_patch_bytes bytes", computed without a loop: after each start s the forced starts are
    s + k·max_patch_bytes until the next start. starts: bool (B, T) with starts[:, 0] True.
    """
    if max_patch_bytes < 1:
        raise ValueError(f"max_patch_bytes must be >= 1, got {max_patch_bytes}")
    T = starts.shape[1]
    pos = torch.arange(T, device=starts.device).expand_as(starts)
    last = torch.where(starts, pos, torch.zeros_like(pos)).cummax(dim=1).values  # (B, T) last start <= t
    return starts | ((pos - last) % max_patch_bytes == 0)


def patch_starts(
    entropies: torch.Tensor,
    threshold: float,
    monotonic: bool = False,
    max_patch_bytes: int | None = None,
) -> torch.Tensor:
    """Entropy patching. entropies: (B, T) float, H_t in nats from bytes < t -> starts (B, T) bool.

    Global rule (``monotonic=False``): byte t starts a patch when H_t > threshold.
    Approximate-monotonicity rule: byte t >= 1 starts a patch when H_t - H_{t-1} > threshold.
    Byte 0 always starts a patch; ``max_patch_bytes`` then caps patch lengths.
    """
    if entropies.dim() != 2:
        raise ValueError(f"entropies must be (B, T), got shape {tuple(entropies.shape)}")
    if monotonic:
        starts = torch.zeros(entropies.shape, dtype=torch.bool, device=entropies.device)
        starts[:, 1:] = (entropies[:, 1:] - entropies[:, :-1]) > threshold
    else:
        starts = entropies > threshold
    starts[:, :1] = True
    if max_patch_bytes is not None:
        starts = limit_patch_length(starts, max_patch_bytes)
    return starts


def space_patch_starts(data: torch.Tensor, max_patch_bytes: int | None = None) -> torch.Tensor:
    """Space patching. data: (B, T) long bytes -> starts (B, T): byte t starts a patch when byte
    t-1 is ASCII whitespace (so a run of spaces gives one-byte patches), and byte 0 always."""
    ws = torch.isin(data, torch.tensor(WHITESPACE, device=data.device))
    starts = torch.zeros(data.shape, dtype=torch.bool, device=data.device)
    starts[:, 1:] = ws[:, :-1]
    starts[:, :1] = True
    if max_patch_bytes is not None:
        starts = limit_patch_length(starts, max_patch_bytes)
    return starts


def static_patch_starts(batch: int, length: int, size: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Static patching: fixed ``size``-byte patches, starts (batch, length) True at t % size == 0."""
    if size < 1:
        raise ValueError(f"static patch size must be >= 1, got {size}")
    return (torch.arange(length, device=device) % size == 0).expand(batch, length).clone()


def patch_ids(starts: torch.Tensor) -> torch.Tensor:
    """Index of the patch holding each byte: starts (B, T) bool -> (B, T) long, 0-based."""
    return starts.long().cumsum(dim=1) - 1


def patch_sizes(starts: torch.Tensor, lengths: torch.Tensor, score_from: torch.Tensor | None = None) -> list[list[int]]:
    """Byte lengths of the patches that cover each window's scored span, clipped to it.

    starts (B, T) bool with starts[:, 0] True, lengths (B,) long (bytes of each window; positions
    past it are padding), score_from (B,) long or None (= 0). The last patch of a window ends at
    its length. A patch that starts before ``score_from`` and runs into the span counts with its
    bytes from ``score_from`` on, so the sizes of window b tile [score_from_b, length_b) exactly
    and sum to its scored bytes (the definition of ``core.segments``); an empty span gives [].

    Whole-batch tensor ops on ``starts``' device and one copy to the host at the end: a scored
    byte opens a segment iff it is the span's first byte or a patch start, and each segment runs
    to the next opening byte of its window or to the window's end. Host tensors (scoring reads
    segments after the batch's copy back) take the same steps in numpy.
    """
    if starts.device.type == "cpu":
        return _patch_sizes_host(starts, lengths, score_from)
    return _patch_sizes_torch(starts, lengths, score_from)


def _patch_sizes_host(starts: torch.Tensor, lengths: torch.Tensor, score_from: torch.Tensor | None) -> list[list[int]]:
    """``patch_sizes`` of host tensors, in numpy. Why: the same steps as torch CPU ops on a
    128-window batch took 0.95 ms on an idle H100 host and 88 ms beside 12 busy processes (a
    run's workers; 16 intra-op threads), numpy 1.26 and 1.93 ms (``benchmarks/bench_patch_sizes.py``,
    ``benchmarks/results/gpu_s26/call5_patch_sizes.log``)."""
    st = starts.numpy()
    B, T = st.shape
    ln = lengths.numpy().astype(np.int64, copy=False)
    sf = score_from.numpy().astype(np.int64, copy=False) if score_from is not None else np.zeros(B, dtype=np.int64)
    pos = np.arange(T, dtype=np.int64)[None, :]
    scored = (pos >= sf[:, None]) & (pos < ln[:, None])
    opens = scored & (st | (pos == sf[:, None]))
    row, first = np.nonzero(opens)  # row-major: sorted by (row, first)
    end = ln[row]
    if row.size > 1:
        end[:-1] = np.where(row[1:] == row[:-1], first[1:], end[:-1])
    sizes = (end - first).tolist()
    bounds = np.concatenate(([0], np.cumsum(opens.sum(1)))).tolist()
    return [sizes[bounds[b] : bounds[b + 1]] for b in range(B)]


def _patch_sizes_torch(starts: torch.Tensor, lengths: torch.Tensor, score_from: torch.Tensor | None) -> list[list[int]]:
    """``patch_sizes`` as tensor ops on ``starts``' device (see there)."""
    B, T = starts.shape
    dev = starts.device
    lengths = lengths.to(dev)
    sf = score_from.to(dev) if score_from is not None else torch.zeros_like(lengths)
    pos = torch.arange(T, device=dev)[None, :]  # (1, T)
    scored = (pos >= sf[:, None]) & (pos < lengths[:, None])  # (B, T)
    opens = scored & (starts | (pos == sf[:, None]))  # (B, T) first byte of a clipped patch
    row, first = opens.nonzero(as_tuple=True)  # (K,) each, sorted by (row, first)
    end = lengths[row]  # (K,) a window's last segment ends at its length ...
    same = row[1:] == row[:-1]  # ... the others where the next one in the same window opens
    end[:-1] = torch.where(same, first[1:], end[:-1])
    flat = torch.cat([opens.sum(1), end - first]).tolist()  # the one device -> host copy
    counts, sizes = flat[:B], flat[B:]
    out: list[list[int]] = []
    k = 0
    for n in counts:  # split the flat list per window (host lists, no tensor ops)
        out.append(sizes[k : k + n])
        k += n
    return out


def mean_patch_size(starts: torch.Tensor, valid: torch.Tensor) -> float:
    """Mean bytes per patch over whole windows (score_from = 0): Σ bytes / Σ patches, i.e.
    ``core.segments.bytes_per_segment``. starts, valid: (B, T) bool."""
    return bytes_per_segment(float(valid.sum()), max(1, int((starts & valid).sum())))


def fit_threshold(
    entropies: torch.Tensor,
    valid: torch.Tensor,
    target_patch_size: float,
    monotonic: bool = False,
    max_patch_bytes: int | None = None,
) -> tuple[float, float]:
    """Pick θ so that entropy patching of these windows gives ``target_patch_size`` bytes per patch.

    entropies: (B, T) nats; valid: (B, T) bool (False on padding). The mean patch size is a
    non-decreasing step function of θ that only changes at observed values of H_t (or of
    H_t - H_{t-1} under the monotonic rule), so a binary search over those sorted values finds
    the closest achievable size exactly. Returns (θ, achieved mean patch size).
    """
    if target_patch_size < 1:
        raise ValueError(f"target_patch_size must be >= 1, got {target_patch_size}")
    scores = entropies[:, 1:] - entropies[:, :-1] if monotonic else entropies[:, 1:]
    cand = torch.unique(scores[valid[:, 1:]].float())  # sorted ascending
    if cand.numel() == 0:
        raise ValueError("cannot fit a patch threshold: the training windows hold fewer than 2 bytes")

    def size_at(k: int) -> float:
        return mean_patch_size(patch_starts(entropies, float(cand[k]), monotonic, max_patch_bytes), valid)

    lo, hi = 0, cand.numel() - 1  # invariant: the answer index lies in [lo, hi]
    while lo < hi:
        mid = (lo + hi) // 2
        if size_at(mid) < target_patch_size:
            lo = mid + 1
        else:
            hi = mid
    # lo: first index whose size >= target (or the last one); its left neighbour may be closer.
    best = min({lo, max(0, lo - 1)}, key=lambda k: abs(size_at(k) - target_patch_size))
    # θ = the value itself: values equal to θ do not start a patch (strict >).
    return float(cand[best]), size_at(best)
