"""What makes the one training loop and the one scoring function run at the hardware's pace,
without changing what they compute:

* ``compile_backbones`` — ``torch.compile`` of every transformer block of the shared ``Backbone``
  (in place: state-dict keys stay the same; shapes that vary, like BPE's token counts, become
  dynamic after the first recompile). Switch: ``budget.compile`` (auto = on CUDA only).
* ``Prefetcher`` — collation (tokenization, patching, FLOP counts) in a background thread, a few
  batches ahead, into pinned memory, so the copies to the GPU are asynchronous.
* ``gemm_tflops`` — the bf16 8192³ matrix-product rate measured in this process: the MFU ceiling.

Nothing here runs on CPU by default except the prefetch thread, whose output is identical to
collating in the loop (same windows, same order).
"""

from __future__ import annotations

import contextvars
import math
import multiprocessing
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from encoders.backbone import Backbone


def prefer_flash_attention() -> bool:
    """Take cuDNN out of ``scaled_dot_product_attention``'s backends on CUDA (flash, then
    memory-efficient, then math remain). Profiled on an H200 (BENCHMARKS.md, profile run): the
    cuDNN backend spent 0.3 ms of host time per call at a fixed length and 7.6 ms at BPE's
    per-batch token lengths (an execution plan built per shape), so a small model's step waited
    on the host. ``TOKBENCH_CUDNN_SDPA=1`` keeps cuDNN. Returns whether cuDNN is now off."""
    if os.environ.get("TOKBENCH_CUDNN_SDPA") == "1":
        return False
    torch.backends.cuda.enable_cudnn_sdp(False)
    return True


def want_compile(setting: Any, device: torch.device) -> bool:
    """``budget.compile``: True / False, or "auto" = compile on CUDA only (on CPU the first
    compile costs more than a CI-sized run saves, and it needs a C++ toolchain)."""
    if setting == "auto":
        return device.type == "cuda"
    return bool(setting)


def compile_backbones(model: nn.Module) -> int:
    """Compile each transformer block and final norm of every ``Backbone`` inside ``model``, in
    place. Returns how many modules were compiled (0 when the model has no backbone, or when
    already compiled). The Backbone's own forward stays eager so hooks on it keep working.

    All blocks of all models share one code object, so its compiled variants add up over a run
    (train / inference mode, bf16 / fp32 sub-models, static / dynamic shapes, six encoders):
    the recompile limit is raised so none of them falls back to eager."""
    import torch._dynamo

    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    n = 0
    for m in model.modules():
        if isinstance(m, Backbone):
            for sub in [*m.blocks, m.norm]:
                if getattr(sub, "_compiled_call_impl", None) is None:
                    sub.compile()
                    n += 1
    return n


_DONE = object()


class Prefetcher:
    """Iterate ``make(item)`` for each item of ``items`` computed ``depth`` ahead in a daemon
    thread; exceptions are re-raised in the consumer. ``close()`` stops the thread early.

    The thread holds the GIL only while it runs Python (tokenization); the training loop's
    thread releases it while it waits on the GPU, so collation overlaps the step.
    """

    def __init__(self, items: Iterator[Any], make: Callable[[Any], Any], depth: int = 3) -> None:
        self._q: queue.Queue[Any] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self.wait_seconds = 0.0  # time the consumer spent waiting for a batch (host-bound steps)
        # The thread runs in a copy of the caller's context: context variables the caller set
        # (``causal_attention_cost`` of a scaling sweep) apply to the FLOP counts made there too.
        ctx = contextvars.copy_context()
        self._thread = threading.Thread(target=ctx.run, args=(self._run, items, make), daemon=True)
        self._thread.start()

    def _put(self, x: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._q.put(x, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self, items: Iterator[Any], make: Callable[[Any], Any]) -> None:
        try:
            for it in items:
                if self._stop.is_set() or not self._put(make(it)):
                    return
            self._put(_DONE)
        except BaseException as e:  # handed to the consumer, which re-raises it
            self._put(("__error__", e))

    def __iter__(self) -> Iterator[Any]:
        while True:
            t0 = time.perf_counter()
            x = self._q.get()
            self.wait_seconds += time.perf_counter() - t0
            if x is _DONE:
                return
            if isinstance(x, tuple) and len(x) == 2 and x[0] == "__error__":
                raise x[1]
            yield x

    def close(self) -> None:
        self._stop.set()
        try:
            while True:
                self._q.get_nowait()
        except queue.Empty:
            pass
        self._thread.join(timeout=5.0)


_COLLATE: Callable[[Any], Any] | None = None  # set in the parent before fork


class _Wire:
    """A tensor on its way from a collation worker: the numpy array under it. Pickled as plain
    bytes through the pool's pipe; torch's own reductions pass every tensor as a shared-memory
    file descriptor over a socket (a connect and a recvmsg per tensor), which measured on an
    H200 host left the training thread waiting for batches most of each step."""

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array


def _to_wire(obj: Any) -> Any:
    """``obj`` with every CPU tensor inside lists, tuples, dicts and dataclasses made a _Wire."""
    import dataclasses

    if isinstance(obj, torch.Tensor):
        # numpy has no bfloat16: such a tensor keeps torch's shared-memory reduction
        return obj if obj.dtype == torch.bfloat16 else _Wire(obj.numpy())
    if isinstance(obj, list):
        return [_to_wire(x) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_to_wire(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _to_wire(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            object.__setattr__(obj, f.name, _to_wire(getattr(obj, f.name)))
    return obj


def _from_wire(obj: Any) -> Any:
    """Inverse of ``_to_wire``: tensors sharing the unpickled arrays' memory (no copy)."""
    import dataclasses

    if isinstance(obj, _Wire):
        return torch.from_numpy(obj.array)
    if isinstance(obj, list):
        return [_from_wire(x) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_from_wire(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _from_wire(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            object.__setattr__(obj, f.name, _from_wire(getattr(obj, f.name)))
    return obj


def _collate_call(item: Any) -> Any:
    assert _COLLATE is not None
    return _to_wire(_COLLATE(item))


def die_with_parent(parent: int) -> None:
    """Initializer of forked worker processes: a worker ends when the process that forked it
    dies, SIGKILL included, so a killed run leaves no idle workers behind holding its files
    (Linux's PR_SET_PDEATHSIG; elsewhere only the check below)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def ordered_pool_map(fn: Callable[[Any], Any], items: Iterator[Any], processes: int,
                     ahead: int = 8) -> Iterator[Any]:
    """``map(fn, items)`` in order, computed by ``processes`` forked worker processes with at
    most ``ahead`` items in flight (the item stream may be long or endless). ``fn`` must be
    pure CPU work (collation): the children never touch CUDA. ``processes`` <= 0: in this process.
    Tensors come back as numpy arrays pickled through the pipe (``_Wire``)."""
    if processes <= 0 or "fork" not in multiprocessing.get_all_start_methods():
        yield from map(fn, items)
        return
    import collections
    from concurrent.futures import ProcessPoolExecutor

    import torch.multiprocessing  # noqa: F401 - the reductions for the rare bfloat16 tensor

    global _COLLATE
    _COLLATE = fn
    try:
        # Workers fork on first use, from the prefetch thread; they inherit ``_COLLATE``.
        with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork"),
                                 initializer=die_with_parent, initargs=(os.getpid(),)) as ex:
            pending: collections.deque[Any] = collections.deque()
            for it in items:
                pending.append(ex.submit(_collate_call, it))
                if len(pending) >= ahead:
                    yield _from_wire(pending.popleft().result())
            while pending:
                yield _from_wire(pending.popleft().result())
    finally:
        _COLLATE = None


def collate_processes(device: torch.device) -> int:
    """Worker processes for training-batch collation: on CUDA up to 8 (half the CPUs), so
    tokenization keeps up with the GPU; on CPU none (the CPU is busy training)."""
    if device.type != "cuda":
        return 0
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(8, cpus // 2)


def pin(batch: Any) -> Any:
    """Pin a TensorBatch's tensors (page-locked memory makes ``.to(cuda, non_blocking=True)``
    a true asynchronous copy). Returns the same batch object."""
    batch.tensors = {k: v.pin_memory() for k, v in batch.tensors.items()}
    return batch


def gemm_tflops(device: torch.device, n: int = 8192, reps: int = 20) -> float | None:
    """Measured dense bf16 matrix-product rate (TFLOP/s) of an n×n×n product on ``device``,
    random inputs, median of ``reps`` timed with CUDA events after a warm-up. None on CPU."""
    if device.type != "cuda":
        return None
    g = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16, generator=g)
    for _ in range(3):
        a @ b
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    times.sort()
    del a, b
    return 2.0 * n**3 / times[len(times) // 2] / 1e12


def union_length(spans: Iterator[tuple[float, float]] | list[tuple[float, float]]) -> float:
    """Total length covered by intervals [a, b) (overlaps counted once): the device's busy time
    from its kernel and copy intervals, which overlap across streams."""
    total, end = 0.0, -math.inf
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


class IdleMeter:
    """GPU idle share of training steps ``first`` to ``last`` (exclusive), measured with the torch
    profiler: idle = 1 − Σ kernel and copy time on the device / wall time of those steps
    (synchronised at both ends). Off unless ``TOKBENCH_IDLE_STEPS=first:last`` is set and the
    device is CUDA; the profiler's own host overhead makes the share an upper bound."""

    def __init__(self, device: torch.device, spec: str | None) -> None:
        self.range: tuple[int, int] | None = None
        if spec and device.type == "cuda":
            a, b = (int(x) for x in spec.split(":"))
            self.range = (a, b)
        self.device = device
        self._prof: Any = None
        self._t0 = 0.0
        self.result: dict[str, float] | None = None

    def step(self, i: int) -> None:
        """Call at the start of step ``i`` (0-based, counting this run's steps)."""
        if self.range is None:
            return
        if i == self.range[0]:
            from torch.profiler import ProfilerActivity, profile

            torch.cuda.synchronize(self.device)
            self._prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
            self._prof.__enter__()
            self._t0 = time.perf_counter()
        elif i == self.range[1] and self._prof is not None:
            self.finish()

    def finish(self) -> None:
        if self._prof is None:
            return
        torch.cuda.synchronize(self.device)
        wall = time.perf_counter() - self._t0
        self._prof.__exit__(None, None, None)
        busy_us = union_length((e.time_range.start, e.time_range.end) for e in self._prof.events()
                               if "CUDA" in str(getattr(e, "device_type", "")))
        steps = self.range[1] - self.range[0] if self.range else 1
        self.result = {"steps": steps, "wall_seconds": wall, "device_busy_seconds": busy_us / 1e6,
                       "idle_fraction": max(0.0, 1.0 - busy_us / 1e6 / wall) if wall > 0 else float("nan")}
        self._prof = None
