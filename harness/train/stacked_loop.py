"""The training loop of a stack (``harness.train.stacked``): K members of one shape, one window stream,
each stopped exactly where ``harness.train.loop.train_encoder`` would stop it alone.

    stats = train_stack(members, windows, device, on_finish=save)   # one stats dict per member
    train_at_once([start_a, start_b, ...], device, at_once=6)       # several stacks, one stream each

Each member is a built encoder with its own budget (learning rate, warm-up and schedule length:
``lr_at(member.budget, seen, member.n_bytes)``) and FLOP cap. Before every step, as the lone loop
checks ``flops >= max_flops`` before taking a batch, the members whose cap is reached are
finished: their row is written into their own encoder, ``on_finish(member, stats)`` runs (the
sweep saves it to the model cache there, so a killed run keeps it), and the rest are re-stacked
with their optimizer state. The step's FLOPs are the template's count of the shared batch, the
same for every member (same shape, same batch), so each member's bytes, steps and FLOPs are the
lone loop's. Its ``seconds`` is its share of the stack's wall (each step's time split evenly over
the members it trained, and over the members of every stack in flight beside it), so the members'
seconds sum to the wall the stacks ran.

Several stacks at once (``scaling.streams``, ``train_at_once``): the loop is a generator that
yields after each step, and one host thread steps the stacks in flight in turn, each on its own
CUDA stream. A step of these small models is a few hundred kernels that each fill a fraction of
the GPU, so steps queued on several streams run at the same time; each stack's computation is
unchanged (tests/harness/train/test_stacked.py: bit for bit on CPU).

Resumable like the lone loop: with a ``Checkpointer`` the stack (weights, moments, counters, the
members' curves) is saved every ``every_seconds``; a restarted run whose unfinished members are
among the checkpoint's resumes there (a member finished and cached since is dropped at once).
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from core.metrics import LN2
from encoders.backbone import causal_attention_cost
from encoders.base import Encoder
from harness.config.suite import BudgetConfig
from harness.data.load import batched
from harness.data.pretokenize import pretokenized_batches
from harness.infra.accel import Prefetcher, collate_processes, ordered_pool_map, pin
from harness.train.loop import Checkpointer, lr_at, peak_memory
from harness.train.stacked import Stack, StackedStep


@dataclass
class Member:
    """One model of a stack: ``encoder`` (built, same shape as the others), its ``budget`` (lr,
    warmup_bytes), ``n_bytes`` (the schedule's length, ``train_encoder``'s ``n_bytes``) and
    ``max_flops`` (it stops at the first step that reaches them); ``label`` names it."""

    encoder: Encoder
    budget: BudgetConfig
    n_bytes: int
    max_flops: float
    label: str
    # the lone loop's host-side record, filled as its losses land
    curve: list[tuple[int, float]] = field(default_factory=list)
    recent: list[float] = field(default_factory=list)
    window: list[float] = field(default_factory=lambda: [0.0, 0.0])  # Σ loss × bytes, Σ bytes since the last point
    last_point: int = -1
    seconds: float = 0.0

    def take(self, lv: float, nb: int, seen: int, at: int) -> None:
        """A step's loss (bits per byte) over ``nb`` scored bytes, ``seen`` bytes after it:
        ``train_encoder``'s curve (a point every 1 % of ``n_bytes``) and last-10 mean."""
        if not math.isfinite(lv):
            raise FloatingPointError(f"training loss of {self.label} is {lv} at step {at}; lower budget.lr")
        self.recent = (self.recent + [lv])[-10:]
        self.window[0] += lv * nb
        self.window[1] += nb
        if seen - self.last_point >= max(1, self.n_bytes // 100) or self.last_point < 0:
            self.curve.append((seen, self.window[0] / self.window[1]))
            self.window = [0.0, 0.0]
            self.last_point = seen

    def host_state(self) -> dict[str, Any]:
        return {"curve": self.curve, "recent": self.recent, "window": self.window,
                "last_point": self.last_point, "seconds": self.seconds}


class _Losses:
    """The steps' (K,) losses from the device without waiting: a non-blocking copy into pinned
    memory behind an event (CUDA), read in step order by ``ready``."""

    def __init__(self, cuda: bool) -> None:
        self.cuda, self.queue = cuda, []  # type: ignore[var-annotated]

    def put(self, loss: torch.Tensor, members: list[Member], nb: int, seen: int, at: int) -> None:
        if self.cuda:
            host = torch.empty(loss.shape, dtype=loss.dtype, pin_memory=True)
            host.copy_(loss, non_blocking=True)
            done = torch.cuda.Event()
            done.record()
            self.queue.append((host, done, members, nb, seen, at))
        else:
            self.queue.append((loss, None, members, nb, seen, at))
        self.drain(wait=False)  # what has landed

    def drain(self, wait: bool) -> None:
        while self.queue:
            host, done, members, nb, seen, at = self.queue[0]
            if done is not None and not done.query():
                if not wait:
                    return
                done.synchronize()
            self.queue.pop(0)
            for m, v in zip(members, host.tolist()):
                m.take(v / LN2, nb, seen, at)


def _feed(template: Encoder, windows: Iterable[bytes], budget: BudgetConfig, device: torch.device,
          skip: int, at_once: int = 1) -> Prefetcher:
    """The steps' batches with the template's FLOP counts, as ``train_encoder`` makes them: BPE
    tokenized in bulk, byte-level collated per step; (batch, forward, frozen, causal-half FLOPs).
    ``at_once`` stacks in flight share the collation workers."""
    per_step = budget.windows_per_step
    workers = collate_processes(device)
    workers = max(1, workers // at_once) if workers else 0
    collated = pretokenized_batches(template, windows, per_step, per_step, skip, workers)
    if collated is None:
        todo = (chunk for i, chunk in enumerate(batched(windows, per_step)) if i >= skip)
        collated = ordered_pool_map(lambda c: [template.collate(c, [0] * len(c))], todo, workers)

    def prepare(batches: list[Any]) -> list[tuple[Any, float, float, float]]:
        out = []
        for batch in batches:
            frozen, fwd = template.frozen_flops(batch), template.flops(batch)
            with causal_attention_cost(0.5):
                half = 3.0 * template.flops(batch) - 2.0 * template.frozen_flops(batch)
            out.append((pin(batch) if device.type == "cuda" else batch, fwd, frozen, half))
        return out

    return Prefetcher(collated, prepare, depth=4, name="stacked training batches")


def _stats(m: Member, c: dict[str, Any], k0: int, wall: float, step: StackedStep | None,
           device: torch.device, at_once: int = 1) -> dict[str, Any]:
    """A finished member's run.json training facts, in ``train_encoder``'s form."""
    return {"forward_flops": c["fwd"], "bytes": c["seen"], "steps": c["steps"], "flops": c["flops"],
            "flops_causal_attn_half": c["causal"], "seconds": m.seconds,
            "first_step_seconds": c["first_s"], "first_step_flops_causal_attn_half": c["first_causal"],
            "setup_seconds": c["setup"], "host_wait_seconds": c["wait"], "compiled_modules": 0,
            **({"cuda_graph_steps": step.replays, "cuda_graphs": len(step.graphs)} if step is not None and step.use_graphs else {}),
            "bytes_per_s": c["seen"] / m.seconds if m.seconds > 0 else math.nan,
            "peak_mem_bytes": peak_memory(device),
            "peak_mem_kind": "cuda_allocated" if device.type == "cuda" else "process_max_rss",
            "final_loss_bpb": sum(m.recent) / len(m.recent) if m.recent else math.nan,
            "loss_curve": m.curve,
            # the stack it trained in: members at the start, the stack's wall when this one ended,
            # stacks in flight beside it
            "stack": {"members": k0, "wall_seconds": wall, "at_once": at_once, **({"resumed_at_step": c["resumed"]} if "resumed" in c else {}),
                      **({"vmap_fallback": sorted(step.fallbacks)} if step is not None and step.fallbacks else {})}}


def _resume(members: list[Member], checkpoint: Checkpointer | None, template: Encoder,
            device: torch.device) -> tuple[Stack, dict[str, Any]]:
    """A stack of ``members`` and the counters: fresh, or from a checkpoint whose members include
    them all (rows of members finished since are dropped)."""
    c = {"seen": 0, "steps": 0, "flops": 0.0, "fwd": 0.0, "causal": 0.0, "elapsed": 0.0}
    state = checkpoint.load() if checkpoint is not None else None
    labels = [m.label for m in members]
    if state is not None and "stack" in state and set(labels) <= set(state["labels"]):
        stack = Stack.from_state(state["stack"], template, device)
        stack = stack.keep([state["labels"].index(lb) for lb in labels], template)
        for m in members:
            h = state["members"][m.label]
            m.curve = [(int(a), float(b)) for a, b in h["curve"]]
            m.recent, m.window, m.last_point, m.seconds = list(h["recent"]), list(h["window"]), int(h["last_point"]), float(h["seconds"])
        c.update({k: state[k] for k in c})
        c["resumed"] = c["steps"]
        return stack, c
    return Stack.of([m.encoder for m in members], template, device), c


def _count(c: dict[str, Any], parts: list[tuple[Any, float, float, float]], nb: int) -> None:
    """A step's bytes and FLOPs into the counters, as ``train_encoder`` adds them."""
    for _, fwd, frozen, half in parts:
        c["flops"] += 3.0 * fwd - 2.0 * frozen
        c["fwd"] += fwd
        c["causal"] += half
    c["seen"] += nb
    c["steps"] += 1


def _checkpoint(stack: Stack, alive: list[Member], c: dict[str, Any], elapsed: float) -> dict[str, Any]:
    """What ``_resume`` reads: the stack, its members' labels (rows) and host records, the counters."""
    return {"stack": stack.state(), "labels": [m.label for m in alive],
            "members": {m.label: m.host_state() for m in alive},
            **{k: c[k] for k in ("seen", "steps", "flops", "fwd", "causal")}, "elapsed": elapsed,
            "model": {}, "optimizer": {}}  # the lone loop's checkpoint keys, so its reader accepts the file


class WallShare:
    """The wall split evenly over the members training at each moment, across every stack in
    flight (``train_at_once``), so the members' ``seconds`` sum to the wall the stacks ran."""

    def __init__(self) -> None:
        self.alive: list[Member] = []
        self.t = time.perf_counter()

    def tick(self) -> None:
        """Add the wall since the last tick to each member alive in it, in equal shares."""
        now = time.perf_counter()
        for m in self.alive:
            m.seconds += (now - self.t) / len(self.alive)
        self.t = now

    def join(self, members: Sequence[Member]) -> None:
        self.tick()
        self.alive += members

    def leave(self, members: Sequence[Member]) -> None:
        self.tick()
        gone = {id(m) for m in members}
        self.alive = [m for m in self.alive if id(m) not in gone]


def train_stack(members: Sequence[Member], windows: Iterable[bytes], device: torch.device, *,
                on_finish: Callable[[Member, dict[str, Any]], None],
                checkpoint: Checkpointer | None = None,
                progress: Callable[[int, int, float], None] | None = None) -> dict[str, dict[str, Any]]:
    """Train ``members`` (one encoder class and shape; each row starts from its own encoder's
    weights) on the shared ``windows``; the shared settings (batch, betas, decay, clip, dtype,
    cuda_graphs) are the shortest member's budget's. Returns label → stats; ``on_finish`` gets
    each member as it ends, shortest first."""
    steps = stack_steps(members, windows, device, on_finish=on_finish, checkpoint=checkpoint, progress=progress)
    while True:
        try:
            next(steps)
        except StopIteration as end:
            return end.value  # type: ignore[no-any-return]


def train_at_once(runs: Sequence[Callable[[WallShare, int], Generator[None, None, Any]]], device: torch.device,
                  at_once: int) -> None:
    """Step the stacks of ``runs`` in turn from this thread, at most ``at_once`` in flight, each on
    its own CUDA stream (one stack's small kernels leave most of the GPU idle; the streams let
    the GPU run several stacks' steps at the same time). ``runs[i](share, at_once)`` starts run i
    (``stack_steps``), which yields after each step. Each stack's computation is its own, so the
    order of the turns changes no number. On CPU, or with ``at_once`` 1, the turns run on the
    current stream. A failing run closes the others (their ``finally`` ends their feeds)."""
    from collections import deque

    share = WallShare()
    cuda = device.type == "cuda" and at_once > 1
    free: list[torch.cuda.Stream | None] = [torch.cuda.Stream(device) for _ in range(at_once)] if cuda else [None] * at_once
    todo = deque(runs)
    active: list[tuple[Generator[None, None, Any], torch.cuda.Stream | None]] = []
    try:
        while todo or active:
            while todo and len(active) < at_once:
                stream = free.pop()
                if stream is not None:  # after what the caller's stream queued (the models' weights)
                    stream.wait_stream(torch.cuda.current_stream(device))
                with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                    active.append((todo.popleft()(share, at_once), stream))
            for item in list(active):
                gen, stream = item
                with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                    try:
                        next(gen)
                    except StopIteration:
                        active.remove(item)
                        free.append(stream)
    finally:
        for gen, _ in active:
            gen.close()
        if cuda:  # the models' weights were written on the side streams: visible to what follows
            torch.cuda.synchronize(device)


def stack_steps(members: Sequence[Member], windows: Iterable[bytes], device: torch.device, *,
                on_finish: Callable[[Member, dict[str, Any]], None],
                checkpoint: Checkpointer | None = None,
                progress: Callable[[int, int, float], None] | None = None,
                share: WallShare | None = None, at_once: int = 1) -> Generator[None, None, dict[str, dict[str, Any]]]:
    """``train_stack`` as a generator that yields after each step (``train_at_once`` takes turns
    over several); returns label → stats. ``share``: the wall's split over the members of every
    stack in flight (a fresh one: this stack's alone); ``at_once``: stacks in flight, recorded."""
    t_setup = time.perf_counter()
    share = share if share is not None else WallShare()
    alive = sorted(members, key=lambda m: m.max_flops)
    template, budget = alive[0].encoder, alive[0].budget
    for m in alive:
        m.encoder.to(device).train()
    stack, c = _resume(alive, checkpoint, template, device)
    k0 = stack.k
    step = StackedStep(stack, template, budget, device, budget.cuda_graphs and device.type == "cuda")
    feed = _feed(template, windows, budget, device, c["steps"], at_once)
    losses = _Losses(device.type == "cuda")
    c.update(first_s=0.0, first_causal=0.0, setup=time.perf_counter() - t_setup, wait=0.0)
    t0 = time.perf_counter() - c["elapsed"]
    last_ckpt = time.perf_counter()
    out: dict[str, dict[str, Any]] = {}

    def settle() -> None:
        """Split the wall since the last split over the members alive in it (after a sync)."""
        if device.type == "cuda":
            torch.cuda.current_stream(device).synchronize()
        share.tick()

    def finish(done: list[Member]) -> None:
        losses.drain(wait=True)
        settle()
        share.leave(done)
        c["wait"] = feed.wait_seconds
        for m in done:
            step.stack.write_into(alive.index(m), m.encoder)
            m.encoder.eval()  # also the template's mode, if m is: no output of a stackable model depends on it
            out[m.label] = _stats(m, c, k0, time.perf_counter() - t0, step, device, at_once)
            on_finish(m, out[m.label])
        keep = [i for i, m in enumerate(alive) if m not in done]
        alive[:] = [alive[i] for i in keep]
        if alive:
            step.shrink(keep)

    share.join(alive)
    try:
        for parts in feed:
            if done := [m for m in alive if c["flops"] >= m.max_flops]:
                finish(done)
            if not alive:
                break
            batches = [p[0] for p in parts]
            if not step.accepts(batches):  # stackable() admits no such encoder
                raise ValueError("scaling.stack: this step's batches cannot be stacked; set scaling.stack: false")
            nb = sum(b.scored_bytes for b in batches)
            lrs = [lr_at(m.budget, c["seen"], m.n_bytes) for m in alive]
            loss = step(batches[0], lrs, nb, step.stack.steps)
            _count(c, parts, nb)
            losses.put(loss, list(alive), nb, c["seen"], c["steps"] - 1)
            if not c["first_s"]:  # the first step of this call (cold start and capture included)
                settle()
                c["first_s"], c["first_causal"] = time.perf_counter() - t0, c["causal"]
            if progress is not None:
                progress(c["seen"], alive[-1].n_bytes, alive[-1].recent[-1] if alive[-1].recent else math.nan)
            if checkpoint is not None and time.perf_counter() - last_ckpt > checkpoint.every_seconds:
                losses.drain(wait=True)
                settle()
                checkpoint.save(_checkpoint(step.stack, alive, c, time.perf_counter() - t0))
                last_ckpt = time.perf_counter()
            yield
        if alive:  # the stream ended first (as the lone loop's for-loop ends)
            finish(list(alive))
    finally:
        feed.close()
        share.leave(alive)  # a stack closed early (another failed) takes no more of the wall
    if checkpoint is not None and checkpoint.path.exists():
        os.unlink(checkpoint.path)
    return out
