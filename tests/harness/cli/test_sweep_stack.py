"""``scaling.stack`` end to end on CPU: a tiny bytes + BPE sweep whose rungs train as stacked models
writes the results.csv rows, refusals and sweep facts of the one-point-at-a-time run (scores to
float rounding: the stacked step sums in another order); killed with -9 after its first cached
point under ``--nproc 2`` and resumed, it equals the one-process stacked run; and the deal keeps a
stacked rung on one rank."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from _builders import SWEEP_SUITE, kill_and_resume, run_sweep, write_sweep

from harness.pipeline.sweep_ranks import plan_sweep

pytestmark = pytest.mark.slow

# two encoders, three budgets: each rung trained at two or three budgets (a stack of 2-3 points)
STACK_SUITE = (SWEEP_SUITE.replace("  only_budgets: [5e8, 1e9]\n", "  only_budgets: [3.5e8, 7e8, 1e9]\n")
               .replace("  - name: bytes\n", "  - name: bytes\n  - {name: bpe, vocab_size: 300}\n"))


def _rows(run: Path) -> list[dict[str, str]]:
    with open(run / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def _same_rows(a: Path, b: Path) -> None:
    """Equal rows in equal order: text exactly, numbers to 1e-4 (relative)."""
    ra, rb = _rows(a), _rows(b)
    assert len(ra) == len(rb) > 0
    for x, y in zip(ra, rb):
        assert list(x) == list(y)
        for k, v in x.items():
            try:
                fx, fy = float(v), float(y[k])
            except ValueError:
                assert v == y[k], k
                continue
            assert math.isclose(fx, fy, rel_tol=1e-4, abs_tol=1e-9) or (math.isnan(fx) and math.isnan(fy)), (k, v, y[k])


def test_stack_deal_keeps_a_rung_on_one_rank() -> None:
    costs = {(0, "a@1:s0"): 1.0, (0, "a@2:s0"): 2.0, (0, "a@1:s1"): 2.5, (0, "a@2:s1"): 2.0}
    units = {(0, "a@1:s0"): "s0", (0, "a@2:s0"): "s0", (0, "a@1:s1"): "s1", (0, "a@2:s1"): "s1"}
    owner = plan_sweep(costs, 2, units)
    assert owner[(0, "a@1:s0")] == owner[(0, "a@2:s0")] != owner[(0, "a@1:s1")] == owner[(0, "a@2:s1")]
    assert owner[(0, "a@1:s1")] == 0  # the larger unit (4.5) first


def test_stacked_sweep_equals_one_point_at_a_time(tmp_path: Path) -> None:
    write_sweep(tmp_path, STACK_SUITE)
    run_sweep(tmp_path, "one")
    r = run_sweep(tmp_path, "stack", "--set", "scaling.stack=true")
    assert r.stderr.count("as one stacked model") >= 5 and "bpe:s0 seed 0: 3 points" in r.stderr
    _same_rows(tmp_path / "one", tmp_path / "stack")
    one = json.loads((tmp_path / "one" / "run.json").read_text())
    st = json.loads((tmp_path / "stack" / "run.json").read_text())
    assert st["scaling"] == one["scaling"] and list(st["encoders"]) == list(one["encoders"])
    for label, facts in one["encoders"].items():
        a, b = facts["seeds"]["0"]["train"], st["encoders"][label]["seeds"]["0"]["train"]
        assert (a["steps"], a["bytes"], a["flops"]) == (b["steps"], b["bytes"], b["flops"]), label
    assert sum("stack" in f["seeds"]["0"]["train"] for f in st["encoders"].values()) >= 10
    # killed after its first cached point under --nproc 2, then resumed: the stacked run's rows
    kill_and_resume(tmp_path, "two", "--set", "scaling.stack=true")
    _same_rows(tmp_path / "stack", tmp_path / "two")
    two = json.loads((tmp_path / "two" / "run.json").read_text())
    owner = two["distributed"]["owner"]
    for label in two["encoders"]:  # a rung's points on one rank
        rung = [v for k, v in owner.items() if k.split("@")[0] == label.split("@")[0]
                and k.split(":")[1].split()[0] == label.split(":")[1]]
        assert len(set(rung)) == 1, (label, rung)


def test_stack_takes_a_boolean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("x")
    (tmp_path / "sweep.yaml").write_text(STACK_SUITE)
    assert main(["run", str(tmp_path / "sweep.yaml"), "--dry-run", "--set", "scaling.stack=maybe"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "tokbench: error: --set scaling.stack=maybe: scaling.stack: expected true or false, got 'maybe'"


def test_streams_train_stacks_at_once(tmp_path: Path) -> None:
    """``scaling.streams``: three stacks in flight (a rung at one budget a stack of one) give the
    stacked run's rows, every point's run.json names the stacks in flight; killed with -9 under
    ``--nproc 2`` and resumed, the same rows."""
    write_sweep(tmp_path, STACK_SUITE)
    run_sweep(tmp_path, "stack", "--set", "scaling.stack=true")
    r = run_sweep(tmp_path, "streams", "--set", "scaling.stack=true", "--set", "scaling.streams=3")
    assert "bytes:s2 seed 0: bytes@1e9:s2 as a stack of one, 3 stacks at once" in r.stderr
    _same_rows(tmp_path / "stack", tmp_path / "streams")
    st = json.loads((tmp_path / "streams" / "run.json").read_text())
    trains = [f["seeds"]["0"]["train"] for f in st["encoders"].values()]
    assert len(trains) == 22 and all(t["stack"]["at_once"] == 3 for t in trains)
    kill_and_resume(tmp_path, "two", "--set", "scaling.stack=true", "--set", "scaling.streams=2")
    _same_rows(tmp_path / "streams", tmp_path / "two")


def test_streams_is_a_count_of_stacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    write_sweep(tmp_path, STACK_SUITE)
    assert main(["run", str(tmp_path / "sweep.yaml"), "--dry-run", "--set", "scaling.streams=0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sweep.yaml:12: scaling: streams:" in err[0] and "1 to 64, got 0" in err[0], err
    # the dry run plays the stacks in flight out (on CPU the steps of a round add up)
    assert main(["run", str(tmp_path / "sweep.yaml"), "--dry-run", "--device", "cpu", "--set", "scaling.streams=3"]) == 0
    assert "; scaling.streams 3, one process: " in capsys.readouterr().out
