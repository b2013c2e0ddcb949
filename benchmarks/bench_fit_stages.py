"""Time the run's CPU fit stages outside training: the perturbation fits (``Runner.scoring_inputs``)
and the morphology analysis's fit with its Morfessor segmenter (trained lazily at the first
scoring otherwise), counting Morfessor trainings.

    TOKBENCH_CACHE=... PYTHONPATH=$PWD python benchmarks/bench_fit_stages.py [SUITE] [--out DIR] [--set K=V ...]

Tiny models as in ``bench_scoring_host.py`` (trained once into ``--out``, then loaded): the
analysis looks for a trained BPE encoder to take its boundaries from. Prints wall seconds per
stage, the number of Morfessor ``train_batch`` calls, and a few segmentations (so two versions
can be checked to segment alike).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import morfessor

import harness.run as run_mod
from benchmarks.bench_scoring_host import tiny_overrides
from harness.cli import find_suite
from harness.config import load_suite
from harness.data import load_data
from harness.run import Runner, RunOptions

WORDS = ["unbelievably", "walking", "reconstruction", "governments", "kindnesses"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", nargs="?", default="suites/standard.yaml")
    ap.add_argument("--out", default="/tmp/tokbench-bench-scoring")
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    trainings = [0]
    train_batch = morfessor.BaselineModel.train_batch

    def counted(self: Any, *a: Any, **k: Any) -> Any:
        trainings[0] += 1
        return train_batch(self, *a, **k)

    morfessor.BaselineModel.train_batch = counted
    suite = load_suite(find_suite(args.suite), tiny_overrides(args.suite, args.set))
    r = Runner(suite, RunOptions(out=Path(args.out), device="cpu", prepare=False, progress=False,
                                 report=False, log=lambda s: None))
    data = load_data(suite, r.ctx, prepare=False, log=lambda s: None)
    run_mod.atomic_write_json = lambda *a, **k: None  # never touch a run's run.json
    t0 = time.perf_counter()
    r.scoring_inputs(data)
    t_fit = time.perf_counter() - t0
    models = r.train_models(suite.seeds[0], data.train)
    t0 = time.perf_counter()
    r.fit_analyses(data.train, models)
    segs = {}
    for spec in suite.analyses:
        seg = getattr(spec.config, "segmenter", None)
        if callable(seg):
            segs[spec.name] = seg("en")
    t_an = time.perf_counter() - t0
    print(f"perturbation fits {t_fit:.1f} s; analysis fits + English segmenter {t_an:.1f} s; "
          f"Morfessor trainings {trainings[0]}")
    for name, seg in segs.items():
        if seg is not None:
            print(name, {w: seg.segment(w) for w in WORDS})


if __name__ == "__main__":
    main()
