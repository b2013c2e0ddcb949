"""run.json's training MFU fields, by hand: the whole run, and the steps after the first."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from harness.run import Runner


def _facts(train: dict[str, float]) -> dict:
    return {"m": {"seeds": {"0": {"train": {"bytes_per_s": 1.0, "seconds": 10.0, "peak_mem_bytes": 0,
                                            "first_step_seconds": 4.0, **train},
                                  "fit": {}}}}}


def test_mfu_after_first_step_leaves_out_the_cold_step() -> None:
    # 100 TFLOP/s ceiling; 11 steps of 5e13 causal-half FLOPs in 10 s, the first taking 4 s
    train = {"steps": 11, "flops": 6.6e14, "flops_causal_attn_half": 5.5e14,
             "first_step_flops_causal_attn_half": 5e13}
    run = SimpleNamespace(gemm_tflops=100.0, encoder_facts=_facts(train), score_facts={})
    row = Runner.speed_facts(run)["train"]["m s0"]  # type: ignore[arg-type]
    assert row["mfu"] == pytest.approx(5.5e14 / 10.0 / 1e14)  # 0.55
    assert row["mfu_full_attn"] == pytest.approx(6.6e14 / 10.0 / 1e14)
    # ten steps of 5e13 in the 6 s after the first step
    assert row["mfu_after_first_step"] == pytest.approx(5e14 / 6.0 / 1e14)


@pytest.mark.parametrize("extra", [{"steps": 1, "first_step_flops_causal_attn_half": 5e13},
                                   {"steps": 11}])  # one step only; a record from before the field
def test_mfu_after_first_step_absent_when_not_defined(extra: dict) -> None:
    train = {"flops": 6.6e14, "flops_causal_attn_half": 5.5e14, **extra}
    run = SimpleNamespace(gemm_tflops=100.0, encoder_facts=_facts(train), score_facts={})
    row = Runner.speed_facts(run)["train"]["m s0"]  # type: ignore[arg-type]
    assert "mfu_after_first_step" not in row and math.isfinite(row["mfu"])


def test_no_mfu_on_cpu() -> None:  # no GEMM ceiling measured: no MFU at all
    train = {"steps": 11, "flops": 6.6e14, "flops_causal_attn_half": 5.5e14,
             "first_step_flops_causal_attn_half": 5e13}
    run = SimpleNamespace(gemm_tflops=None, encoder_facts=_facts(train), score_facts={})
    row = Runner.speed_facts(run)["train"]["m s0"]  # type: ignore[arg-type]
    assert "mfu" not in row and "mfu_after_first_step" not in row
