"""run.json's training MFU fields, by hand: the whole run, the steps after the first, the median step."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.pipeline.facts import speed_facts, train_mfu


def _facts(train: dict[str, float]) -> dict:
    return {"m": {"seeds": {"0": {"train": {"bytes_per_s": 1.0, "seconds": 10.0, "peak_mem_bytes": 0,
                                            "first_step_seconds": 4.0, **train},
                                  "fit": {}}}}}


def test_mfu_after_first_step_leaves_out_the_cold_step() -> None:
    # 100 TFLOP/s ceiling; 11 steps of 5e13 causal-half FLOPs in 10 s, the first taking 4 s
    train = {"steps": 11, "flops": 6.6e14, "flops_causal_attn_half": 5.5e14,
             "first_step_flops_causal_attn_half": 5e13}
    run = SimpleNamespace(gemm_tflops=100.0, encoder_facts=_facts(train), score_facts={})
    row = speed_facts(run)["train"]["m s0"]
    assert row["mfu"] == pytest.approx(5.5e14 / 10.0 / 1e14)  # 0.55
    assert row["mfu_full_attn"] == pytest.approx(6.6e14 / 10.0 / 1e14)
    # ten steps of 5e13 in the 6 s after the first step
    assert row["mfu_after_first_step"] == pytest.approx(5e14 / 6.0 / 1e14)


@pytest.mark.parametrize("extra", [{"steps": 1, "first_step_flops_causal_attn_half": 5e13},
                                   {"steps": 11}])  # one step only; a record from before the field
def test_mfu_after_first_step_absent_when_not_defined(extra: dict) -> None:
    train = {"flops": 6.6e14, "flops_causal_attn_half": 5.5e14, **extra}
    run = SimpleNamespace(gemm_tflops=100.0, encoder_facts=_facts(train), score_facts={})
    row = speed_facts(run)["train"]["m s0"]
    assert "mfu_after_first_step" not in row and math.isfinite(row["mfu"])


def test_no_mfu_on_cpu() -> None:  # no GEMM ceiling measured: no MFU at all
    train = {"steps": 11, "flops": 6.6e14, "flops_causal_attn_half": 5.5e14,
             "first_step_flops_causal_attn_half": 5e13}
    run = SimpleNamespace(gemm_tflops=None, encoder_facts=_facts(train), score_facts={})
    row = speed_facts(run)["train"]["m s0"]
    assert "mfu" not in row and "mfu_after_first_step" not in row


def test_mfu_median_step_is_the_mean_step_over_the_median_device_step() -> None:
    # 11 steps, the first 5e13 FLOPs; the ten after it 5e14 in all (5e13 each); median step 250 ms
    train = {"steps": 11, "flops": 6.6e14, "flops_causal_attn_half": 5.5e14, "seconds": 10.0,
             "first_step_seconds": 4.0, "first_step_flops_causal_attn_half": 5e13,
             "step_clock": {"median_ms": 250.0}}
    row = train_mfu(train, 1e14)
    assert row["mfu_median_step"] == pytest.approx(5e13 / 0.25 / 1e14)  # 2.0 by these made-up numbers
    # a record without the first step's own count (before the field): every step taken as equal
    del train["first_step_flops_causal_attn_half"]
    assert train_mfu(train, 1e14)["mfu_median_step"] == pytest.approx(5.5e14 / 11 / 0.25 / 1e14)
    # data parallel: FLOPs summed over two ranks, the ceiling doubled with them
    assert train_mfu({**train, "ranks": 2}, 1e14)["mfu_median_step"] == pytest.approx(5.5e14 / 11 / 0.25 / 2e14)


@pytest.mark.parametrize("clock", [None, {"median_ms": 0.0}])  # CPU (no step clock); an empty clock
def test_mfu_median_step_absent_without_a_step_clock(clock: dict | None) -> None:
    train = {"steps": 11, "flops": 6.6e14, "flops_causal_attn_half": 5.5e14, "seconds": 10.0,
             **({"step_clock": clock} if clock is not None else {})}
    row = train_mfu(train, 1e14)
    assert "mfu_median_step" not in row and row["mfu"] == pytest.approx(0.55)


def test_train_mfu_script_reads_a_run_json(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    train = {"steps": 11, "flops": 6.6e14, "flops_causal_attn_half": 5.5e14, "seconds": 10.0,
             "first_step_seconds": 4.0, "first_step_flops_causal_attn_half": 5e13,
             "step_clock": {"median_ms": 500.0, "p90_ms": 600.0, "excess_over_median_ms": 1200.0}}
    (tmp_path / "run.json").write_text(json.dumps(
        {"speed": {"gemm_bf16_tflops": 500.0}, "encoders": {"m": {"seeds": {"0": {"train": train}}}}}))
    (tmp_path / "cpu.json").write_text(json.dumps({"speed": {"gemm_bf16_tflops": None}, "encoders": {}}))
    out = subprocess.run([sys.executable, str(root / "benchmarks" / "train_mfu.py"),
                          str(tmp_path / "run.json"), str(tmp_path / "cpu.json")],
                         capture_output=True, text=True, check=True, env={"PYTHONPATH": str(root)}).stdout
    # 5.5e14 / 10 s / 5e14 = 11.0 %; 5e14 / 6 s / 5e14 = 16.7 %; 5e13 / 0.5 s / 5e14 = 20.0 %
    assert "MFU whole  11.0%  after first step  16.7%  median step  20.0%" in out
    assert "beyond the median  1.20 s" in out
    assert "a CPU run" in out
