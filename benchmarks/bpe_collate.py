"""Host cost of one standard-suite training step's BPE collation (256 windows of 1 KB).

    TOKBENCH_CACHE=... python benchmarks/bpe_collate.py [--vocab 4096] [--reps 5]

Merges are learned on 1 MB of the standard suite's training text (prepared data needed); prints
the median collation time per step. On a GPU the training loop collates in worker processes
(harness/accel.py), so a step is host-bound when this time / workers exceeds the GPU step.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from encoders.backbone import BackboneConfig
from encoders.base import FitContext
from encoders.bpe import BpeConfig, BpeEncoder
from harness.config import load_suite
from harness.data import training_windows
from harness.run import Runner, RunOptions


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    suite = load_suite("suites/standard.yaml", ["seeds=[0]"])
    train, _ = Runner(suite, RunOptions(prepare=False, device="cpu")).load_data()
    wins = list(training_windows(train.docs, 256 * 1024, 1024, 0))[:256]
    enc = BpeEncoder(BpeConfig(vocab_size=args.vocab), BackboneConfig(layers=6, dim=384, heads=6))
    enc.fit(FitContext(train_docs=lambda: (d.data for d in train.docs), train_bytes=1_000_000, context_bytes=1024,
                       seed=0, device=torch.device("cpu"), train=lambda e, n: {}, log=lambda s: None))
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        b = enc.collate(wins, [0] * len(wins))
        times.append(time.perf_counter() - t0)
    print(f"bpe-{args.vocab}: collate {len(wins)} windows ({b.scored_bytes:,} bytes, {b['inputs'].shape[1]} tokens "
          f"padded): median {statistics.median(times) * 1e3:.0f} ms over {args.reps} (min {min(times) * 1e3:.0f} ms)")


if __name__ == "__main__":
    main()
