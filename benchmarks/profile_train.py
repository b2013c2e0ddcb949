"""Where a training step's wall time goes, per encoder: cProfile of the main thread and the torch
profiler's CPU/CUDA op table over a short run of the one training loop (``train_encoder``).

    python benchmarks/profile_train.py suites/scaling.yaml --steps 150 \
        --set backbone.layers=4 --set backbone.dim=160 --set backbone.heads=4 [--device cuda]
    python benchmarks/profile_train.py suites/standard.yaml --only blt --steps 30 --device cuda

Prints per encoder: steps/s, the top main-thread functions by own time, and the top ops by
self CPU time (the host side that a GPU step waits on when the model is small) and, on CUDA, by
self device time.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.config.build import load_suite  # noqa: E402
from harness.data import load_data, source_context, training_windows  # noqa: E402
from harness.run import build_encoder, pick_device  # noqa: E402
from harness.train import fit_context, train_encoder  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--cache", default=None, help="data cache (default: TOKBENCH_CACHE or ~/.cache)")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--only", action="append", default=[], help="encoder label(s) to profile (default: all)")
    a = ap.parse_args()
    suite = load_suite(a.suite, a.sets)
    device = pick_device(a.device)
    from harness.data import default_cache_dir
    ctx = source_context(suite, Path(a.cache) if a.cache else default_cache_dir(), print)
    data = load_data(suite, ctx, prepare=False)
    train = data.train
    b = suite.budget
    n_bytes = a.steps * b.batch_bytes
    for spec in suite.encoders:
        if a.only and spec.label not in a.only:
            continue
        enc = build_encoder(spec, 0, Path(a.suite).resolve().parent).to(device)
        enc.fit(fit_context(train.docs, b, device, 0))
        run_b = replace(b, train_bytes=n_bytes, warmup_bytes=0)
        # warm-up run: first-step costs (allocator, cuBLAS handles, compile) stay out of the profile
        train_encoder(enc, training_windows(train.docs, 10 * 20 * b.batch_bytes, b.context_bytes, 0),
                      20 * b.batch_bytes, replace(run_b, train_bytes=20 * b.batch_bytes), device)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]
                                    + ([torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [])) as tp:
            stats = train_encoder(enc, training_windows(train.docs, 10 * n_bytes, b.context_bytes, 1),
                                  n_bytes, run_b, device)
        prof.disable()
        wall = time.perf_counter() - t0
        print(f"\n=== {spec.label} on {device}: {stats['steps']} steps in {wall:.2f} s "
              f"({1e3 * wall / max(1, stats['steps']):.1f} ms/step, profiled)")
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(a.top)
        print("\n".join(s.getvalue().splitlines()[-(a.top + 3):]))
        print(tp.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.top))
        if device.type == "cuda":  # and where the device's time goes
            print(tp.key_averages().table(sort_by="self_cuda_time_total", row_limit=a.top))


if __name__ == "__main__":
    main()
