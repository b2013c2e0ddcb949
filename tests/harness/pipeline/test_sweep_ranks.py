"""A scaling sweep across ranks on CPU (gloo): the deal by hand, and a tiny sweep under
``--nproc 2`` — killed with -9 after its first finished grid point, then resumed — whose
results.csv, refusals and run.json facts equal the one-process run's."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from _builders import ROOT, SWEEP_SUITE, kill_and_resume, run_sweep, write_sweep

from harness.pipeline.sweep_ranks import merged_refusals, plan_sweep, point_cost


def test_point_cost_and_deal_by_hand() -> None:
    # 1e12 FLOPs, 1e5 parameters, 1e4-byte batches: 1e12 / 6e9 = 166.7 steps x 7 ms + 1e12 / 1e14 s
    assert point_cost(1e12, 100_000, 10_000) == pytest.approx(1e12 / 6e9 * 7e-3 + 0.01)
    costs = {(0, "a"): 5.0, (0, "b"): 4.0, (0, "c"): 3.0, (1, "a"): 3.0, (1, "b"): 3.0}
    assert plan_sweep(costs, 2) == {(0, "a"): 0, (0, "b"): 1, (0, "c"): 1, (1, "a"): 0, (1, "b"): 1}


def test_sweep_on_two_ranks_equals_one_process(tmp_path: Path) -> None:
    write_sweep(tmp_path, SWEEP_SUITE)
    run_sweep(tmp_path, "one")
    done, r = kill_and_resume(tmp_path, "two")
    # the resumed job trains only what the killed one had not finished (refusals are cached too)
    assert done <= 5 and r.stderr.count("final loss") == 5 - done
    assert "[rank 1]" in r.stderr
    # each point trains in one process exactly as alone: the files are byte-identical
    assert (tmp_path / "one" / "results.csv").read_bytes() == (tmp_path / "two" / "results.csv").read_bytes()
    with open(tmp_path / "two" / "results.csv", newline="") as f:
        assert len({row["encoder"] for row in csv.DictReader(f)}) == 5
    one = json.loads((tmp_path / "one" / "run.json").read_text())
    two = json.loads((tmp_path / "two" / "run.json").read_text())
    assert two["distributed"]["world_size"] == 2 and sorted(set(two["distributed"]["owner"].values())) == [0, 1]
    assert list(two["encoders"]) == list(one["encoders"])  # grid order
    assert two["scaling"] == one["scaling"] and len(one["scaling"]["refused"]) == 5
    for label, facts in one["encoders"].items():
        assert two["encoders"][label]["seeds"]["0"]["key"] == facts["seeds"]["0"]["key"]
        assert two["encoders"][label]["scaling"] == facts["scaling"]
    # the sweep's speed: every trained point's FLOPs, per rung (encoder:size) and in total
    sweep = two["speed"]["sweep"]
    flops = sum(f["seeds"]["0"]["train"]["flops_causal_attn_half"] for f in two["encoders"].values())
    assert sweep["flops"] == pytest.approx(flops) and sweep["mfu"] is None  # no MFU on CPU
    assert sum(r["points"] for r in sweep["rungs"].values()) == 5 and "bytes:s0" in sweep["rungs"]
    assert sum(r["flops"] for r in sweep["rungs"].values()) == pytest.approx(flops)


def test_merged_refusals_follow_the_grid() -> None:
    from harness.config import load_suite

    suite = load_suite(ROOT / "suites" / "scaling_smoke.yaml")
    a = {"bytes@1.95e10:s0": "x"}
    got = merged_refusals(suite, [{"bpe@1.95e10:s4": "y"}, a, {"bytes@8e9:s1": "z"}])
    labels = list(got)
    assert set(labels) <= {"bytes@1.95e10:s0", "bpe@1.95e10:s4", "bytes@8e9:s1"}
    assert labels[0] == "bytes@8e9:s1"  # the smallest budget first, as a one-process run records it
