"""Host cost of one standard-suite BPE training step's batch: per-step collation (tokenize each
window, then pad) against the bulk path of ``harness/pretokenize.py`` (tokenize many steps'
windows at once, ahead of training; each step an array slice).

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD python benchmarks/bench_bpe_collate.py [--vocab 1024 4096 16384]

The step's shape comes from suites/standard.yaml (``budget.batch_bytes`` / ``context_bytes``
windows of seed 0's training stream). Text: the standard suite's training part when its data is
prepared (TOKBENCH_CACHE), else the stdlib source (said in the output). Merges are learned on the
first ``--fit-bytes`` of that text. Prints, per vocabulary, the median over ``--steps`` steps of:
``collate`` (what a step cost before, in a worker process on CUDA, plus its transfer), and
``tokenize_windows`` per step (the same tokenization, now in bulk and off the step's path) and
``collate_tokenized`` (what is left on the step's path), and checks they give equal batches.
"""

from __future__ import annotations

import argparse
import statistics
import time
from itertools import islice
from typing import Any

import torch

from benchmarks.timing import median_seconds
from encoders.backbone import BackboneConfig
from encoders.base import FitContext
from encoders.bpe import BpeConfig, BpeEncoder
from harness.config import load_suite
from harness.data import training_windows
from harness.train import batched


def training_text(suite: Any) -> tuple[list[Any], str]:
    """The standard suite's training documents if prepared, else the stdlib source's."""
    from harness.data import load_data, source_context

    try:
        data = load_data(suite, source_context(suite), prepare=False, log=lambda s: None)
        return list(data.train.docs), "standard suite training part"
    except Exception as e:  # not prepared on this machine
        from harness.data import default_cache_dir
        from sources.base import SourceContext
        from sources.stdlib import StdlibSource

        ctx = SourceContext(base_dir=".", cache_dir=default_cache_dir(), log=lambda s: None)
        return list(StdlibSource().documents(ctx)), f"stdlib source (standard data not prepared: {str(e)[:60]})"


def median_us(f: Any, reps: int) -> float:
    return median_seconds(f, reps) * 1e6


def time_step(enc: BpeEncoder, wins: list[bytes]) -> tuple[float, float, float]:
    """µs of ``collate`` (before), ``tokenize_windows`` and ``collate_tokenized`` (after) for
    one step's windows; checks that both give the same batch."""
    old = median_us(lambda: enc.collate(wins, [0] * len(wins)), 1)
    tok = median_us(lambda: enc.tokenize_windows(wins), 1)
    block = enc.tokenize_windows(wins)
    new = median_us(lambda: enc.collate_tokenized(block, 0, len(wins)), 5)
    a, c = enc.collate(wins, [0] * len(wins)), enc.collate_tokenized(block, 0, len(wins))
    assert all(torch.equal(a[k], c[k]) for k in a.tensors) and list(a.meta["segments"]) == list(c.meta["segments"])
    return old, tok, new


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, nargs="+", default=[1024, 4096, 16384])
    ap.add_argument("--steps", type=int, default=8, help="steps of the stream timed (each its own windows)")
    ap.add_argument("--fit-bytes", type=int, default=1_000_000)
    ap.add_argument("--processes", type=int, default=0,
                    help="also time both feeds end to end with this many worker processes (the run uses "
                         "up to 8 on CUDA: harness.accel.collate_processes)")
    ap.add_argument("--feed-steps", type=int, default=160, help="steps the feed timing reads")
    args = ap.parse_args()
    suite = load_suite("suites/standard.yaml", ["seeds=[0]"])
    b = suite.budget
    per_step = max(1, b.batch_bytes // b.context_bytes)
    docs, what = training_text(suite)
    print(f"text: {what}, {len(docs)} documents; step: {per_step} windows of <= {b.context_bytes} bytes; "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    steps = list(batched(training_windows(docs, args.steps * per_step * b.context_bytes, b.context_bytes, 0),
                         per_step))[: args.steps]
    bb = BackboneConfig(layers=suite.backbone.layers, dim=suite.backbone.dim, heads=suite.backbone.heads)
    for vocab in args.vocab:
        enc = BpeEncoder(BpeConfig(vocab_size=vocab), bb)
        enc.fit(FitContext(train_docs=lambda: (d.data for d in docs), train_bytes=args.fit_bytes,
                           context_bytes=b.context_bytes, seed=0, device=torch.device("cpu"),
                           train=lambda e, n: {}, log=lambda s: None))
        old, tok, new = zip(*(time_step(enc, wins) for wins in steps))
        n_tok = enc.collate(steps[-1], [0] * len(steps[-1]))["inputs"].shape[1]
        print(f"bpe-{vocab}: per step ({sum(len(w) for w in steps[-1]):,} bytes, {n_tok} tokens padded), "
              f"median of {len(steps)} steps: before collate {statistics.median(old) / 1e3:.1f} ms | after: "
              f"tokenize_windows {statistics.median(tok) / 1e3:.1f} ms (bulk, ahead, in workers on CUDA), "
              f"collate_tokenized {statistics.median(new):.0f} us on the step's path; batches equal")
        if args.processes > 0:
            feeds(enc, docs, b.context_bytes, per_step, args.processes, args.feed_steps)


def feeds(enc: BpeEncoder, docs: list[Any], context: int, per_step: int, processes: int, n_steps: int) -> None:
    """Steps per second the training loop could read from each feed (per-step collation in
    worker processes, as before; bulk tokenization in worker processes, as now), over
    ``n_steps`` steps from the feed's start."""
    from harness.accel import ordered_pool_map
    from harness.pretokenize import pretokenized_batches

    def stream() -> Any:
        return training_windows(docs, (n_steps + 1) * per_step * context, context, 0)

    def per_step_collate(chunk: list[bytes]) -> Any:
        return enc.collate(chunk, [0] * len(chunk))

    for name in ("before: collate per step", "after: bulk tokenization"):
        t0 = time.perf_counter()  # from the start, workers' fork included: the feeds read ahead
        # 8 (before) and 64 (after) steps, so only a long read measures throughput
        if name.startswith("before"):
            feed = ordered_pool_map(per_step_collate, batched(stream(), per_step), processes)
        else:
            feed = pretokenized_batches(enc, stream(), per_step, per_step, 0, processes)
        n = sum(1 for _ in islice(feed, n_steps))
        dt = time.perf_counter() - t0
        print(f"  feed with {processes} processes, {name}: {n / dt:.1f} steps/s ({dt / n * 1e3:.1f} ms a step)")


if __name__ == "__main__":
    main()
