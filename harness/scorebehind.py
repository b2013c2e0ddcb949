"""Scoring behind training: once a model is trained, its scoring forwards (every eval set's
packed job, ``harness.score.score_items``) run in a background thread on a CUDA stream of their
own while the run's thread trains the next model; the run's thread later takes the scores and
makes the cells from them as before.

Why it was built: on an H200 a standard seed spent 119 s in scoring's packed jobs after 167 s of
training (BENCHMARKS.md, session 19), one after the other, although neither seemed to keep the
GPU busy — BPE's forwards were host-paced (55-61 % of their wall on the device), and each
model's first training steps compile for seconds with the GPU idle. The hope was that behind
training those forwards would fill the gaps.

What was measured (BENCHMARKS.md, session 20; one H100, the standard suite's seed 0, this and
the plain run on the same machine): no gain. Training took 219 s instead of 169 s, and the run
then waited 44 s for the thread: 263 s either way, because training's steady steps already
keep the GPU busy (device-bound) and the byte-level forwards are too, so the two only shared
it; the seed took 315.9 s against 295.2 s, the thread's analyses and compiles beside training
included. So it stays off by default; it remains for GPUs or suites where training leaves the
device idle.

What it changes: nothing a cell holds. A model's forwards are the same calls on the same
batches (the packing does not depend on where it runs); the stream only orders the GPU's work
(the forwards wait for an event queued after the model's training). On a GPU the timings of
training steps and their peak memory then include whatever the scoring thread ran at the same
time.

Threads and torch: while one thread traces a graph (AOTAutograd's ``make_fx``, compiling a model
it trains or scores), FX's tracing flag is set for the whole process, and torch refuses any
other thread's call of a compiled function then ("Detected that you are using FX to
symbolically trace a dynamo-optimized function": the scoring thread, a byte model's forward,
while the next model's first step compiled, on an H100 with torch 2.11, BENCHMARKS.md session
20). While the thread lives, ``torch._dynamo.config.error_on_nested_fx_trace`` is off, so such a
call runs that function uncompiled instead (the same computation; on a GPU bf16 rounding may
differ from the compiled kernels' in the last bits), and is restored when it closes. Dynamo
compiles under one process-wide lock (``compile_lock``), autocast,
grad and inference modes are per thread, the attention backends' flags are set one thread at a
time (``encoders.backbone._sdpa``), prefetch threads run on their caller's stream
(``harness.accel.Prefetcher``), and the plan-ahead process's pipe is read by one thread at a
time (``harness.planahead.PlanAhead``).

``TOKBENCH_SCORE_BEHIND``: 1 on, 0 or unset off.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch._dynamo

from core.switches import switch

ENV = "TOKBENCH_SCORE_BEHIND"


def score_behind_wanted() -> bool:
    """Whether trained models score behind the next one's training (module docstring: only
    when ``TOKBENCH_SCORE_BEHIND=1``, on any device). Any value but 0, 1 or empty is a
    ``ValueError`` naming it (the CLI's one-line error)."""
    return switch(ENV) is True


class Cancelled(Exception):
    """The run closed the scoring thread while a job ran (an error or an interrupt elsewhere)."""


@dataclass
class _Job:
    fn: Callable[[Callable[[], None]], Any]
    ready: Any  # a CUDA event queued on the submitter's stream, or None
    done: threading.Event = field(default_factory=threading.Event)
    value: Any = None
    error: BaseException | None = None
    seconds: float = 0.0


class ForwardsBehind:
    """One background thread running submitted jobs in order. ``submit(key, fn)`` queues
    ``fn(check)`` — ``check()`` raises ``Cancelled`` once ``close()`` was called, so a long job
    calls it between batches — ``result(key)`` waits for that job and returns its value (its
    exception re-raised in the caller's thread), ``close()`` stops the thread (a job under way
    stops at its next ``check``; queued ones never start).

    On CUDA each job runs on the thread's own stream, after an event ``submit`` queued on the
    caller's current stream: the job sees everything the caller had queued by then (the model's
    last optimizer step), and the caller's later work need not wait for the job's.

    ``busy_seconds``: wall seconds the thread spent in jobs; ``wait_seconds``: how long callers
    of ``result`` waited for them."""

    def __init__(self, device: torch.device, name: str = "tokbench-score-behind") -> None:
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        # a compiled call while the other thread traces runs uncompiled (module docstring):
        # torch keeps that setting per thread (a context variable in torch 2.13), so it is set
        # here, for the caller, and in the thread; close() restores the caller's
        self._creator = threading.get_ident()
        self._nested_fx_error = torch._dynamo.config.error_on_nested_fx_trace
        torch._dynamo.config.error_on_nested_fx_trace = False
        self.busy_seconds = 0.0
        self.wait_seconds = 0.0
        self._jobs: dict[str, _Job] = {}
        self._q: queue.Queue[_Job | None] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, key: str, fn: Callable[[Callable[[], None]], Any]) -> None:
        if key in self._jobs:
            raise ValueError(f"a job for {key!r} is already queued")
        ready = None
        if self.stream is not None:
            ready = torch.cuda.Event()
            ready.record()  # on the caller's stream
        job = _Job(fn, ready)
        self._jobs[key] = job
        self._q.put(job)

    def __contains__(self, key: object) -> bool:
        return key in self._jobs

    def result(self, key: str) -> Any:
        """The value of ``key``'s job (waiting for it); its exception re-raised here."""
        job = self._jobs.pop(key)
        t0 = time.perf_counter()
        while not job.done.wait(timeout=1.0):
            if not self._thread.is_alive():  # never: the loop sets done for every job it takes
                raise RuntimeError(f"scoring behind training: the thread ended before {key!r}'s job")
        self.wait_seconds += time.perf_counter() - t0
        if job.error is not None:
            raise job.error
        return job.value

    def _check(self) -> None:
        if self._stop.is_set():
            raise Cancelled("scoring behind training was stopped")

    def _loop(self) -> None:
        torch._dynamo.config.error_on_nested_fx_trace = False  # this thread's own (see __init__)
        while True:
            job = self._q.get()
            if job is None:
                return
            t0 = time.perf_counter()
            try:
                self._check()
                if self.stream is None:
                    job.value = job.fn(self._check)
                else:
                    with torch.cuda.stream(self.stream):
                        self.stream.wait_event(job.ready)
                        job.value = job.fn(self._check)
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
                job.error = e
            finally:
                job.seconds = time.perf_counter() - t0
                self.busy_seconds += job.seconds
                job.done.set()

    def close(self) -> None:
        """Stop the thread: the job under way ends at its next ``check`` (or when it ends),
        queued ones are dropped; returns once the thread has ended. Called by the thread that
        made this object, it restores that thread's nested-trace setting (``__init__``)."""
        self._stop.set()
        self._q.put(None)
        self._thread.join()
        if threading.get_ident() == self._creator:
            torch._dynamo.config.error_on_nested_fx_trace = self._nested_fx_error
