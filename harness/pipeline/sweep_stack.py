"""``scaling.stack``: a sweep's points of one rung trained as one stacked model (``harness.train.stacked``).

    rest = train_stacks(pending, runner, train, seed, finish)   # in harness.pipeline.sweep.train_sweep

Why the points of a rung can share one step: for one seed they start from the same weights
(``build_encoder`` seeds them alike), and each reads ``training_windows(docs, 10 × its bytes + a
batch, context, seed)`` — the same document order and cuts whatever the length (the length only
cuts the stream's last window, ten times further than the FLOP cap lets a point read), so a shorter
budget's batches are a prefix of a longer one's. A BPE rung's merges are learned once per process
for every point. What differs is the learning rate's schedule (warm-up and cosine over the point's
own bytes) and where the FLOP cap stops it; the stacked loop keeps both per point.

A group is the planned (not cached, not refused) points of one (encoder, size) that qualify:
autoregressive byte-level or BPE models (``graph_capable``), no dropout (the points would draw
their masks from one generator), no fit stage that trains (BLT), one micro-batch a step. A group
of one, and every point that does not qualify (the masked-diffusion objective among them: its
masks are drawn per step from the global generator, a stream the stack cannot reproduce for each
point), trains one at a time as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.config.scaling import HEADLINE_ATTENTION


def stackable(job: dict[str, Any], budget: Any) -> bool:
    """Whether a planned grid point may train in a stack (see the module's docstring)."""
    from harness.train.graph_step import graph_capable

    spec = job["spec"]
    return (graph_capable(job["enc"]) and (spec.backbone is None or spec.backbone.dropout == 0)
            and job["point"].fit_flops == 0 and budget.windows_per_micro_batch >= budget.windows_per_step)


def smallest_stack(streams: int) -> int:
    """The fewest points a stack holds: 2, but 1 with several stacks in flight (a lone point then
    steps beside the others instead of alone)."""
    return 1 if streams > 1 else 2


def stack_groups(jobs: list[dict[str, Any]], budget: Any, by_rung: bool = True,
                 smallest: int = 2) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
    """(groups of at least ``smallest`` stackable points — of one (encoder, size) if ``by_rung``,
    else each point its own — in grid order; the rest)."""
    groups_of: dict[Any, list[dict[str, Any]]] = {}
    rest: list[dict[str, Any]] = []
    for job in jobs:
        if stackable(job, budget):
            p = job["point"]
            groups_of.setdefault((p.encoder, p.rung.name) if by_rung else p.label, []).append(job)
        else:
            rest.append(job)
    groups = [g for g in groups_of.values() if len(g) >= smallest]
    rest += [j for g in groups_of.values() if len(g) < smallest for j in g]
    order = {id(j): i for i, j in enumerate(jobs)}
    return groups, sorted(rest, key=lambda j: order[id(j)])


def train_stacks(jobs: list[dict[str, Any]], runner: Any, train: Any, seed: int,
                 finish: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
    """Train the stackable ``jobs`` as stacked models, each point handed to ``finish`` (with its
    ``stats``) the moment it ends; returns the jobs left to train alone. ``scaling.stack``: a
    rung's points are one stack (a rung at one budget trains alone); ``scaling.streams`` N > 1:
    N stacks at once on their own CUDA streams (``train_at_once``), a lone stackable point a
    stack of one."""
    from encoders.backbone import causal_attention_cost
    from harness.train.stacked_loop import train_at_once

    cfg, b = runner.suite.scaling, runner.budget
    groups, rest = stack_groups(jobs, b, by_rung=cfg.stack, smallest=smallest_stack(cfg.streams))
    # FLOPs counted in the headline convention (the feeds' threads copy this context as they start)
    with causal_attention_cost(HEADLINE_ATTENTION):
        train_at_once([_stack_run(group, runner, train, seed, finish) for group in groups], runner.device,
                      cfg.streams)
    return rest


def _stack_run(group: list[dict[str, Any]], runner: Any, train: Any, seed: int,
               finish: Callable[[dict[str, Any]], None]) -> Callable[[Any, int], Any]:
    """What starts ``group``'s stack for ``train_at_once``: its ``stack_steps``, on its windows,
    with its checkpoint."""
    from harness.data.load import training_windows
    from harness.train.loop import Checkpointer
    from harness.train.stacked_loop import Member, stack_steps

    b = runner.budget
    members = [Member(j["enc"], j["budget"], j["point"].train_bytes, j["point"].budget - j["point"].fit_flops,
                      j["point"].label) for j in group]
    by_label = {j["point"].label: j for j in group}
    longest = max(group, key=lambda j: j["point"].budget)
    p = longest["point"]
    name = f"{p.encoder}:{p.rung.name}"

    def done(m: Member, stats: dict[str, Any]) -> None:
        by_label[m.label]["stats"] = stats
        finish(by_label[m.label])

    def start(share: Any, at_once: int) -> Any:
        runner.log(f"[scaling] {name} seed {seed}: " + (
            f"{len(group)} points as one stacked model ({', '.join(j['point'].label for j in group)})"
            if len(group) > 1 else f"{p.label} as a stack of one") + (f", {at_once} stacks at once" if at_once > 1 else ""))
        return stack_steps(
            members, training_windows(train.docs, 10 * p.train_bytes + b.batch_bytes, b.context_bytes, seed),
            runner.device, on_finish=done,
            # keyed by the longest point: it is in the stack until the end, so a resumed run
            # whose shorter points are cached finds the checkpoint
            checkpoint=Checkpointer(runner.rd.partial_path(longest["key"] + "-stack"), runner.opts.checkpoint_seconds),
            progress=runner._bar(f"train {name} s{seed} (stack of {len(group)})", p.train_bytes),
            share=share, at_once=at_once)

    return start
