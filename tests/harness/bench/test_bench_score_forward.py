"""benchmarks/bench_score_forward.py's kernels' floor on a CPU: the FLOPs it divides by are the ones
the run's MFU counts (``Backbone.flops`` with attention at half, plus the head), and its floor is
the per-layer sum of the ops it timed."""

from __future__ import annotations

import pytest
import torch
from bench_script import load_benchmark

from encoders.backbone import Backbone, BackboneConfig, causal_attention_cost

bench = load_benchmark("bench_score_forward")


@pytest.mark.parametrize(("windows", "n", "vocab"), [(2, 16, 40), (3, 7, 11)])
def test_floor_counts_the_flops_the_run_counts(windows: int, n: int, vocab: int) -> None:
    cfg = BackboneConfig(layers=3, dim=16, heads=2)
    rows = bench.floor_parts(cfg, vocab, n, windows, 1, torch.device("cpu"))
    # each row's name up to its shapes: "qkv", "mlp in", "attention", "floor:" ...
    by_op = {" ".join(w for w in op.split(" ")[:2] if not w[0].isdigit()): (s, f) for op, s, f in rows}
    m = windows * n
    # each op's FLOPs by hand: 2 per multiply-add; the MLP is 4 x dim wide
    assert by_op["qkv"][1] == 2 * m * 16 * 48
    assert by_op["proj"][1] == 2 * m * 16 * 16
    assert by_op["mlp in"][1] == by_op["mlp out"][1] == 2 * m * 16 * 64
    assert by_op["attention"][1] == 2 * 2 * n * n * 16 * 0.5 * windows
    assert by_op["head"][1] == 2 * m * 16 * vocab
    with causal_attention_cost(0.5):
        model_flops = Backbone(cfg).flops(windows, n)
    floor_s, floor_f = by_op["floor: block"]
    assert floor_f == pytest.approx(model_flops + 2 * m * 16 * vocab, rel=1e-12)
    block = [(s, f) for op, s, f in rows[:5]]  # the four matmuls and attention
    assert floor_s == pytest.approx(3 * sum(s for s, _ in block) + by_op["head"][0], rel=1e-12)
    assert all(s > 0 for _, s, _ in rows)
