"""bf16 against fp32 scoring, per cell: |ΔBPB| of the models a finished run trained.

    python benchmarks/score_dtype_check.py standard --out RUN_DIR [--set seeds=[0]] [--perturbations 4]

Loads the run's cached models (nothing is trained), plans the clean cell and the first N
perturbation cells of every eval set and mode (from the plan cache), scores each with bf16
autocast and in fp32, and prints max |ΔBPB| per model (issue 16 asks ≤ 2e-4).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from harness.config import load_suite
from harness.run import CLEAN, Runner, RunOptions
from harness.score import score_items


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("suite")
    ap.add_argument("--out", required=True)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--perturbations", type=int, default=4)
    ap.add_argument("--device", default="cuda", help="cpu only checks the script (bf16 is CUDA-only: Δ = 0)")
    args = ap.parse_args()
    suite = load_suite(args.suite, args.set)
    r = Runner(suite, RunOptions(out=Path(args.out), device=args.device, prepare=False, progress=False))
    train, evals = r.load_data()
    perts = r.perturbation_instances(train)
    stride = suite.eval.stride_bytes or max(1, suite.budget.context_bytes // 2)
    seed = suite.seeds[0]
    cells = [(p, m) for p in [CLEAN, *suite.perturbations[: args.perturbations]] for m in suite.eval.modes]
    for spec in suite.encoders:
        enc, _ = r.get_model(spec, seed, train, None)
        worst = 0.0
        for ep in evals:
            texts = [d.data.decode("utf-8", "surrogateescape") for d in ep.docs]
            plans = r.plans(ep, texts, cells, perts, seed, stride)
            for key, plan in plans.items():
                items = [p[1] for p in plan if p is not None]
                n = sum(len(it.scored_bytes) for it in items)
                bpb = {}
                for bf16 in (False, True):
                    sc = score_items(enc, items, r.device, suite.eval.batch_windows, bf16)
                    bpb[bf16] = sum(s.nll for s in sc if s is not None) / (math.log(2) * n)
                d = abs(bpb[True] - bpb[False])
                worst = max(worst, d)
                print(f"{spec.label:<12} {ep.name:<10} {key[0]}@{key[1]:g} {key[2]:<12} fp32 {bpb[False]:.5f} "
                      f"bf16 {bpb[True]:.5f} |Δ| {d:.2e}")
        print(f"{spec.label}: max |ΔBPB| bf16 vs fp32 = {worst:.2e}")
        del enc
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
