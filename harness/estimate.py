"""``tokbench run --dry-run``: the models to train and the cells to score, with FLOPs, predicted
peak memory and a time estimate per seed, without training anything and without fetching data.

How each part of a seed is estimated (all measured on the chosen device, with the run's dtype,
autocast and compile setting, through the same code the run uses):

* data: loading the prepared sources, timed (nothing is fetched: prepare the data first).
* fit stages: each encoder's ``fit`` on a 1 MB sample of the training text (sub-models — BLT's
  entropy model — are timed like a main model below), scaled linearly to the bytes the real fit
  reads. Merge learning is roughly linear in text; treat this term as the loosest.
* training: training steps on k = 2 and k = 4 windows of the real length (after a warm-up
  step, which holds the cold compile and is reported as its own term), fitted as
  ``a + b·windows`` and scaled to the run's windows per step and steps. On CUDA, when the
  predicted peak memory of a real step fits, a real (micro-)batch step is timed instead: a GPU
  is far from linear at 2–4 windows.
* peak memory: on CUDA, the allocator's peak at k = 2 and 4 windows, extrapolated linearly to a
  (micro-)batch; a run that cannot fit the device is refused (set ``budget.micro_batch_bytes``).
* perturbation: ``plan_rows`` on a sample of eval documents per perturbation and mode, scaled to
  all documents and divided by the worker processes.
* scoring: a forward on one scoring batch, scaled to the windows of every cell.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
import time
from typing import Any

import torch

from encoders.base import Encoder
from harness.accel import collate_processes, compile_backbones, want_compile
from harness.data import load_data, rolling_windows, training_windows
from harness.results import atomic_write_json
from harness.run import CLEAN, ESTIMATE_FILE, EvalSet, Runner, RunOptions
from harness.suite import Suite
from harness.train import autocast_for, fit_context, make_optimizer, train_step

FIT_SAMPLE = 1_000_000  # bytes the quick fit learns from


class DoesNotFit(ValueError):
    """A model's predicted peak memory exceeds the device."""


def dry_run(suite: Suite, opts: RunOptions) -> str:
    runner = Runner(suite, opts)
    data = load_data(suite, runner.ctx, prepare=False, limit=opts.limit, log=opts.log)  # fetches nothing
    runner.data_facts.update(data.facts)
    train, evals, t_data = data.train, data.evals, data.seconds
    if suite.scaling is not None:  # an IsoFLOP grid: per point, not per encoder
        from harness.scaling import sweep_dry_run

        return sweep_dry_run(suite, train, runner.device, runner.ctx.base_dir)
    b = suite.budget
    dev = runner.device
    per_step = max(1, b.batch_bytes // b.context_bytes)
    micro = max(1, b.micro_batch_bytes // b.context_bytes) if b.micro_batch_bytes else per_step
    cpu = dev.type != "cuda"
    probe = list(training_windows(train.docs, 4 * b.context_bytes, b.context_bytes, suite.seeds[0]))
    big = probe if cpu else list(training_windows(train.docs, micro * b.context_bytes, b.context_bytes, suite.seeds[0]))
    dev_mem = torch.cuda.get_device_properties(dev).total_memory if not cpu else None
    ev = suite.eval
    stride = ev.stride_bytes or max(1, b.context_bytes // 2)
    n_cells_p = 1 + len(suite.perturbations)
    # windows of one cell set (clean text; perturbations move lengths a little)
    win_full = sum(len(rolling_windows(d.data, b.context_bytes, stride)) for e in evals for d in e.docs)
    win_target = sum(len(e.docs) for e in evals)
    score_windows = n_cells_p * ((win_full if "full" in ev.modes else 0) + (win_target if "clean_target" in ev.modes else 0))

    lines = [f"suite '{suite.name}': {len(suite.seeds)} seed(s) x {len(suite.encoders)} encoder(s) on {dev}; "
             f"train part {train.n_bytes:,} bytes in {len(train.docs)} docs; dtype {b.dtype}, "
             f"compile {'on' if want_compile(b.compile, dev) else 'off'}",
             "", f"{'model':<16} {'params':>11} {'fwd FLOP/B':>10} {'train FLOPs':>11} {'peak mem':>9} "
             f"{'fit':>7} {'compile':>8} {'train':>8} {'score':>8}"]
    fit_s = train_s = compile_s = score_s = 0.0
    for spec in suite.encoders:
        enc = runner.build(spec, suite.seeds[0]).to(dev)
        t1 = time.perf_counter()
        sub: dict[str, float] = {}
        holder: list[Any] = []

        def sub_train(s: Any, n: int, _sub: dict[str, float] = sub, _ctx: list[Any] = holder) -> dict[str, Any]:
            # a sub-model (BLT's entropy model): time its steps like a main model (those steps
            # also leave it trained a little, so the parent's fit can go on)
            t2 = time.perf_counter()
            s.fit(_ctx[0])
            s.to(dev)
            est = _time_steps(s, probe, big, b, dev, per_step, micro)
            _sub["seconds"] = est["step_s"] * math.ceil(n / (per_step * b.context_bytes)) + est["compile_s"]
            _sub["measuring"] = time.perf_counter() - t2
            s.eval()
            return {"bytes": n, "flops": 0.0, "seconds": 0.0}

        ctx = fit_context(train.docs, b, dev, suite.seeds[0], train_bytes=min(b.train_bytes, FIT_SAMPLE),
                          log=lambda s: None)
        ctx.train = sub_train
        holder.append(ctx)
        enc.fit(ctx)
        quick = time.perf_counter() - t1 - sub.get("measuring", 0.0)
        # A fit that reads the training text (BPE merges) scales with the bytes it reads; the
        # rest of a fit that trains a sub-model (BLT's threshold on a fixed sample) does not.
        real_fit_bytes = min(b.train_bytes, train.n_bytes)
        scale = 1.0 if sub else real_fit_bytes / max(1, min(FIT_SAMPLE, real_fit_bytes))
        this_fit = (quick * scale if type(enc).fit is not Encoder.fit else 0.0) + sub.get("seconds", 0.0)
        est = _time_steps(enc, probe, big, b, dev, per_step, micro, ev.batch_windows)
        steps = math.ceil(b.train_bytes / (per_step * b.context_bytes))
        t_train = est["step_s"] * steps
        batch = enc.collate(probe, [0] * len(probe))
        fpb = enc.flops(batch) / max(1, batch.scored_bytes)
        peak = est.get("peak_bytes")
        if peak is not None and dev_mem is not None and peak > 0.95 * dev_mem:
            raise DoesNotFit(
                f"encoder '{spec.label}': predicted peak memory {peak / 2**30:.1f} GiB exceeds the device's "
                f"{dev_mem / 2**30:.1f} GiB; set budget.micro_batch_bytes (e.g. {max(b.context_bytes, b.batch_bytes // 4)})")
        t_score = est["score_window_s"] * score_windows
        fit_s += this_fit
        train_s += t_train
        compile_s += est["compile_s"]
        score_s += t_score
        params = sum(p.numel() for p in enc.parameters())
        mem = f"{peak / 2**30:.1f} GiB" if peak is not None else "-"
        lines.append(f"{spec.label:<16} {params:>11,} {fpb:>10.3g} {3 * fpb * b.train_bytes:>11.3g} {mem:>9} "
                     f"{_fmt(this_fit):>7} {_fmt(est['compile_s']):>8} {_fmt(t_train):>8} {_fmt(t_score):>8}")
        del enc
    t_pert = _perturb_time(runner, train, evals, stride)
    n_docs = sum(len(e.docs) for e in evals)
    cells = suite.n_cells()
    per_seed = t_data + fit_s + compile_s + train_s + t_pert + score_s
    lines += ["", f"cells to score: {cells} ({len(evals)} eval set(s), {n_docs} docs, "
              f"{n_cells_p} perturbation cells incl. '{CLEAN.id}', modes {', '.join(ev.modes)}); "
              f"{score_windows:,} windows per model and seed",
              f"estimate per seed: data {_fmt(t_data)}, fits {_fmt(fit_s)}, compile {_fmt(compile_s)}, "
              f"training {_fmt(train_s)}, perturbation {_fmt(t_pert)}, scoring {_fmt(score_s)}: {_fmt(per_seed)}",
              f"estimated total: {_fmt(per_seed * len(suite.seeds))} for {len(suite.seeds)} seed(s) "
              "(report not included)"]
    if suite.baselines.compressors:  # model-free rows (docs/fragility.md), not in the estimate
        lines.append(f"compressor baseline cells: {suite.n_baseline_cells()} "
                     f"({', '.join(suite.baselines.compressors)} x {1 + len(suite.permutations)} stream(s))")
    phases = {"data": t_data, "fits": fit_s, "compile": compile_s, "training": train_s,
              "perturbation": t_pert, "scoring": score_s, "per_seed": per_seed}
    # The run in this directory reads it back and writes estimated vs actual into run.json.
    runner.rd.root.mkdir(parents=True, exist_ok=True)
    atomic_write_json(runner.rd.root / ESTIMATE_FILE, {"device": str(dev), "seeds": len(suite.seeds),
                                                       "seconds_per_seed": phases})
    lines.append(f"(written to {runner.rd.root / ESTIMATE_FILE}; a run into that directory reports estimated vs actual)")
    return "\n".join(lines)


def _time_steps(enc: Any, probe: list[bytes], big: list[bytes], b: Any, dev: torch.device,
                per_step: int, micro: int, score_batch: int = 64) -> dict[str, float]:
    """Time training steps and one scoring forward of ``enc`` (see the module docstring).
    Returns step_s (one optimizer step of the run), compile_s (first step's extra time),
    peak_bytes (CUDA only) and score_window_s (seconds per scored window)."""
    enc.train()
    if want_compile(b.compile, dev):
        compile_backbones(enc)
    opt = make_optimizer(enc, b, dev)
    autocast = autocast_for(b, dev)

    def step(wins: list[bytes]) -> float:
        """One step of the training loop's own ``train_step`` (collation outside the timing:
        the loop does it beside the step; it is counted below)."""
        batch = enc.collate(wins, [0] * len(wins))
        t0 = time.perf_counter()
        train_step(enc, batch, opt, b.lr, b, autocast, dev)
        _sync(dev)
        return time.perf_counter() - t0

    first = step(probe[:2])  # cold compile, allocator warm-up
    out: dict[str, float] = {}
    peaks = {}
    times = {}
    for k in (2, 4):
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        times[k] = statistics.median(step(probe[:k]) for _ in range(2))
        if dev.type == "cuda":
            peaks[k] = torch.cuda.max_memory_allocated(dev)
    slope = max(0.0, (times[4] - times[2]) / 2)
    step_s = (times[2] - 2 * slope + slope * micro) * math.ceil(per_step / micro)
    if dev.type == "cuda":
        pslope = max(0, (peaks[4] - peaks[2]) / 2)
        out["peak_bytes"] = peaks[2] + pslope * (micro - 2)
        total = torch.cuda.get_device_properties(dev).total_memory
        if out["peak_bytes"] < 0.9 * total and len(big) >= micro:
            step(big[:micro])  # new shape: compile again outside the timing
            torch.cuda.reset_peak_memory_stats(dev)
            step_s = statistics.median(step(big[:micro]) for _ in range(3)) * math.ceil(per_step / micro)
            out["peak_bytes"] = torch.cuda.max_memory_allocated(dev)
    # Host side: collating a step's windows (tokenization, patching, FLOP counts). The run does
    # it in a thread (and, on CUDA, in ``collate_processes`` worker processes) beside the step,
    # so a step takes the longer of the two on CUDA and their sum on CPU (same cores).
    wins = (big if dev.type == "cuda" else probe)[:micro]
    t0 = time.perf_counter()
    cb = enc.collate(wins, [0] * len(wins))
    enc.flops(cb)
    host_s = (time.perf_counter() - t0) * micro / max(1, len(wins)) * math.ceil(per_step / micro)
    workers = collate_processes(dev)
    if dev.type == "cuda":
        step_s = max(step_s, host_s / max(1, workers))
    else:
        step_s += host_s
    out["host_collate_s"] = host_s
    out["step_s"] = step_s
    out["compile_s"] = max(0.0, first - times[2])
    # scoring: one forward on a scoring batch (real batch on CUDA, 4 windows on CPU), per window
    enc.eval()
    n = min(len(big), score_batch if dev.type == "cuda" else 4)
    wins = (big if dev.type == "cuda" else probe)[:n]
    with torch.inference_mode():
        for _ in range(2):
            batch = enc.collate(wins, [0] * len(wins))
            t0 = time.perf_counter()
            with autocast:
                enc(batch.to(dev)).byte_nll([len(w) for w in wins], [0] * len(wins))
            _sync(dev)
            dt = time.perf_counter() - t0
    out["score_window_s"] = dt / max(1, len(wins))
    return out


def _perturb_time(runner: Runner, train: Any, evals: list[Any], stride: int) -> float:
    """Seconds to perturb and plan every cell of one seed: ``plan_rows`` on up to 4 documents
    per eval set, perturbation and mode, scaled to all documents, divided by the processes
    ``perturb_many`` uses; plus fitting the perturbations once."""
    t0 = time.perf_counter()
    languages = {d.language for e in evals for d in e.docs if d.language is not None}
    perts = runner.perturbation_instances(train, languages)
    fit_s = time.perf_counter() - t0
    specs = [CLEAN, *runner.suite.perturbations]
    total = 0.0
    for ep in evals:
        sample = EvalSet.of(dataclasses.replace(ep, docs=ep.docs[:4]))
        for pspec in specs:
            for mode in runner.suite.eval.modes:
                t1 = time.perf_counter()
                runner.plan_rows(sample, pspec, perts.get((pspec.id, pspec.severity)), runner.suite.seeds[0], mode)
                total += (time.perf_counter() - t1) * len(ep.docs) / max(1, len(sample.part.docs))
    procs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return fit_s + total / max(1, min(procs, len(specs) * len(runner.suite.eval.modes)))


def _step_time(enc: Any, batch: Any, suite: Suite, device: torch.device) -> float:
    """Seconds of the training loop's own step (``harness.train.train_step``) on one batch
    already on ``device``, best of two (the scaling sweep's dry run times its grid points so)."""
    b = suite.budget
    opt = make_optimizer(enc, b, device)
    autocast = autocast_for(b, device)
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        train_step(enc, batch, opt, b.lr, b, autocast)
        _sync(device)
        times.append(time.perf_counter() - t0)
    return min(times)


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _fmt(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"
