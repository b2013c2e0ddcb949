"""The collation pool and the prefetch thread end cleanly however training stops: early (a FLOP
budget), on an error, or on a dead or stalled worker — never a silent hang.

The hang these guard against (seen on an H200 after a scaling grid point): the workers were
forked from the prefetch thread, whose exit kills them (PR_SET_PDEATHSIG follows the forking
thread); one killed while sending a multi-MB batch left ``ProcessPoolExecutor``'s result thread
waiting forever on the rest of the message, and the pool's shutdown with it. Each test that could
hang runs under a deadline (a subprocess, or the pool's own stall limit) so that it fails instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from _procs import alive, children

from harness.infra.accel import Prefetcher, WorkerDied, ordered_pool_map

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork + PR_SET_PDEATHSIG are Linux's")
def test_many_early_stops_with_busy_workers_finish() -> None:
    # As a scaling sweep on a GPU: many train_encoder calls in one process, 8 collation workers
    # sending large batches no faster than the model trains them (host-bound, as a
    # small model on a GPU), each run stopped by a FLOP budget while workers are still sending.
    # Before the fix the first round hung in the pool's shutdown.
    code = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
import torch
import harness.train.loop as train_mod
from encoders.backbone import BackboneConfig
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.data.load import training_windows
from harness.config.suite import BudgetConfig
from sources.base import Document

class Heavy(ByteEncoder):
    def collate(self, windows, score_from):
        b = super().collate(windows, score_from)
        b.meta["ballast"] = torch.zeros(1 << 19, dtype=torch.int64)  # 4 MB through each pipe
        return b

train_mod.collate_processes = lambda device: 8  # as on CUDA
docs = [Document(f"d{{i}}", (f"sample text number {{i}}, with words. " * 40).encode()) for i in range(8)]
budget = BudgetConfig(train_bytes=1 << 20, context_bytes=64, batch_bytes=256, lr=1e-3, warmup_bytes=0)
model = lambda: Heavy(ByteConfig(), BackboneConfig(layers=1, dim=8, heads=1))
cpu = torch.device("cpu")
per_step = train_mod.train_encoder(model(), training_windows(docs, 256, 64, 0), 256, budget, cpu)["flops"]
for r in range(6):
    st = train_mod.train_encoder(model(), training_windows(docs, budget.train_bytes, 64, 0), budget.train_bytes,
                                 budget, cpu, max_flops=per_step * (9.5 + r))
    assert 9 + r <= st["steps"] <= 12 + r, st["steps"]  # stopped mid-stream (per-step FLOPs vary a little)
    print("round", r, flush=True)
"""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"training hung after {str(e.stdout or '').count('round')} of 6 early stops")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("round") == 6


def _pid_and_ballast(i: int) -> tuple[int, int, torch.Tensor]:
    return i, os.getpid(), torch.full((1 << 18,), i, dtype=torch.int64)  # 2 MB


def test_early_stop_ends_the_thread_and_every_worker() -> None:
    pids: set[int] = set()
    feed = Prefetcher(ordered_pool_map(_pid_and_ballast, iter(range(10_000)), 4), lambda x: x, depth=2)
    for n, (i, pid, t) in enumerate(feed):
        assert i == n and torch.equal(t, torch.full((1 << 18,), i, dtype=torch.int64))
        pids.add(pid)
        if n == 5:
            break
    feed.close(timeout=60)
    assert not feed._thread.is_alive()
    assert len(pids) == 4  # items go round the workers in order
    deadline = time.time() + 10
    while any(alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in pids)


def test_a_prefetch_thread_blocked_on_a_full_queue_is_released_and_closes_its_source() -> None:
    closed_in: list[int] = []

    def endless() -> Iterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed_in.append(threading.get_ident())

    feed = Prefetcher(endless(), lambda x: x, depth=1)
    it = iter(feed)
    assert next(it) == 0
    time.sleep(0.3)  # the thread now waits on the full queue
    feed.close(timeout=10)
    assert not feed._thread.is_alive()
    # closed by the prefetch thread itself (where a pool's workers were forked), not by us
    assert closed_in and closed_in[0] != threading.get_ident()


def _die_at_3(i: int) -> int:
    if i == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return i


def test_a_dead_worker_is_a_one_line_error() -> None:
    got = []
    with pytest.raises(WorkerDied, match=r"worker 1 \(pid \d+\) died \(exit code -9\)"):
        for x in ordered_pool_map(_die_at_3, iter(range(8)), 2):
            got.append(x)
    assert got == [0, 1, 2]


def _stall_at_2(i: int) -> int:
    if i == 2:
        time.sleep(120)
    return i


def test_a_stalled_worker_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKBENCH_STALL_SECONDS", "2")
    t0 = time.perf_counter()
    got = []
    with pytest.raises(TimeoutError, match=r"worker 0 \(pid \d+\) sent no batch in 2 s"):
        for x in ordered_pool_map(_stall_at_2, iter(range(8)), 2):
            got.append(x)
    assert got == [0, 1]
    assert time.perf_counter() - t0 < 60  # the sleeping worker was killed, not waited for


def test_a_stalled_prefetch_thread_is_a_one_line_error_naming_the_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKBENCH_STALL_SECONDS", "1")
    release = threading.Event()

    def make(x: int) -> int:
        if x == 1:
            release.wait(30)
        return x

    feed = Prefetcher(iter(range(4)), make, depth=2, name="training batches")
    got = []
    try:
        with pytest.raises(TimeoutError, match="training batches: no batch from the prefetch thread in 1 s"):
            for x in feed:
                got.append(x)
    finally:
        release.set()
        feed.close()
    assert got == [0]


def _bad_window(i: int) -> int:
    if i == 2:
        raise ValueError("bad window 2")
    return i


def test_errors_in_workers_keep_their_type_and_order() -> None:
    got = []
    with pytest.raises(ValueError, match="bad window 2"):
        for x in ordered_pool_map(_bad_window, iter(range(8)), 3):
            got.append(x)
    assert got == [0, 1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_early_stop_of_the_pretokenized_bpe_feed_ends_its_workers() -> None:
    from encoders.backbone import BackboneConfig
    from encoders.base import FitContext
    from encoders.bpe import BpeConfig, BpeEncoder
    from harness.data.load import training_windows
    from harness.data.pretokenize import pretokenized_batches
    from sources.base import Document

    docs = [Document(f"d{i}", (f"sample text number {i}, with words and more words. " * 40).encode())
            for i in range(8)]
    enc = BpeEncoder(BpeConfig(vocab_size=300), BackboneConfig(layers=1, dim=16, heads=2))
    enc.fit(FitContext(train_docs=lambda: (d.data for d in docs), train_bytes=8_000, context_bytes=64, seed=0,
                       device=torch.device("cpu"), train=lambda e, n: {}, log=lambda s: None))
    before = children()
    batches = pretokenized_batches(enc, training_windows(docs, 1 << 20, 64, 0), 8, 8, 0, 4, steps_per_task=2)
    assert batches is not None
    feed = Prefetcher(batches, lambda x: x, depth=2)
    for n, _ in enumerate(feed):
        if n == 0:
            assert len(children() - before) == 4
        if n == 5:
            break
    feed.close(timeout=60)
    assert not feed._thread.is_alive()
    deadline = time.time() + 10
    while children() - before and time.time() < deadline:
        time.sleep(0.05)
    assert not children() - before


def test_wire_round_trip_keeps_structure_and_plain_lists() -> None:
    """A batch crosses the pipe as numpy arrays (``_to_wire``) and comes back as tensors with the
    same values; lists of plain values (a BPE batch's segments) are left as they are — the same
    objects, not walked element by element — and tuples stay tuples."""
    import pickle

    from encoders.base import TensorBatch
    from harness.infra.accel import _from_wire, _to_wire

    segs = [[3, 1, 2], [6], []]
    batch = TensorBatch({"inputs": torch.arange(6).view(2, 3), "w": torch.tensor([0.5, 1.5])},
                        meta={"segments": segs, "units": 6, "pair": (torch.ones(2), "x")})
    wired = _to_wire(batch)
    # each window's list holds nothing to map: passed on as it is, not walked
    assert all(a is b for a, b in zip(wired.meta["segments"], segs, strict=True))
    back = _from_wire(pickle.loads(pickle.dumps(wired)))
    assert torch.equal(back["inputs"], torch.arange(6).view(2, 3)) and back["inputs"].dtype == torch.int64
    assert torch.equal(back["w"], torch.tensor([0.5, 1.5]))
    assert back.meta["segments"] == [[3, 1, 2], [6], []] and back.meta["units"] == 6
    pair = back.meta["pair"]
    assert isinstance(pair, tuple) and torch.equal(pair[0], torch.ones(2)) and pair[1] == "x"


def test_workers_run_one_torch_thread() -> None:
    """Forked collation and perturbation workers use one intra-op thread (as DataLoader workers
    do), whatever the parent's count; the parent keeps its own."""
    from harness.infra.accel import pool_map

    before = torch.get_num_threads()
    threads = list(ordered_pool_map(lambda _: torch.get_num_threads(), iter(range(3)), 2, stage="t"))
    assert threads == [1, 1, 1]
    assert pool_map(lambda _: torch.get_num_threads(), [0, 1, 2], 2, stage="t") == [1, 1, 1]
    assert torch.get_num_threads() == before


def _square(x: int) -> int:
    return x * x


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork is Linux's here")
def test_each_worker_gets_its_first_item_as_it_is_forked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers are forked one at a time, each handed its first item before the next fork (the
    first batch is collated while the others start), and no more are forked than there are
    items; results stay in item order."""
    import harness.infra.accel as accel

    events: list[str] = []
    start, send = accel._start_workers, accel.send

    def counted_start(fn, processes, stage):  # noqa: ANN001, ANN202
        events.append(f"fork {processes}")
        return start(fn, processes, stage)

    def counted_send(conn, proc, k, item, stage):  # noqa: ANN001, ANN202
        events.append(f"send {k}")
        return send(conn, proc, k, item, stage)

    monkeypatch.setattr(accel, "_start_workers", counted_start)
    monkeypatch.setattr(accel, "send", counted_send)
    assert list(ordered_pool_map(_square, iter(range(7)), 3)) == [x * x for x in range(7)]
    assert events[:6] == ["fork 1", "send 0", "fork 1", "send 1", "fork 1", "send 2"]
    assert events.count("fork 1") == 3 and events.count("send 0") + events.count("send 1") + events.count("send 2") == 7
    events.clear()
    assert list(ordered_pool_map(_square, iter(range(2)), 8)) == [0, 1]
    assert events == ["fork 1", "send 0", "fork 1", "send 1"]  # two items: two workers, not eight
    events.clear()
    assert list(ordered_pool_map(_square, iter([]), 4)) == []
    assert events == []  # nothing to do: nothing forked
