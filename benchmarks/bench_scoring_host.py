"""Where scoring's wall time goes on the host: cells/s and seconds per phase of one seed's scoring.

    python benchmarks/bench_scoring_host.py [SUITE] [--device cpu|cuda] [--out DIR] [--set K=V ...]
                                            [--no-tiny] [--profile N] [--no-forward] [--count-duplicates]

Runs ``harness.pipeline.scoring.score_seed`` — the scoring the run does, every cell of one seed — on the suite's
eval sets, perturbations and modes (default: suites/standard.yaml, seed 0, its 300 documents per
eval set). Models are trained once into ``--out`` and reused; cells go to a scratch folder, so
every cell is scored. Tiny models by default (backbone 1 × 32, tiny training and fits); on a CPU
their forward still dominates at a 1 KB context, so ``--no-forward`` replaces ``score_items`` by
1 nat per byte: what is left is the per-cell host work at full scale (plans, analysis tables,
cell rows, writing). ``--no-tiny`` measures the suite's own models (on a GPU: the real thing).
--out may be a finished run: its models are loaded, its cells and run.json are left alone.

Phases are wall seconds measured by wrapping the run's own functions (nothing else changes):
``collate`` runs in the prefetch thread, overlapped with the forward, so it is not part of the
sum; ``waiting for collate`` is the time the scoring loop waited for it. On CUDA the forward is
asynchronous: GPU time that the host work does not hide shows up in ``score_items rest`` (the
loop waits for a batch's results there), unless ``--sync`` puts it in ``forward``.
``--profile N`` prints the N functions with the most own time, then the N with the most time
inside them (cProfile, main thread only). ``--models a,b`` scores those models alone.
``--count-duplicates`` prints, per model, the windows handed to ``score_items`` (all cells of one
eval set in one call), the distinct ones among them — equal (window bytes, score_from), which
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


class TimedPrefetcher(score_mod.Prefetcher):
    def close(self, timeout: float = 30.0) -> None:
        SECONDS["waiting for collate"] += self.wait_seconds
        super().close(timeout)


def fake_score_items(encoder: Any, items: Any, *a: Any, needed: Any = None, **k: Any) -> list[Any]:
    """score_items without a model: 1 nat per scored byte, one unit per byte, no segments."""
    out: list[Any] = []
    for i, it in enumerate(items):
        if needed is not None and not needed[i]:
            out.append(None)
            continue
        n = sum(w.end - w.score_start for w in it.windows)
        out.append(score_mod.DocScore(float(n), n, None, np.ones(n)))
    return out


# per model: [windows, distinct windows, fed bytes, distinct fed bytes] over its score_items calls
DUPLICATES: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])


def counting_duplicates(scorer: Callable[..., Any], label_of: dict[int, str]) -> Callable[..., Any]:
    """``scorer`` that first adds its items' windows and distinct windows to DUPLICATES (keyed by
    the model's label: ``label_of`` maps ``id(encoder)`` to it)."""

    def wrapper(encoder: Any, items: Any, *a: Any, **k: Any) -> Any:
        fw = score_mod.flatten_windows(items)
        c = DUPLICATES[label_of.get(id(encoder), type(encoder).__name__)]
        c[0] += len(fw.flat)
        c[1] += len(fw.distinct)
        c[2] += sum(len(w) for _, w, _ in fw.flat)
        c[3] += sum(len(w) for w, _ in fw.distinct)
        return scorer(encoder, items, *a, **k)

    return wrapper


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("suite", nargs="?", default="suites/standard.yaml")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--out", default="/tmp/tokbench-bench-scoring")
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--no-tiny", action="store_true")
    ap.add_argument("--sync", action="store_true", help="synchronize CUDA after each forward (GPU time in 'forward')")
    ap.add_argument("--no-forward", action="store_true",
                    help="replace score_items by a constant 1 nat per byte: the per-cell host work alone, at full scale")
    ap.add_argument("--count-duplicates", action="store_true",
                    help="print per model the windows, distinct windows and fed bytes of its scoring jobs")
    ap.add_argument("--models", help="comma-separated model labels to score (default: every model of the suite)")
    ap.add_argument("--profile", type=int, default=0)
    ap.add_argument("--profile-out", help="write the cProfile stats here (pstats format)")
    args = ap.parse_args()
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
    models = r.train_models(seed, data.train)
    print(f"models (trained or loaded from {args.out}) {time.perf_counter() - t0:.1f} s")
    if args.models:  # score these alone (a profile of one encoder's loop); a bad label is an error
        wanted = [m.strip() for m in args.models.split(",") if m.strip()]
        unknown = [m for m in wanted if m not in models]
        if unknown:
            raise SystemExit(f"--models: no model {unknown[0]!r} in the suite (it has {', '.join(models)})")
        models = {k: models[k] for k in wanted}
    # cells go to a scratch folder (every cell is scored; a finished run's cells stay as they are)
    scratch = Path(tempfile.mkdtemp(prefix="bench-scoring-cells-"))
    r.rd.cells = scratch

    # Wrap the run's own functions (module and class attributes: every call site sees the wrapper).
    run_mod.Runner.plans = timed("perturb + plan (plan cache)", run_mod.Runner.plans)
    scoring_mod.baseline_cell = timed("compressor baselines", scoring_mod.baseline_cell)
    scoring_mod.score_cell = timed("cell rows (samples, buckets)", scoring_mod.score_cell)
    RunDir.save_cell = timed("write cells", RunDir.save_cell)  # type: ignore[method-assign]
    run_mod.score_items = timed("score_items (packed jobs)", fake_score_items if args.no_forward else run_mod.score_items)
    if args.count_duplicates:  # outside the timed call: hashing is not scoring's time
        run_mod.score_items = counting_duplicates(run_mod.score_items, {id(m.enc): k for k, m in models.items()})
    UnitNLL.byte_nll = timed("unit NLL -> bytes (d2h)", UnitNLL.byte_nll)  # type: ignore[method-assign]
    score_mod.Prefetcher = TimedPrefetcher  # type: ignore[misc]
    for cls in {type(a.config) for a in suite.analyses}:
        cls.prepare = timed("analysis prepare (processes)", cls.prepare)  # type: ignore[method-assign]
    for m in models.values():
        m.enc.forward = timed("forward", m.enc.forward, sync=args.sync)  # type: ignore[method-assign]
        m.enc.collate = timed("collate (prefetch thread)", m.enc.collate)  # type: ignore[method-assign]

    r.timings["perturb_seconds"] = 0.0
    prof = cProfile.Profile() if args.profile or args.profile_out else None
    t0 = time.perf_counter()
    if prof is not None:
        prof.enable()
    scoring_mod.score_seed(r, seed, evals, models, perts)
    if prof is not None:
        prof.disable()
    wall = time.perf_counter() - t0
    cells = suite.n_cells(per_seed=True)
    perturb = SECONDS["perturb + plan (plan cache)"]
    inside = SECONDS["score_items (packed jobs)"] - SECONDS["forward"] - SECONDS["unit NLL -> bytes (d2h)"] \
        - SECONDS["waiting for collate"]
    dev = r.device if args.device != "cuda" else f"{r.device} ({torch.cuda.get_device_name()})"
    print(f"suite {suite.name}, seed {seed}, device {dev}, {'suite models' if args.no_tiny else 'tiny models'}, "
          f"{len(models)} models, {sum(len(e.docs) for e in data.evals)} eval docs")
    print(f"scoring wall {wall:.2f} s for {cells} cells: {cells / wall:.1f} cells/s "
          f"({cells / max(1e-9, wall - perturb):.1f} cells/s without perturbation)")
    print(f"{'phase':<34} {'seconds':>8} {'calls':>7}")
    for k in ["perturb + plan (plan cache)", "analysis prepare (processes)", "compressor baselines", "score_items (packed jobs)", "forward",
              "unit NLL -> bytes (d2h)", "waiting for collate", "collate (prefetch thread)",
              "cell rows (samples, buckets)", "write cells"]:
        if CALLS.get(k) or k == "waiting for collate":
            print(f"{k:<34} {SECONDS[k]:8.2f} {CALLS[k] if k in CALLS else '':>7}")
    print(f"{'score_items rest (Python)':<34} {inside:8.2f}")
    rest = wall - perturb - SECONDS["analysis prepare (processes)"] - SECONDS["compressor baselines"] - SECONDS["score_items (packed jobs)"] \
        - SECONDS["cell rows (samples, buckets)"] - SECONDS["write cells"]
    print(f"{'score_seed rest':<34} {rest:8.2f}")
    for label, st in r.score_facts.items():
        print(f"  {label:<16} {st.get('scored_bytes', 0) / max(1e-9, st.get('seconds', 0)) / 1e6:7.3f} MB/s "
              f"in score_items, {st.get('windows', 0):.0f} windows ({st.get('duplicate_windows', 0):.0f} "
              f"served from another window's forward)")
        for mode, g in st.get("groups", {}).items():  # seconds of shared batches split by FLOPs
            print(f"    {mode:<14} {g['scored_bytes'] / max(1e-9, g['seconds']) / 1e6:7.3f} MB/s, "
                  f"{g['windows']:.0f} windows, {g['forward_flops'] / 1e12:.2f} TFLOP")
    if args.count_duplicates:
        print("windows handed to score_items per model (all its eval sets; duplicates = equal bytes and "
              "score_from within one call):")
        print(f"  {'model':<16} {'windows':>9} {'distinct':>9} {'dup %':>6} {'fed bytes':>12} "
              f"{'distinct fed':>12} {'dup %':>6}")
        for label, (n, nd, b, bd) in DUPLICATES.items():
            print(f"  {label:<16} {n:9,d} {nd:9,d} {100 * (n - nd) / max(1, n):6.1f} {b:12,d} {bd:12,d} "
                  f"{100 * (b - bd) / max(1, b):6.1f}")
    shutil.rmtree(scratch, ignore_errors=True)
    if prof is not None and args.profile_out:
        prof.dump_stats(args.profile_out)
    if prof is not None and args.profile:
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(args.profile)


if __name__ == "__main__":
    main()
