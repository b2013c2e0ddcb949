"""The dry run's estimate of a scaling sweep's training wall under the sweep engine: grid points
dealt over ``ranks`` processes (``harness.pipeline.sweep_ranks``) that share ``gpus`` GPUs, each step
eager or a CUDA-graph replay (``harness.train.graph_step``) as the run will take it.

Two bounds, and the estimate is the larger: the ranks' makespan — each point's steps × its step
wall measured alone, dealt longest first as the run deals them (ranks whose steps leave the GPU
idle overlap freely) — and the GPUs' work — Σ steps × the step's GPU time over the GPUs (processes
on one GPU take turns on it: without MPS their kernels do not run at once). The GPU time of a
step is measured with the GPU held back (``torch.cuda._sleep``) while the host queues the steps,
so it holds no launch gaps. Under ``scaling.stack`` (``stack_estimate``) a rung's points are one stack
whose step is timed at its sizes.
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


def stacked_wall(steps: Sequence[int], step_seconds: Callable[[int], float]) -> float:
    """Seconds of one stack (``scaling.stack``) whose members take ``steps`` steps each: while k
    members are left a step costs ``step_seconds(k)``; the shortest leave first."""
    wall, prev = 0.0, 0
    ordered = sorted(steps)
    for i, n in enumerate(ordered):
        wall += (n - prev) * step_seconds(len(ordered) - i)
        prev = n
    return wall


def stack_estimate(points: Sequence[Any], built: dict[tuple[str, str], tuple[Any, Any]], budget: Any,
                   device: torch.device) -> float:
    """Training wall of the trained ``points`` of one seed under ``scaling.stack`` in one process:
    each rung of two or more stackable points (``harness.pipeline.sweep_stack``) as one stack — its
    step timed at its full size K and at 1 (``built``: the rung's encoder and a step's batch on
    the device), linear between — and every other point alone (steps × its measured step)."""
    from harness.train.graph_step import graph_capable
    from harness.train.stacked import Stack, StackedStep

    groups: dict[tuple[str, str], list[Any]] = {}
    for p in points:
        if not p.refused:
            groups.setdefault((p.encoder, p.rung.name), []).append(p)
    total = 0.0
    for key, pts in groups.items():
        enc, batch = built[key]
        cfg = getattr(enc, "backbone_config", None)
        if (len(pts) < 2 or not graph_capable(enc) or any(p.fit_flops for p in pts)
                or (cfg is not None and cfg.dropout) or budget.windows_per_micro_batch < budget.windows_per_step):
            total += sum(p.steps * p.seconds_per_step for p in pts)
            continue

        def timed(k: int, enc: Any = enc, batch: Any = batch) -> float:
            step = StackedStep(Stack.of([enc] * k, enc, device), enc, budget, device,
                               budget.cuda_graphs and device.type == "cuda")
            return step_times(lambda: step(batch, [budget.lr] * k, batch.scored_bytes, 0), device)[0]

        k, one = len(pts), timed(1)
        full = timed(k)
        total += stacked_wall([p.steps for p in pts], lambda n, k=k, one=one, full=full: one + (full - one) * (n - 1) / (k - 1))
    return total
