"""Host cost of one training step, per encoder: torch ops dispatched and host milliseconds.

    python benchmarks/step_host.py [suites/smoke.yaml] [--device cpu] [--steps 20] [--warmup 3] \
        [--set backbone.layers=4 --set backbone.dim=192 ...] [--top 12]

A small model on a fast GPU is host-bound: the step's wall time is the Python and dispatch work
of launching its ops, not the GPU's arithmetic (issue #16: ~113 launches, 2.9 ms of GPU time and
~45 ms of wall time per step of a 4-layer dim-192 model on an H200). This benchmark measures the
two numbers that cost depends on, on the training loop's own step (``harness.train.loop.train_step``,
the one ``train_encoder`` and the dry run take) and on batches collated as the loop collates
them (``encoder.collate`` per micro-batch of the suite's budget):

* ops/step: aten ops dispatched by one step (forward, loss, backward, ``zero_grad``, gradient
  clipping, AdamW), counted by a ``TorchDispatchMode`` — the ops after autograd and composite
  decomposition, i.e. about one kernel each on the eager path. Split into forward (+ loss),
  backward and the rest (zero_grad, clipping, optimizer). Deterministic for given shapes: the
  robust number of this benchmark. (FuzzyTok's conv runs its custom-op path under a dispatch
  mode, ``encoders/fuzzytok/ops.py``; on CUDA with compiled blocks the Triton kernels inside the
  blocks are not aten ops and are not counted.)
* host ms/step: median (and 10th / 90th percentile) of the wall time of ``train_step`` calls
  after ``--warmup`` steps, without a device sync per step — on a GPU the time the host needs to
  issue a step; on CPU the step itself. ``wall ms/step`` is the mean over all timed steps with
  one sync at the end.

Each encoder is built and fitted (BPE merges, BLT's entropy model) as the run does; with
``--fit-cap`` a sub-model trains on at most that many bytes (quicker; BLT's patches then differ a
little from the run's).
"""
from __future__ import annotations

import argparse
import inspect
import os
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from encoders.base import Encoder, TensorBatch  # noqa: E402
from harness.config.build import load_suite  # noqa: E402
from harness.config.suite import BudgetConfig  # noqa: E402
from harness.data.load import (  # noqa: E402
    batched,
    default_cache_dir,
    load_data,
    source_context,
    training_windows,
)
from harness.infra.accel import compile_backbones, want_compile  # noqa: E402
from harness.infra.device import pick_device  # noqa: E402
from harness.train.loop import autocast_for, build_encoder, fit_context, make_optimizer, train_step  # noqa: E402


class OpCounter(TorchDispatchMode):
    """Counts every aten op dispatched inside the mode, by op name (``aten.mm``, ...).
    Backward ops count too: the autograd engine runs them under the caller's dispatch modes."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.counts[str(func.overloadpacket)] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def step_batches(enc: Encoder, docs: Any, b: BudgetConfig, steps: int, seed: int) -> Iterator[list[TensorBatch]]:
    """``steps`` training steps' micro-batches from the suite's window stream, collated as
    ``harness.train.loop.train_encoder`` collates them (``encoder.collate`` per micro-batch), FLOPs
    counted on each as the loop's prefetch thread does before the step (BLT patches there)."""
    per_step, micro = b.windows_per_step, b.windows_per_micro_batch
    wins = training_windows(docs, 2 * steps * per_step * b.context_bytes, b.context_bytes, seed)
    for i, chunk in enumerate(batched(wins, per_step)):
        if i >= steps:
            return
        parts = [enc.collate(chunk[j : j + micro], [0] * len(chunk[j : j + micro])) for j in range(0, len(chunk), micro)]
        for p in parts:
            enc.flops(p)
            enc.frozen_flops(p)
        yield parts


def _clip_kw(enc: Encoder) -> dict[str, Any]:
    """``clip_params`` as the training loop passes it, where ``train_step`` takes it (the code
    before it did not: the script measures that code too)."""
    if "clip_params" not in inspect.signature(train_step).parameters:
        return {}
    return {"clip_params": list(enc.parameters())}


def count_step(enc: Encoder, parts: list[TensorBatch], opt: torch.optim.Optimizer, b: BudgetConfig,
               autocast: Any, device: torch.device) -> dict[str, Any]:
    """Ops of one whole ``train_step`` and of its forward (+ loss) and backward alone (a second
    pass on the same batches, gradients dropped after it; the optimizer does not step).

    The step is taken once uncounted first: what a model makes once per shape (the backbone's
    RoPE tables for a length not seen yet, e.g. a BPE batch's token count) is not a per-step
    cost, and counting it would make the number depend on which batch came first."""
    train_step(enc, parts, opt, b.lr, b, autocast, device, **_clip_kw(enc))
    with OpCounter() as whole:
        train_step(enc, parts, opt, b.lr, b, autocast, device, **_clip_kw(enc))
    step_bytes = sum(p.scored_bytes for p in parts)
    fwd, bwd = OpCounter(), OpCounter()
    for batch in parts:
        batch = batch.to(device)
        with fwd, autocast:
            loss = enc(batch).nll.sum() / step_bytes
        with bwd:
            loss.backward()
    enc.zero_grad(set_to_none=True)
    return {"total": whole.total, "fwd": fwd.total, "bwd": bwd.total,
            "rest": whole.total - fwd.total - bwd.total, "counts": whole.counts}


def time_steps(enc: Encoder, batches: list[list[TensorBatch]], opt: torch.optim.Optimizer, b: BudgetConfig,
               autocast: Any, device: torch.device) -> tuple[list[float], float]:
    """Host seconds of each ``train_step`` call (no per-step sync) and the mean wall seconds per
    step with one sync at the end."""
    host = []
    kw = _clip_kw(enc)  # as train_encoder: the parameter list made once
    t_all = time.perf_counter()
    for parts in batches:
        t0 = time.perf_counter()
        train_step(enc, parts, opt, b.lr, b, autocast, device, **kw)
        host.append(time.perf_counter() - t0)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return host, (time.perf_counter() - t_all) / max(1, len(batches))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", nargs="?", default="suites/smoke.yaml")
    ap.add_argument("--set", action="append", default=[], dest="sets", metavar="KEY=VALUE")
    ap.add_argument("--device", default="cpu", choices=["auto", "cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=20, help="timed steps per encoder (median reported)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (allocator, compile)")
    ap.add_argument("--fit-cap", type=int, default=None, help="train sub-models (BLT's entropy model) on at most N bytes")
    ap.add_argument("--only", action="append", default=[], help="encoder label(s) to measure (default: all)")
    ap.add_argument("--top", type=int, default=0, help="print the N most frequent ops of each step")
    ap.add_argument("--cache", default=None, help="data cache (default: TOKBENCH_CACHE or ~/.cache)")
    a = ap.parse_args()
    suite = load_suite(a.suite, a.sets)
    device = pick_device(a.device)
    ctx = source_context(suite, Path(a.cache) if a.cache else default_cache_dir(), lambda s: None)
    docs = load_data(suite, ctx, prepare=False).train.docs
    b = suite.budget
    bb = suite.encoders[0].backbone if suite.encoders else None
    print(f"# step_host: suite {a.suite} {' '.join('--set ' + s for s in a.sets)}".rstrip())
    print(f"# device {device}, torch {torch.__version__}, torch threads {torch.get_num_threads()}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '-')}; backbone {bb}")
    print(f"# budget: {b.windows_per_step} windows of {b.context_bytes} B per step, "
          f"{b.windows_per_micro_batch} per micro-batch, grad_clip {b.grad_clip}, dtype {b.dtype}, "
          f"compile {want_compile(b.compile, device)}; {a.warmup} warm-up + {a.steps} timed steps")
    print("# ops/step: aten ops of one train_step (TorchDispatchMode), deterministic: the robust number.")
    print("# host ms: per-step wall of train_step without a device sync (median [p10, p90]). On a shared")
    print("# machine (the 2-core CPU box is shared with other jobs) timings are fragile; compare op counts.")
    print(f"{'encoder':<12} {'params':>9} {'ops/step':>8} {'fwd':>6} {'bwd':>6} {'rest':>6} "
          f"{'host ms/step':>13} {'[p10, p90]':>15} {'wall ms/step':>12}")
    for spec in suite.encoders:
        if a.only and spec.label not in a.only:
            continue
        enc = build_encoder(spec, 0, Path(a.suite).resolve().parent).to(device)
        enc.fit(fit_context(docs, b, device, 0, sub_bytes_cap=a.fit_cap, log=lambda s: None))
        enc.to(device)
        enc.train()
        if want_compile(b.compile, device):
            compile_backbones(enc)
        opt = make_optimizer(enc, b, device)
        autocast = autocast_for(b, device)
        batches = list(step_batches(enc, docs, b, a.warmup + a.steps + 1, seed=0))
        if device.type == "cuda":
            batches = [[p.to(device) for p in parts] for parts in batches]
        time_steps(enc, batches[: a.warmup], opt, b, autocast, device)
        host, wall = time_steps(enc, batches[a.warmup : a.warmup + a.steps], opt, b, autocast, device)
        ops = count_step(enc, batches[-1], opt, b, autocast, device)
        q = statistics.quantiles(host, n=10) if len(host) > 1 else [host[0]] * 9
        params = sum(p.numel() for p in enc.parameters())
        print(f"{spec.label:<12} {params:>9,} {ops['total']:>8} {ops['fwd']:>6} {ops['bwd']:>6} {ops['rest']:>6} "
              f"{1e3 * statistics.median(host):>13.2f} {f'[{1e3 * q[0]:.2f}, {1e3 * q[-1]:.2f}]':>15} "
              f"{1e3 * wall:>12.2f}", flush=True)
        if a.top:
            print("    " + ", ".join(f"{n} {c}" for n, c in ops["counts"].most_common(a.top)))
        del enc, opt, batches


if __name__ == "__main__":
    main()
