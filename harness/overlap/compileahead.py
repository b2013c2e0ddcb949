"""Compiling while the models train: a spawned process runs every model's first training steps
and first scoring forwards on small batches, so ``torch.compile``'s on-disk caches (inductor's
FX-graph and AOTAutograd caches, Triton's kernel cache) already hold each model's graphs when
the run reaches it. The run then compiles from the cache, not from scratch.

Why: cold compiles were 77.5 s of a 462 s standard seed on an H200 (63.4 s of training's first
steps, 14.1 s of scoring's; BENCHMARKS.md), paid one model after another on the
critical path while the host's other cores sat idle. A warm cache cut a small backbone's compile
of one training and one inference step from 31.3 s to 3.7 s on the 2-core VM (BENCHMARKS.md).
It skips the first model's training graphs (the run compiles those itself at the same moment), so it is a model ahead of the run.

What it changes: nothing the run computes. A cache hit hands back the code a fresh compile of
that graph would make (the caches are keyed by the graph, the input layouts and the compiler's
settings), so numbers are the same (tests/harness/overlap/test_compile_ahead.py). The process trains
on the run's own batch on a GPU of 100 GiB or more, on half of it on a smaller GPU where every
model's estimated training memory fits in ``MID_GPU_SHARE`` of it (the process then caps itself
at ``AHEAD_MEMORY_SHARE`` of the device and takes a model it cannot fit at ``WARM_WINDOWS``
windows), else on ``WARM_WINDOWS`` windows a step (``warm_windows``): batch and length are
symbolic in the compiled blocks (``Backbone.dynamic_shapes``), but inductor guards some of its
choices on their product, so graphs made from a small batch do not all serve the run's.
It waits for the length at which the run's first model trains
(``encoders.backbone.attention_in_graph``'s rule depends on it) before training anything. It
never blocks the run: the run never waits for it (unless ``overlap.compile_ahead_wait``, for
measurement and tests), a failure over there is a line in the log and the run compiles as
before, and the run stops it when scoring is done.

``overlap.compile_ahead``: true on, false off; auto: on when the run compiles on a GPU with at
least 4 CPUs (spawned, not forked: the run's process may have touched CUDA already).

Two processes on a host of ``MANY_CPUS`` or more (``overlap.compile_ahead_workers``, 1-4): the
models after the first are dealt to them in training order (``assign``), so the second model and
the third are compiled at the same time. Why: compiling is the host's single-threaded Python, and
on a slow host one process fell behind the run — on an H100 whose host did everything 1.5-2x
slower than another H100's, it finished fuzzytok's graphs (48 s) before starting BLT's (53 s), so
the run reached BLT first and compiled 8 of its 12 graphs itself, 25 s of its first step
(BENCHMARKS.md). On a GPU under ``BIG_GPU_BYTES`` the processes share
``1 - need`` of the device between them (``memory_share``), so the run's own model still fits.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import pickle
import tempfile
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import torch

WARM_WINDOWS = 8  # windows a training step in the process on a smaller GPU (the run's, if fewer)
BIG_GPU_BYTES = 100 * 2**30  # from this much device memory on, the run's own batch by default
MID_GPU_SHARE = 0.55  # below it: half the run's batch if every model's estimate fits this share
AHEAD_MEMORY_SHARE = 0.45  # ... and this process then allocates at most this share of the device
MANY_CPUS = 8  # from this many usable CPUs on, two processes by default
MAX_WORKERS = 4


def compile_ahead_wanted(setting: Literal["auto"] | bool, device_type: str, compiling: bool, cpus: int) -> bool:
    """Whether to compile ahead (module docstring): ``overlap.compile_ahead`` when the run
    compiles; under auto, on CUDA with at least 4 CPUs."""
    if not compiling:
        return False
    if setting != "auto":
        return bool(setting)
    return device_type == "cuda" and cpus >= 4


def cuda_index(dev: torch.device) -> int:
    """The CUDA device's index: `dev`'s own, else the current device's.

    `torch.cuda.set_per_process_memory_fraction` refuses a bare `torch.device("cuda")` with a
    ValueError, which once cost an H100 run its compile-ahead process.
    """
    import torch

    return dev.index if dev.index is not None else torch.cuda.current_device()


def warm_windows(run_windows: int, device_bytes: int | None = None, need_bytes: int | None = None,
                 setting: int | None = None) -> int:
    """Windows a training step of the compile-ahead process (never more than the run's
    ``run_windows``): ``setting`` (``overlap.compile_ahead_windows``; 0 = the run's); null, the run's own on
    a GPU of ``BIG_GPU_BYTES`` or more; half of it (at least ``WARM_WINDOWS``) on a smaller GPU
    when ``need_bytes`` — the largest estimated training memory of the suite's models
    (``harness.infra.memory``) — is at most ``MID_GPU_SHARE`` of ``device_bytes``; else (and on the CPU)
    ``WARM_WINDOWS``.

    Why not a few windows everywhere: the graphs are symbolic in batch and length, but inductor
    decides some fusions on the size of a step and guards the graph on that decision, and a
    cached graph whose guards fail is compiled again. On the GPU, torch 2.13's mixed-order reduction
    (a norm's backward: the row sums fused with the column sums of its weight gradient) is
    guarded on rows × width ≥ 5·2²⁰ and rows ≥ 4096, rows = windows × positions; 8 windows of
    1024 bytes fail it at width ≤ 512 and the run's 256 windows pass it. So on an H200 8 windows
    left BLT 4 of 16 graphs to compile again (19.6 s; its own batch none, 3.9 s: BENCHMARKS.md),
    and on an H100 the run took no training graph of fuzzytok, BLT or bpe-1024 from
    AOTAutograd's cache. On the CPU the same kind of guard is the C++ reduction's
    ``rows ≤ 4096`` (``benchmarks/compile_cache_probe.py --guards``: a graph compiled at batch 2
    served batch 16, not 64, at 128 positions). Half the run's batch stays on the run's side of
    every such threshold the standard suite meets, at half the memory of a second model training
    beside the run (up to 31.6 GiB for its BLT at the whole batch)."""
    few = min(WARM_WINDOWS, run_windows)
    if setting is None:
        if device_bytes is None:
            return few
        if device_bytes >= BIG_GPU_BYTES:
            return run_windows
        if need_bytes is not None and need_bytes <= MID_GPU_SHARE * device_bytes:
            return max(few, -(-run_windows // 2))
        return few
    return run_windows if setting == 0 else min(setting, run_windows)


def ahead_workers(cpus: int, n_models: int, setting: int | None = None) -> int:
    """Processes to compile ahead with: ``setting`` (``overlap.compile_ahead_workers``, 1 to
    ``MAX_WORKERS``); null, 2 on ``MANY_CPUS`` usable CPUs or more, else 1 — never more than the
    models whose training graphs are warmed (all but the first), and at least 1."""
    n = setting if setting is not None else 2 if cpus >= MANY_CPUS else 1
    return max(1, min(n, n_models - 1))


def assign(labels: list[str], workers: int) -> list[tuple[list[str], list[str]]]:
    """Per process, (models whose training graphs it warms, models whose scoring graphs it
    warms), ``labels`` in training order. The models after the first are dealt round robin, so
    each process's first model is among the first the run meets; each process scores the models
    it trained, and the first model's scoring (its training graphs are the run's own) goes to the
    process with the fewest models. Scoring lists keep the training order."""
    train: list[list[str]] = [list(labels[1 + w :: workers]) for w in range(workers)]
    score = [list(t) for t in train]
    if labels:
        fewest = min(range(workers), key=lambda w: (len(train[w]), -w))  # ties: the last
        score[fewest].insert(0, labels[0])
    return list(zip(train, score))


def memory_share(device_bytes: int | None, need_bytes: int | None, workers: int) -> float:
    """The share of a GPU under ``BIG_GPU_BYTES`` that each compile-ahead process may allocate
    (when it trains on more than a few windows): ``AHEAD_MEMORY_SHARE`` for one process; for
    several, what the run's largest estimated model (``need_bytes``) leaves, split evenly (at most
    ``AHEAD_MEMORY_SHARE`` each; without an estimate ``AHEAD_MEMORY_SHARE`` split evenly). A
    model past it is warmed on a few windows instead (``_warm_training``)."""
    if workers <= 1:
        return AHEAD_MEMORY_SHARE
    if not device_bytes or not need_bytes:
        return AHEAD_MEMORY_SHARE / workers
    return max(0.0, min(AHEAD_MEMORY_SHARE, (1.0 - need_bytes / device_bytes) / workers))


class CompileAhead:
    """The compile-ahead process, seen from the run. ``first_length(n)`` tells it the length the
    run's first compiled training step ran at; ``poll()`` reads what it has warmed so far;
    ``ready(label, part)`` says whether ``part`` ("train" or "score") of a model is warmed
    (waiting for it under ``wait``, ``overlap.compile_ahead_wait``); ``stop()`` ends it; ``warmed``,
    ``error`` and ``finished`` are its facts (run.json's ``compile_ahead`` is made from them by
    ``CompileAheadGroup``)."""

    def __init__(self, job: dict[str, Any], log: Any, wait: bool = False) -> None:
        from core.forkpool import one_fork_at_a_time, start_process

        ctx = multiprocessing.get_context("spawn")
        # The job (up to the whole training text) goes through a private file, not the spawn
        # pipe: the parent writes a spawned process's arguments into a pipe the child drains
        # only while it unpickles them, importing torch and the harness on the way, so a large
        # job held the run ~7 s at its start on the H200 (BENCHMARKS.md), and a
        # child that died while starting left it blocked on that pipe.
        fd, self.job_path = tempfile.mkstemp(prefix="tokbench-compile-ahead-", suffix=".pickle")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(job, f, protocol=pickle.HIGHEST_PROTOCOL)
        self.log = log
        self.wait = wait
        self.warmed: dict[str, dict[str, Any]] = {}  # label -> {"train": {...}, "score": {...}}
        self.error: str | None = None
        self.finished: dict[str, Any] | None = None
        with one_fork_at_a_time():  # no pool worker forked meanwhile keeps the child's end open
            self.conn, child = ctx.Pipe()
            self.proc = ctx.Process(target=_child, args=(child, self.job_path, os.getpid()),
                                    name="tokbench-compile-ahead", daemon=True)
            try:
                start_process(self.proc)  # a fork refused under a file lock is tried again (core.forkpool)
            finally:
                child.close()
        self._sent_length = False

    def first_length(self, n: int) -> None:
        if self._sent_length or self.proc is None:
            return
        self._sent_length = True
        with contextlib.suppress(OSError, ValueError):  # it ended: nothing to tell
            self.conn.send(("first_length", int(n)))

    def poll(self, timeout: float = 0.0) -> None:
        """Read its messages (waiting up to ``timeout`` s for the first one)."""
        if self.proc is None:
            return
        try:
            while self.conn.poll(timeout):
                timeout = 0.0
                msg = self.conn.recv()
                if msg[0] == "warmed":
                    _, label, part, info = msg
                    self.warmed.setdefault(label, {})[part] = info
                elif msg[0] == "error":
                    self.error = msg[1]
                    self.log(f"[compile] compiling ahead stopped ({msg[1]}); the run compiles as before")
                elif msg[0] == "done":
                    self.finished = msg[1]
        except (EOFError, OSError):
            if self.error is None and self.finished is None:
                code = self.proc.exitcode
                self.error = f"the process ended (exit code {code})"
                self.log(f"[compile] compiling ahead stopped ({self.error}); the run compiles as before")
            self._end()

    def ready(self, label: str, part: str) -> bool:
        """Whether ``part`` of model ``label`` is warmed; under ``overlap.compile_ahead_wait``
        waits for it (or for the process to end)."""
        self.poll()
        # training graphs need the run's first length, sent once the run has trained: before
        # that there is nothing to wait for
        may_wait = self.wait and (part == "score" or self._sent_length)
        while may_wait and self.proc is not None and part not in self.warmed.get(label, {}):
            self.poll(timeout=1.0)
        return part in self.warmed.get(label, {})

    def stop(self) -> None:
        self.poll()
        self._end()

    def _end(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self.conn.send(("stop",))
        self.proc.join(timeout=5.0)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=5.0)
        with contextlib.suppress(OSError):
            self.conn.close()
            os.unlink(self.job_path)  # the process removes it once read; not if it died before
        self.proc = None


class CompileAheadGroup:
    """Several compile-ahead processes (``assign``), seen from the run as one: the same calls as
    ``CompileAhead``, each passed to the process that warms that model's part. ``finished`` once
    all have finished (the longest one's seconds); ``error``: the first process's error, if any
    (each failure is its own log line, and the others go on)."""

    def __init__(self, parts: list[tuple[CompileAhead, list[str], list[str]]]) -> None:
        self.parts = parts  # (process, labels it trains, labels it scores)
        self.seen_ready: dict[str, bool] = {}

    def _owner(self, label: str, part: str) -> CompileAhead | None:
        for ahead, train, score in self.parts:
            if label in (train if part == "train" else score):
                return ahead
        return None

    def first_length(self, n: int) -> None:
        for ahead, *_ in self.parts:
            ahead.first_length(n)

    def poll(self, timeout: float = 0.0) -> None:
        for ahead, *_ in self.parts:
            ahead.poll(timeout)

    def ready(self, label: str, part: str) -> bool:
        ahead = self._owner(label, part)
        return ahead is not None and ahead.ready(label, part)

    def mark_training(self, label: str) -> None:
        """The run starts training ``label``: note whether its graphs were warmed by then."""
        self.seen_ready.setdefault(label, self.ready(label, "train"))

    def stop(self) -> None:
        from encoders import backbone

        for ahead, *_ in self.parts:
            ahead.stop()
        with contextlib.suppress(ValueError):
            backbone.FIRST_LENGTH_LISTENERS.remove(self.first_length)

    @property
    def error(self) -> str | None:
        return next((a.error for a, *_ in self.parts if a.error is not None), None)

    @property
    def finished(self) -> dict[str, Any] | None:
        done = [a.finished for a, *_ in self.parts]
        if any(d is None for d in done):
            return None
        return {"seconds": max(d["seconds"] for d in done if d is not None),
                "workers_seconds": [d["seconds"] for d in done if d is not None]}

    def facts(self) -> dict[str, Any]:
        warmed: dict[str, dict[str, Any]] = {}
        for ahead, *_ in self.parts:
            for label, parts in ahead.warmed.items():
                warmed.setdefault(label, {}).update(parts)
        fin = self.finished
        return {"on": True, "workers": len(self.parts),
                "assigned": [{"train": t, "score": sc} for _, t, sc in self.parts],
                "models": warmed, "ready_when_trained": self.seen_ready, "error": self.error,
                "errors": [a.error for a, *_ in self.parts],
                **({"finished": fin} if fin is not None else {})}


def start(runner: Any, train: Any, evals: list[Any]) -> CompileAheadGroup | None:
    """The compile-ahead processes for ``runner``'s first seed, or None when not wanted (module
    docstring). ``train``: the training part; ``evals``: the eval parts (``DataPart``; a few
    documents of each are scored over there)."""
    from core.forkpool import usable_cpus
    from encoders import backbone
    from harness.config import pretrained
    from harness.infra import plugins
    from harness.infra.accel import want_compile

    b = runner.budget
    compiling = want_compile(b.compile, runner.device)
    ov = runner.suite.overlap
    if not compile_ahead_wanted(ov.compile_ahead, runner.device.type, compiling, usable_cpus()):
        return None
    if runner.suite.scaling is not None or runner.dp is not None:
        return None  # a sweep trains hundreds of shapes; data parallel compiles on every rank
    from harness.train.measure import _score_sample, fit_sample

    stride = runner.suite.eval.stride_bytes or max(1, b.context_bytes // 2)
    dev_bytes = need = None
    if runner.device.type == "cuda":
        import torch

        from harness.infra.memory import suite_estimates

        dev_bytes = int(torch.cuda.get_device_properties(runner.device).total_memory)
        try:
            need = max((est.total for *_, est in suite_estimates(runner.suite, runner.device)), default=0)
        except Exception:  # noqa: BLE001 - an encoder the estimate cannot size: a few windows, as before
            need = None
    windows = warm_windows(b.windows_per_micro_batch, dev_bytes, need, ov.compile_ahead_windows)
    # an encoder trained elsewhere has no backbone of ours to compile, and is never trained
    specs = [s for s in runner.suite.training_order()
             if not pretrained.is_trained_elsewhere(plugins.resolve("encoder", s.name, search_paths=[runner.ctx.base_dir]))]
    if not specs:
        return None
    workers = ahead_workers(usable_cpus(), len(specs), ov.compile_ahead_workers)
    job = {
        "suite": runner.suite, "device": str(runner.device), "cache_dir": runner.opts.cache_dir,
        "specs": specs, "seed": runner.suite.seeds[0],
        "fit_docs": fit_sample(train.docs), "train_docs": _window_docs(train.docs, b, windows), "windows": windows,
        "sample": _score_sample(evals, b.context_bytes, stride, 2 * runner.suite.eval.batch_windows),
        "memory_share": memory_share(dev_bytes, need, workers),
    }
    parts = [(CompileAhead({**job, "train_labels": tl, "score_labels": sl}, runner.log, ov.compile_ahead_wait), tl, sl)
             for tl, sl in assign([s.label for s in specs], workers)]
    group = CompileAheadGroup(parts)
    if backbone._FIRST_TRAINED_LENGTH:  # this process trained a compiled model before (an earlier run)
        group.first_length(backbone._FIRST_TRAINED_LENGTH[0])
    else:
        backbone.FIRST_LENGTH_LISTENERS.append(group.first_length)
    return group


def _window_docs(docs: list[Any], b: Any, windows: int) -> list[Any]:
    """The first documents of the training text, enough for the process's training calls of
    ``windows`` windows a step (the run's window stream starts with them)."""
    from harness.train.measure import WARMUP_CALLS

    need = (sum(WARMUP_CALLS) + 1) * windows * b.context_bytes * 4
    out, n = [], 0
    for d in docs:
        out.append(d)
        n += len(d.data)
        if n >= need:
            break
    return out


# -- the spawned process ----------------------------------------------------------------------

# The process's program builds and scores models as the run does, so it imports the run, which
# imports this module: it is named, not imported, here (the process boundary is the only edge).
CHILD_MODULE = "harness.pipeline.compileahead_child"


def _child(conn: Any, job_path: str, parent: int) -> None:
    """The spawned process's entry point: ``CHILD_MODULE``'s ``main``."""
    importlib.import_module(CHILD_MODULE).main(conn, job_path, parent)
