"""Meters of the hardware's pace, read by the run and the benchmarks: the bf16 GEMM ceiling
(``gemm_tflops``, TFLOP/s: the MFU denominator), a training loop's step times on the device
(``StepClock``, ms) and the GPU's idle share of a span of steps (``IdleMeter``). They measure
only; nothing they do changes what the loop computes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import torch


def gemm_tflops(device: torch.device, n: int = 8192, reps: int = 20) -> float | None:
    """Measured dense bf16 matrix-product rate (TFLOP/s) of an n×n×n product on ``device``,
    random inputs, median of ``reps`` timed with CUDA events after a warm-up. None on CPU."""
    if device.type != "cuda":
        return None
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=g)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    del a, b
    return 2.0 * n**3 / times[len(times) // 2] / 1e12


def union_length(spans: Iterator[tuple[float, float]] | list[tuple[float, float]]) -> float:
    """Total length covered by intervals [a, b) (overlaps counted once): the device's busy time
    from its kernel and copy intervals, which overlap across streams."""
    total, end = 0.0, -math.inf
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def _upper_median(xs: list[float]) -> float:
    """The middle item of xs sorted (the upper one of the two middles for an even count)."""
    return sorted(xs)[len(xs) // 2]


def _quarters(xs: list[float]) -> list[list[float]]:
    """xs in four consecutive, nearly equal, non-empty parts (fewer when xs has < 4 items)."""
    n = len(xs)
    cuts = [round(i * n / 4) for i in range(5)]
    return [xs[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


class StepClock:
    """Where a training loop's wall time goes between its steps, without a host sync: a CUDA event
    recorded at the start of every step (the GPU reaches it when it has finished the steps
    before), read once at the end. ``summary()`` gives the device-side step times (ms between
    consecutive markers: the steady pace, the slow steps and what they add over the median),
    the host's own step-to-step times, and how long closing the batch feed took at the end.
    Off on CPU (``summary()`` is then None); costs one event record a step."""

    def __init__(self, device: torch.device) -> None:
        self.on = device.type == "cuda"
        self.events: list[Any] = []
        self.host: list[float] = []

    def mark(self) -> None:
        """Call at the start of each step, and once after the last one (before its final sync)."""
        if not self.on:
            return
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        self.events.append(e)
        self.host.append(time.perf_counter())

    def summary(self, close_seconds: float | None = None) -> dict[str, Any] | None:
        """Call after a synchronisation. Step i's time is marker i → i+1 on the device."""
        if not self.on or len(self.events) < 3:
            return None
        dev = [a.elapsed_time(b) for a, b in zip(self.events, self.events[1:])]
        host = [1e3 * (b - a) for a, b in zip(self.host, self.host[1:])]
        steady = sorted(dev[1:])  # the first step holds the cold compile
        med = _upper_median(steady)
        p90 = steady[min(len(steady) - 1, int(0.9 * len(steady)))]
        slow = sorted(range(1, len(dev)), key=lambda i: -dev[i])[:8]
        return {
            "steps": len(dev),
            "first_ms": dev[0],
            "median_ms": med,
            "p90_ms": p90,
            "max_ms": steady[-1],
            "sum_ms": sum(dev),
            # what the steps after the first took beyond the median pace, in all
            "excess_over_median_ms": sum(max(0.0, d - med) for d in dev[1:]),
            "slowest": [[i, round(dev[i], 2), round(host[i], 2)] for i in slow],  # step, device ms, host ms
            # the median step of each quarter of the run after the first step: a drift (clocks,
            # memory) shows as a trend, a cold start as a slow first quarter
            "quarter_medians_ms": [_upper_median(q) for q in _quarters(dev[1:])],
            "host_median_ms": _upper_median(host[1:]),
            **({"close_seconds": close_seconds} if close_seconds is not None else {}),
        }


class IdleMeter:
    """GPU idle share of training steps ``first`` to ``last`` (exclusive), measured with the torch
    profiler: idle = 1 − Σ kernel and copy time on the device / wall time of those steps
    (synchronised at both ends). ``steps``: (first, last), from ``budget.idle_steps``; off when
    None or the device is not CUDA. The profiler's own host overhead makes the share an upper
    bound."""

    def __init__(self, device: torch.device, steps: tuple[int, int] | None) -> None:
        self.range: tuple[int, int] | None = None
        if steps is not None and device.type == "cuda":
            self.range = steps
        self.device = device
        self._prof: Any = None
        self._t0 = 0.0
        self.result: dict[str, float] | None = None
        # wall seconds spent stopping the profiler and reading its events (3-8 s a model on an
        # H200, BENCHMARKS.md): the measurement's cost, which the loop leaves out of
        # its training seconds
        self.overhead_seconds = 0.0

    def step(self, i: int) -> None:
        """Call at the start of step ``i`` (0-based, counting this run's steps)."""
        if self.range is None:
            return
        if i == self.range[0]:
            from torch.profiler import ProfilerActivity, profile

            torch.cuda.synchronize(self.device)
            self._prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            self._prof.__enter__()
            self._t0 = time.perf_counter()
        elif i == self.range[1] and self._prof is not None:
            self.finish()

    def finish(self) -> None:
        if self._prof is None:
            return
        torch.cuda.synchronize(self.device)
        t_end = time.perf_counter()
        wall = t_end - self._t0
        self._prof.__exit__(None, None, None)
        busy_us = union_length((e.time_range.start, e.time_range.end) for e in self._prof.events()
                               if "CUDA" in str(getattr(e, "device_type", "")))
        self.overhead_seconds += time.perf_counter() - t_end
        steps = self.range[1] - self.range[0] if self.range else 1
        self.result = {"steps": steps, "wall_seconds": wall, "device_busy_seconds": busy_us / 1e6,
                       "idle_fraction": max(0.0, 1.0 - busy_us / 1e6 / wall) if wall > 0 else float("nan"),
                       "meter_overhead_seconds": self.overhead_seconds}
        self._prof = None
