"""Why the dry run's training estimate differs from the run's steps (issue 16): the dry run's
``_train_timing`` calls of ``train_encoder`` (GPU_STEPS of the real batch, each a fresh call) and
then longer calls, each call's steps, seconds and first-step seconds printed.

    python3 benchmarks/dry_train_probe.py [--encoder bytes] [--steps 3 8 24 64 64] [--set KEY=VALUE ...]

Needs the suite's data prepared (``TOKBENCH_CACHE``); compiles as the run does (``budget.compile``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from harness.cli import find_suite
from harness.config import load_suite
from harness.data.load import load_data, training_windows
from harness.pipeline.run import Runner, RunOptions
from harness.train.loop import train_encoder


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--suite", default="standard")
    ap.add_argument("--encoder", default="bytes")
    ap.add_argument("--steps", type=int, nargs="+", default=[3, 8, 24, 64, 64])
    ap.add_argument("--set", action="append", default=["seeds=[0]"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    suite = load_suite(find_suite(a.suite), a.set)
    runner = Runner(suite, RunOptions(out=Path("/tmp/tokbench-dry-train-probe"), device=a.device))
    data = load_data(suite, runner.ctx, prepare=False, limit=None, log=lambda s: None)
    b, dev = suite.budget, torch.device(a.device)
    spec = next(s for s in suite.encoders if s.label == a.encoder)
    enc = runner.build(spec, 0).to(dev)
    step_bytes = b.windows_per_step * b.context_bytes
    offset = 0
    for k in a.steps:
        wins = training_windows(data.train.docs, (offset + k) * step_bytes, b.context_bytes, 0)
        for _ in range(offset * step_bytes // b.context_bytes):
            next(wins)
        offset += k
        t0 = time.perf_counter()
        st = train_encoder(enc, wins, k * step_bytes, b, dev)
        wall = time.perf_counter() - t0
        rest = (st["seconds"] - st["first_step_seconds"]) / max(1, st["steps"] - 1)
        print(json.dumps({"k": k, "steps": st["steps"], "bytes": st["bytes"], "seconds": round(st["seconds"], 3),
                          "call_wall": round(wall, 3), "first_step": round(st["first_step_seconds"], 3),
                          "later_step_ms": round(1e3 * rest, 2), "host_wait": round(st["host_wait_seconds"], 3),
                          "compile_graph": round(st.get("compile_graph_seconds", 0.0), 2)}), flush=True)


if __name__ == "__main__":
    main()
