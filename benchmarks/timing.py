"""One timing helper for the host-side benchmarks run as ``PYTHONPATH=$PWD python3 benchmarks/X.py``."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], reps: int, warmup: int = 0) -> float:
    """Median wall seconds of ``reps`` calls of ``fn``, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
