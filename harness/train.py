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
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import torch
from torch import nn

from core.metrics import LN2
from encoders.base import Encoder, FitContext, TensorBatch
from harness.data import training_windows
from harness.permutation import WindowPermuter
from harness.results import atomic_torch_save
from harness.suite import BudgetConfig
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


def make_optimizer(model: nn.Module, budget: BudgetConfig) -> torch.optim.Optimizer:
    """AdamW; weight decay on matrices only (not on norms, biases or embeddings' 1-D params)."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": budget.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=budget.lr, betas=(budget.beta1, budget.beta2), foreach=False)


@dataclass
class Checkpointer:
    """Periodic resumable checkpoints at ``path`` (written atomically)."""

    path: Path
    every_seconds: float = 120.0


def batched(it: Iterable[bytes], size: int) -> Iterator[list[bytes]]:
    it = iter(it)
    while chunk := list(islice(it, size)):
        yield chunk


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


def train_step(encoder: Encoder, batch: TensorBatch, opt: torch.optim.Optimizer, lr: float,
               budget: BudgetConfig, autocast: Any) -> torch.Tensor:
    """One optimizer step on a batch already on the device; returns the detached loss (nats per
    scored byte). The training loop and the dry-run estimate both take exactly this step."""
    for g in opt.param_groups:
        g["lr"] = lr
    with autocast:
        units = encoder(batch)
        loss = units.nll.sum() / batch.scored_bytes
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if budget.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(encoder.parameters(), budget.grad_clip)
    opt.step()
    return loss.detach()


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
    """
    encoder.to(device)
    encoder.train()
    opt = make_optimizer(encoder, budget)
    per_step = max(1, budget.batch_bytes // budget.context_bytes)
    seen, steps, flops, fwd_flops, elapsed = 0, 0, 0.0, 0.0, 0.0
    curve: list[tuple[int, float]] = []
    recent: list[float] = []
    if checkpoint is not None and checkpoint.path.exists():
        state = torch.load(checkpoint.path, map_location=device, weights_only=True)
        encoder.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        seen, steps, flops, elapsed = int(state["seen"]), int(state["steps"]), float(state["flops"]), float(state["elapsed"])
        fwd_flops = float(state.get("forward_flops", 0.0))
        curve = [(int(a), float(b)) for a, b in state["curve"]]
    skip = steps  # batches already consumed by the interrupted run
    autocast = autocast_for(budget, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter() - elapsed
    last_ckpt = time.perf_counter()
    curve_every = max(1, n_bytes // 100)
    window_loss, window_bytes = 0.0, 0
    for i, chunk in enumerate(batched(windows, per_step)):
        if i < skip:
            continue
        # Under a FLOP budget the FLOPs decide when to stop (n_bytes only shapes the schedule).
        if (flops >= max_flops) if max_flops is not None else (seen >= n_bytes):
            break
        if permuter is None:
            batch = encoder.collate(chunk, [0] * len(chunk))
        else:
            batch = permuter.collate(encoder, chunk)[0]
        # Training = forward + backward ≈ 3 × forward, except for frozen parts (BLT's entropy
        # model) which only run forward.
        fwd = encoder.flops(batch)
        step_flops = 3.0 * fwd - 2.0 * encoder.frozen_flops(batch)
        loss = train_step(encoder, batch.to(device), opt, lr_at(budget, seen, n_bytes), budget, autocast)
        lv = float(loss) / LN2
        if not math.isfinite(lv):
            raise FloatingPointError(f"training loss is {lv} at step {steps}; lower budget.lr")
        seen += batch.scored_bytes
        steps += 1
        flops += step_flops
        fwd_flops += fwd
        recent = (recent + [lv])[-10:]
        # Each curve point is the byte-weighted mean loss since the previous point (a single
        # step's loss is too noisy to read, above all for large-vocabulary BPE).
        window_loss += lv * batch.scored_bytes
        window_bytes += batch.scored_bytes
        if not curve or seen - curve[-1][0] >= curve_every:
            curve.append((seen, window_loss / window_bytes))
            window_loss, window_bytes = 0.0, 0
        if progress is not None:
            progress(seen, n_bytes, lv)
        if checkpoint is not None and time.perf_counter() - last_ckpt > checkpoint.every_seconds:
            atomic_torch_save(
                {"model": encoder.state_dict(), "optimizer": opt.state_dict(), "seen": seen, "steps": steps,
                 "flops": flops, "forward_flops": fwd_flops, "elapsed": time.perf_counter() - t0, "curve": curve},
                checkpoint.path,
            )
            last_ckpt = time.perf_counter()
    seconds = time.perf_counter() - t0
    encoder.eval()
    if checkpoint is not None and checkpoint.path.exists():
        os.unlink(checkpoint.path)
    return {
        "forward_flops": fwd_flops,
        "bytes": seen,
        "steps": steps,
        "flops": flops,
        "seconds": seconds,
        "bytes_per_s": seen / seconds if seconds > 0 else math.nan,
        "peak_mem_bytes": peak_memory(device),
        "peak_mem_kind": "cuda_allocated" if device.type == "cuda" else "process_max_rss",
        "final_loss_bpb": sum(recent) / len(recent) if recent else math.nan,
        "loss_curve": curve,
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
