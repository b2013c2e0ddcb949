"""benchmarks/step_host.py: its op counter sees forward and backward ops, and its step is the
training loop's own ``train_step`` on the loop's micro-batches."""

from __future__ import annotations

import torch
from bench_script import load_benchmark

from encoders.backbone import BackboneConfig
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.config.suite import BudgetConfig
from harness.train.loop import autocast_for, make_optimizer

step_host = load_benchmark("step_host")


def test_op_counter_counts_each_dispatched_op_by_name() -> None:
    a, b = torch.ones(2, 3), torch.ones(3, 4)
    with step_host.OpCounter() as c:
        y = torch.mm(a, b) + 1.0  # one mm, one add
        z = y * y  # one mul
    assert dict(c.counts) == {"aten.mm": 1, "aten.add": 1, "aten.mul": 1}
    assert c.total == 3 and float(z[0, 0]) == 16.0


def test_op_counter_sees_the_backward_pass() -> None:
    x = torch.ones(3, requires_grad=True)
    y = (x * 2.0).sum()
    with step_host.OpCounter() as c:
        y.backward()
    # the engine's ops (the seed gradient, sum's expand, mul's backward) run under the mode
    assert c.counts["aten.mul"] >= 1 and c.total >= 3
    assert torch.equal(x.grad, torch.full((3,), 2.0))


def test_count_step_splits_a_step_into_forward_backward_and_the_rest() -> None:
    torch.manual_seed(0)
    enc = ByteEncoder(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2))
    budget = BudgetConfig(context_bytes=8, batch_bytes=16)
    parts = [enc.collate([b"abcdefgh", b"ijklmnop"], [0, 0])]
    opt = make_optimizer(enc, budget)
    ops = step_host.count_step(enc, parts, opt, budget, autocast_for(budget, torch.device("cpu")), torch.device("cpu"))
    assert ops["total"] == ops["fwd"] + ops["bwd"] + ops["rest"] == sum(ops["counts"].values())
    assert min(ops["fwd"], ops["bwd"], ops["rest"]) > 0
    # the forward runs the model's matmuls: embedding lookup, qkv, proj, fc, out, head
    assert ops["counts"]["aten.embedding"] == 1
    assert all(p.grad is None for p in enc.parameters())  # the counting pass leaves no gradients


def test_step_batches_are_the_loops_micro_batches() -> None:
    enc = ByteEncoder(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2))
    from sources.base import Document

    docs = [Document(id=f"d{i}", data=bytes(range(32 + i, 96 + i))) for i in range(4)]
    budget = BudgetConfig(context_bytes=16, batch_bytes=64, micro_batch_bytes=32)
    steps = list(step_host.step_batches(enc, docs, budget, 2, seed=0))
    assert len(steps) == 2 and all(len(parts) == 2 for parts in steps)  # 4 windows, 2 per micro-batch
    from harness.data.load import training_windows

    wins = list(training_windows(docs, 4 * 2 * 4 * 16, 16, 0))[:8]
    want = enc.collate(wins[2:4], [0, 0])
    assert torch.equal(steps[0][1]["inputs"], want["inputs"]) and torch.equal(steps[0][1]["targets"], want["targets"])
