"""benchmarks/stack_compare.py: a stacked sweep's rung walls against the same points alone, read
from the two runs' log lines, checked on a hand-made pair of logs."""

from __future__ import annotations

from bench_script import load_benchmark

sc = load_benchmark("stack_compare")

STACK_LOG = """\
[model] bytes@1e12:s0 seed 0: 1e+12 FLOPs = ~1,000 bytes, 100 steps, lr 0.004 (cuda)
[model] bytes@2e12:s0 seed 0: 2e+12 FLOPs = ~2,000 bytes, 200 steps, lr 0.004 (cuda)
[scaling] bytes:s0 seed 0: 2 points as one stacked model (bytes@1e12:s0, bytes@2e12:s0)
[model] bytes@1e12:s0 seed 0: 1,000 bytes, 1e+12 FLOPs in 0.2s, final loss 3.000 bpb
[model] bytes@2e12:s0 seed 0: 2,000 bytes, 2e+12 FLOPs in 0.5s, final loss 2.500 bpb
[scaling] bytes:s1 seed 0: 2 points as one stacked model (bytes@1e12:s1, bytes@2e12:s1)
[model] bytes@1e12:s1 seed 0: 900 bytes, 1e+12 FLOPs in 0.3s, final loss 3.100 bpb
"""
# the one-at-a-time run, killed after its first point and resumed (a cached point prints no line)
ALONE_1 = "[model] bytes@1e12:s0 seed 0: 1,000 bytes, 1e+12 FLOPs in 0.3s, final loss 3.010 bpb\n"
ALONE_2 = """\
[model] bytes@2e12:s0 seed 0: 2,000 bytes, 2e+12 FLOPs in 0.7s, final loss 2.490 bpb
[model] bytes@1e12:s1 seed 0: 900 bytes, 1e+12 FLOPs in 0.4s, final loss 3.100 bpb
"""


def test_rung_ratio_and_losses_by_hand() -> None:
    out = sc.compare(STACK_LOG, [ALONE_1, ALONE_2], gemm_tflops=100.0).splitlines()
    # s0 only (s1's stack was cut before its second member): stack 0.5 s, alone 0.3 + 0.7 = 1.0 s;
    # 3e12 FLOPs / 0.5 s = 6 TFLOP/s = 6 % of 100
    assert out[0] == ("1 rung(s): stack 0.5 s (6.0 TFLOP/s = 6.0 % of 100), alone 1.0 s "
                      "(3.0 TFLOP/s = 3.0 % of 100): 2.00x")
    # 100 steps in 0.2 s with both points, then 100 more in 0.3 s with one
    assert out[1] == "  bytes:s0 seed 0: 2 points, stack 0.5 s, alone 1.0 s, 2.00x; ms a step at K=2 2.00, K=1 3.00"
    # three points finished in both runs: differences -0.010, +0.010, 0.000
    assert out[2] == ("final training loss, 3 points in both: bytes read equal; stack - alone: largest "
                      "|difference| 0.010 BPB, mean +0.0000 BPB")


def test_no_common_rung() -> None:
    assert sc.compare(STACK_LOG, [""]) == "no rung finished in both runs"
