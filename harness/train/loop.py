"""The one training loop. Every encoder — and every sub-model an encoder fits (BLT's entropy
model) — is trained by ``train_encoder``: same windows in the same order, same AdamW, same
schedule, same loss normalisation (ΣNLL / Σ scored bytes, nats per byte).

    stats = train_encoder(encoder, windows, n_bytes, budget, device)

Resumable: with a ``Checkpointer`` the loop saves model + optimizer + position every
``every_seconds`` and a restarted run continues where it stopped (the window stream is
deterministic, so it is replayed and skipped).
"""

from __future__ import annotations

import math
import os
import resource
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from encoders.backbone import causal_attention_cost
from encoders.base import Encoder, FitContext, TensorBatch
from harness.config.bounds import MIN_LR
from harness.config.permutation import WindowPermuter
from harness.config.suite import BudgetConfig, EncoderSpec
from harness.data.load import batched, training_windows
from harness.data.pretokenize import pretokenized_batches
from harness.infra import plugins
from harness.infra.accel import (
    Prefetcher,
    cache_counts,
    cache_counts_since,
    collate_processes,
    compile_backbones,
    compile_clock,
    compile_since,
    ordered_pool_map,
    pin,
    want_compile,
)
from harness.infra.meters import IdleMeter, StepClock
from harness.infra.watchdog import Watchdog
from harness.train.graph_step import GraphStep, graph_capable
from harness.train.losses import LossCurve, LossReadback
from sources.base import Document


def lr_at(budget: BudgetConfig, seen: int, total: int) -> float:
    """Learning rate after ``seen`` of ``total`` training bytes: linear warm-up over
    warmup_bytes, then cosine / linear decay to min_lr_ratio·lr, or constant."""
    if budget.warmup_bytes > 0 and seen < budget.warmup_bytes:
        return budget.lr * (seen + 1) / budget.warmup_bytes
    if budget.schedule == "constant" or total <= budget.warmup_bytes:
        return budget.lr
    frac = min(1.0, (seen - budget.warmup_bytes) / max(1, total - budget.warmup_bytes))
    lo = budget.min_lr_ratio * budget.lr
    if budget.schedule == "linear":
        return budget.lr - (budget.lr - lo) * frac
    return lo + 0.5 * (budget.lr - lo) * (1.0 + math.cos(math.pi * frac))


def make_optimizer(model: nn.Module, budget: BudgetConfig, device: torch.device | None = None,
                   capturable: bool = False) -> torch.optim.Optimizer:
    """AdamW; weight decay on matrices only (not on norms, biases or embeddings' 1-D params).

    On CUDA the fused kernel (one launch for all parameters, no host sync); on CPU the plain
    per-parameter loop, whose results the CPU tests pin down. ``capturable`` (CUDA only): step
    count and learning rate on the device, so a CUDA graph can replay the step
    (``harness.train.graph_step``)."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": budget.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    if not math.isfinite(budget.lr) or budget.lr < MIN_LR:  # the suite checks refuse it; never train blind
        raise ValueError(f"budget.lr: the learning rate is {budget.lr:.3g}; it must be finite and >= {MIN_LR:g}")
    fast = device is not None and device.type == "cuda"
    kw: dict[str, Any] = {"fused": True} if fast else {"foreach": False}
    if capturable and fast:
        for g in groups:  # one tensor per group: the graph reads each group's own
            g["lr"] = torch.tensor(budget.lr, dtype=torch.float32, device=device)
        kw["capturable"] = True
    return torch.optim.AdamW(groups, lr=budget.lr, betas=(budget.beta1, budget.beta2), **kw)


@dataclass
class Checkpointer:
    """Periodic resumable checkpoints at ``path`` (written atomically, sealed with an HMAC-SHA256 by
    ``harness.infra.cache``; a damaged one is reported through ``log``, removed, and training restarts).
    Only the holder of the run-directory lock (``harness.infra.lock``) trains, so a partial checkpoint
    is never shared by two live processes."""

    path: Path
    every_seconds: float = 120.0
    log: Callable[[str], None] | None = None

    def load(self) -> dict[str, Any] | None:
        from harness.infra.cache import CacheDamaged, discard, read_sealed_torch

        if not self.path.exists():
            return None
        try:
            state = read_sealed_torch(self.path, "cpu")
            if not isinstance(state, dict) or not {"model", "optimizer", "seen", "steps"} <= set(state):
                raise CacheDamaged("not a training checkpoint")
            return state
        except CacheDamaged as e:
            discard(self.path, str(e), self.log or (lambda s: print(s, file=sys.stderr)))
            return None

    def save(self, state: dict[str, Any]) -> None:
        from harness.infra.cache import write_sealed_torch

        write_sealed_torch(self.path, state)


def peak_memory(device: torch.device) -> int:
    """Peak bytes: CUDA allocator peak on GPU; the process's max RSS on CPU (process-wide)."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def autocast_for(budget: BudgetConfig, device: torch.device) -> Any:
    """bf16 autocast on CUDA when ``budget.dtype`` asks for it, else a disabled context."""
    if budget.dtype == "bfloat16" and device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def train_step(encoder: Encoder, batches: TensorBatch | list[TensorBatch], opt: torch.optim.Optimizer, lr: float,
               budget: BudgetConfig, autocast: Any, device: torch.device | None = None, *,
               global_bytes: float | None = None, dp: Any = None,
               clip_params: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
    """One optimizer step over a step's micro-batches (one batch: no accumulation), each moved
    to ``device`` when given; returns the detached loss (nats per scored byte of the whole step),
    still on the device. Each micro-batch's loss is divided by the whole step's scored bytes, so
    the accumulated gradient is the one-batch gradient to float rounding. The training loop and
    the dry-run estimate both take exactly this step.

    Data parallel (``dp``, a ``harness.pipeline.distributed.DataParallel``): ``batches`` are this rank's
    slice of the step (possibly none), ``global_bytes`` the step's scored bytes summed over all
    ranks; each loss is divided by that global count and the gradients are summed over ranks
    before clipping, so every rank takes the one-process step; the returned loss is global.

    clip_params: the encoder's parameters as a list, made once by the caller (the training
    loop), so the step does not walk the module tree for gradient clipping every time; default
    ``encoder.parameters()``. The same tensors in the same order, so the same clipping."""
    parts = batches if isinstance(batches, list) else [batches]
    step_bytes = global_bytes if global_bytes is not None else sum(b.scored_bytes for b in parts)
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    total: torch.Tensor | None = None
    for batch in parts:
        if device is not None:
            batch = batch.to(device)
        with autocast:
            units = encoder(batch)
            loss = units.nll.sum() / step_bytes
        loss.backward()
        total = loss.detach() if total is None else total + loss.detach()
    if dp is not None:
        dp.all_reduce_grads(encoder)  # Σ over ranks = the one-process gradient, before clipping
    if budget.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(encoder.parameters() if clip_params is None else clip_params,
                                       budget.grad_clip)
    opt.step()
    if dp is not None:  # an empty slice contributes 0 to the global loss
        dev = device if device is not None else next(encoder.parameters()).device
        return dp.sum_tensor(torch.zeros((), device=dev) if total is None else total.float())
    assert total is not None
    return total


@dataclass(slots=True)
class _Tally:
    """A run's totals so far, saved in and resumed from its checkpoints: bytes seen, optimizer steps,
    training FLOPs (3 × forward − 2 × frozen), forward FLOPs, training FLOPs with causal attention at
    half its dense cost, seconds trained before this call, loss curve (bytes seen, bits/byte)."""

    seen: int = 0
    steps: int = 0
    flops: float = 0.0
    fwd_flops: float = 0.0
    causal_flops: float = 0.0
    elapsed: float = 0.0
    curve: list[tuple[int, float]] = field(default_factory=list)

    @classmethod
    def resumed(cls, state: dict[str, Any]) -> _Tally:
        """The totals in a checkpoint's ``state`` (as ``Checkpointer.load`` returns it)."""
        return cls(int(state["seen"]), int(state["steps"]), float(state["flops"]),
                   float(state.get("forward_flops", 0.0)), float(state.get("causal_flops", 0.0)),
                   float(state["elapsed"]), [(int(a), float(b)) for a, b in state["curve"]])


@dataclass(slots=True)
class _Stepper:
    """What every step uses, made once by ``_set_up``: the encoder (on ``device``, training), its
    optimizer, its parameters as a list (for clipping), the CUDA-graph step or None, the autocast
    context, data parallel or None, and how many backbones were compiled."""

    encoder: Encoder
    budget: BudgetConfig
    device: torch.device
    opt: torch.optim.Optimizer
    params: list[torch.Tensor]
    graph: GraphStep | None
    autocast: Any
    dp: Any
    compiled: int

    def step(self, parts: list[tuple[Any, float, float, float]], tally: _Tally,
             n_bytes: int) -> tuple[torch.Tensor, int]:
        """One optimizer step over a step's micro-batches as ``_flop_counter`` made them, its FLOPs
        added to ``tally``; returns the detached loss (nats per scored byte, still on the device) and
        the step's scored bytes (under data parallel both summed over ranks)."""
        step_bytes = sum(p[0].scored_bytes for p in parts)
        lr = lr_at(self.budget, tally.seen, n_bytes)
        if self.graph is not None and self.graph.accepts([p[0] for p in parts]):
            step_loss = self.graph(parts[0][0], lr, step_bytes)
        elif self.dp is None:
            step_loss = train_step(self.encoder, [p[0] for p in parts], self.opt, lr, self.budget, self.autocast,
                                   self.device, clip_params=self.params)
        else:
            # global bytes (the loss divisor) and FLOPs of the step, summed over ranks first
            # (one small collective per step; it syncs the host with the device)
            n, fwd, frozen, half = self.dp.sum([float(step_bytes), sum(p[1] for p in parts),
                                                sum(p[2] for p in parts), sum(p[3] for p in parts)], self.device)
            step_loss = train_step(self.encoder, [p[0] for p in parts], self.opt, lr, self.budget, self.autocast,
                                   self.device, global_bytes=n, dp=self.dp, clip_params=self.params)
            tally.flops += 3.0 * fwd - 2.0 * frozen
            tally.fwd_flops += fwd
            tally.causal_flops += half
            return step_loss, int(round(n))
        for _, fwd, frozen, half in parts:
            tally.flops += 3.0 * fwd - 2.0 * frozen
            tally.fwd_flops += fwd
            tally.causal_flops += half
        return step_loss, step_bytes


def _set_up(encoder: Encoder, budget: BudgetConfig, device: torch.device, checkpoint: Checkpointer | None,
            permuter: WindowPermuter | None, dp: Any) -> tuple[_Stepper, _Tally]:
    """The encoder on ``device`` in training mode (backbones compiled where asked), its optimizer and
    CUDA-graph step, the checkpoint's state resumed, parameters synced over ranks, the peak reset."""
    encoder.to(device)
    encoder.train()
    compiled = compile_backbones(encoder) if want_compile(budget.compile, device) else 0
    # a byte-level or BPE step replayed as a CUDA graph (harness.train.graph_step): one process, one
    # micro-batch a step, the window stream as it is
    graphs = (budget.cuda_graphs and device.type == "cuda" and dp is None and permuter is None
              and budget.windows_per_micro_batch >= budget.windows_per_step and graph_capable(encoder))
    opt = make_optimizer(encoder, budget, device, capturable=graphs)
    params = list(encoder.parameters())  # for gradient clipping: made once, not every step
    graph = GraphStep(encoder, opt, budget, device, params) if graphs else None
    tally = _Tally()
    state = checkpoint.load() if checkpoint is not None else None
    if state is not None:
        encoder.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        tally = _Tally.resumed(state)
    if dp is not None:
        dp.sync_parameters(encoder)
    autocast = autocast_for(budget, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    return _Stepper(encoder, budget, device, opt, params, graph, autocast, dp, compiled), tally


def _step_batches(encoder: Encoder, windows: Iterable[bytes], budget: BudgetConfig, device: torch.device,
                  skip: int, permuter: WindowPermuter | None, dp: Any) -> Iterator[list[Any]]:
    """Each step's micro-batches (``windows_per_micro_batch`` windows each), collated on CPU, from
    step ``skip`` on (the steps a resumed run already took are skipped)."""
    # Micro-batches: the step's windows in slices of micro_batch_bytes, gradients accumulated;
    # the loss of each slice is divided by the whole step's scored bytes, so the step's gradient
    # is the same sum (to float rounding) as in one batch.
    per_step, micro = budget.windows_per_step, budget.windows_per_micro_batch

    def collate(chunk: list[bytes]) -> list[Any]:
        """The step's micro-batches, collated on CPU (in worker processes on CUDA)."""
        if permuter is not None:
            return [permuter.collate(encoder, chunk[j : j + micro])[0] for j in range(0, len(chunk), micro)]
        return [encoder.collate(chunk[j : j + micro], [0] * len(chunk[j : j + micro]))
                for j in range(0, len(chunk), micro)]

    # BPE: windows tokenized in bulk ahead of the steps, each step an array slice (same batches)
    collated = (pretokenized_batches(encoder, windows, per_step, micro, skip, collate_processes(device))
                if permuter is None and dp is None else None)
    if collated is None:
        # data parallel: this rank's contiguous slice of each global step (an empty slice
        # collates to no micro-batches; the rank still joins the step's collectives)
        todo = ((dp.shard(chunk) if dp is not None else chunk)
                for i, chunk in enumerate(batched(windows, per_step)) if i >= skip)
        collated = ordered_pool_map(collate, todo, collate_processes(device))
    return collated


def _flop_counter(encoder: Encoder, device: torch.device) -> Callable[[list[Any]], list[tuple[Any, float, float, float]]]:
    """The prefetch thread's work on a step's micro-batches: (batch, pinned on CUDA; forward FLOPs;
    frozen FLOPs; training FLOPs with causal attention at half its dense cost) for each."""

    def prepare(batches: list[Any]) -> list[tuple[Any, float, float, float]]:
        """(batch, forward FLOPs, frozen FLOPs, causal-half training FLOPs) per micro-batch; runs in
        the prefetch thread (FLOP counts may run a frozen sub-model on the device: BLT's entropy model)."""
        out = []
        for batch in batches:
            # Training = forward + backward ≈ 3 × forward, except for frozen parts (BLT's entropy
            # model) which only run forward.
            frozen = encoder.frozen_flops(batch)
            fwd = encoder.flops(batch)
            # the same count with causal attention at half its dense cost (MFU's convention)
            with causal_attention_cost(0.5):
                half = 3.0 * encoder.flops(batch) - 2.0 * encoder.frozen_flops(batch)
            out.append((pin(batch) if device.type == "cuda" else batch, fwd, frozen, half))
        return out

    return prepare


def _save(checkpoint: Checkpointer, stepper: _Stepper, tally: _Tally, t0: float) -> None:
    """A resumable checkpoint: model, optimizer and ``tally`` (``elapsed``: seconds since ``t0``)."""
    checkpoint.save(
        {"model": stepper.encoder.state_dict(), "optimizer": stepper.opt.state_dict(), "seen": tally.seen,
         "steps": tally.steps, "flops": tally.flops, "forward_flops": tally.fwd_flops,
         "causal_flops": tally.causal_flops, "elapsed": time.perf_counter() - t0, "curve": tally.curve},
    )


def _run_steps(stepper: _Stepper, feed: Prefetcher, tally: _Tally, losses: LossCurve, *, n_bytes: int,
               max_flops: float | None, checkpoint: Checkpointer | None,
               progress: Callable[[int, int, float], None] | None, dog: Watchdog, idle: IdleMeter,
               clock: StepClock, t0: float) -> tuple[float | None, float]:
    """Steps over ``feed`` until ``n_bytes`` are seen (or ``max_flops`` spent), calling ``progress``
    and checkpointing every ``checkpoint.every_seconds``; returns the seconds since ``t0`` at the end
    of the first step (None: no step ran) and the causal-half training FLOPs by then."""
    device, readback, writer = stepper.device, losses.readback, stepper.dp is None or stepper.dp.writer
    step_here = 0  # steps run by this call (a resumed run starts at 0 again)
    last_ckpt = time.perf_counter()
    curve_every = max(1, n_bytes // 100)
    last_point = tally.curve[-1][0] if tally.curve else -1  # bytes seen at the last curve point queued
    first_step_s: float | None = None
    first_step_causal = 0.0  # causal_flops when the first step had run (the steady pace's start)
    for parts in feed:
        dog.beat()
        # Under a FLOP budget the FLOPs decide when to stop (n_bytes only shapes the schedule).
        if (tally.flops >= max_flops) if max_flops is not None else (tally.seen >= n_bytes):
            break
        idle.step(step_here)
        clock.mark()
        step_here += 1
        step_loss, step_bytes = stepper.step(parts, tally, n_bytes)
        readback.step(step_loss, step_bytes, tally.steps)
        tally.seen += step_bytes
        tally.steps += 1
        if first_step_s is None:
            if device.type == "cuda":
                torch.cuda.current_stream(device).synchronize()
            first_step_s = time.perf_counter() - t0  # includes the cold compile
            first_step_causal = tally.causal_flops
        if tally.seen - last_point >= curve_every or last_point < 0:
            readback.point(tally.seen)
            last_point = tally.seen
        losses.flush(wait=False)
        if progress is not None:
            progress(tally.seen, n_bytes, losses.last_lv)
        if writer and checkpoint is not None and time.perf_counter() - last_ckpt > checkpoint.every_seconds:
            losses.flush()
            _save(checkpoint, stepper, tally, t0)
            last_ckpt = time.perf_counter()
    return first_step_s, first_step_causal


def _facts(stepper: _Stepper, tally: _Tally, losses: LossCurve, first_step: tuple[float | None, float], *,
           seconds: float, setup_s: float, feed: Prefetcher, idle: IdleMeter, step_clock: dict[str, Any] | None,
           clock0: dict[str, float], cache0: dict[str, int]) -> dict[str, Any]:
    """``train_encoder``'s stats for run.json (seconds, bytes, FLOPs, bits/byte; see its docstring),
    read at the end of training (compile time and cache hits since ``clock0`` / ``cache0``)."""
    graph, dp, device = stepper.graph, stepper.dp, stepper.device
    return {
        "forward_flops": tally.fwd_flops,
        "bytes": tally.seen,
        "steps": tally.steps,
        "flops": tally.flops,
        "flops_causal_attn_half": tally.causal_flops,
        "seconds": seconds,
        "first_step_seconds": first_step[0] or 0.0,
        # FLOPs (causal attention at half) up to the end of the first step: with
        # first_step_seconds, the pace after the cold start (run.json ``mfu_after_first_step``)
        "first_step_flops_causal_attn_half": first_step[1],
        # before the clock started: optimizer, collation pools (BPE's bulk tokenization
        # starts here), the prefetch thread; part of run.json's ``model_other_seconds``
        "setup_seconds": setup_s,
        "host_wait_seconds": feed.wait_seconds,
        "compiled_modules": stepper.compiled,
        **({"cuda_graph_steps": graph.replays, "cuda_graphs": len(graph.graphs)} if graph is not None else {}),
        # of ``seconds``: torch.compile's graphs and FuzzyTok's kernel tuning (cold start costs)
        **{f"compile_{k}_seconds": v for k, v in compile_since(clock0).items()},
        "compile_cache": cache_counts_since(cache0),  # graphs from the disk cache / compiled anew
        **({"gpu_idle": idle.result} if idle.result is not None else {}),
        # device-side step times from events (no sync): the steady pace, the slow steps, the feed's close
        **({"step_clock": step_clock} if step_clock is not None else {}),
        "bytes_per_s": tally.seen / seconds if seconds > 0 else math.nan,
        "peak_mem_bytes": peak_memory(device),
        "peak_mem_kind": "cuda_allocated" if device.type == "cuda" else "process_max_rss",
        "final_loss_bpb": sum(losses.recent) / len(losses.recent) if losses.recent else math.nan,
        "loss_curve": tally.curve,
        # data parallel: bytes, flops and forward_flops above are the sums over these ranks (an
        # MFU divides by ranks × one GPU's peak)
        **({"ranks": dp.ctx.world} if dp is not None else {}),
    }


def train_encoder(
    encoder: Encoder,
    windows: Iterable[bytes],
    n_bytes: int,
    budget: BudgetConfig,
    device: torch.device,
    *,
    max_flops: float | None = None,
    checkpoint: Checkpointer | None = None,
    progress: Callable[[int, int, float], None] | None = None,
    permuter: WindowPermuter | None = None,
    dp: Any = None,
) -> dict[str, Any]:
    """Train ``encoder`` in place on ``windows`` (byte strings of <= context_bytes) until
    ``n_bytes`` bytes have been consumed — or, if ``max_flops`` is given, until that many
    training FLOPs are spent (the LR schedule then runs over an estimated ``n_bytes``).
    With a ``permuter`` every window is fed permuted (the model learns the permuted stream).

    Loss per step: Σ unit NLL (nats) / Σ scored bytes. Training FLOPs = 3 × forward FLOPs
    (1 × for frozen sub-modules an encoder reports through ``frozen_flops``).
    Returns stats for run.json: bytes, steps, flops, seconds, bytes_per_s, peak_mem_bytes,
    final_loss_bpb (mean of the last 10 steps, bits/byte) and a loss curve of ~100 points
    (bytes seen, mean bits/byte since the previous point).

    dp: a ``harness.pipeline.distributed.DataParallel`` to train across ranks (each rank collates its
    slice of every step's windows; bytes, FLOPs and loss are global; only its writer rank saves
    checkpoints).
    """
    t_setup = time.perf_counter()  # set-up (optimizer, pools, prefetch) is outside ``seconds``
    stepper, tally = _set_up(encoder, budget, device, checkpoint, permuter, dp)
    collated = _step_batches(encoder, windows, budget, device, tally.steps, permuter, dp)
    # a step that never returns ends the run with one line (harness.infra.watchdog; made before the
    # thread below, so a bad limit leaves no thread behind)
    dog = Watchdog(f"training ({type(encoder).__name__})")
    feed = Prefetcher(collated, _flop_counter(encoder, device), depth=4, name="training batches")
    clock0 = compile_clock()
    cache0 = cache_counts()
    idle = IdleMeter(device, budget.idle_steps)
    clock = StepClock(device)
    setup_s = time.perf_counter() - t_setup
    t0 = time.perf_counter() - tally.elapsed
    losses = LossCurve(LossReadback(device), tally.curve)
    dog.start()
    try:
        first_step = _run_steps(stepper, feed, tally, losses, n_bytes=n_bytes, max_flops=max_flops,
                                checkpoint=checkpoint, progress=progress, dog=dog, idle=idle, clock=clock, t0=t0)
        clock.mark()
        losses.flush()
        idle.finish()
    finally:
        dog.stop()
        t_close = time.perf_counter()
        feed.close()
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
    # the idle meter's profiler teardown (budget.idle_steps only) is the measurement's cost
    seconds = time.perf_counter() - t0 - idle.overhead_seconds
    step_clock = clock.summary(time.perf_counter() - t_close)
    encoder.eval()
    if (dp is None or dp.writer) and checkpoint is not None and checkpoint.path.exists():
        os.unlink(checkpoint.path)
    return _facts(stepper, tally, losses, first_step, seconds=seconds, setup_s=setup_s, feed=feed, idle=idle,
                  step_clock=step_clock, clock0=clock0, cache0=cache0)


def fit_context(
    docs: Sequence[Document],
    budget: BudgetConfig,
    device: torch.device,
    seed: int,
    *,
    sub_bytes_cap: int | None = None,
    progress: Callable[[str, int], Callable[[int, int, float], None] | None] | None = None,
    log: Callable[[str], None] = print,
    train_bytes: int | None = None,
    permuter: WindowPermuter | None = None,
) -> FitContext:
    """The FitContext an encoder's ``fit`` stage gets: the training documents, and ``train`` —
    this module's one loop run on a sub-model (BLT's entropy model) over the same window stream.

    sub_bytes_cap: train sub-models on at most this many bytes (the dry run's quick estimate).
    progress: makes a progress callback from (description, total bytes).
    permuter: sub-models learn the same permuted stream as the main model.
    """

    def sub_train(sub: Encoder, n_bytes: int) -> dict[str, Any]:
        sub.fit(ctx)
        n = n_bytes if sub_bytes_cap is None else min(n_bytes, sub_bytes_cap)
        bar = progress("fit sub-model", n) if progress is not None else None
        return train_encoder(sub, training_windows(docs, n, budget.context_bytes, seed), n, budget, device, progress=bar,
                             permuter=permuter)

    ctx = FitContext(
        train_docs=lambda: (d.data for d in docs),
        train_bytes=budget.train_bytes if train_bytes is None else train_bytes,
        context_bytes=budget.context_bytes,
        seed=seed,
        device=device,
        train=sub_train,
        log=log,
    )
    return ctx


def build_encoder(spec: EncoderSpec, seed: int, base_dir: Path) -> Encoder:
    """A fresh encoder for a suite entry; the seed fixes its initial weights."""
    # the suite loader has imported a module:Class plugin already, from the suite's plugin_paths
    cls = plugins.resolve("encoder", spec.name, search_paths=[base_dir])
    torch.manual_seed(seed)  # same seed → same initial weights for identical shapes
    return cls(spec.config, spec.backbone)
