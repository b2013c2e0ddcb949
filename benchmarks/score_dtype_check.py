"""bf16 against fp32 scoring, per cell: |ΔBPB| of the models a run trained (issue 16 asks ≤ 2e-4).

    python benchmarks/score_dtype_check.py SUITE --out RUN_DIR [--set K=V ...] [--perturbations 4]
                                           [--max-docs 64] [--device cuda]

Loads the run's cached models from RUN_DIR (a finished run of the same suite and --set; a
missing model is an error, nothing is trained), plans the clean cell and the first N
perturbation cells of every eval set and mode (plan cache), scores all of a model's cells in one
packed job in strict fp32 (TF32 off) and again with bf16 autocast once per output-head mode
(``--heads``, ``OutputHead``'s scoring modes), and prints the BPB of each cell in each, |ΔBPB|
per cell against fp32, the largest per model and overall, and how many cells are within 2e-4.
Eager (``budget.compile``
off unless --set turns it on), so no compile time: about 30-60 s for the six models of
suites/standard.yaml at 64 documents per eval set on one H200 (estimated, not yet measured).

    PYTHONPATH=$PWD python benchmarks/score_dtype_check.py standard --out /tmp/tokbench-standard-s0 \\
        --set 'seeds=[0]'
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import torch

import encoders.backbone as backbone_mod
from core.metrics import bpb
from harness.cli import find_suite
from harness.config import load_suite
from harness.data.evalsets import CLEAN
from harness.data.load import load_data
from harness.pipeline.models import get_model
from harness.pipeline.run import Runner, RunOptions
from harness.score.items import score_items

BOUND = 2e-4  # issue 16: bf16 scoring within this of fp32, per cell
STRICT = "strict fp32"  # the reference: no autocast, TF32 off (not a head mode's name)


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("suite")
    ap.add_argument("--out", required=True, help="the run directory whose models are checked")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--perturbations", type=int, default=4, help="perturbation cells besides clean")
    ap.add_argument("--max-docs", type=int, default=64, help="documents per eval set")
    ap.add_argument("--device", default="cuda", help="cpu only checks the script (bf16 is CUDA-only: Δ = 0)")
    ap.add_argument("--heads", default=backbone_mod.SCORE_HEAD,
                    help="comma-separated OutputHead scoring modes to check under bf16 (fp32, mixed, bf16): "
                         "each is scored on the same models and compared with the fp32 path")
    return ap.parse_args()


def cached_models(r: Runner, suite: Any, data: Any, seed: int, out: str) -> dict[str, Any]:
    """The run's models of ``seed`` loaded from its cache, as ``Runner.train_models`` orders them,
    without writing its run.json; a missing model is an error (nothing is trained here)."""
    load_model = r.rd.load_model

    def cached_only(key: str) -> Any:
        got = load_model(key)
        if got is None:
            raise SystemExit(f"score_dtype_check: a model of this suite (with these --set) is not in "
                             f"{out}/models: run the suite into --out first")
        return got

    r.rd.load_model = cached_only  # type: ignore[method-assign]
    models = {}
    flops_target = None
    order = sorted(suite.encoders, key=lambda s: suite.budget.match == "flops"
                   and s.label != (suite.budget.flops_reference or suite.encoders[0].label))
    for spec in order:
        enc, meta = get_model(r, spec, seed, data.train, flops_target)
        if suite.budget.match == "flops" and flops_target is None:
            flops_target = float(meta["total_flops"])
        models[spec.label] = enc
    return models


def check_model(r: Runner, label: str, enc: Any, evals: list[Any], perts: Any, seed: int,
                heads: list[str]) -> tuple[dict[str, float], dict[str, int], int]:
    """Every planned cell of one model scored in strict fp32 and under bf16 with each head mode,
    a line per cell; returns the largest |ΔBPB| per head, the cells within BOUND per head and
    the number of cells."""
    worst, within, n_cells = dict.fromkeys(heads, 0.0), dict.fromkeys(heads, 0), 0
    for es in evals:
        plans = r.plans(es, perts, seed)
        keys = list(plans)
        rows = [[p for p in plans[k] if p is not None] for k in keys]
        items = [p.item for rs in rows for p in rs]
        score: dict[str, list[float]] = {}  # per head mode, and STRICT
        for variant in [None, *heads]:  # None: the strict fp32 path, then bf16 per head mode
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
            backbone_mod.SCORE_HEAD = variant or "fp32"
            sc = score_items(enc, items, r.device, r.suite.eval.batch_windows, bf16=variant is not None)
            score[variant or STRICT] = [s.nll for s in sc if s is not None]
        k0 = 0
        for key, rs in zip(keys, rows):
            n_bytes = sum(len(p.item.scored_bytes) for p in rs)
            b32 = bpb(sum(score[STRICT][k0 : k0 + len(rs)]), n_bytes)
            line = f"{label:<12} {es.part.name:<10} {key[0] + '@' + format(key[1], 'g'):<22} {key[2]:<12} fp32 {b32:.6f}"
            for h in heads:
                b16 = bpb(sum(score[h][k0 : k0 + len(rs)]), n_bytes)
                d = abs(b16 - b32)
                worst[h] = max(worst[h], d)
                within[h] += d <= BOUND
                line += f" | bf16 {h} head {b16:.6f} |Δ| {d:.2e}"
            k0 += len(rs)
            n_cells += 1
            print(line)
    return worst, within, n_cells


def main() -> None:
    args = parse_args()
    t_start = time.perf_counter()
    suite = load_suite(find_suite(args.suite), ["budget.compile=false", *args.set])
    # only the perturbations checked: the others' fits (Morfessor) would cost time for nothing
    suite = dataclasses.replace(suite, perturbations=suite.perturbations[: args.perturbations])
    r = Runner(suite, RunOptions(out=Path(args.out), device=args.device, prepare=False, progress=False,
                                 report=False, log=lambda s: print(s, file=sys.stderr)))
    data = load_data(suite, r.ctx, prepare=False, limit=args.max_docs, log=lambda s: None)
    perts, evals = r.scoring_inputs(data)
    seed = suite.seeds[0]
    cells = [(p, m) for p in [CLEAN, *suite.perturbations] for m in suite.eval.modes]
    models = cached_models(r, suite, data, seed, args.out)
    print(f"loaded {len(models)} models in {time.perf_counter() - t_start:.1f} s; "
          f"{len(cells)} cells per eval set, {args.max_docs} documents per eval set, device {r.device}")
    heads = [h for h in args.heads.split(",") if h]
    if not heads or any(h not in backbone_mod.SCORE_HEADS for h in heads):
        raise SystemExit(f"score_dtype_check: --heads {args.heads!r}: each must be one of {', '.join(backbone_mod.SCORE_HEADS)}")
    worst_all = dict.fromkeys(heads, 0.0)
    cells_in = dict.fromkeys(heads, 0)
    n_cells = 0
    for label, enc in models.items():
        t0 = time.perf_counter()
        worst, within, n = check_model(r, label, enc, evals, perts, seed, heads)
        n_cells += n
        for h in heads:
            print(f"{label}: bf16 with the {h} head: max |ΔBPB| vs fp32 = {worst[h]:.2e}")
        print(f"{label}: {time.perf_counter() - t0:.1f} s")
        if r.device.type == "cuda":
            torch.cuda.empty_cache()
        for h in heads:
            worst_all[h] = max(worst_all[h], worst[h])
            cells_in[h] += within[h]
    for h in heads:
        verdict = "within" if worst_all[h] <= BOUND else "OVER"
        print(f"all models, bf16 with the {h} head: {cells_in[h]} of {n_cells} cells within {BOUND:g}; "
              f"max |ΔBPB| = {worst_all[h]:.2e}, {verdict} the bound")
    print(f"{time.perf_counter() - t_start:.1f} s in all")


if __name__ == "__main__":
    main()
