"""run.json's ``speed.sweep`` and the dry run's sweep wall, against numbers worked by hand."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.pipeline.sweep_estimate import sweep_wall
from harness.pipeline.sweep_speed import sweep_speed


def _facts(size: str, n: int, *trains: tuple[float, float]) -> dict:
    return {"params_non_embedding": n, "scaling": {"model_size": size},
            "seeds": {str(i): {"train": {"flops_causal_attn_half": f, "flops": 2 * f, "seconds": s}}
                      for i, (f, s) in enumerate(trains)}}


def test_sweep_mfu_per_rung_and_total() -> None:
    facts = {"bytes@1e14:s0": _facts("s0", 10, (1e14, 4.0)), "bytes@2e14:s0": _facts("s0", 10, (2e14, 6.0)),
             "bytes@2e14:s1": _facts("s1", 20, (2e14, 5.0), (2e14, 5.0)), "bpe@2e14:s1": _facts("s1", 30, (2e14, 8.0))}
    out = sweep_speed(facts, wall_seconds=10.0, peak_flops=1e15, gpus=2)
    # 9e14 FLOPs (causal half, not "flops") over 10 s x 2 GPUs x 1e15 FLOP/s
    assert out["flops"] == pytest.approx(9e14) and out["mfu"] == pytest.approx(0.045)
    assert out["tflops"] == pytest.approx(45.0)
    r = out["rungs"]
    assert set(r) == {"bytes:s0", "bytes:s1", "bpe:s1"}  # a rung per encoder
    assert r["bytes:s0"]["points"] == 2 and r["bytes:s0"]["mfu_own"] == pytest.approx(3e14 / 10.0 / 1e15)
    assert r["bytes:s1"]["mfu_share"] == pytest.approx(4e14 / 20.0 / 1e15)
    assert sum(x["mfu_share"] for x in r.values()) == pytest.approx(out["mfu"])
    cpu = sweep_speed(facts, wall_seconds=10.0, peak_flops=None)
    assert cpu["mfu"] is None and cpu["rungs"]["bpe:s1"]["mfu_own"] is None and cpu["tflops"] == pytest.approx(90.0)


def test_sweep_wall_by_hand() -> None:
    def pt(steps: int, wall: float, gpu: float) -> SimpleNamespace:
        return SimpleNamespace(steps=steps, seconds_per_step=wall, extra={"gpu_seconds_per_step": gpu})

    # alone: 10, 6, 4 s; GPU work 5 + 3 + 2 = 10 s
    points = [pt(1000, 0.010, 0.005), pt(1000, 0.006, 0.003), pt(1000, 0.004, 0.002)]
    one = sweep_wall(points, ranks=1, gpus=1)
    assert one["makespan"] == pytest.approx(20.0) and one["wall"] == pytest.approx(20.0)
    two = sweep_wall(points, ranks=2, gpus=1)  # LPT: {10}, {6, 4}: makespan 10 = the GPU's work
    assert two["makespan"] == pytest.approx(10.0) and two["gpu_work"] == pytest.approx(10.0)
    three = sweep_wall(points, ranks=3, gpus=1)  # the GPU's work bounds it, not the makespan
    assert three["makespan"] == pytest.approx(10.0) and three["wall"] == pytest.approx(10.0)
    fast = [pt(1000, 0.010, 0.001), pt(1000, 0.010, 0.001)]  # host-bound: ranks overlap freely
    assert sweep_wall(fast, ranks=2, gpus=1)["wall"] == pytest.approx(10.0)
