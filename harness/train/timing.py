"""How long the run's training of one model takes, measured with the run's own loop
(``train_encoder``) on real batches: the dry run's training estimate (harness.pipeline.estimate
documents the method). Seconds throughout; peak memory in bytes.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import itertools
import math
from typing import Any

import torch

from harness.data.load import training_windows
from harness.infra.accel import want_compile
from harness.train.loop import train_encoder
from harness.train.measure import GPU_STEPS

# CPU: the timed steps hold 2 windows, then as many as CPU_POSITIONS bytes of windows (at least 3,
# at most a real (micro-)batch): a wide span keeps the line's slope out of the noise, and the cap
# keeps memory down (a 1 KB window of the standard backbone holds ~0.3 GB of float32 activations;
# its dry run must stay under 2 GB RSS, so it times 2 and 3 windows)
CPU_POSITIONS = 3072


class DoesNotFit(ValueError):
    """A model's predicted peak memory exceeds the device."""


def train_timing(enc: Any, docs: Any, b: Any, dev: torch.device, seed: int, n_bytes: int) -> dict[str, Any]:
    """Seconds the run's training of ``enc`` on ``n_bytes`` takes (the method: harness.pipeline.estimate):
    train_s (start-up and steps, compile excluded), compile_s, step_s; peak_bytes on CUDA."""
    steps = math.ceil(n_bytes / (b.windows_per_step * b.context_bytes))
    if dev.type == "cuda":
        return _train_timing_cuda(enc, docs, b, dev, seed, steps)
    return _train_timing_cpu(enc, docs, b, dev, seed, steps)


def _train_timing_cuda(enc: Any, docs: Any, b: Any, dev: torch.device, seed: int, steps: int) -> dict[str, Any]:
    """``train_encoder`` itself on real batches: calls of ``GPU_STEPS`` steps, fitted by
    ``fit_train_calls``; plus peak_bytes."""
    step_bytes = b.windows_per_step * b.context_bytes
    walls = []
    peak = 0
    offset = 0
    for k in GPU_STEPS:
        # each call reads windows of its own (the stream's next ones), so shapes vary as in the run
        wins = training_windows(docs, (offset + k) * step_bytes, b.context_bytes, seed)
        for _ in range(offset * step_bytes // b.context_bytes):
            next(wins)
        offset += k
        try:
            st = train_encoder(enc, wins, k * step_bytes, b, dev)
        except torch.cuda.OutOfMemoryError as e:
            raise DoesNotFit(f"{type(enc).__name__}: one training step does not fit the device ({e}); "
                             "set budget.micro_batch_bytes") from None
        walls.append((st["seconds"], st["steps"],
                      st.get("compile_graph_seconds", 0.0) + st.get("compile_kernels_seconds", 0.0)))
        peak = max(peak, st["peak_mem_bytes"])
    return {**fit_train_calls(walls, steps), "peak_bytes": peak}


def fit_train_calls(calls: list[tuple[float, int, float]], steps: int) -> dict[str, float]:
    """Seconds of a run's training from the timed ``train_encoder`` calls, each (wall seconds,
    steps it ran, seconds of it compiling by ``compile_clock``), in ``GPU_STEPS`` order: the
    last two calls' compile-free walls give a step's time (their difference) and the start-up
    (what is left of the shorter one); the earlier calls' compile clocks and whatever they took
    beyond start-up and steps (first launches, allocator growth) are the cold compile.
    Returns step_s, train_s (start-up + ``steps`` steps, compile excluded), compile_s."""
    free = [(w - c, n) for w, n, c in calls]
    (w_short, n_short), (w_long, n_long) = free[-2], free[-1]
    step_s = (w_long - w_short) / (n_long - n_short) if n_long > n_short else 0.0
    if step_s <= 0.0:  # noise (or a compile the clock missed) in the short call: the long call's mean
        step_s = w_long / max(1, n_long)
    startup = max(0.0, w_short - n_short * step_s)
    compile_s = sum(c for _, _, c in calls) + sum(max(0.0, w - startup - n * step_s) for w, n in free[:-2])
    return {"step_s": step_s, "train_s": startup + step_s * steps, "compile_s": compile_s}


def _train_timing_cpu(enc: Any, docs: Any, b: Any, dev: torch.device, seed: int, steps: int) -> dict[str, Any]:
    """``train_encoder`` itself with steps of 2 and of more windows (collation, FLOP counts
    and the loop's bookkeeping included: on CPU they share the cores with the step): per k, one
    step first (compile when on, allocator warm-up), then 1 and 4 steps; their difference gives a
    step's time, fitted as ``a + b·k`` and scaled to the run's windows per step."""
    per_step, micro = b.windows_per_step, b.windows_per_micro_batch
    times: dict[int, float] = {}
    extra = 0.0  # first calls' extra time: the compile, when on
    skip = 0
    lo, hi = 2, max(3, min(micro, CPU_POSITIONS // b.context_bytes))
    for k in (lo, hi):
        bk = dataclasses.replace(b, batch_bytes=k * b.context_bytes, micro_batch_bytes=0)
        walls = []
        for n in (1, 1, 4):
            # each call reads windows of its own (the stream's next ones), as the run does
            wins = itertools.islice(training_windows(docs, (skip + 2 * n * k) * b.context_bytes, b.context_bytes, seed),
                                    skip, None)
            st = train_encoder(enc, wins, n * k * b.context_bytes, bk, dev)
            walls.append((st["seconds"], st["steps"]))
            enc.zero_grad(set_to_none=True)  # memory: the next call's peak must not stack on these
            release_memory()
            skip += st["steps"] * k
        (t_first, _), (t1, n1), (t4, n4) = walls
        times[k] = (t4 - t1) / max(1, n4 - n1)
        if times[k] < 0.5 * t4 / n4:  # a busy machine made the difference meaningless: the long
            times[k] = t4 / n4  # call's mean step (its start-up included: errs high)
        extra += max(0.0, t_first - t1)
    slope = (times[hi] - times[lo]) / (hi - lo)
    if slope <= 0 or times[lo] - lo * slope < 0:
        # noise (a busy machine) made the line meaningless: a step's time proportional to windows
        slope = (times[lo] + times[hi]) / (lo + hi)
    step_s = (times[lo] + slope * (micro - lo)) * math.ceil(per_step / micro)
    # compile off: a first call's extra time is allocator warm-up, lost in a long run
    compile_s = extra if want_compile(b.compile, dev) else 0.0
    return {"step_s": step_s, "train_s": step_s * steps, "compile_s": compile_s, "peak_bytes": None}


def release_memory() -> None:
    """Hand freed heap memory back to the OS (glibc keeps it otherwise), so one model's peak
    does not stack on the last one's: the dry run's RSS is that of its largest model."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
