"""A scaling sweep across the ranks of a torchrun job: grid points dealt over ranks, rank 0 gathers.

    tokbench run scaling --nproc 6 --device cuda --set 'scaling.only_budgets=[5.12e14]'

Each grid point is one whole model, trained by one rank exactly as a one-process run trains it
(``harness.pipeline.sweep.train_sweep`` with an ``owned`` filter): same windows in the same order, same
schedule, same seed, same model-cache key, so a point trained under ``--nproc 2`` is the file a
one-process run would write, and a killed job resumes from the cached points. Several ranks may
share one GPU (``harness.pipeline.distributed.init`` maps local ranks onto the visible GPUs round-robin):
a small model's step is bound by the host's launches, so two processes on one GPU fill each
other's idle gaps.

Under ``scaling.stack`` a rung's points of one seed are one unit of the deal (``sweep_units``): they
train as one stacked model in one process. The deal is longest-processing-time first (``assign_lpt``) over an estimate of each point's
seconds that needs no fit stage: steps × the host's per-step floor + FLOPs ÷ a GPU rate, with
steps from 6 × parameters FLOPs per byte. Refused points cost nothing and still go to a rank,
which records the refusal.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from harness.config.scaling import GridPoint, ScalingConfig, grid
from harness.pipeline.sweep import point_spec

# Balancing constants of the deal, not a prediction: the eager step's host floor on an H100 host
# (6-9 ms a step measured for the scaling ladder) and a GPU rate for the FLOPs beyond it.
HOST_STEP_SECONDS = 7e-3
GPU_FLOPS_PER_SECOND = 1e14


def point_cost(budget: float, params_total: int, batch_bytes: int) -> float:
    """Estimated seconds of one grid point before any fit: steps × HOST_STEP_SECONDS + budget ÷
    GPU_FLOPS_PER_SECOND, steps = budget / (6 · params_total · batch_bytes) (FLOPs per byte of a
    byte-level model without attention; it orders points, it does not plan them)."""
    steps = budget / (6.0 * max(1, params_total) * max(1, batch_bytes))
    return steps * HOST_STEP_SECONDS + budget / GPU_FLOPS_PER_SECOND


def sweep_costs(suite: Any, base_dir: Any) -> dict[tuple[int, str], float]:
    """{(seed, point label): estimated seconds} of every grid point of the selected budgets, in
    the one-process training order (seed, budget, size, encoder); one unfitted model built per
    (encoder, size) to count its parameters."""
    from harness.train.loop import build_encoder

    cfg: ScalingConfig = suite.scaling
    specs = {s.label: s for s in suite.encoders}
    params: dict[tuple[str, str], int] = {}
    out: dict[tuple[int, str], float] = {}
    for seed in suite.seeds:
        for p in grid(cfg, list(specs)):
            k = (p.encoder, p.rung.name)
            if k not in params:
                enc = build_encoder(point_spec(cfg, specs[p.encoder], p), suite.seeds[0], base_dir)
                params[k] = sum(x.numel() for x in enc.parameters())
            out[(seed, p.label)] = point_cost(p.budget, params[k], suite.budget.batch_bytes)
    return out


def plan_sweep(costs: dict[tuple[int, str], float], world: int,
               units: dict[tuple[int, str], Hashable] | None = None) -> dict[tuple[int, str], int]:
    """{(seed, point label): rank}, longest first, balanced by ``costs``. ``units`` (``sweep_units``):
    points with the same unit go to one rank together, dealt by their summed cost."""
    from harness.infra.schedule import assign_lpt

    unit_of = units or {j: j for j in costs}
    groups: dict[Hashable, list[tuple[int, str]]] = {}
    for j in costs:
        groups.setdefault(unit_of.get(j, j), []).append(j)
    keys = list(groups)
    ranks = assign_lpt([sum(costs[j] for j in groups[k]) for k in keys], world)
    return {j: r for k, r in zip(keys, ranks) for j in groups[k]}


def sweep_units(suite: Any) -> dict[tuple[int, str], Hashable] | None:
    """Under ``scaling.stack``: {(seed, point label): (seed, encoder, size)} — a rung's points of
    one seed train as one stacked model (``harness.pipeline.sweep_stack``), so one rank takes them
    all; else None (every point its own unit)."""
    cfg: ScalingConfig = suite.scaling
    if not cfg.stack:
        return None
    points = grid(cfg, [s.label for s in suite.encoders])
    return {(seed, p.label): (seed, p.encoder, p.rung.name) for seed in suite.seeds for p in points}


def sweep_order(suite: Any, seed: int, trained: Sequence[str] | set[str] | dict[str, Any]) -> list[tuple[str, Any]]:
    """(label, spec) of the trained points of ``seed`` in a one-process run's order (budget,
    size, encoder): the order its run.json facts and results rows are written in."""
    cfg: ScalingConfig = suite.scaling
    specs = {s.label: s for s in suite.encoders}
    points: list[GridPoint] = grid(cfg, list(specs))
    return [(p.label, point_spec(cfg, specs[p.encoder], p)) for p in points if p.label in trained]


def merged_refusals(suite: Any, per_rank: Sequence[dict[str, str]]) -> dict[str, str]:
    """The ranks' refused points merged in grid order (a one-process run's ``scaling.refused``)."""
    got: dict[str, str] = {}
    for r in per_rank:
        got.update(r)
    labels = [p.label for p in grid(suite.scaling, [s.label for s in suite.encoders])]
    return {label: got[label] for label in labels if label in got}
