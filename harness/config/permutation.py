"""Static permutations of windows for the context-fragility study (issue #18). No torch.

    spec = Permutation(kind="inter_block", block_bytes=16)
    pw = permute_window(window, unit_lengths=[1] * len(window), spec=spec, context=1024, seed=0)
    b"".join(pw.units)           # what the model is fed (and trained on)
    unpermute(values, pw.source)  # per-byte values of the fed stream, back in the window's order

A window is cut into the encoder's *prediction units* (bytes for byte-level encoders, tokens for
BPE, given as their byte lengths); the permutation reorders whole units, so a BPE token is never
split and byte and BPE models lose comparable structure:

  * ``global`` — units in the order of one fixed random permutation of positions 0..context−1.
  * ``inter_block`` — units grouped into blocks of about ``block_bytes`` bytes (see ``blocks``);
    blocks kept whole, block order shuffled by a fixed permutation of 0..context−1.
  * ``intra_block`` — block order kept, units inside block k shuffled by a fixed permutation
    of 0..block_bytes−1 drawn for that block index.
  * ``none`` — the identity (the original stream).

Every fixed permutation is drawn once from (seed, kind, block_bytes, [block index]) with a
sha256-seeded ``random.Random`` (never Python's salted ``hash``), so it is the same in every
process, on every machine, for training and for scoring. A window with fewer units than the
permutation's length takes the *induced* order: the fixed permutation's entries that are < n, in
the order they appear (``induced``). Units are at least one byte and a window at most ``context``
bytes, so a window never has more units than positions.
"""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

KINDS = ("none", "global", "inter_block", "intra_block")
BLOCK_KINDS = ("inter_block", "intra_block")
Kind = Literal["none", "global", "inter_block", "intra_block"]


@dataclass(frozen=True, kw_only=True)
class Permutation:
    """One static permutation. ``block_bytes`` (bytes, > 0) is required by the block kinds and
    must be absent (None) for ``none`` and ``global``."""

    kind: Kind = "none"
    block_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"permutation kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind in BLOCK_KINDS:
            if not isinstance(self.block_bytes, int) or isinstance(self.block_bytes, bool) \
                    or self.block_bytes < 1:
                raise ValueError(f"permutation {self.kind}: block_bytes must be a positive integer, "
                                 f"got {self.block_bytes!r}")
        elif self.block_bytes is not None:
            raise ValueError(f"permutation {self.kind}: block_bytes does not apply "
                             f"(got {self.block_bytes!r})")

    @property
    def label(self) -> str:
        """``none``, ``global``, ``inter_block-16``: the suffix of variant labels (``bytes~global``)."""
        return self.kind if self.block_bytes is None else f"{self.kind}-{self.block_bytes}"

    @property
    def is_identity(self) -> bool:
        return self.kind == "none"


def variant_label(name: str, perm: Permutation) -> str:
    """Label of an encoder (or compressor) trained/scored under ``perm``: ``bytes``,
    ``bytes~inter_block-16``."""
    return name if perm.is_identity else f"{name}~{perm.label}"


@functools.lru_cache(maxsize=4096)
def fixed_order(n: int, seed: int, *key: object) -> tuple[int, ...]:
    """A permutation of 0..n−1 drawn from sha256(seed, key): identical in every process."""
    blob = "\x1f".join(str(p) for p in ("tokbench.permutation", seed, n, *key)).encode()
    rng = random.Random(int.from_bytes(hashlib.sha256(blob).digest()[:8], "big"))
    order = list(range(n))
    rng.shuffle(order)
    return tuple(order)


def induced(order: Sequence[int], n: int) -> list[int]:
    """The order a permutation of 0..len(order)−1 induces on 0..n−1: its entries < n, in turn."""
    if n > len(order):
        raise ValueError(f"{n} positions exceed the fixed permutation's {len(order)}")
    return [i for i in order if i < n] if n < len(order) else list(order)


def blocks(unit_lengths: Sequence[int], block_bytes: int) -> list[tuple[int, int]]:
    """Cut consecutive units into blocks, as unit index ranges ``[a, b)`` in order.

    Greedy from the left: a block takes units while its byte size stays <= ``block_bytes``; a unit
    longer than ``block_bytes`` on its own forms a block. So blocks end on unit (token)
    boundaries, hold at most ``block_bytes`` bytes unless they are a single long unit, and for
    single-byte units they are exactly ``block_bytes`` bytes (the last one possibly shorter)."""
    out: list[tuple[int, int]] = []
    a, size = 0, 0
    for i, ln in enumerate(unit_lengths):
        if ln < 1:
            raise ValueError(f"unit {i} has length {ln}; units are at least one byte")
        if i > a and size + ln > block_bytes:
            out.append((a, i))
            a, size = i, 0
        size += ln
    if len(unit_lengths) > a:
        out.append((a, len(unit_lengths)))
    return out


def unit_order(unit_lengths: Sequence[int], perm: Permutation, context: int, seed: int) -> list[int]:
    """The permuted order of a window's units: entry j is the index of the unit fed at place j.

    unit_lengths: byte length of each unit of the window, in the window's order (Σ <= context).
    """
    n = len(unit_lengths)
    if sum(unit_lengths) > context:
        raise ValueError(f"window of {sum(unit_lengths)} bytes exceeds context_bytes={context}")
    if perm.kind == "none":
        return list(range(n))
    if perm.kind == "global":
        return induced(fixed_order(context, seed, "global"), n)
    assert perm.block_bytes is not None
    bl = blocks(unit_lengths, perm.block_bytes)
    if perm.kind == "inter_block":
        out: list[int] = []
        for k in induced(fixed_order(context, seed, "inter_block", perm.block_bytes), len(bl)):
            out.extend(range(*bl[k]))
        return out
    out = []
    for k, (a, b) in enumerate(bl):
        # a block holds <= block_bytes units, except a single over-long unit (b - a == 1)
        sigma = fixed_order(max(perm.block_bytes, b - a), seed, "intra_block", perm.block_bytes, k)
        out.extend(a + i for i in induced(sigma, b - a))
    return out


def invert(order: Sequence[int]) -> list[int]:
    """The inverse permutation: ``invert(p)[p[j]] == j``."""
    inv = [0] * len(order)
    for j, i in enumerate(order):
        inv[i] = j
    return inv


@dataclass(frozen=True)
class PermutedWindow:
    """A window after permutation.

    data: the fed stream (the window's bytes in the fed order).
    order: (n_units,) index in the original window of the unit fed at place j.
    source: (n_bytes,) offset in the original window of byte j of the fed stream.
    lengths: (n_units,) byte length of each fed unit, in the fed order.
    """

    data: bytes
    order: tuple[int, ...]
    source: tuple[int, ...]
    lengths: tuple[int, ...]

    @property
    def units(self) -> tuple[bytes, ...]:
        """The fed units as byte strings, in the fed order (``b"".join(units) == data``)."""
        out, pos = [], 0
        for ln in self.lengths:
            out.append(self.data[pos : pos + ln])
            pos += ln
        return tuple(out)


def permute_window(window: bytes, unit_lengths: Sequence[int], perm: Permutation, context: int,
                   seed: int) -> PermutedWindow:
    """Permute the units of ``window`` (cut by ``unit_lengths``, which must sum to its length)."""
    if sum(unit_lengths) != len(window):
        raise ValueError(f"unit lengths sum to {sum(unit_lengths)}, the window has {len(window)} bytes")
    if len(unit_lengths) == len(window):  # one byte per unit (byte encoders, compressors)
        order, index = _byte_order(len(window), perm, context, seed)
        data = np.frombuffer(window, dtype=np.uint8)[index].tobytes()
        return PermutedWindow(data, order, order, (1,) * len(window))
    starts = [0] * len(unit_lengths)
    for i in range(1, len(unit_lengths)):
        starts[i] = starts[i - 1] + unit_lengths[i - 1]
    order = unit_order(unit_lengths, perm, context, seed)
    data = b"".join(window[starts[i] : starts[i] + unit_lengths[i]] for i in order)
    source = tuple(s for i in order for s in range(starts[i], starts[i] + unit_lengths[i]))
    return PermutedWindow(data, tuple(order), source, tuple(unit_lengths[i] for i in order))


@functools.lru_cache(maxsize=4096)
def _byte_order(n: int, perm: Permutation, context: int, seed: int) -> tuple[tuple[int, ...], np.ndarray]:
    # With one byte per unit the order depends on the window length only: training and scoring
    # permute thousands of windows of a few lengths, so it is computed once per length.
    order = tuple(unit_order([1] * n, perm, context, seed))
    return order, np.asarray(order, dtype=np.intp)


def unpermute(values: Sequence[float], source: Sequence[int]) -> list[float]:
    """Per-byte values of a fed stream (e.g. NLL per byte), put back in the window's byte order."""
    if len(values) != len(source):
        raise ValueError(f"{len(values)} values for a stream of {len(source)} bytes")
    out = [0.0] * len(values)
    for j, s in enumerate(source):
        out[s] = values[j]
    return out


def check_scoring(modes: Sequence[str], stride_bytes: int | None, context_bytes: int) -> None:
    """Permutations are scored in full mode with stride = context only, so that a scored window
    is cut from the document whole and a permutation never mixes context and scored bytes.
    Raises a one-line ValueError naming the offending keys otherwise."""
    if tuple(modes) != ("full",):
        raise ValueError(f"permutations: need eval.modes: [full] (a permutation must never mix context "
                         f"and scored bytes), got {list(modes)}")
    if stride_bytes != context_bytes:
        raise ValueError(f"permutations: need eval.stride_bytes equal to budget.context_bytes "
                         f"({context_bytes}), got {stride_bytes}")


@dataclass(frozen=True)
class WindowPermuter:
    """Applies one permutation to every window an encoder is fed, in training and in scoring
    (the harness's one loop and one scoring function take it as an optional argument).

    ``collate(encoder, windows)`` → (batch, permuted windows): the encoder's ``collate_units``
    batch of the ``PermutedWindow`` objects (every byte scored; the encoder reads ``.data`` or
    ``.units``), and those windows, whose ``source`` puts per-byte results back in the original
    order. ``encoder`` is any
    ``encoders.base.Encoder`` (duck-typed here, so this module needs no torch)."""

    perm: Permutation
    context: int
    seed: int

    def collate(self, encoder: object, windows: Sequence[bytes]) -> tuple[object, list[PermutedWindow]]:
        pws = [permute_window(w, encoder.unit_lengths(w), self.perm, self.context, self.seed)  # type: ignore[attr-defined]
               for w in windows]
        return encoder.collate_units(pws), pws  # type: ignore[attr-defined]


def unpermute_segments(segments: Sequence[int], pw: PermutedWindow) -> list[int]:
    """An encoder's segment lengths of a fed window, in the window's own order when the segments
    are the permuted units (BPE tokens); otherwise (e.g. patches of the fed byte stream, which
    need not be contiguous in the original) as given — their lengths still count."""
    if list(pw.lengths) != list(segments):
        return list(segments)
    out = [0] * len(segments)
    for j, i in enumerate(pw.order):
        out[i] = segments[j]
    return out
