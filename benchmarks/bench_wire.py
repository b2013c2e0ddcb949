"""What a scoring batch costs on its way through the collation pool, on the host (no GPU).

    PYTHONPATH=$PWD python benchmarks/bench_wire.py [--vocab 1024] [--windows 64] [--docs 120]

A BPE model of ``--vocab`` merges (fitted on ``--docs`` documents of Python's library sources,
as ``bench_score_items.py`` does) collates rolling 1 KB windows (stride 512) into batches of
``--windows``; per batch, median milliseconds of: ``collate`` (the worker's work),
``to_wire`` (the worker turns tensors into numpy arrays for the pipe), the pickled size, and
``from_wire`` (unpickling and turning them back into tensors: the parent's prefetch thread,
which shares the GIL with the loop that launches the forwards). Why: on an H200 the BPE-1024
scoring loop took 61 ms a 64-window batch against 17-21 ms of forward (BENCHMARKS.md,
session 11), and a batch carries its segments as Python lists.
"""

from __future__ import annotations

import argparse
import pickle
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_score_items as bsi  # noqa: E402

from harness.accel import _from_wire, _to_wire  # noqa: E402
from harness.score import flatten_windows, plan_full  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--windows", type=int, default=64)
    ap.add_argument("--docs", type=int, default=120)
    ap.add_argument("--batches", type=int, default=20)
    args = ap.parse_args()
    docs = bsi.documents(args.docs, 8192)
    enc = bsi.build(argparse.Namespace(device="cpu", dim=32, layers=1, heads=2, vocab=args.vocab), docs,
                    torch.device("cpu"))
    distinct = flatten_windows([plan_full(d, 1024, 512) for d in docs]).distinct
    times: dict[str, list[float]] = {"collate": [], "to_wire": [], "from_wire": []}
    size = 0
    for b in range(args.batches):
        chunk = distinct[b * args.windows : (b + 1) * args.windows]
        if len(chunk) < args.windows:
            break
        t0 = time.perf_counter()
        batch = enc.collate([w for w, _ in chunk], [s for _, s in chunk])
        tc = time.perf_counter()
        ref = batch["inputs"].clone()  # _to_wire replaces the batch's tensors in place (untimed)
        t1 = time.perf_counter()
        payload = pickle.dumps(_to_wire(batch), protocol=pickle.HIGHEST_PROTOCOL)
        t2 = time.perf_counter()
        back = _from_wire(pickle.loads(payload))
        t3 = time.perf_counter()
        assert torch.equal(back["inputs"], ref)
        size = len(payload)
        times["collate"].append(tc - t0)
        times["to_wire"].append(t2 - t1)
        times["from_wire"].append(t3 - t2)
    n_units = int(batch.meta["units"])
    print(f"BPE-{args.vocab}, {args.windows} windows a batch ({n_units} units in the last), "
          f"{len(times['collate'])} batches, pickled {size / 1e3:.0f} KB; median ms: "
          + ", ".join(f"{k} {statistics.median(v) * 1e3:.2f}" for k, v in times.items()))


if __name__ == "__main__":
    main()
