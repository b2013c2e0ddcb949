"""What makes the one training loop and the one scoring function run at the hardware's pace,
without changing what they compute:

* ``compile_backbones`` — ``torch.compile`` of every transformer block of the shared ``Backbone``
  (in place: state-dict keys stay the same; shapes that vary, like BPE's token counts, become
  dynamic after the first recompile). Switch: ``budget.compile`` (auto = on CUDA only).
* ``Prefetcher`` — collation (tokenization, patching, FLOP counts) in a background thread, a few
  batches ahead, into pinned memory, so the copies to the GPU are asynchronous.
* ``ordered_pool_map`` / ``pool_map`` — forked CPU worker processes, a pipe each (collation;
  perturbation): a worker that dies or stalls is a one-line error naming it, never a hang.

Nothing here runs on CPU by default except the prefetch thread, whose output is identical to
collating in the loop (same windows, same order). The meters of MFU and step times are in
``harness.infra.meters``.
"""

from __future__ import annotations

import contextvars
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

import encoders.backbone as backbone

# the forked pool's shared parts (WorkerDied, die_with_parent and usable_cpus are used from here too)
from core.forkpool import (  # noqa: F401
    WorkerDied,
    die_with_parent,
    send,
    start_workers,
    stop_workers,
    usable_cpus,
)
from core.forkpool import can_fork as _can_fork
from core.forkpool import pool_map as _pool_map
from core.forkpool import receive as _core_receive
from encoders.backbone import Backbone
from harness.infra.watchdog import stall_limit

# attention_backends' mode; the other two exist for benchmarks to compare against
CUDNN_SDPA: str = "fixed"
# compile_backbones marks the blocks dynamic from the first compile; False keeps torch's static-first
COMPILE_DYNAMIC = True
# warm_compile_pool before the data loads; False leaves the workers to the first compile
WARM_POOL = True


def attention_backends() -> str:
    """Choose ``scaled_dot_product_attention``'s backends on CUDA (``CUDNN_SDPA``); returns the
    mode chosen:

    * ``fixed`` (default) — cuDNN is asked for first only in compiled training steps at a fixed
      length (``encoders.backbone.CUDNN_FIXED``: the byte-level models' 1 KB windows) and is left
      out everywhere else (scoring, varying lengths), where flash then memory-efficient run. Why:
      on an H200 cuDNN's causal forward + backward at the standard suite's training shape took
      3.10 ms against flash's 4.68 (BENCHMARKS.md), but the cuDNN backend built a
      host-side execution plan per shape, 7.6 ms a call at BPE's per-batch token lengths (a
      small model's step then waited on the host), and torch 2.11 chose it for BPE's compiled
      scoring forwards when merely enabled, so lengths that vary stay on flash;
    * ``0`` — cuDNN off everywhere (the earlier order: flash, memory-efficient, math);
    * ``1`` — torch's own choice everywhere (in torch 2.11 and 2.13 cuDNN comes last).

    Under torch's deterministic algorithms (``budget.deterministic``, harness/infra/determinism.py)
    cuDNN stays off whatever ``CUDNN_SDPA`` says: its backward is nondeterministic."""
    mode = CUDNN_SDPA
    if mode not in ("fixed", "0", "1"):
        raise ValueError(f"CUDNN_SDPA={mode!r} is not one of fixed, 0, 1")
    if torch.are_deterministic_algorithms_enabled():
        mode = "0"
    backbone.CUDNN_FIXED = mode == "fixed"  # read by every Backbone.forward
    torch.backends.cuda.enable_cudnn_sdp(mode != "0")
    return mode


def want_compile(setting: Any, device: torch.device) -> bool:
    """``budget.compile``: True / False, or "auto" = compile on CUDA only (on CPU the first
    compile costs more than a CI-sized run saves, and it needs a C++ toolchain)."""
    if setting == "auto":
        return device.type == "cuda"
    return bool(setting)


def warm_pool_wanted() -> bool:
    """Whether to start the compile workers early (``warm_compile_pool``): ``WARM_POOL``."""
    return WARM_POOL


def warm_compile_pool() -> bool:
    """Start inductor's compile workers now (in the background) rather than at the first
    compile; returns whether it asked (torch's own ``TORCH_WARM_POOL=0`` still keeps them for
    the first compile, as does a single compile thread).

    Why: inductor starts its worker processes when its backend is first called, and until they
    answer it compiles every kernel in the calling process, one after another
    (``AsyncCompile.use_process_pool`` is False while the pool's first job is pending). The
    run's first model then pays its cold compile partly serially; started before the data is
    loaded, the workers are up by then. It changes no kernel: the same code, compiled elsewhere.
    Private torch API: if it is not there, nothing happens."""
    try:
        from torch._inductor.async_compile import maybe_warm_pool
    except Exception:  # noqa: BLE001 - an optimization only
        return False
    maybe_warm_pool()
    return True


# What ``torch.nn.attention.sdpa_kernel`` leaves in a graph it is traced into: calls of these two
# helpers, which AOTAutograd's cache does not know, so every such graph bypassed that cache
# (torch 2.11 on an H200, 2.13 on CPU; tests/harness/infra/test_compile_cache.py) and was compiled
# anew in each process that ran it. Under the "fixed" cuDNN mode that is every compiled graph
# with attention inside: the byte-level models' training steps (cuDNN first) and scoring
# forwards (cuDNN left out) — the compile-ahead process's work on them was redone in the run
# (a standard seed's scoring compile went 2.4 -> 7.9 s when 540e863 put ``sdpa_kernel`` into
# the scoring graphs: BENCHMARKS.md). Both are functions of the constant arguments
# the graph holds (a name -> enum lookup; setting the backends the graph was traced under), so
# a graph from the cache does what the same graph compiled anew does; torch's version is the
# value, which goes into the cache key.
SDPA_KERNEL_HELPERS = ("torch.nn.attention._backend_from_string", "torch.nn.attention._sdpa_kernel")


def cacheable_attention_graphs() -> None:
    """Let AOTAutograd cache graphs that trace ``sdpa_kernel`` (``SDPA_KERNEL_HELPERS``). Set in
    every process before its first compile (``compile_backbones``): the marks are part of the
    cache keys, so the compile-ahead process and the run must agree on them."""
    import torch._inductor.config as inductor_config

    marked = getattr(inductor_config, "unsafe_marked_cacheable_functions", None)
    if marked is None:  # a torch without the setting: graphs bypass the cache, as before
        return
    if any(name not in marked for name in SDPA_KERNEL_HELPERS):  # marks already there win
        inductor_config.unsafe_marked_cacheable_functions = {
            **dict.fromkeys(SDPA_KERNEL_HELPERS, torch.__version__), **marked}


def compile_backbones(model: nn.Module) -> int:
    """Compile each transformer block and final norm of every ``Backbone`` inside ``model``, in
    place. Returns how many modules were compiled (0 when the model has no backbone, or when
    already compiled). The Backbone's own forward stays eager so hooks on it keep working.

    All blocks of all models share one code object, so its compiled variants add up over a run
    (train / inference mode, bf16 / fp32 sub-models, static / dynamic shapes, six encoders):
    the recompile limit is raised so none of them falls back to eager. A later model whose
    block shapes an earlier one compiled reuses that code (no compile at all).

    Batch and length are compiled symbolic from the first call (``Backbone.dynamic_shapes``):
    otherwise each (width, train/inference) compiles twice, static first and dynamic at the next
    shape — BPE's token counts, the last partial batch, scoring's batches. On CPU with cold
    caches this cut a 5-compile sequence of the suite's kinds of shapes to 3
    (``benchmarks/compile_reuse.py``). ``COMPILE_DYNAMIC = False`` keeps static first."""
    import torch._dynamo

    cacheable_attention_graphs()
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    dynamic = COMPILE_DYNAMIC
    n = 0
    for m in model.modules():
        if isinstance(m, Backbone) and m.compilable:
            m.dynamic_shapes = dynamic
            for sub in [*m.blocks, m.norm]:
                if getattr(sub, "_compiled_call_impl", None) is None:
                    sub.compile()
                    n += 1
    return n


def compile_clock() -> dict[str, float]:
    """Cumulative wall seconds this process has spent so far compiling: ``graph`` — torch.compile
    (Dynamo, AOTAutograd, Inductor, their Triton kernels; lazily compiled backward graphs
    included), ``kernels`` — FuzzyTok's autotuned Triton kernels (a new key's configs compiled and
    timed). Differences of two readings say how much of a stretch of time was compiling (a cold
    first step, a first scoring job). Private torch counters: 0.0 when unavailable."""
    graph = 0.0
    try:
        from torch._dynamo.utils import calculate_time_spent

        graph = float(calculate_time_spent().get("total_wall_time", 0.0))
    except Exception:  # noqa: BLE001 - a measurement only; torch may rename its counters
        pass
    kernels = 0.0
    mod = sys.modules.get("encoders.fuzzytok.kernels")  # loaded only when a FuzzyTok model ran
    if mod is not None and hasattr(mod, "tune_seconds"):
        kernels = float(mod.tune_seconds())
    return {"graph": graph, "kernels": kernels}


CACHE_COUNTERS = (("inductor", "fxgraph_cache_hit"), ("inductor", "fxgraph_cache_miss"),
                  ("inductor", "fxgraph_cache_bypass"), ("aot_autograd", "autograd_cache_hit"),
                  ("aot_autograd", "autograd_cache_miss"), ("aot_autograd", "autograd_cache_bypass"))


def cache_counts() -> dict[str, int]:
    """How many compiled graphs this process has so far taken from torch.compile's on-disk
    caches (``*_hit``) and compiled anew (``*_miss``): inductor's FX-graph cache and
    AOTAutograd's. Differences of two readings say whether a stretch compiled from a warm cache
    (``harness.overlap.compileahead``). Private torch counters: zeros when unavailable."""
    try:
        from torch._dynamo.utils import counters
    except Exception:  # noqa: BLE001 - a measurement only
        return {name: 0 for _, name in CACHE_COUNTERS}
    return {name: int(counters[group][name]) for group, name in CACHE_COUNTERS}


def cache_counts_since(start: dict[str, int]) -> dict[str, int]:
    """``cache_counts()`` now minus ``start``."""
    return {k: v - start.get(k, 0) for k, v in cache_counts().items()}


def compile_since(start: dict[str, float]) -> dict[str, float]:
    """``compile_clock()`` now minus ``start``: seconds compiled since that reading."""
    now = compile_clock()
    return {k: max(0.0, now[k] - start.get(k, 0.0)) for k in now}


_DONE = object()


# How long a consumer waits for one batch, or a pool worker for one result, before the run fails
# with a one-line error naming the stage (``harness.infra.watchdog.stall_limit``: one validated
# ``TOKBENCH_STALL_SECONDS``, also behind the guarded loops' limit)
stall_seconds = stall_limit


def _caller_stream() -> Any:
    """The calling thread's current CUDA stream when it is not the default one (None otherwise,
    and on a machine or process without CUDA: nothing to carry over)."""
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    stream = torch.cuda.current_stream()
    return None if stream == torch.cuda.default_stream() else stream


class Prefetcher:
    """Iterate ``make(item)`` for each item of ``items`` computed ``depth`` ahead in a daemon
    thread; exceptions are re-raised in the consumer. ``close()`` stops the thread early.

    The thread holds the GIL only while it runs Python (tokenization); the training loop's
    thread releases it while it waits on the GPU, so collation overlaps the step.

    ``items`` is closed (``.close()``, when it has one) in the thread before it ends, early stop
    included: ``ordered_pool_map``'s workers are forked from this thread and die with it
    (PR_SET_PDEATHSIG follows the forking thread), so the pool must be torn down here, while the
    thread lives. ``name`` names the stage in the error raised when no batch comes for
    ``stall_seconds()``.
    """

    def __init__(self, items: Iterator[Any], make: Callable[[Any], Any], depth: int = 3,
                 name: str = "batches") -> None:
        self._q: queue.Queue[Any] = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self.name = name
        self.wait_seconds = 0.0  # time the consumer spent waiting for a batch (host-bound steps)
        # the thread's CPU seconds (``time.thread_time``), set when it ends: the time it competed
        # with the consumer's thread for the GIL is at most this
        self.cpu_seconds = 0.0
        # The thread runs in a copy of the caller's context: context variables the caller set
        # (``causal_attention_cost`` of a scaling sweep) apply to the FLOP counts made there too.
        ctx = contextvars.copy_context()
        # ... and on the caller's CUDA stream (a new thread starts on the default one): what
        # ``make`` queues on the device (BLT's entropy model patching a scoring batch) is then
        # ordered before the caller's use of it
        self._stream = _caller_stream()
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
        c0 = time.thread_time()
        if self._stream is not None:
            torch.cuda.set_stream(self._stream)  # this thread's current stream from here on
        try:
            try:
                for it in items:
                    if self._stop.is_set() or not self._put(make(it)):
                        return
            finally:
                close = getattr(items, "close", None)
                if close is not None:
                    close()  # tears down a worker pool in the thread that forked it
                self.cpu_seconds = time.thread_time() - c0
            self._put(_DONE)
        except BaseException as e:  # handed to the consumer, which re-raises it
            self._put(("__error__", e))

    def __iter__(self) -> Iterator[Any]:
        limit = stall_seconds()
        while True:
            t0 = time.perf_counter()
            while True:
                try:
                    x = self._q.get(timeout=1.0)
                    break
                except queue.Empty:
                    if not self._thread.is_alive() and self._q.empty():
                        raise RuntimeError(f"{self.name}: the prefetch thread ended without a batch") from None
                    if time.perf_counter() - t0 > limit:
                        raise TimeoutError(f"{self.name}: no batch from the prefetch thread in {limit:.0f} s "
                                           "(collation stalled; TOKBENCH_STALL_SECONDS)") from None
            self.wait_seconds += time.perf_counter() - t0
            if x is _DONE:
                return
            if isinstance(x, tuple) and len(x) == 2 and x[0] == "__error__":
                raise x[1]
            yield x

    def close(self, timeout: float = 30.0) -> None:
        """Stop the thread and wait for it (and the pool it tears down) up to ``timeout`` s;
        past that, say so on stderr and go on (the daemon thread ends on its own)."""
        self._stop.set()
        try:
            while True:
                self._q.get_nowait()
        except queue.Empty:
            pass
        self._thread.join(timeout=timeout)
        if self._thread.is_alive():
            print(f"warning: {self.name}: the prefetch thread is still running {timeout:.0f} s after "
                  "close(); continuing without it", file=sys.stderr)


class _Wire:
    """A tensor on its way from a collation worker: the numpy array under it. Pickled as plain
    bytes through the pool's pipe; torch's own reductions pass every tensor as a shared-memory
    file descriptor over a socket (a connect and a recvmsg per tensor), which measured on an
    H200 host left the training thread waiting for batches most of each step."""

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array


_ATOMS = frozenset({int, float, bool, str, bytes, type(None)})


def _map_tensors(obj: Any, leaf: Callable[[Any], Any], kind: type | tuple[type, ...]) -> Any:
    """``obj`` with every ``kind`` instance inside lists, tuples, dicts and dataclasses (the
    latter updated in place) replaced by ``leaf(it)``."""
    import dataclasses

    if isinstance(obj, kind):
        return leaf(obj)
    if isinstance(obj, (list, tuple)):
        # A list of plain values (a BPE batch's segments: 64 lists, 13,000 ints) holds nothing
        # to map: returned as it is after one C-speed pass over its types. Walking it element by
        # element cost 13 ms a scoring batch on the thread that feeds the GPU (BENCHMARKS.md).
        if _ATOMS.issuperset(map(type, obj)):
            return obj
        mapped = [_map_tensors(x, leaf, kind) for x in obj]
        return mapped if isinstance(obj, list) else tuple(mapped)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, leaf, kind) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            object.__setattr__(obj, f.name, _map_tensors(getattr(obj, f.name), leaf, kind))
    return obj


def _to_wire(obj: Any) -> Any:
    """``obj`` with every CPU tensor made a _Wire; numpy has no bfloat16, so such a tensor
    keeps torch's shared-memory reduction."""
    return _map_tensors(obj, lambda t: t if t.dtype == torch.bfloat16 else _Wire(t.numpy()), torch.Tensor)


def _from_wire(obj: Any) -> Any:
    """Inverse of ``_to_wire``: tensors sharing the unpickled arrays' memory (no copy)."""
    return _map_tensors(obj, lambda w: torch.from_numpy(w.array), _Wire)


def _start_workers(fn: Callable[[Any], Any], processes: int, stage: str) -> list[tuple[Any, Any]]:
    """``core.forkpool.start_workers`` with results sent as ``_Wire`` (numpy arrays, not
    shared-memory file descriptors)."""
    import torch.multiprocessing  # noqa: F401 - the reductions for the rare bfloat16 tensor

    return start_workers(fn, processes, stage, encode=_to_wire, setup=one_torch_thread)


def one_torch_thread() -> None:
    """A forked worker's setup: one intra-op torch thread, as torch's own DataLoader workers do.

    Why: a forked worker inherits the parent's thread count (16 on the H200 host), so eight
    collation workers could run up to 128 OpenMP threads for the torch ops above torch's parallel
    grain (the byte model's training batch fills 256 x 1024 tensors) and contend for the cores the
    training or scoring loop launches kernels from. Not measured on a GPU host (on the 2-core VM
    it changes no timing); BPE's collation is numpy and unaffected. Collation does integer and
    copy work only (BLT patches on the device), so no number changes."""
    torch.set_num_threads(1)


def ordered_pool_map(fn: Callable[[Any], Any], items: Iterator[Any], processes: int,
                     stage: str = "training-batch collation", unit: str = "batch") -> Iterator[Any]:
    """``map(fn, items)`` in order, computed by ``processes`` forked worker processes, one item
    in flight per worker (the item stream may be long or endless). ``fn`` must be pure CPU
    work (collation): the children never touch CUDA. ``processes`` <= 0: in this process.
    Tensors come back as numpy arrays pickled through the pipe (``_Wire``). ``stage`` and
    ``unit`` name the work in errors (``<stage>: worker 1 (pid 1234) died (exit code -9)
    before sending its <unit>``).

    Each worker has a pipe of its own and item i goes to worker i mod n, so results come back
    in order with no shared queue, lock or helper thread: a worker that dies (SIGKILL included,
    mid-message too) reads as end-of-file on its pipe and fails the run with a one-line
    ``WorkerDied``, where ``ProcessPoolExecutor``'s result thread waited forever on the rest of
    a message (the hang this replaced). Workers fork on the first ``next()`` — from the calling
    thread, which must also close the generator: closing it (or finishing it) ends every worker
    at once; each is forked with its first item sent right away, and no more are forked than
    there are items. For a finite list of tasks of uneven cost, ``pool_map``.
    """
    if processes <= 0 or not _can_fork():
        yield from map(fn, items)
        return
    import collections

    limit = stall_seconds()
    workers: list[tuple[Any, Any]] = []  # (process, the parent's end of its pipe)
    finished = False
    try:
        it = iter(items)
        in_flight: collections.deque[int] = collections.deque()  # worker per item, in item order
        for k in range(processes):
            nxt = next(it, _DONE)
            if nxt is _DONE:
                break  # fewer items than workers: no more forks
            # Each worker gets its first item as soon as it is forked, so the first batch is
            # collated while the others fork: starting a worker from the run's process (GBs of
            # CUDA mappings) took 73 ms on an H100 host (under cProfile), and the first batch
            # waited for all eight (a scoring job's first batch: 0.35-0.9 s; BENCHMARKS.md)
            workers += _start_workers(fn, 1, stage)
            send(workers[k][1], workers[k][0], k, nxt, stage)
            in_flight.append(k)
        while in_flight:
            k = in_flight.popleft()
            out = _core_receive(workers[k][1], workers[k][0], k, limit, stage, unit, _from_wire)
            nxt = next(it, _DONE)
            if nxt is not _DONE:  # the worker is idle now: the next item overlaps the consumer
                send(workers[k][1], workers[k][0], k, nxt, stage)
                in_flight.append(k)
            yield out
        finished = True
    finally:
        stop_workers(workers, finished)


def pool_map(fn: Callable[[Any], Any], tasks: Sequence[Any], processes: int, stage: str,
             unit: str = "result") -> list[Any]:
    """``[fn(t) for t in tasks]`` in forked worker processes (``core.forkpool.pool_map``: the same
    workers, pipes and one-line errors as ``ordered_pool_map``, results in task order), with
    tensors crossing as ``_Wire`` and a worker with no result for ``stall_seconds()`` after it
    got its task a ``TimeoutError``. ``fn`` must be pure CPU work (perturbation)."""
    if min(processes, len(tasks)) > 1:
        import torch.multiprocessing  # noqa: F401 - the reductions for the rare bfloat16 tensor
    return _pool_map(fn, tasks, processes, stage, unit, limit=stall_seconds(), encode=_to_wire, decode=_from_wire,
                     setup=one_torch_thread)


def collate_processes(device: torch.device) -> int:
    """Worker processes for training-batch collation: on CUDA up to 8 (half the CPUs, shared by
    the torchrun ranks of this node), so tokenization keeps up with the GPU; on CPU none (the CPU
    is busy training)."""
    if device.type != "cuda":
        return 0
    ranks = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))  # set by torchrun
    return min(8, usable_cpus() // 2 // ranks)


def pin(batch: Any) -> Any:
    """Pin a TensorBatch's tensors (page-locked memory makes ``.to(cuda, non_blocking=True)``
    a true asynchronous copy). Returns the same batch object."""
    batch.tensors = {k: v.pin_memory() for k, v in batch.tensors.items()}
    return batch
