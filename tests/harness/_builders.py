"""Builders shared by tests of harness: tiny fitted encoders for the training-step tests
(test_graph_step, test_stacked), and a tiny scaling sweep on disk, run, killed with -9 and resumed
for the sweep tests (test_sweep_ranks, test_sweep_stack)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from _procs import kill_when

ROOT = Path(__file__).resolve().parents[2]

# {layers} is filled in by fitted_encoders; c.txt is a placeholder (the encoders fit on given text)
_STEP_SUITE = """\
name: g
seeds: [0]
data:
  train: {paths: [c.txt]}
  eval: [{name: e, paths: [c.txt]}]
budget: {train_bytes: 4000, context_bytes: 64, batch_bytes: 256, lr: 0.01, warmup_bytes: 0, grad_clip: 0.5}
backbone: {layers: {layers}, dim: 16, heads: 2}
encoders: [{name: bytes}, {name: bpe, vocab_size: 300}]
eval: {target_bytes: 24}
"""


def fitted_encoders(tmp: Path, which: int, n: int, *, layers: int, text: bytes) -> tuple[Any, list[Any]]:
    """The suite (64-byte windows, 256-byte batches, backbone of ``layers`` layers, dim 16) and
    ``n`` equal fresh models of its encoder ``which`` (0: bytes, 1: BPE of 300 ids), each fitted
    on ``text`` (BPE learns the same merges each time; bytes has nothing to fit)."""
    from encoders.base import FitContext
    from harness.config import load_suite
    from harness.train.loop import build_encoder

    (tmp / "c.txt").write_text("x")
    (tmp / "s.yaml").write_text(_STEP_SUITE.replace("{layers}", str(layers)))
    suite = load_suite(tmp / "s.yaml")
    encs = [build_encoder(suite.encoders[which], 0, tmp) for _ in range(n)]
    for enc in encs:
        enc.fit(FitContext(train_docs=lambda: iter([text]), train_bytes=2000, context_bytes=64, seed=0,
                           device=torch.device("cpu"), train=None, log=lambda s: None))  # type: ignore[arg-type]
    return suite, encs


# 2 budgets x 5 sizes: 5 points trained (74-182 steps of 256 bytes), 5 refused below min_steps
SWEEP_SUITE = """\
name: tinysweep
seeds: [0]
data:
  train: {paths: [corpus], docs: paragraph, language: en}
  eval:
    - {name: heldout, paths: [corpus], language: en}
budget: {train_bytes: 6000, context_bytes: 64, batch_bytes: 256, lr: 0.003, warmup_bytes: 0}
backbone: {layers: 1, dim: 8, heads: 2}
encoders:
  - name: bytes
scaling:
  budgets: [2.5e8, 3.5e8, 5e8, 7e8, 1e9]
  only_budgets: [5e8, 1e9]
  ladder:
    - {name: s0, layers: 1, dim: 8, heads: 2}
    - {name: s1, layers: 1, dim: 12, heads: 2}
    - {name: s2, layers: 1, dim: 16, heads: 2}
    - {name: s3, layers: 2, dim: 12, heads: 2}
    - {name: s4, layers: 2, dim: 16, heads: 2}
  min_steps: 60
  max_passes: 100
  lr_ref_dim: 8
perturbations:
  - {name: case.upper, severity: 1.0}
eval: {max_docs: 3, target_bytes: 24, sample_docs: 1}
"""


def write_sweep(tmp: Path, suite: str) -> None:
    """``tmp/sweep.yaml`` holding ``suite``, and its corpus: two files of 25 short paragraphs."""
    (tmp / "corpus").mkdir()
    for f in range(2):
        paras = [f"File {f} paragraph {p}: the quick brown fox jumps over the lazy dog." for p in range(25)]
        (tmp / "corpus" / f"f{f}.txt").write_text("\n\n".join(paras))
    (tmp / "sweep.yaml").write_text(suite)


def _env() -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}  # threads pinned
    env.pop("WORLD_SIZE", None)
    return env


def _cmd(tmp: Path, out: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "run", str(tmp / "sweep.yaml"), "--out", str(tmp / out),
            "--quiet", "--no-report", "--device", "cpu", *extra]


def run_sweep(tmp: Path, out: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """``tokbench run tmp/sweep.yaml --out tmp/out`` on CPU (``extra``: more arguments), which
    must succeed; its stderr in the result."""
    r = subprocess.run(_cmd(tmp, out, *extra), cwd=tmp, env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def kill_and_resume(tmp: Path, out: str, *extra: str) -> tuple[int, subprocess.CompletedProcess[str]]:
    """kill -9 the launcher of the sweep under ``--nproc 2`` (``extra``: more arguments) once a grid
    point is on disk, wait until every process of the job is gone, then run it again the same way:
    the points finished before the kill (at least one) and the resumed run, which loaded exactly
    those from the cache."""
    models = tmp / out / "models"

    def committed() -> int:  # a model's meta is written after its weights
        return sum(1 for m in models.glob("*.json") if m.with_suffix(".pt").exists())

    done = kill_when(_cmd(tmp, out, "--nproc", "2", *extra), tmp, _env(), committed, "the sweep", poll=0.05)
    assert done >= 1
    r = run_sweep(tmp, out, "--nproc", "2", *extra)
    assert r.stderr.count("loaded from cache") == done
    return done, r
