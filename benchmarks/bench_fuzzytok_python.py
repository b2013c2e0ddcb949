"""Our own Python per eager FuzzyTok call, on a CPU: ``dilated_causal_conv`` without gradient on
CPU tensors in Triton's interpreter, with the recorded kernel's launch replaced by a no-op, so
what is timed is the path from the public function to the launch (checks, the weight's layout,
the output's allocation, the launch key, the descriptors) — the part of a GPU call's host cost
that is ours (issue 16's ≤ 30 µs target; the GPU's own numbers: ``bench_fuzzytok.py --parts
host``). The weight's re-layout is a real copy here (a kernel launch on a GPU).

    PYTHONPATH=. python benchmarks/bench_fuzzytok_python.py [--profile 20]

Prints µs per call (the best of 5 repeats of 2,000 calls) for the TMA and the pointer kernel's
shapes; ``--profile N``: the N functions with the most own time under cProfile."""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import timeit

os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton defines the kernels

import torch  # noqa: E402

from encoders.fuzzytok import kernels as kn  # noqa: E402
from encoders.fuzzytok.ops import dilated_causal_conv  # noqa: E402

SHAPES = {"tma (C 64 -> 64, K 3)": (4, 64, 64, 64, 3), "pointer (C 5 -> 7, K 3)": (4, 64, 5, 7, 3)}


class _NoLaunch:
    """Stands in for a launcher's ``@jit`` function: ``jit[grid](*args)`` does nothing."""

    def __getitem__(self, grid: object):  # noqa: ANN204
        return lambda *a, **k: None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", type=int, default=0, help="print the N costliest functions")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    calls = {}
    for name, (B, T, ci, co, K) in SHAPES.items():
        g = torch.Generator().manual_seed(0)
        x, w, b = torch.randn(B, T, ci, generator=g), torch.randn(co, ci, K, generator=g), torch.randn(co, generator=g)
        dilated_causal_conv(x, w, b, 2, impl="triton")  # tunes the key and records its entry (a real run)
        calls[name] = (lambda x=x, w=w, b=b: dilated_causal_conv(x, w, b, 2, impl="triton"))
    for la in kn.LAUNCHERS.values():
        la.jit = _NoLaunch()  # recorded entries launch through it: nothing runs
    for name, f in calls.items():
        best = min(timeit.repeat(f, number=2000, repeat=5)) / 2000
        print(f"{name}: {best * 1e6:.1f} µs a call (launch stubbed)")
    if args.profile:
        pr = cProfile.Profile()
        f = next(iter(calls.values()))
        pr.enable()
        for _ in range(3000):
            f()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
