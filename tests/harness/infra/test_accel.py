"""The speed machinery changes no number: collation in worker processes, micro-batches, the
prefetch thread, and the ordered process map."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from _procs import alive

import harness.train.loop as train_mod
from encoders.backbone import BackboneConfig
from encoders.base import TensorBatch
from encoders.bpe import BpeConfig, BpeEncoder
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.config.suite import BudgetConfig
from harness.data.load import training_windows
from harness.infra.accel import Prefetcher, ordered_pool_map, want_compile
from harness.train.loop import FitContext, train_encoder
from sources.base import Document

BUDGET = BudgetConfig(train_bytes=4_096, context_bytes=64, batch_bytes=512, lr=1e-2, warmup_bytes=512)
DOCS = [Document(f"d{i}", (f"sample text number {i}, with words and more words. " * 6).encode()) for i in range(16)]
CPU = torch.device("cpu")


def byte_model() -> ByteEncoder:
    torch.manual_seed(0)
    return ByteEncoder(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2))


def bpe_model() -> BpeEncoder:
    torch.manual_seed(0)
    enc = BpeEncoder(BpeConfig(vocab_size=300), BackboneConfig(layers=1, dim=16, heads=2))
    enc.fit(FitContext(train_docs=lambda: (d.data for d in DOCS), train_bytes=4_096, context_bytes=64, seed=0,
                       device=CPU, train=lambda e, n: {}, log=lambda s: None))
    return enc


def run(enc: torch.nn.Module, budget: BudgetConfig = BUDGET) -> dict:
    return train_encoder(enc, training_windows(DOCS, budget.train_bytes, 64, 0), budget.train_bytes, budget, CPU)


def test_ordered_pool_map_keeps_order_and_tensors() -> None:
    out = list(ordered_pool_map(lambda x: (x, torch.full((3,), x)), iter(range(12)), processes=2))
    assert [o[0] for o in out] == list(range(12))
    assert all(torch.equal(t, torch.full((3,), i)) for i, t in out)


def _batch(i: int) -> TensorBatch:
    """A TensorBatch with the dtypes collation makes (and a bfloat16 one), tensors in meta too."""
    ids = torch.arange(i, i + 12).reshape(3, 4)[:, ::2]  # non-contiguous
    return TensorBatch({"ids": ids, "mask": ids % 2 == 0, "w": ids.float() / 7, "b": ids.bfloat16()},
                       {"spans": [torch.tensor([i, i + 1])], "n": i}, scored_bytes=i)


def test_batches_from_worker_processes_equal_in_process_ones() -> None:
    """Collated batches cross the process boundary as numpy arrays (``_Wire``): same values,
    dtypes and shapes, meta included, as collating in the parent."""
    out = list(ordered_pool_map(_batch, iter(range(6)), processes=2))
    for i, got in enumerate(out):
        want = _batch(i)
        assert got.scored_bytes == i and got.meta["n"] == i
        assert torch.equal(got.meta["spans"][0], want.meta["spans"][0])
        for k, t in want.tensors.items():
            assert got.tensors[k].dtype == t.dtype and torch.equal(got.tensors[k], t), k


def test_collation_in_worker_processes_gives_the_same_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    a = bpe_model()
    sa = run(a)
    monkeypatch.setattr(train_mod, "collate_processes", lambda device: 2)  # as on CUDA
    b = bpe_model()
    sb = run(b)
    assert sa["loss_curve"] == sb["loss_curve"] and sa["flops"] == sb["flops"]
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)


def test_micro_batches_give_the_same_step_to_float_rounding() -> None:
    a, b = byte_model(), byte_model()
    sa = run(a)
    micro = BudgetConfig(**{**BUDGET.__dict__, "micro_batch_bytes": 128})  # 4 micro-batches per step
    sb = run(b, micro)
    assert sa["bytes"] == sb["bytes"] and sa["steps"] == sb["steps"]
    # (FLOPs differ: each micro-batch pads to its own longest window, and padding is counted)
    for (_, la), (_, lb) in zip(sa["loss_curve"], sb["loss_curve"]):
        assert la == pytest.approx(lb, rel=1e-5)
    for pa, pb in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(pa, pb, rtol=1e-4, atol=1e-5)


def test_prefetcher_reraises_errors_in_order() -> None:
    def make(x: int) -> int:
        if x == 3:
            raise ValueError("bad window")
        return x * 10

    got = []
    with pytest.raises(ValueError, match="bad window"):
        for v in Prefetcher(iter(range(6)), make, depth=2):
            got.append(v)
    assert got == [0, 10, 20]


def test_compile_switch() -> None:
    assert want_compile("auto", torch.device("cuda")) and not want_compile("auto", CPU)
    assert want_compile(True, CPU) and not want_compile(False, torch.device("cuda"))


def test_busy_time_is_the_union_of_device_intervals() -> None:
    from harness.infra.meters import IdleMeter, union_length

    assert union_length([(0, 2), (1, 3), (5, 6), (5.5, 5.8)]) == 4.0  # [0,3) + [5,6)
    assert union_length([]) == 0.0
    meter = IdleMeter(CPU, (1, 3))  # off on CPU: no profiler, no result
    for i in range(4):
        meter.step(i)
    meter.finish()
    assert meter.result is None


def test_flop_counts_in_the_prefetch_thread_follow_the_callers_attention_convention() -> None:
    from encoders.backbone import causal_attention_cost

    plain = run(byte_model())
    assert 0 < plain["flops_causal_attn_half"] < plain["flops"]
    with causal_attention_cost(0.5):  # as a scaling sweep trains its grid points
        halved = run(byte_model())
    assert halved["flops"] == pytest.approx(plain["flops_causal_attn_half"])
    assert halved["flops_causal_attn_half"] == pytest.approx(halved["flops"])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_forked_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    # A run killed with SIGKILL must not leave its forked workers idling (they kept the killed
    # run's files open): each worker records its pid, the parent is killed, the workers must go.
    root = Path(__file__).resolve().parents[3]
    code = (
        "import os, sys, time\n"
        f"sys.path.insert(0, {str(root)!r})\n"
        "from harness.data.batchscore import perturb_many\n"
        "def work(t):\n"
        f"    open(os.path.join({str(tmp_path)!r}, str(os.getpid())), 'w').close()\n"
        "    time.sleep(120)\n"
        "    return []\n"
        "perturb_many([1, 2], work, processes=2)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.time() + 60
        while len(list(tmp_path.iterdir())) < 2 and time.time() < deadline:
            time.sleep(0.1)
        pids = [int(p.name) for p in tmp_path.iterdir()]
        assert len(pids) == 2, "the workers did not start"
    finally:
        proc.kill()
        proc.wait()

    deadline = time.time() + 20
    while any(alive(p) for p in pids) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids)


class _FakeEvent:
    """A CUDA event's timing interface with a given device time stamp (ms)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def elapsed_time(self, other: _FakeEvent) -> float:
        return other.t - self.t


def test_step_clock_reads_device_step_times_between_markers() -> None:
    from harness.infra.meters import StepClock

    off = StepClock(CPU)
    off.mark()
    off.mark()
    assert off.summary() is None and off.events == []  # no events on CPU
    clock = StepClock(CPU)
    clock.on = True
    # markers at device times 0, 1000 (a cold first step), then steps of 10, 10, 30, 10, 12 ms
    stamps = [0.0, 1000.0, 1010.0, 1020.0, 1050.0, 1060.0, 1072.0]
    clock.events = [_FakeEvent(t) for t in stamps]
    clock.host = [t / 1e3 for t in [0.0, 0.5, 0.51, 0.52, 0.53, 0.54, 0.55]]
    s = clock.summary(close_seconds=0.25)
    assert s is not None
    assert s["steps"] == 6 and s["first_ms"] == 1000.0 and s["sum_ms"] == 1072.0
    assert s["median_ms"] == 10.0 and s["max_ms"] == 30.0  # sorted [10, 10, 10, 12, 30]: middle 10
    assert s["excess_over_median_ms"] == pytest.approx(20.0 + 2.0)
    assert s["slowest"][0][:2] == [3, 30.0]  # step 3 (0-based), 30 ms on the device
    assert s["close_seconds"] == 0.25
    assert s["quarter_medians_ms"] == [10.0, 10.0, 30.0, 12.0]  # quarters [10], [10], [30, 10], [12]; upper middle


def test_attention_backends_mode_is_checked_and_sets_the_backbone_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    import encoders.backbone as backbone
    import harness.infra.accel as accel
    from harness.infra.accel import attention_backends

    was = (torch.backends.cuda.cudnn_sdp_enabled(), backbone.CUDNN_FIXED)
    try:
        monkeypatch.setattr(accel, "CUDNN_SDPA", "0")
        assert attention_backends() == "0" and not torch.backends.cuda.cudnn_sdp_enabled()
        assert backbone.CUDNN_FIXED is False
        monkeypatch.setattr(accel, "CUDNN_SDPA", "fixed")
        assert attention_backends() == "fixed" and torch.backends.cuda.cudnn_sdp_enabled()
        assert backbone.CUDNN_FIXED is True
        monkeypatch.setattr(accel, "CUDNN_SDPA", "yes")
        with pytest.raises(ValueError, match="CUDNN_SDPA='yes'"):
            attention_backends()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was[0])
        backbone.CUDNN_FIXED = was[1]


def test_compile_workers_are_asked_for_before_the_data_loads_when_compiling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``warm_compile_pool`` (inductor's workers started early) runs before the run loads its
    data when the run compiles, never otherwise; ``WARM_POOL = False`` skips it."""
    import json

    from test_run import make_suite  # tests/harness/cli/ (on sys.path: tests/harness/conftest.py)

    import harness.infra.accel as accel
    import harness.pipeline.run as run_mod
    from harness.cli import main

    order: list[str] = []
    real_load = run_mod.load_data

    def load(*a, **k):  # noqa: ANN002, ANN003, ANN202
        order.append("data")
        return real_load(*a, **k)

    monkeypatch.setattr(run_mod, "load_data", load)
    monkeypatch.setattr(run_mod, "warm_compile_pool", lambda: order.append("warm") or True)
    suite = make_suite(tmp_path)
    # "compiling" as the run's own check sees it; training itself stays eager on the CPU
    # (harness.train.loop and the compile-ahead process read their own want_compile)
    monkeypatch.setattr(run_mod, "want_compile", lambda setting, device: True)
    assert main(["run", str(suite), "--out", str(tmp_path / "a"), "--quiet", "--no-report"]) == 0
    assert order == ["warm", "data"]
    assert json.loads((tmp_path / "a" / "run.json").read_text())["compile"] == {"warm_pool": True}
    order.clear()
    monkeypatch.setattr(accel, "WARM_POOL", False)
    assert main(["run", str(suite), "--out", str(tmp_path / "b"), "--quiet", "--no-report"]) == 0
    assert order == ["data"]
    monkeypatch.setattr(accel, "WARM_POOL", True)
    # not compiling: nothing asked for
    order.clear()
    monkeypatch.setattr(run_mod, "want_compile", accel.want_compile)
    assert main(["run", str(suite), "--out", str(tmp_path / "d"), "--quiet", "--no-report"]) == 0
    assert order == ["data"]
