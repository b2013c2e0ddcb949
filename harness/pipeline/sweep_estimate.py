"""The dry run's estimate of a scaling sweep's training wall under the sweep engine: grid points
dealt over ``ranks`` processes (``harness.pipeline.sweep_ranks``) that share ``gpus`` GPUs, each step
eager or a CUDA-graph replay (``harness.train.graph_step``) as the run will take it.

Two bounds, and the estimate is the larger: the ranks' makespan — each point's steps × its step
wall measured alone, dealt longest first as the run deals them (ranks whose steps leave the GPU
idle overlap freely) — and the GPUs' work — Σ steps × the step's GPU time over the GPUs (processes
on one GPU take turns on it: without MPS their kernels do not run at once). The GPU time of a
step is measured with the GPU held back (``torch.cuda._sleep``) while the host queues the steps,
so it holds no launch gaps.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch


def step_times(step: Callable[[], Any], device: torch.device, reps: int = 3) -> tuple[float, float]:
    """(wall, GPU) seconds of one call of ``step`` (a training step on device data, no host
    sync inside), each the best / mean of ``reps`` after one warm-up call. On CPU both are the
    wall."""
    step()
    if device.type != "cuda":
        walls = []
        for _ in range(reps):
            t0 = time.perf_counter()
            step()
            walls.append(time.perf_counter() - t0)
        return min(walls), min(walls)
    torch.cuda.synchronize(device)
    walls = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize(device)
        walls.append(time.perf_counter() - t0)
    # queue ``reps`` steps behind a sleeping kernel: the GPU then runs them back to back
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(int(2e8))  # ~0.1 s at 2 GHz: longer than queueing a few eager steps
    start.record()
    for _ in range(reps):
        step()
    end.record()
    end.synchronize()
    return min(walls), start.elapsed_time(end) / 1e3 / reps


def sweep_wall(points: Sequence[Any], ranks: int, gpus: int) -> dict[str, float]:
    """Training wall of the trained ``points`` (``steps``, ``seconds_per_step`` and
    ``extra["gpu_seconds_per_step"]`` filled) on ``ranks`` processes over ``gpus`` GPUs:
    {"makespan", "gpu_work", "wall"} seconds (fit stages, loads and scoring not included)."""
    from harness.infra.schedule import assign_lpt

    alone = [p.steps * p.seconds_per_step for p in points]
    owner = assign_lpt(alone, max(1, ranks))
    load = [0.0] * max(1, ranks)
    for t, r in zip(alone, owner):
        load[r] += t
    gpu = sum(p.steps * p.extra.get("gpu_seconds_per_step", p.seconds_per_step) for p in points)
    makespan = max(load) if load else 0.0
    work = gpu / max(1, min(gpus, ranks))
    return {"makespan": makespan, "gpu_work": work, "wall": max(makespan, work)}
