"""The machine facts run.json records: the CPU's model name and the host's single-thread pace."""

from __future__ import annotations

import math
from pathlib import Path

import torch

from harness.infra.provenance import cpu_model, hardware, host_facts, host_pace_us

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme

processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8480+
"""


def test_cpu_model_reads_the_first_model_name(tmp_path: Path) -> None:
    f = tmp_path / "cpuinfo"
    f.write_text(CPUINFO)
    # "model\t\t: 143" is another key: only "model name" counts
    assert cpu_model(f) == "Intel(R) Xeon(R) Platinum 8480+"


def test_cpu_model_is_none_without_the_file_or_the_line(tmp_path: Path) -> None:
    assert cpu_model(tmp_path / "missing") is None
    f = tmp_path / "cpuinfo"
    f.write_text("processor\t: 0\nmodel\t\t: 143\nmodel name\t:   \n")  # an empty value is no name
    assert cpu_model(f) is None


def test_host_pace_is_a_positive_time() -> None:
    us = host_pace_us(reps=3, n=2_000)
    assert math.isfinite(us) and us > 0


def test_hardware_records_cpu_facts() -> None:
    hw = hardware(torch.device("cpu"))
    assert hw["device"] == "cpu"
    assert hw["host_pace_us"] > 0
    assert 1 <= hw["cpu_usable"] <= hw["cpu_count"]
    assert hw["cpu_model"] is None or isinstance(hw["cpu_model"], str)


def test_host_facts_are_measured_once_per_process() -> None:
    # run.json is rewritten after every model: the pace must not be measured again each time
    # (a second measurement of a ~ms workload would almost never round to the same 0.1 µs)
    first = hardware(torch.device("cpu"))["host_pace_us"]
    assert hardware(torch.device("cpu"))["host_pace_us"] == first
    assert host_facts() is host_facts()
