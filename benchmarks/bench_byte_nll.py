"""Host time of ``UnitNLL.byte_nll`` — the per-batch bookkeeping of the scoring loop's thread —
for a byte-level batch (one unit per byte) and a BPE-like one (units of 1-8 bytes), and of
``core.segments.check_tiling`` over every window of the BPE-like batch (its segments: the units'
lengths as Python lists), and of reading and checking the same segments from BPE's
``TokenLengths`` one window at a time (each window indexed, converted and
checked on its own) against ``core.segments.window_segments`` (all windows at once); and each
window's values as numpy arrays: ``byte_nll``'s tensors then ``.numpy()`` each against
``byte_nll_arrays`` (where the tree has it).

    PYTHONPATH=$PWD python benchmarks/bench_byte_nll.py [--windows 64] [--reps 50]

Run it with PYTHONPATH pointing at two checkouts to compare implementations (the script only
calls the public method). Why: on an H200 the scoring loop spent 20-30 ms a 256-window batch here
as torch CPU ops, longer than the batch's forward.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable

import numpy as np
import torch

from benchmarks.timing import median_seconds
from core.segments import check_tiling, window_segments
from encoders.base import UnitNLL
from encoders.bpe.model import TokenLengths


def batch(windows: int, context: int, score_from: int, max_unit: int, seed: int = 0) -> tuple[UnitNLL, list[int], list[int]]:
    """Units tiling the scored bytes of ``windows`` windows of ``context`` bytes, window-major."""
    rng = random.Random(seed)
    win, st, en = [], [], []
    for w in range(windows):
        t = score_from
        while t < context:
            e = min(context, t + rng.randint(1, max_unit))
            win.append(w)
            st.append(t)
            en.append(e)
            t = e
    nll = torch.rand(len(win), generator=torch.Generator().manual_seed(seed)) * 5
    u = UnitNLL(nll=nll, window=torch.tensor(win), start=torch.tensor(st), end=torch.tensor(en))
    return u, [context] * windows, [score_from] * windows


def median_ms(fn: Callable[[], object], reps: int) -> float:
    """Median wall milliseconds of ``reps`` calls of ``fn``."""
    return median_seconds(fn, reps) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--windows", type=int, default=64)
    ap.add_argument("--reps", type=int, default=50)
    args = ap.parse_args()
    torch.set_num_threads(1)  # the scoring loop's thread; torch's intra-op pool is not what is timed
    print(f"torch {torch.__version__}, {args.windows} windows of 1024 bytes scored from 512; "
          f"median of {args.reps} calls (ms)")

    def show(name: str, n_units: int, fn: Callable[[], object]) -> None:
        print(f"{name:<28} {n_units:>7} units  {median_ms(fn, args.reps):8.2f} ms")

    for name, max_unit in (("byte-level (1 byte a unit)", 1), ("BPE-like (1-8 bytes a unit)", 8)):
        u, lengths, sf = batch(args.windows, 1024, 512, max_unit)
        u.byte_nll(lengths, sf)  # warm-up
        show(name, len(u.nll), lambda u=u, a=(lengths, sf): u.byte_nll(*a))
        # what the scoring loop's thread needs: each window's values as a numpy array
        show("  then .numpy() each", len(u.nll), lambda u=u, a=(lengths, sf): [t.numpy() for t in u.byte_nll(*a)])
        if hasattr(u, "byte_nll_arrays"):  # what the scoring loop calls
            show("  byte_nll_arrays", len(u.nll), lambda u=u, a=(lengths, sf): u.byte_nll_arrays(*a))
    u, lengths, sf = batch(args.windows, 1024, 512, 8)
    ln = (u.end - u.start).tolist()
    per = torch.bincount(u.window, minlength=args.windows).tolist()
    segments, k = [], 0
    for n in per:
        segments.append(ln[k : k + n])
        k += n

    def every_window() -> None:
        for sg, n, f in zip(segments, lengths, sf):
            check_tiling(sg, n - f, "BPE")

    show("check_tiling, every window", len(ln), every_window)
    # BPE's segments as collation hands them: token ids, bytes per id, per-window offsets
    tl = TokenLengths(np.asarray(ln, dtype=np.int64), np.arange(len(ln), dtype=np.int64),
                      np.concatenate(([0], np.cumsum(per))).astype(np.int64))
    n_scored = [n - f for n, f in zip(lengths, sf)]
    assert window_segments(tl, n_scored) == segments

    def one_by_one() -> None:
        for j, n in enumerate(n_scored):
            check_tiling(tl[j], n, "BPE")

    show("TokenLengths one by one", len(ln), one_by_one)
    show("TokenLengths window_segments", len(ln), lambda: window_segments(tl, n_scored, "BPE"))


if __name__ == "__main__":
    main()
