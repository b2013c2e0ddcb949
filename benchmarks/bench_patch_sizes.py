"""Host time of BLT's ``patch_sizes`` on a scoring batch's host tensors (128 windows of 1 KB,
scored from byte 0-511, a patch every 4 bytes): the numpy path against the same steps as torch
CPU ops (``_patch_sizes_torch``), with
torch's intra-op threads as the process has them, and again while ``--busy`` other processes
spin on the CPUs (a run's collation and cell workers).

    PYTHONPATH=$PWD python benchmarks/bench_patch_sizes.py [--reps 50] [--busy 12]

Why: a profile of BLT's scoring on an H100 host put 5 ms a batch in
those torch CPU ops (``aten::ge`` 0.8 ms, ``aten::nonzero`` 2 ms on a 128 x 1024 tensor).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp

import torch

from benchmarks.timing import median_seconds
from encoders.blt.patching import _patch_sizes_host, _patch_sizes_torch


def spin(stop: mp.Event) -> None:  # type: ignore[valid-type]
    x = 0
    while not stop.is_set():  # type: ignore[attr-defined]
        for _ in range(100_000):
            x += 1


def timed(fn, args: tuple, reps: int) -> float:  # noqa: ANN001
    """Median ms of ``fn(*args)`` after one untimed call."""
    return median_seconds(lambda: fn(*args), reps, warmup=1) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--busy", type=int, default=12)
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    B, T = 128, 1024
    starts = torch.rand(B, T, generator=g) < 0.25
    starts[:, 0] = True
    lengths = torch.randint(900, T + 1, (B,), generator=g)
    starts &= torch.arange(T)[None] < lengths[:, None]
    sf = torch.randint(0, 512, (B,), generator=g)
    batch = (starts, lengths, sf)
    assert _patch_sizes_host(*batch) == _patch_sizes_torch(*batch)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads; {B} x {T}; median of {args.reps} (ms)")
    for load in (0, args.busy):
        stop = mp.Event()
        procs = [mp.Process(target=spin, args=(stop,), daemon=True) for _ in range(load)]
        for p in procs:
            p.start()
        try:
            print(f"  {load:>2} busy processes: numpy {timed(_patch_sizes_host, batch, args.reps):6.2f}   "
                  f"torch CPU ops {timed(_patch_sizes_torch, batch, args.reps):6.2f}")
        finally:
            stop.set()
            for p in procs:
                p.join()


if __name__ == "__main__":
    main()
