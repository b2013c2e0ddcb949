"""The one definition of bytes per segment (token, patch or byte), used by the BLT fit log,
results.csv ``bytes_per_segment``, the report's efficiency table and its segments figure.

A *segment* is what an encoder's sequence model steps over. Over a scored span, an encoder's
segments are those that hold at least one scored byte, each clipped to the span, so they tile
it exactly: a patch that starts in the context before the span and runs into it counts once,
with its scored bytes (``UnitNLL.segments``; the harness checks the tiling). Then

    bytes per segment = Σ scored bytes / Σ segments

over whatever is pooled (a window, a cell, the clean cells of an encoder): a ratio of sums, like
BPB, so a long document weighs by its bytes. A byte-level encoder has exactly 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def bytes_per_segment(n_bytes: float, n_segments: float) -> float:
    """Σ bytes / Σ segments; NaN when there are no segments."""
    return float(n_bytes) / float(n_segments) if n_segments and n_segments > 0 else math.nan


def check_tiling(segments: Sequence[int], n_scored: int, where: str = "") -> None:
    """Raise AssertionError (an encoder bug, not bad input — like ``UnitNLL.byte_nll``'s check)
    unless ``segments`` (byte lengths, each ≥ 1) sum to ``n_scored``."""
    # min/sum run at C speed over a list as it is (an encoder's lists of ints: no copy); this runs
    # per scored window on the scoring loop's thread (a 256-window BPE-like batch on the VM: 1.66
    # ms converting every length first, 0.51 ms without; benchmarks/bench_byte_nll.py)
    lengths = segments if type(segments) is list else list(map(int, segments))
    if (lengths and min(lengths) < 1) or sum(lengths) != n_scored:
        raise AssertionError(f"segments{' of ' + where if where else ''} do not tile the "
                         f"{n_scored} scored bytes: {len(lengths)} segments summing to "
                         f"{sum(lengths)} (lengths must be ≥ 1)")


def window_segments(segments: Sequence[Any], n_scored: Sequence[int], where: str = "") -> list[list[int]]:
    """Each window's segment lengths as a list, checked like ``check_tiling`` (AssertionError
    naming ``where`` unless window j's lengths are ≥ 1 and sum to ``n_scored[j]``).

    ``segments``: per window a sequence of lengths, or an object whose ``flat()`` returns
    (lengths (S,) int array of every window in order, offsets (W + 1,) int array: window j's are
    ``lengths[offsets[j]:offsets[j + 1]]``) — then the check is one pass of array operations and
    the lists are slices of one converted list. Why: a 512-window BPE-like batch's segments cost
    the scoring loop's thread 2.10 ms to index, convert and check one window at a time, 0.53 ms
    at once (the idle 2-core VM, ``benchmarks/bench_byte_nll.py --windows 512``,
    ``benchmarks/results/window_segments_cpu_s26.log``).
    """
    flat_of = getattr(segments, "flat", None)
    if flat_of is None:
        out = []
        for j, n in enumerate(n_scored):
            lengths = segments[j]
            check_tiling(lengths, n, where)
            out.append(lengths if type(lengths) is list else list(map(int, lengths)))
        return out
    lengths, offsets = flat_of()
    lengths = np.asarray(lengths, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    if len(offsets) != len(n_scored) + 1:
        raise AssertionError(f"segments{' of ' + where if where else ''}: {len(offsets) - 1} windows "
                             f"for {len(n_scored)} scored spans")
    # per-window sums from one cumulative sum (``np.add.reduceat`` misreads empty windows)
    cum = np.concatenate(([0], np.cumsum(lengths)))
    sums = cum[offsets[1:]] - cum[offsets[:-1]]
    want = np.asarray(n_scored, dtype=np.int64)
    bad = np.flatnonzero(sums != want)
    if lengths.size and int(lengths.min()) < 1:
        low = np.flatnonzero(lengths < 1)[0]
        bad = np.union1d(bad, [int(np.searchsorted(offsets, low, side="right") - 1)])
    if bad.size:
        j = int(bad[0])
        check_tiling(lengths[offsets[j] : offsets[j + 1]].tolist(), int(want[j]), where)  # raises, as it says
    every = lengths.tolist()
    bounds = offsets.tolist()
    return [every[bounds[j] : bounds[j + 1]] for j in range(len(n_scored))]
