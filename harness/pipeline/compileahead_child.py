"""The compile-ahead process's program (``harness.overlap.compileahead``): spawned by the run, it trains
its models' first steps and scores a sample with the run's own code, so torch.compile's graphs are
in the caches before the run needs them."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import multiprocessing
import os
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.overlap.compileahead import AHEAD_MEMORY_SHARE, BIG_GPU_BYTES, WARM_WINDOWS, cuda_index


def main(conn: Any, job_path: str, parent: int) -> None:
    """The process's work (module docstring): its models (``assign``) in the run's order,
    training graphs first (the run needs them first), then their scoring graphs. Sends
    ("warmed", label, part, facts) as each part is done, ("error", line) if anything fails, then
    ("done", facts)."""
    from core.forkpool import can_fork, die_with_parent

    die_with_parent(parent)
    # A spawned process's default start method is "spawn": a multiprocessing lock made in it
    # (tqdm makes one when Inductor compiles) is then a named semaphore the resource tracker
    # watches, and the os._exit below skips its unlinking, so every GPU run ended with
    # "resource_tracker: There appear to be N leaked semaphore objects". Under "fork", the run's
    # own default on Linux, a lock is unlinked as it is made and nothing is left to track.
    if can_fork():
        multiprocessing.set_start_method("fork", force=True)
    # a daemon (the run ends it at exit) that still forks collation workers of its own: they
    # die with it (PR_SET_PDEATHSIG); on the H200 the refusal stopped it before its first model
    from harness.overlap.planahead import allow_children

    allow_children()
    # its compiler warnings would repeat the run's own in the run's log
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    t0 = time.perf_counter()
    try:
        with open(job_path, "rb") as f:
            job = pickle.load(f)  # written by this run's process, private to it (mkstemp)
        os.unlink(job_path)
        with tempfile.TemporaryDirectory(prefix="tokbench-compile-ahead-") as tmp:
            _warm_all(conn, job, Path(tmp))
        conn.send(("done", {"seconds": time.perf_counter() - t0}))
    except _Stopped:
        pass
    except BaseException as e:  # noqa: BLE001 - reported to the run, which compiles as before
        with contextlib.suppress(OSError, ValueError):
            conn.send(("error", f"{type(e).__name__}: {e}".splitlines()[0][:300]))
    finally:
        conn.close()
        sys.stdout.flush()
        os._exit(0)  # no atexit handlers of the parent's modules, no lingering threads


class _Stopped(Exception):
    """The run said stop."""


def _messages(conn: Any, state: dict[str, Any], block: bool) -> None:
    """Read the run's messages into ``state`` (waiting for one when ``block``)."""
    while conn.poll(None if block else 0):
        block = False
        msg = conn.recv()
        if msg[0] == "stop":
            raise _Stopped
        if msg[0] == "first_length":
            state["first_length"] = msg[1]


def _set_up(job: dict[str, Any], tmp: Path) -> tuple[Any, Path]:
    """The run's kernels, device and plugin folder for the job: (device, the suite's base_dir);
    the compile workers started when the run starts them."""
    from harness.data.load import source_context
    from harness.infra import watchdog
    from harness.infra.accel import want_compile, warm_compile_pool, warm_pool_wanted
    from harness.infra.device import pick_device

    suite = job["suite"]
    if suite.budget.deterministic:  # the run's kernels, so its graphs are the ones the run needs
        from harness.infra.determinism import set_deterministic_kernels

        set_deterministic_kernels()
    watchdog.STACKS_DIR = tmp  # a stuck loop's stacks stay out of the run's directory
    dev = pick_device(job["device"])
    base_dir = source_context(suite, job["cache_dir"], lambda s: None).base_dir
    if warm_pool_wanted() and want_compile(suite.budget.compile, dev):
        warm_compile_pool()  # its workers up while it fits and waits for the run's first length
    return dev, base_dir


def _warm_all(conn: Any, job: dict[str, Any], tmp: Path) -> None:
    import torch

    from encoders import backbone
    from harness.infra.accel import compile_backbones, compile_clock, compile_since, want_compile
    from harness.pipeline.models import TrainedModel
    from harness.score.fragility import permuter_for
    from harness.train.loop import build_encoder, fit_context
    from harness.train.measure import _sync

    suite = job["suite"]
    seed = job["seed"]
    dev, base_dir = _set_up(job, tmp)
    b = suite.budget
    per = job["windows"]
    few = min(WARM_WINDOWS, b.windows_per_micro_batch)  # the fallback after an out-of-memory error
    small = dataclasses.replace(b, batch_bytes=per * b.context_bytes, micro_batch_bytes=0,
                                warmup_bytes=0)
    if dev.type == "cuda" and per > few and torch.cuda.get_device_properties(dev).total_memory < BIG_GPU_BYTES:
        # beside the run on a smaller GPU: an allocation past this share fails here, not in the run
        torch.cuda.set_per_process_memory_fraction(job.get("memory_share", AHEAD_MEMORY_SHARE), cuda_index(dev))
    labels = [spec.label for spec in job["specs"]]
    # this process's share (``assign``); alone, every model after the first and every model's scoring
    train_labels = set(job.get("train_labels", labels[1:]))
    score_labels = set(job.get("score_labels", labels))
    state: dict[str, Any] = {}
    models: list[tuple[Any, Any]] = []
    for i, spec in enumerate(job["specs"]):
        if spec.label not in train_labels and spec.label not in score_labels:
            continue  # another process's model
        _messages(conn, state, block=False)
        t1 = time.perf_counter()
        clock = compile_clock()
        enc = build_encoder(spec, seed, base_dir).to(dev)
        if want_compile(b.compile, dev):
            compile_backbones(enc)
        # quick fit on a sample: the shapes need the vocabulary, not its merges; a sub-model
        # (BLT's entropy model, never compiled) trains a step or two
        ctx = fit_context(job["fit_docs"], small, dev, seed, sub_bytes_cap=2 * small.batch_bytes,
                          log=lambda s: None, permuter=permuter_for(spec.permutation, b.context_bytes, seed))
        enc.fit(ctx)
        enc.to(dev)
        if spec.label in score_labels:
            models.append((spec, enc))
        if i == 0 or spec.label not in train_labels:
            # scoring only: the run compiles its first model's training graphs itself, at this
            # moment (warming them too would only put this process a model behind: on the H200
            # its 27-30 s there made it reach the second model after the run did, BENCHMARKS.md),
            # and another process warms the other models' training
            continue
        if not state.get("first_length"):
            _messages(conn, state, block=True)  # the run's first training forward tells it
        if not backbone._FIRST_TRAINED_LENGTH:
            backbone._FIRST_TRAINED_LENGTH.append(state["first_length"])
        permuter = permuter_for(spec.permutation, b.context_bytes, seed)
        used = _warm_training(enc, job["train_docs"], small, few, dev, seed, permuter)
        enc.eval()
        enc.zero_grad(set_to_none=True)
        _sync(dev)
        if dev.type == "cuda":
            torch.cuda.empty_cache()  # hold no more of the device than the next model needs
        conn.send(("warmed", spec.label, "train", {"seconds": time.perf_counter() - t1, "windows": used,
                                                  **{f"compile_{k}_seconds": v for k, v in compile_since(clock).items()}}))
    for spec, enc in models:
        _messages(conn, state, block=False)
        t1 = time.perf_counter()
        clock = compile_clock()
        _score(suite, dev, TrainedModel(enc, {"key": ""}, spec), job["sample"], seed)
        conn.send(("warmed", spec.label, "score", {"seconds": time.perf_counter() - t1,
                                                  **{f"compile_{k}_seconds": v for k, v in compile_since(clock).items()}}))
    del models
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()


def _warm_training(enc: Any, docs: list[Any], small: Any, few: int, dev: Any, seed: int, permuter: Any) -> int:
    """``_train_calls`` on ``small``'s batch; if that runs out of device memory (past this
    process's cap, ``AHEAD_MEMORY_SHARE``: the run's memory is not touched), again on ``few``
    windows a step, which still warm the graphs whose guards hold at any batch. Returns the
    windows a step it trained on."""
    import torch

    per = small.batch_bytes // small.context_bytes
    try:
        _train_calls(enc, docs, small, dev, seed, permuter)
        return per
    except torch.OutOfMemoryError:
        if per <= few:
            raise
    # out of the except block: its traceback no longer holds the failed step's tensors
    enc.zero_grad(set_to_none=True)
    gc.collect()
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    _train_calls(enc, docs, dataclasses.replace(small, batch_bytes=few * small.context_bytes), dev, seed, permuter)
    return few


def _train_calls(enc: Any, docs: list[Any], small: Any, dev: Any, seed: int, permuter: Any) -> None:
    """The dry run's warm-up calls (``WARMUP_CALLS`` steps each) on ``small``'s batch, each on the
    training stream's next windows."""
    from harness.data.load import training_windows
    from harness.train.loop import train_encoder
    from harness.train.measure import WARMUP_CALLS

    per = small.batch_bytes // small.context_bytes
    offset = 0
    for k in WARMUP_CALLS:
        wins = training_windows(docs, (offset + k) * small.batch_bytes, small.context_bytes, seed)
        for _ in range(offset * per):
            next(wins, None)
        offset += k
        train_encoder(enc, wins, k * small.batch_bytes, small, dev, permuter=permuter)


def _score(suite: Any, dev: Any, model: Any, sample: list[Any], seed: int) -> None:
    """The run's scoring call (``score_items``) on the clean cells of the sample, every mode."""
    from harness.pipeline.plans import clean_cells
    from harness.score.fragility import permuter_for
    from harness.score.items import score_items
    from harness.train.measure import _sync

    rows = [(p.item, mode) for _, mode, plan in clean_cells(suite, sample, seed) for p in plan if p is not None]
    items, groups = [r[0] for r in rows], [r[1] for r in rows]
    if items:
        score_items(model.enc, items, dev, suite.eval.batch_windows, suite.score_dtype == "bfloat16",
                    stats={}, mc_samples=suite.eval.mc_samples,
                    permuter=permuter_for(model.spec.permutation, suite.budget.context_bytes, seed), groups=groups)
    _sync(dev)
