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
