"""Distributed runs on CPU (gloo): the planner by hand, the launcher's command and environment,
and a 2-rank run in both modes whose results.csv equals the one-process run's."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _procs import kill_when

from harness.infra.schedule import assign_lpt
from harness.pipeline.launch import (
    LOCK_HELD_ENV,
    MULTICAST_OFF,
    rank_env,
    run_lock,
    strip_nproc,
    torchrun_command,
)

ROOT = Path(__file__).resolve().parents[3]

SUITE = """\
name: tinydist
seeds: [0, 1]
data:
  train: {paths: [corpus], docs: paragraph, language: en}
  eval:
    - {name: heldout, paths: [corpus], language: en}
budget: {train_bytes: 6000, context_bytes: 64, batch_bytes: 512, warmup_bytes: 500}
backbone: {layers: 1, dim: 16, heads: 2}
encoders:
  - name: bytes
  - {name: fuzzytok, dim: 8, blocks: 1}
perturbations:
  - {name: case.upper, severity: 1.0}
eval: {max_docs: 4, target_bytes: 24, sample_docs: 1}
"""
# Text columns and counts must be equal as strings; every other numeric column to 1e-6.
EXACT = ("encoder", "encoder_name", "seed", "dataset", "language", "perturbation", "perturbation_id",
         "severity", "mode", "n_docs", "n_bytes", "n_bytes_clean", "n_tokens", "n_words", "token_unit",
         "segment_unit", "fingerprint")


def test_lpt_by_hand() -> None:
    # costs 5,4,3,3,3 on 2 ranks: 5→r0, 4→r1, 3→r1 (4<5), 3→r0 (5<7), 3→r1 (7<8)
    assert assign_lpt([5, 4, 3, 3, 3], 2) == [0, 1, 1, 0, 1]
    assert assign_lpt([1.0, 1.0, 1.0], 1) == [0, 0, 0]
    assert assign_lpt([1.0, 9.0], 3) == [1, 0]


def test_model_cache_key_budget() -> None:
    # speed keys never enter the model key; data_parallel only when true (old keys unchanged)
    from dataclasses import replace

    from harness.config.suite import BudgetConfig
    from harness.pipeline.keys import cache_budget

    b = BudgetConfig()
    key = cache_budget(b)
    assert not {"compile", "micro_batch_bytes", "idle_steps", "data_parallel"} & key.keys()
    assert cache_budget(replace(b, compile=True, micro_batch_bytes=4096, idle_steps=(20, 40))) == key
    assert cache_budget(replace(b, data_parallel=True)) == {**key, "data_parallel": True}


def test_launcher_command_and_env() -> None:
    argv = ["run", "s.yaml", "--nproc", "2", "--out", "x", "--nproc=3"]
    assert strip_nproc(argv) == ["run", "s.yaml", "--out", "x"]
    cmd = torchrun_command(argv, 2)
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    assert cmd[-4:] == ["run", "s.yaml", "--out", "x"]
    env = rank_env({"PATH": "/bin"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert MULTICAST_OFF.items() <= env.items() and env[LOCK_HELD_ENV] == "1"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)


def test_run_lock_excludes_a_second_holder(tmp_path: Path) -> None:
    # the launcher's lock is harness.infra.lock.RunLock: another process (a one-process run) is refused
    probe = ("import sys; from pathlib import Path; from harness.infra.lock import RunLock\n"
             "try:\n    RunLock(Path(sys.argv[1])).__enter__()\nexcept ValueError:\n    sys.exit(3)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with run_lock(tmp_path):
        assert subprocess.run([sys.executable, "-c", probe, str(tmp_path)], env=env).returncode == 3
    assert subprocess.run([sys.executable, "-c", probe, str(tmp_path)], env=env).returncode == 0
    with run_lock(tmp_path):  # released on exit: can be taken again
        pass


def _suite(tmp: Path) -> Path:
    (tmp / "corpus").mkdir()
    for f in range(2):
        paras = [f"File {f} paragraph {p}: the quick brown fox jumps over the lazy dog." for p in range(25)]
        (tmp / "corpus" / f"f{f}.txt").write_text("\n\n".join(paras))
    p = tmp / "tinydist.yaml"
    p.write_text(SUITE)
    return p


def _run(tmp: Path, out: str, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}  # threads pinned
    env.pop("WORLD_SIZE", None)
    cmd = [sys.executable, "-m", "harness.cli", "run", str(tmp / "tinydist.yaml"), "--out", str(tmp / out),
           "--quiet", "--no-report", "--device", "cpu", *extra]
    r = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def _rows(run: Path) -> list[dict[str, str]]:
    with open(run / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def _compare(a: list[dict[str, str]], b: list[dict[str, str]], tol: float, tol_cols: tuple[str, ...] | None) -> float:
    """Assert equal rows (same order); returns the largest numeric difference seen."""
    assert len(a) == len(b) and len(a) > 0
    worst = 0.0
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            if k in EXACT or x[k] == y[k]:
                assert x[k] == y[k], (k, x[k], y[k])
                continue
            d = abs(float(x[k]) - float(y[k]))
            scale = max(1.0, abs(float(x[k])))
            worst = max(worst, d / scale)
            limit = tol if tol_cols is None or k in tol_cols else 10 * tol
            assert d <= limit * scale, (x["encoder"], x["seed"], x["mode"], k, x[k], y[k])
    return worst


TB = ("--set", "budget.train_bytes=40000")  # long enough to kill the run between two models


def _kill_after_first_model(tmp: Path, out: str, *extra: str) -> int:
    """Start ``tokbench run ... --nproc 2``, kill -9 the launcher once a model is on disk, wait
    until every process of the job is gone (the ranks die with it); returns the models on disk."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    env.pop("WORLD_SIZE", None)
    cmd = [sys.executable, "-m", "harness.cli", "run", str(tmp / "tinydist.yaml"), "--out", str(tmp / out),
           "--quiet", "--no-report", "--device", "cpu", *extra]
    models = tmp / out / "models"

    def committed() -> int:
        # a model is on disk once its meta, written after the weights, is (RunDir.save_model);
        # a bare .pt (its meta not yet written) or a .partial.pt checkpoint is retrained on resume
        return sum(1 for m in models.glob("*.json") if m.with_suffix(".pt").exists())

    return kill_when(cmd, tmp, env, committed, "the run")


def test_two_ranks_equal_one_process(tmp_path: Path) -> None:
    """One process vs 2 gloo ranks: models across ranks (killed, then resumed) and data_parallel."""
    _suite(tmp_path)
    _run(tmp_path, "one", *TB)
    one = _rows(tmp_path / "one")
    assert len(one) == 2 * 2 * 2 * 2  # seeds × encoders × (clean, upper) × modes

    # models across ranks, killed after its first finished model: the same command trains only
    # the unfinished models, and the rows equal the one-process run's
    done = _kill_after_first_model(tmp_path, "two", *TB, "--nproc", "2")
    assert 1 <= done < 4
    r = _run(tmp_path, "two", *TB, "--nproc", "2")
    assert r.stderr.count("loaded from cache") == done and r.stderr.count("fit + train") == 4 - done
    assert "[rank 1]" in r.stderr and "models across ranks" in r.stderr
    _compare(one, _rows(tmp_path / "two"), 1e-6, None)  # each model trains exactly as alone
    facts = json.loads((tmp_path / "two" / "run.json").read_text())
    single = json.loads((tmp_path / "one" / "run.json").read_text())
    assert facts["status"] == "finished" and facts["distributed"]["world_size"] == 2
    assert sorted(set(facts["distributed"]["owner"].values())) == [0, 1]
    assert list(facts["encoders"]) == list(single["encoders"])

    # one model across ranks: the global step is split, loss normalised by all-reduced bytes
    r = _run(tmp_path, "dp", *TB, "--nproc", "2", "--set", "budget.data_parallel=true")
    assert "data_parallel" in r.stderr
    _compare(one, _rows(tmp_path / "dp"), 1e-4, ("bpb", "bpb_clean", "nll_nats"))
    # only rank 0 wrote the models: one file per (encoder, seed)
    assert len(list((tmp_path / "dp" / "models").glob("*.pt"))) == 4
    dp = json.loads((tmp_path / "dp" / "run.json").read_text())
    for label in ("bytes", "fuzzytok"):
        a, b = single["encoders"][label]["seeds"]["0"]["train"], dp["encoders"][label]["seeds"]["0"]["train"]
        assert a["bytes"] == b["bytes"] and a["steps"] == b["steps"]  # same byte stream
        # FLOPs of all ranks are counted; each rank's slice pads only to its own longest window,
        # so the count is what was computed (at most the one-process count, within a few %)
        assert a["flops"] * 0.97 <= b["flops"] <= a["flops"] * (1 + 1e-9)
        assert b["ranks"] == 2 and "ranks" not in a


def test_launcher_refuses_a_locked_run_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli import main

    suite = _suite(tmp_path)
    out = tmp_path / "run"
    with run_lock(out):  # another live run holds the directory: exit 2, one line, nothing started
        assert main(["run", str(suite), "--out", str(out), "--nproc", "2"]) == 2
    assert "run directory is in use" in capsys.readouterr().err
    assert main(["run", str(suite), "--out", str(out), "--nproc", "0"]) == 2
    assert "--nproc 0" in capsys.readouterr().err


# --- DataParallel against one process, including a step whose last window leaves rank 0 empty

def _windows() -> list[bytes]:
    """17 windows of 30..63 bytes: steps of 8, 8 and 1 windows (rank 0's last slice is empty),
    lengths differ so each rank's slice pads differently."""
    return [(f"window {i}: the quick brown fox jumps over the lazy dog " * 2).encode()[:30 + (i * 13) % 34]
            for i in range(17)]


def _train(tmp: Path, dp: object | None, ckpt: Path | None, micro_batch_bytes: int = 0) -> tuple[dict, dict]:
    from dataclasses import replace

    import torch

    from harness.config import load_suite
    from harness.train.loop import Checkpointer, build_encoder, train_encoder

    torch.set_num_threads(1)
    suite = load_suite(tmp / "tinydist.yaml")
    enc = build_encoder(suite.encoders[0], 0, tmp)
    ws = _windows()
    budget = replace(suite.budget, micro_batch_bytes=micro_batch_bytes)
    stats = train_encoder(enc, ws, sum(map(len, ws)), budget, torch.device("cpu"), dp=dp,
                          checkpoint=None if ckpt is None else Checkpointer(ckpt, every_seconds=-1.0))
    return {k: v.clone() for k, v in enc.state_dict().items()}, stats


def _dp_worker(rank: int, tmp: Path) -> None:
    import torch
    import torch.distributed as tdist

    from harness.pipeline.distributed import DataParallel, DistContext

    tdist.init_process_group("gloo", init_method=f"file://{tmp / 'store'}", rank=rank, world_size=2)
    try:
        # each rank its own checkpoint path: the non-writer's must never appear; each rank's
        # slice of 4 windows is 2 micro-batches of 2 (gradient accumulation inside a DP step)
        state, stats = _train(tmp, DataParallel(DistContext(rank, 2, rank, "gloo")), tmp / f"ck{rank}.pt",
                              micro_batch_bytes=128)
        torch.save({"state": state, "stats": {k: stats[k] for k in ("bytes", "steps", "flops", "final_loss_bpb")}},
                   tmp / f"rank{rank}.pt")
        # both ranks reach the teardown together, as harness.pipeline.distributed does: a rank that tears
        # gloo down while its peer is still in a collective can abort the process (seen once in CI)
        tdist.barrier()
    finally:
        tdist.destroy_process_group()


def test_data_parallel_step_equals_one_process(tmp_path: Path) -> None:
    import torch
    import torch.multiprocessing as mp

    _suite(tmp_path)
    ref_state, ref = _train(tmp_path, None, None)
    mp.spawn(_dp_worker, args=(tmp_path,), nprocs=2, join=True)
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert not (tmp_path / "ck1.pt").exists()  # only rank 0 checkpoints (and removes its own at the end)
    assert not (tmp_path / "ck0.pt").exists()
    assert r0["stats"]["bytes"] == ref["bytes"] == sum(map(len, _windows()))
    assert r0["stats"]["steps"] == ref["steps"] == 3
    assert r0["stats"]["final_loss_bpb"] == pytest.approx(ref["final_loss_bpb"], abs=1e-5)
    assert r1["stats"] == r0["stats"]  # the loss, bytes and FLOPs reported are global
    for k, v in ref_state.items():
        assert torch.equal(r0["state"][k], r1["state"][k]), k  # replicas identical
        assert torch.allclose(r0["state"][k], v, atol=1e-5, rtol=1e-4), k  # = one process
