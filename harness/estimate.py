"""``tokbench run --dry-run``: the models to train and the cells to score, with FLOPs and a time
estimate, without training anything.

FLOPs per byte come from each encoder's analytic count on a real training batch; the time per
step is measured by running two training steps on the chosen device. Encoders with a fit stage
(BPE merges, BLT entropy model) are fitted on a small sample first (sub-models train for one
batch), so their FLOPs and times are approximate; the fit stages' own cost is not included.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from harness.data import load_data, source_context, training_windows
from harness.run import CLEAN, RunOptions, build_encoder, pick_device
from harness.suite import Suite
from harness.train import autocast_for, fit_context, lr_at, make_optimizer, train_step


def dry_run(suite: Suite, opts: RunOptions) -> str:
    device = pick_device(opts.device)
    ctx = source_context(suite, opts.cache_dir, opts.log)
    data = load_data(suite, ctx, prepare=opts.prepare, limit=opts.limit, log=opts.log)
    train, evals = data.train, data.evals
    if suite.scaling is not None:  # an IsoFLOP grid: per point, not per encoder
        from harness.scaling import sweep_dry_run

        return sweep_dry_run(suite, train, device, ctx.base_dir)
    b = suite.budget
    per_step = max(1, b.batch_bytes // b.context_bytes)
    probe = list(training_windows(train.docs, per_step * b.context_bytes, b.context_bytes, suite.seeds[0]))
    lines = [f"suite '{suite.name}': {len(suite.seeds)} seed(s) x {len(suite.encoders)} encoder(s) on "
             f"{device}; train part {train.n_bytes:,} bytes in {len(train.docs)} docs",
             "", f"{'model':<24} {'params':>10} {'fwd FLOPs/byte':>15} {'train bytes':>12} {'train FLOPs':>12} {'est. time':>10}"]
    total_s = 0.0
    for spec in suite.encoders:
        enc = build_encoder(spec, suite.seeds[0], ctx.base_dir).to(device)
        # a quick fit: at most 1 MB for merges, one batch for sub-models (BLT's entropy model)
        enc.fit(fit_context(train.docs, b, device, suite.seeds[0], sub_bytes_cap=b.batch_bytes,
                            train_bytes=min(b.train_bytes, 1_000_000), log=lambda s: None))
        batch = enc.collate(probe, [0] * len(probe))
        fpb = enc.flops(batch) / max(1, batch.scored_bytes)
        dt = _step_time(enc, batch.to(device), suite, device)
        steps = b.train_bytes / max(1, batch.scored_bytes)
        est = dt * steps * len(suite.seeds)
        total_s += est
        params = sum(p.numel() for p in enc.parameters())
        lines.append(f"{spec.label:<24} {params:>10,} {fpb:>15.3g} {b.train_bytes:>12,} {3 * fpb * b.train_bytes:>12.3g} {_fmt(est):>10}")
    n_docs = sum(len(e.docs) for e in evals)
    lines += ["", f"cells to score: {suite.n_cells()} ({len(evals)} eval set(s), {n_docs} docs, "
              f"{1 + len(suite.perturbations)} perturbation cells incl. '{CLEAN.id}', modes {', '.join(suite.eval.modes)})",
              f"estimated training time: {_fmt(total_s)} (fit stages and scoring not included)"]
    if suite.baselines.compressors:
        lines.insert(-1, f"compressor baseline cells: {suite.n_baseline_cells()} "
                         f"({', '.join(suite.baselines.compressors)} x {1 + len(suite.permutations)} stream(s))")
    return "\n".join(lines)


def _step_time(enc: Any, batch: Any, suite: Suite, device: torch.device) -> float:
    """Seconds of the training loop's own step (``harness.train.train_step``), best of two."""
    b = suite.budget
    opt = make_optimizer(enc, b)
    autocast = autocast_for(b, device)
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        train_step(enc, batch, opt, lr_at(b, 0, b.train_bytes), b, autocast)
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return min(times)


def _fmt(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"
