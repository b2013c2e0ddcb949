"""Dealing jobs of known cost over workers: the models of a run over torchrun ranks, the points of
a sweep over ranks."""

from __future__ import annotations


def assign_lpt(costs: list[float], world: int) -> list[int]:
    """Rank of each job: longest processing time first — jobs in decreasing cost (ties: lower
    index first), each to the rank with the least total so far (ties: lowest rank). Deterministic;
    its makespan is at most 4/3 of the optimum."""
    load = [0.0] * world
    owner = [0] * len(costs)
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        r = min(range(world), key=lambda r: (load[r], r))
        owner[i] = r
        load[r] += costs[i]
    return owner
