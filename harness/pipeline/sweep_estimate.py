"""The dry run's estimate of a scaling sweep's training wall under the sweep engine: grid points
dealt over ``ranks`` processes (``harness.pipeline.sweep_ranks``) that share ``gpus`` GPUs, each step
eager or a CUDA-graph replay (``harness.train.graph_step``) as the run will take it.

Two bounds, and the estimate is the larger: the ranks' makespan — each point's steps × its step
wall measured alone, dealt longest first as the run deals them (ranks whose steps leave the GPU
idle overlap freely) — and the GPUs' work — Σ steps × the step's GPU time over the GPUs (processes
on one GPU take turns on it: without MPS their kernels do not run at once). The GPU time of a
step is measured with the GPU held back (``torch.cuda._sleep``) while the host queues the steps,
so it holds no launch gaps. Under ``scaling.stack`` (``stack_estimate``) a rung's points are one stack
whose step is timed at its sizes; under ``scaling.streams`` several stacks step in turn, and a
round of them costs what the GPU takes for their steps on separate streams (``measure_overlap``).
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
    return at_once_wall([(steps, step_seconds)], 1, 1.0)


def at_once_wall(units: Sequence[tuple[Sequence[int], Callable[[int], float]]], at_once: int,
                 overlap: float) -> float:
    """Seconds of ``units`` stepped in turn from one thread, at most ``at_once`` in flight
    (``scaling.streams``; the next unit starts as one ends). A unit is a stack: its members' steps
    and a step's seconds while k members are left (the shortest leave first). A round — one step
    of each unit in flight — costs the larger of its slowest step and the sum of its steps over
    ``overlap`` (how many steps the GPU runs in the time of one when they come from several
    streams: measured, ``measure_overlap``)."""
    todo = [sorted(steps) for steps, _ in units]
    costs = [cost for _, cost in units]
    active: list[list[Any]] = []  # [unit index, steps taken]
    nxt, wall = 0, 0.0
    while nxt < len(todo) or active:
        while nxt < len(todo) and len(active) < at_once:
            active.append([nxt, 0])
            nxt += 1
        left = [[n for n in todo[u] if n > done] for u, done in active]
        step = [costs[u](len(ls)) for (u, _), ls in zip(active, left)]
        rounds = min(ls[0] - done for (_, done), ls in zip(active, left))  # until the next member ends
        wall += rounds * max(max(step), sum(step) / max(overlap, 1.0))
        for a in active:
            a[1] += rounds
        active = [a for a in active if any(n > a[1] for n in todo[a[0]])]
    return wall


def measure_overlap(steps: Sequence[tuple[Callable[[], Any], float]], device: torch.device, rounds: int = 5) -> float:
    """How many of ``steps`` (training steps on device data, each already warmed up: captured,
    with its wall alone from ``step_times``) the GPU runs in the time of one when each is queued
    on its own CUDA stream in turn: Σ of their walls alone / the wall of a round. 1 on CPU or
    for one step."""
    if device.type != "cuda" or len(steps) < 2:
        return 1.0
    streams = [torch.cuda.Stream(device) for _ in steps]
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(rounds):
        for (s, _), st in zip(steps, streams):
            with torch.cuda.stream(st):
                s()
    torch.cuda.synchronize(device)
    return sum(wall for _, wall in steps) / ((time.perf_counter() - t0) / rounds)


def stack_estimate(points: Sequence[Any], built: dict[tuple[str, str], tuple[Any, Any]], budget: Any,
                   device: torch.device, stack: bool = True, streams: int = 1) -> float:
    """Training wall of the trained ``points`` of one seed in one process under ``scaling.stack``
    (each rung of two or more stackable points (``harness.pipeline.sweep_stack``) one stack) and
    ``scaling.streams`` (``streams`` stacks at once, a lone stackable point a stack of one): a
    stack's step timed at its full size K and at 1 (``built``: the rung's encoder and a step's
    batch on the device), linear between; every other point alone (steps × its measured step)."""
    from harness.pipeline.sweep_stack import smallest_stack
    from harness.train.graph_step import graph_capable
    from harness.train.stacked import Stack, StackedStep

    groups: dict[Any, list[Any]] = {}
    for p in points:
        if not p.refused:
            groups.setdefault((p.encoder, p.rung.name) if stack else p.label, []).append(p)
    total = 0.0
    units: list[tuple[list[int], Callable[[int], float]]] = []
    first: list[tuple[Callable[[], Any], float]] = []  # each first-wave unit's full-size step, its wall
    for pts in groups.values():
        enc, batch = built[(pts[0].encoder, pts[0].rung.name)]
        cfg = getattr(enc, "backbone_config", None)
        if (len(pts) < smallest_stack(streams) or not graph_capable(enc) or any(p.fit_flops for p in pts)
                or (cfg is not None and cfg.dropout) or budget.windows_per_micro_batch < budget.windows_per_step):
            total += sum(p.steps * p.seconds_per_step for p in pts)
            continue

        def made(k: int, enc: Any = enc, batch: Any = batch) -> Callable[[], Any]:
            step = StackedStep(Stack.of([enc] * k, enc, device), enc, budget, device,
                               budget.cuda_graphs and device.type == "cuda")
            return lambda: step(batch, [budget.lr] * k, batch.scored_bytes, 0)

        k = len(pts)
        full = made(k)
        t_one, t_full = step_times(made(1), device)[0], step_times(full, device)[0]
        if len(first) < streams:
            first.append((full, t_full))
        units.append(([p.steps for p in pts],
                      lambda n, k=k, a=t_one, b=t_full: a + (b - a) * (n - 1) / max(1, k - 1)))
    return total + at_once_wall(units, streams, measure_overlap(first, device))
