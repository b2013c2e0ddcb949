"""The samples and clocks the dry run (harness.pipeline.estimate), the scaling sweep's dry run and the
compile-ahead process share: the first documents a quick fit reads, the first eval documents a
scoring sample holds, the training loop's own step timed, and seconds shown for people."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import torch

from harness.config.suite import Suite
from harness.data.evalsets import EvalSet
from harness.data.load import rolling_windows
from harness.train.loop import autocast_for, make_optimizer, train_step

FIT_SAMPLE = 1_000_000  # bytes the quick fit learns from
# CUDA: steps of two warm-up calls (the first compiles; the second meets the shapes a first call
# leaves out, like the last partial batch's, and compiles again: on an H200 its 3 s made the
# short call slower than the long one and the step time 0 — BENCHMARKS.md), then the
# two timed calls; both hold whole pretokenized blocks (harness.data.pretokenize: 8 steps), so their
# difference is the pipelined pace. Each call's compile clock is taken out of its wall.
GPU_STEPS = (3, 8, 16, 40)
WARMUP_CALLS = GPU_STEPS[:2]  # the two warm-up calls (also harness.overlap.compileahead's training calls)
SCORE_DOCS = 64  # at most this many eval documents per set in the scoring sample


def fit_sample(docs: Any) -> list[Any]:
    """The first documents of the training text, about ``FIT_SAMPLE`` bytes: what a quick fit
    reads (here, and in the compile-ahead process)."""
    out, n = [], 0
    for d in docs:
        if n >= FIT_SAMPLE:
            break
        out.append(d)
        n += len(d.data)
    return out


def _score_sample(evals: list[Any], context: int, stride: int, want_windows: int) -> list[EvalSet]:
    """Per eval set, its first documents: enough for about ``want_windows`` full-mode windows
    (at most ``SCORE_DOCS``)."""
    out = []
    for e in evals:
        docs, n = [], 0
        for d in e.docs[:SCORE_DOCS]:
            docs.append(d)
            n += len(rolling_windows(d.data, context, stride))
            if n >= want_windows:
                break
        out.append(EvalSet.of(dataclasses.replace(e, docs=docs)))
    return out


def _step_time(enc: Any, batch: Any, suite: Suite, device: torch.device) -> float:
    """Seconds of the training loop's own step (``harness.train.loop.train_step``) on one batch
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
    """Wait for ``dev``'s queued work (CUDA); nothing on the CPU."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _fmt(s: float) -> str:
    """Seconds for people: ``42 s``, ``3.5 min``, ``2.1 h``."""
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{s / 3600:.1f} h"
