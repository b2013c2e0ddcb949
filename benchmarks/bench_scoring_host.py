"""Where scoring's wall time goes on the host: cells/s and seconds per phase of one seed's scoring.

    python benchmarks/bench_scoring_host.py [SUITE] [--device cpu|cuda] [--out DIR] [--set K=V ...]
                                            [--no-tiny] [--profile N] [--no-forward] [--count-duplicates]

Runs ``harness.pipeline.scoring.score_seed`` — the scoring the run does, every cell of one seed — on the suite's
eval sets, perturbations and modes (default: suites/standard.yaml, seed 0, its 300 documents per
eval set). Models are trained once into ``--out`` and reused; cells go to a scratch folder, so
every cell is scored. Tiny models by default (backbone 1 × 32, tiny training and fits); on a CPU
their forward still dominates at a 1 KB context, so ``--no-forward`` replaces each packed job
(``harness.pipeline.scoring.start_forwards``) by 1 nat per byte: what is left is the per-cell host work at full scale (plans, analysis tables,
cell rows, writing). ``--no-tiny`` measures the suite's own models (on a GPU: the real thing).
--out may be a finished run: its models are loaded, its cells and run.json are left alone.

Phases are wall seconds measured by wrapping the run's own functions (nothing else changes):
``collate`` runs in the prefetch thread, overlapped with the forward, so it is not part of the
sum; ``waiting for collate`` is the time the scoring loop waited for it. On CUDA the forward is
asynchronous: GPU time that the host work does not hide shows up in ``packed jobs rest`` (the
loop waits for a batch's results there), unless ``--sync`` puts it in ``forward``.
``--profile N`` prints the N functions with the most own time, then the N with the most time
inside them (cProfile, main thread only). ``--models a,b`` scores those models alone.
``--count-duplicates`` prints, per model, the windows handed to its packed jobs (all cells of one
eval set in one job), the distinct ones among them — equal (window bytes, score_from), which
``score_items`` forwards once — and the bytes fed for each (``harness.score.items.flatten_windows``;
hashing the windows adds to the wall time). With ``--no-forward`` it is a CPU-only analysis.

Examples (first run trains the tiny models: a few minutes on a 2-core CPU):
    PYTHONPATH=$PWD python benchmarks/bench_scoring_host.py --device cpu --no-forward
    PYTHONPATH=$PWD python benchmarks/bench_scoring_host.py --device cpu --set eval.max_docs=20
    PYTHONPATH=$PWD python benchmarks/bench_scoring_host.py --device cuda --no-tiny --out RUN_DIR
    PYTHONPATH=$PWD python benchmarks/bench_scoring_host.py --device cuda --no-tiny --out RUN_DIR --models bpe-4096 --profile 30
    PYTHONPATH=$PWD python benchmarks/bench_scoring_host.py --device cpu --no-forward --count-duplicates
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import harness.pipeline.run as run_mod
import harness.pipeline.scoring as scoring_mod
import harness.score.batches as batches_mod
import harness.score.items as score_mod
from encoders.base import UnitNLL
from harness.cli import find_suite
from harness.config import load_suite
from harness.data.load import load_data
from harness.infra.results import RunDir
from harness.pipeline.run import Runner, RunOptions

# Tiny models: the forward is cheap, so host costs dominate (the suite's data and cells stay).
TINY = ["backbone.layers=1", "backbone.dim=32", "backbone.heads=2", "budget.train_bytes=40000",
        "budget.batch_bytes=8192", "budget.warmup_bytes=1000", "budget.compile=false"]
TINY_BY_ENCODER = {"fuzzytok": ["dim=32", "blocks=1"], "bpe": ["fit_bytes=300000"],
                   "blt": ["entropy_dim=32", "entropy_layers=1", "entropy_train_bytes=40000", "local_dim=32",
                           "threshold_fit_bytes=40000", "ngram_table_size=4096"]}

SECONDS: dict[str, float] = defaultdict(float)
CALLS: dict[str, int] = defaultdict(int)


def timed(name: str, fn: Callable[..., Any], sync: bool = False) -> Callable[..., Any]:
    """``fn`` that adds its wall seconds to SECONDS[name] (after a CUDA sync when ``sync``)."""

    def wrapper(*a: Any, **k: Any) -> Any:
        t0 = time.perf_counter()
        try:
            out = fn(*a, **k)
            if sync and torch.cuda.is_available():
                torch.cuda.synchronize()
            return out
        finally:
            SECONDS[name] += time.perf_counter() - t0
            CALLS[name] += 1

    return wrapper


def tiny_overrides(suite_path: str, user: list[str]) -> list[str]:
    suite = load_suite(find_suite(suite_path), user)
    out = list(TINY)
    for i, spec in enumerate(suite.raw.get("encoders", [])):
        out += [f"encoders[{i}].{kv}" for kv in TINY_BY_ENCODER.get(spec.get("name"), [])]
    return out + user  # the user's --set win


class TimedPrefetcher(batches_mod.Prefetcher):
    def close(self, timeout: float = 30.0) -> None:
        SECONDS["waiting for collate"] += self.wait_seconds
        super().close(timeout)


class FakeJob:
    """A packed scoring job without a model (``--no-forward``): 1 nat per scored byte, one unit
    per byte, no segments; ``run`` and ``close`` as ``harness.score.items.ScoreJob``'s."""

    def __init__(self, items: Any, needed: Any) -> None:
        self.items, self.needed = items, needed

    def run(self, progress: Any = None, started: Callable[[], Any] | None = None) -> list[Any]:
        if started is not None:
            started()  # the next model's job starts here, as the run's does
        out: list[Any] = []
        for i, it in enumerate(self.items):
            if self.needed is not None and not self.needed[i]:
                out.append(None)
                continue
            n = sum(w.end - w.score_start for w in it.windows)
            out.append(score_mod.DocScore(float(n), n, None, np.ones(n)))
        return out

    def close(self) -> None:
        pass


def fake_start_forwards(runner: Any, model: Any, items: Any, needed: Any, *a: Any, **k: Any) -> FakeJob:
    """``harness.pipeline.scoring.start_forwards`` without a model (``FakeJob``)."""
    return FakeJob(items, needed)


# per model: [windows, distinct windows, fed bytes, distinct fed bytes] over its packed jobs
DUPLICATES: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])


def counting_duplicates(start: Callable[..., Any]) -> Callable[..., Any]:
    """``start`` (``start_forwards``' signature) that first adds its items' windows and distinct
    windows to DUPLICATES, keyed by the model's label."""

    def wrapper(runner: Any, model: Any, items: Any, *a: Any, **k: Any) -> Any:
        fw = score_mod.flatten_windows(items)
        c = DUPLICATES[model.spec.label]
        c[0] += len(fw.flat)
        c[1] += len(fw.distinct)
        c[2] += sum(len(w) for _, w, _ in fw.flat)
        c[3] += sum(len(w) for w, _ in fw.distinct)
        return start(runner, model, items, *a, **k)

    return wrapper


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("suite", nargs="?", default="suites/standard.yaml")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default="/tmp/tokbench-bench-scoring")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--no-tiny", action="store_true")
    ap.add_argument("--sync", action="store_true", help="synchronize CUDA after each forward (GPU time in 'forward')")
    ap.add_argument("--no-forward", action="store_true",
                    help="replace the packed jobs' forwards by a constant 1 nat per byte: the per-cell host work alone, at full scale")
    ap.add_argument("--count-duplicates", action="store_true",
                    help="print per model the windows, distinct windows and fed bytes of its scoring jobs")
    ap.add_argument("--models", help="comma-separated model labels to score (default: every model of the suite)")
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--profile-out", help="write the cProfile stats here (pstats format)")
    return ap.parse_args()


def chosen(models: dict[str, Any], wanted: str | None) -> dict[str, Any]:
    """The models named in ``--models`` (all when None); an unknown label is an error."""
    if not wanted:
        return models
    labels = [m.strip() for m in wanted.split(",") if m.strip()]
    unknown = [m for m in labels if m not in models]
    if unknown:
        raise SystemExit(f"--models: no model {unknown[0]!r} in the suite (it has {', '.join(models)})")
    return {k: models[k] for k in labels}


def instrument(suite: Any, models: dict[str, Any], args: argparse.Namespace) -> None:
    """Wrap the run's own functions (module and class attributes: every call site sees the
    wrapper) so that each adds its wall seconds to SECONDS."""
    run_mod.Runner.plans = timed("perturb + plan (plan cache)", run_mod.Runner.plans)
    scoring_mod.baseline_cell = timed("compressor baselines", scoring_mod.baseline_cell)
    scoring_mod.score_cell = timed("cell rows (samples, buckets)", scoring_mod.score_cell)
    RunDir.save_cell = timed("write cells", RunDir.save_cell)  # type: ignore[method-assign]
    if args.no_forward:
        scoring_mod.start_forwards = fake_start_forwards
    if args.count_duplicates:  # its hashing counts in the packed jobs' seconds (docstring)
        scoring_mod.start_forwards = counting_duplicates(scoring_mod.start_forwards)
    scoring_mod.run_forwards = timed("packed jobs (score_items)", scoring_mod.run_forwards)
    UnitNLL.byte_nll = timed("unit NLL -> bytes (d2h)", UnitNLL.byte_nll)  # type: ignore[method-assign]
    batches_mod.Prefetcher = TimedPrefetcher  # type: ignore[misc]
    for cls in {type(a.config) for a in suite.analyses}:
        cls.prepare = timed("analysis prepare (processes)", cls.prepare)  # type: ignore[method-assign]
    for m in models.values():
        m.enc.forward = timed("forward", m.enc.forward, sync=args.sync)  # type: ignore[method-assign]
        m.enc.collate = timed("collate (prefetch thread)", m.enc.collate)  # type: ignore[method-assign]


PHASES = ["perturb + plan (plan cache)", "analysis prepare (processes)", "compressor baselines",
          "packed jobs (score_items)", "forward", "unit NLL -> bytes (d2h)", "waiting for collate",
          "collate (prefetch thread)", "cell rows (samples, buckets)", "write cells"]


def print_phases(r: Runner, wall: float, cells: int) -> None:
    """Cells/s, the seconds of each phase, what is left of the packed jobs and of the seed's
    scoring outside them, and each model's scoring rate."""
    perturb = SECONDS["perturb + plan (plan cache)"]
    print(f"scoring wall {wall:.2f} s for {cells} cells: {cells / wall:.1f} cells/s "
          f"({cells / max(1e-9, wall - perturb):.1f} cells/s without perturbation)")
    print(f"{'phase':<34} {'seconds':>8} {'calls':>7}")
    for k in PHASES:
        if CALLS.get(k) or k == "waiting for collate":
            print(f"{k:<34} {SECONDS[k]:8.2f} {CALLS[k] if k in CALLS else '':>7}")
    inside = SECONDS["packed jobs (score_items)"] - SECONDS["forward"] - SECONDS["unit NLL -> bytes (d2h)"] \
        - SECONDS["waiting for collate"]
    print(f"{'packed jobs rest (Python)':<34} {inside:8.2f}")
    rest = wall - sum(SECONDS[k] for k in PHASES[:4]) - SECONDS["cell rows (samples, buckets)"] - SECONDS["write cells"]
    print(f"{'score_seed rest':<34} {rest:8.2f}")
    for label, st in r.score_facts.items():
        print(f"  {label:<16} {st.get('scored_bytes', 0) / max(1e-9, st.get('seconds', 0)) / 1e6:7.3f} MB/s "
              f"in score_items, {st.get('windows', 0):.0f} windows ({st.get('duplicate_windows', 0):.0f} "
              f"served from another window's forward)")
        for mode, g in st.get("groups", {}).items():  # seconds of shared batches split by FLOPs
            print(f"    {mode:<14} {g['scored_bytes'] / max(1e-9, g['seconds']) / 1e6:7.3f} MB/s, "
                  f"{g['windows']:.0f} windows, {g['forward_flops'] / 1e12:.2f} TFLOP")


def print_duplicates() -> None:
    print("windows handed to the packed jobs per model (all its eval sets; duplicates = equal bytes and "
          "score_from within one job):")
    print(f"  {'model':<16} {'windows':>9} {'distinct':>9} {'dup %':>6} {'fed bytes':>12} "
          f"{'distinct fed':>12} {'dup %':>6}")
    for label, (n, nd, b, bd) in DUPLICATES.items():
        print(f"  {label:<16} {n:9,d} {nd:9,d} {100 * (n - nd) / max(1, n):6.1f} {b:12,d} {bd:12,d} "
              f"{100 * (b - bd) / max(1, b):6.1f}")


def main() -> None:
    args = parse_args()
    overrides = args.set if args.no_tiny else tiny_overrides(args.suite, args.set)
    suite = load_suite(find_suite(args.suite), overrides)
    r = Runner(suite, RunOptions(out=Path(args.out), device=args.device, prepare=False, progress=False,
                                 report=False, log=lambda s: None))
    t0 = time.perf_counter()
    data = load_data(suite, r.ctx, prepare=False, log=lambda s: None)
    perts, evals = r.scoring_inputs(data)
    seed = suite.seeds[0]
    print(f"data + perturbation fits {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    run_mod.atomic_write_json = lambda *a, **k: None  # never touch the run's run.json
    scoring_mod.atomic_write_json = run_mod.atomic_write_json
    models = chosen(r.train_models(seed, data.train), args.models)
    print(f"models (trained or loaded from {args.out}) {time.perf_counter() - t0:.1f} s")
    # cells go to a scratch folder (every cell is scored; a finished run's cells stay as they are)
    scratch = Path(tempfile.mkdtemp(prefix="bench-scoring-cells-"))
    r.rd.cells = scratch
    instrument(suite, models, args)
    r.timings["perturb_seconds"] = 0.0
    prof = cProfile.Profile() if args.profile or args.profile_out else None
    t0 = time.perf_counter()
    if prof is not None:
        prof.enable()
    scoring_mod.score_seed(r, seed, evals, models, perts)
    if prof is not None:
        prof.disable()
    wall = time.perf_counter() - t0
    dev = r.device if args.device != "cuda" else f"{r.device} ({torch.cuda.get_device_name()})"
    print(f"suite {suite.name}, seed {seed}, device {dev}, {'suite models' if args.no_tiny else 'tiny models'}, "
          f"{len(models)} models, {sum(len(e.docs) for e in data.evals)} eval docs")
    # the cells of the models scored (``--models`` may take a few): the same number for each model
    print_phases(r, wall, suite.n_cells(per_seed=True) * len(models) // len(suite.encoders))
    if args.count_duplicates:
        print_duplicates()
    shutil.rmtree(scratch, ignore_errors=True)
    if prof is not None and args.profile_out:
        prof.dump_stats(args.profile_out)
    if prof is not None and args.profile:
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
    main()
