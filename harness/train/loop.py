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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from core.metrics import LN2
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
from sources.base import Document


class LossReadback:
    """Step losses from the device to the host without waiting for it, in step order.

    ``step(loss, scored_bytes, index)`` queues a step's loss (a 0-d tensor on ``device``, nats
    per scored byte); on CUDA it starts a non-blocking copy into pinned host memory and records
    an event after it. ``point(seen)`` queues a curve-point marker. ``ready(wait)`` yields the
    queue's head in order — ``("step", nats per byte, scored bytes, index)`` and ``("point",
    seen)`` — as far as the copies have landed (``wait=True``: all of it, waiting for the
    device). On CPU every loss is ready when queued.
    """

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.queue: list[tuple[Any, ...]] = []
        self.head = 0

    def step(self, loss: torch.Tensor, scored_bytes: int, index: int) -> None:
        if self.cuda:
            host = torch.empty((), dtype=loss.dtype, pin_memory=True)
            host.copy_(loss, non_blocking=True)
            done = torch.cuda.Event()
            done.record()
            self.queue.append(("step", host, scored_bytes, index, done))
        else:
            self.queue.append(("step", loss, scored_bytes, index, None))

    def point(self, seen: int) -> None:
        self.queue.append(("point", seen))

    def ready(self, wait: bool) -> Iterator[tuple[Any, ...]]:
        while self.head < len(self.queue):
            item = self.queue[self.head]
            if item[0] == "step":
                done = item[4]
                if done is not None and not done.query():
                    if not wait:
                        break
                    done.synchronize()
                item = ("step", float(item[1]), item[2], item[3])
            self.head += 1
            yield item
        if self.head == len(self.queue):  # all taken: start an empty queue
            self.queue.clear()
            self.head = 0


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
    encoder.to(device)
    encoder.train()
    compiled = compile_backbones(encoder) if want_compile(budget.compile, device) else 0
    per_step = budget.windows_per_step
    # a byte-level or BPE step replayed as a CUDA graph (harness.train.graph_step): one process, one
    # micro-batch a step, the window stream as it is
    graphs = (budget.cuda_graphs and device.type == "cuda" and dp is None and permuter is None
              and budget.windows_per_micro_batch >= per_step and graph_capable(encoder))
    opt = make_optimizer(encoder, budget, device, capturable=graphs)
    params = list(encoder.parameters())  # for gradient clipping: made once, not every step
    graph = GraphStep(encoder, opt, budget, device, params) if graphs else None
    # Micro-batches: the step's windows in slices of micro_batch_bytes, gradients accumulated;
    # the loss of each slice is divided by the whole step's scored bytes, so the step's gradient
    # is the same sum (to float rounding) as in one batch.
    micro = budget.windows_per_micro_batch
    seen, steps, flops, fwd_flops, elapsed = 0, 0, 0.0, 0.0, 0.0
    causal_flops = 0.0  # training FLOPs with causal attention at half its dense cost
    curve: list[tuple[int, float]] = []
    recent: list[float] = []
    state = checkpoint.load() if checkpoint is not None else None
    if state is not None:
        encoder.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        seen, steps, flops, elapsed = int(state["seen"]), int(state["steps"]), float(state["flops"]), float(state["elapsed"])
        fwd_flops = float(state.get("forward_flops", 0.0))
        causal_flops = float(state.get("causal_flops", 0.0))
        curve = [(int(a), float(b)) for a, b in state["curve"]]
    if dp is not None:
        dp.sync_parameters(encoder)
    writer = dp is None or dp.writer
    skip = steps  # batches already consumed by the interrupted run
    autocast = autocast_for(budget, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)

    def collate(chunk: list[bytes]) -> list[Any]:
        """The step's micro-batches, collated on CPU (in worker processes on CUDA)."""
        if permuter is not None:
            return [permuter.collate(encoder, chunk[j : j + micro])[0] for j in range(0, len(chunk), micro)]
        return [encoder.collate(chunk[j : j + micro], [0] * len(chunk[j : j + micro]))
                for j in range(0, len(chunk), micro)]

    def prepare(batches: list[Any]) -> list[tuple[Any, float, float, float]]:
        """(batch, forward FLOPs, frozen FLOPs) per micro-batch; runs in the prefetch thread
        (FLOP counts may run a frozen sub-model on the device: BLT's entropy model)."""
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

    # BPE: windows tokenized in bulk ahead of the steps, each step an array slice (same batches)
    collated = (pretokenized_batches(encoder, windows, per_step, micro, skip, collate_processes(device))
                if permuter is None and dp is None else None)
    if collated is None:
        # data parallel: this rank's contiguous slice of each global step (an empty slice
        # collates to no micro-batches; the rank still joins the step's collectives)
        todo = ((dp.shard(chunk) if dp is not None else chunk)
                for i, chunk in enumerate(batched(windows, per_step)) if i >= skip)
        collated = ordered_pool_map(collate, todo, collate_processes(device))
    # a step that never returns ends the run with one line (harness.infra.watchdog; made before the
    # thread below, so a bad limit leaves no thread behind)
    dog = Watchdog(f"training ({type(encoder).__name__})")
    feed = Prefetcher(collated, prepare, depth=4, name="training batches")
    clock0 = compile_clock()
    cache0 = cache_counts()
    idle = IdleMeter(device, os.environ.get("TOKBENCH_IDLE_STEPS"))
    clock = StepClock(device)
    step_here = 0  # steps run by this call (a resumed run starts at 0 again)
    setup_s = time.perf_counter() - t_setup
    t0 = time.perf_counter() - elapsed
    last_ckpt = time.perf_counter()
    curve_every = max(1, n_bytes // 100)
    window_loss, window_bytes = 0.0, 0
    last_point = curve[-1][0] if curve else -1  # bytes seen at the last curve point queued
    # Step losses are read on the host only once the device has computed them: on CUDA each
    # step's loss is copied into pinned memory behind an event, and a curve point waits in the
    # queue until every step before it has landed (``flush(wait=False)`` takes what has; a
    # checkpoint and the end wait for all). Reading them at each curve point instead (every
    # 1 % of the bytes: every 2-3 steps of the standard suite) made the host wait for the GPU
    # that often, draining its queue; the values, points and order are the same either way.
    readback = LossReadback(device)
    last_lv = math.nan
    first_step_s: float | None = None
    first_step_causal = 0.0  # causal_flops when the first step had run (the steady pace's start)

    def flush(wait: bool = True) -> None:
        nonlocal window_loss, window_bytes, recent, last_lv
        for item in readback.ready(wait):
            if item[0] == "point":  # every step before this curve point has been added
                curve.append((item[1], window_loss / window_bytes))
                window_loss, window_bytes = 0.0, 0
                continue
            _, v, nb, at = item
            lv = v / LN2
            if not math.isfinite(lv):
                raise FloatingPointError(f"training loss is {lv} at step {at}; lower budget.lr")
            recent = (recent + [lv])[-10:]
            # Each curve point is the byte-weighted mean loss since the previous point (a single
            # step's loss is too noisy to read, above all for large-vocabulary BPE).
            window_loss += lv * nb
            window_bytes += nb
            last_lv = lv

    dog.start()
    try:
        for parts in feed:
            dog.beat()
            # Under a FLOP budget the FLOPs decide when to stop (n_bytes only shapes the schedule).
            if (flops >= max_flops) if max_flops is not None else (seen >= n_bytes):
                break
            idle.step(step_here)
            clock.mark()
            step_here += 1
            step_bytes = sum(p[0].scored_bytes for p in parts)
            lr = lr_at(budget, seen, n_bytes)
            if graph is not None and graph.accepts([p[0] for p in parts]):
                step_loss = graph(parts[0][0], lr, step_bytes)
                for _, fwd, frozen, half in parts:
                    flops += 3.0 * fwd - 2.0 * frozen
                    fwd_flops += fwd
                    causal_flops += half
            elif dp is None:
                step_loss = train_step(encoder, [p[0] for p in parts], opt, lr, budget, autocast, device,
                                       clip_params=params)
                for _, fwd, frozen, half in parts:
                    flops += 3.0 * fwd - 2.0 * frozen
                    fwd_flops += fwd
                    causal_flops += half
            else:
                # global bytes (the loss divisor) and FLOPs of the step, summed over ranks first
                # (one small collective per step; it syncs the host with the device)
                n, fwd, frozen, half = dp.sum([float(step_bytes), sum(p[1] for p in parts),
                                               sum(p[2] for p in parts), sum(p[3] for p in parts)], device)
                step_loss = train_step(encoder, [p[0] for p in parts], opt, lr, budget, autocast, device,
                                       global_bytes=n, dp=dp, clip_params=params)
                step_bytes = int(round(n))
                flops += 3.0 * fwd - 2.0 * frozen
                fwd_flops += fwd
                causal_flops += half
            readback.step(step_loss, step_bytes, steps)
            seen += step_bytes
            steps += 1
            if first_step_s is None:
                if device.type == "cuda":  # this loop's stream (a sweep trains points side by side)
                    torch.cuda.current_stream(device).synchronize()
                first_step_s = time.perf_counter() - t0  # includes the cold compile
                first_step_causal = causal_flops
            if seen - last_point >= curve_every or last_point < 0:
                readback.point(seen)
                last_point = seen
            flush(wait=False)
            if progress is not None:
                progress(seen, n_bytes, last_lv)
            if writer and checkpoint is not None and time.perf_counter() - last_ckpt > checkpoint.every_seconds:
                flush()
                checkpoint.save(
                    {"model": encoder.state_dict(), "optimizer": opt.state_dict(), "seen": seen, "steps": steps,
                     "flops": flops, "forward_flops": fwd_flops, "causal_flops": causal_flops,
                     "elapsed": time.perf_counter() - t0, "curve": curve},
                )
                last_ckpt = time.perf_counter()
        clock.mark()
        flush()
        idle.finish()
    finally:
        dog.stop()
        t_close = time.perf_counter()
        feed.close()
    if device.type == "cuda":
        torch.cuda.current_stream(device).synchronize()
    # the idle meter's profiler teardown (TOKBENCH_IDLE_STEPS only) is the measurement's cost
    seconds = time.perf_counter() - t0 - idle.overhead_seconds
    step_clock = clock.summary(time.perf_counter() - t_close)
    encoder.eval()
    if writer and checkpoint is not None and checkpoint.path.exists():
        os.unlink(checkpoint.path)
    return {
        "forward_flops": fwd_flops,
        "bytes": seen,
        "steps": steps,
        "flops": flops,
        "flops_causal_attn_half": causal_flops,
        "seconds": seconds,
        "first_step_seconds": first_step_s or 0.0,
        # FLOPs (causal attention at half) up to the end of the first step: with
        # first_step_seconds, the pace after the cold start (run.json ``mfu_after_first_step``)
        "first_step_flops_causal_attn_half": first_step_causal,
        # before the clock started: optimizer, collation pools (BPE's bulk tokenization
        # starts here), the prefetch thread; part of run.json's ``model_other_seconds``
        "setup_seconds": setup_s,
        "host_wait_seconds": feed.wait_seconds,
        "compiled_modules": compiled,
        **({"cuda_graph_steps": graph.replays, "cuda_graphs": len(graph.graphs)} if graph is not None else {}),
        # of ``seconds``: torch.compile's graphs and FuzzyTok's kernel tuning (cold start costs)
        **{f"compile_{k}_seconds": v for k, v in compile_since(clock0).items()},
        "compile_cache": cache_counts_since(cache0),  # graphs from the disk cache / compiled anew
        **({"gpu_idle": idle.result} if idle.result is not None else {}),
        # device-side step times from events (no sync): the steady pace, the slow steps, the feed's close
        **({"step_clock": step_clock} if step_clock is not None else {}),
        "bytes_per_s": seen / seconds if seconds > 0 else math.nan,
        "peak_mem_bytes": peak_memory(device),
        "peak_mem_kind": "cuda_allocated" if device.type == "cuda" else "process_max_rss",
        "final_loss_bpb": sum(recent) / len(recent) if recent else math.nan,
        "loss_curve": curve,
        # data parallel: bytes, flops and forward_flops above are the sums over these ranks (an
        # MFU divides by ranks × one GPU's peak)
        **({"ranks": dp.ctx.world} if dp is not None else {}),
    }


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
