"""Host µs of ``ThinLauncher.key`` (FuzzyTok's launch key: Triton's specialisation of each run-time
argument) against the per-argument Python path it replaced, on the CPU under Triton's interpreter:

    python3 benchmarks/bench_launch_key.py [--calls 20000]

Both compute the same key (checked); the arguments are a TMA conv launch's ten (six tensors, four
integers). Why: under cProfile on an H100 the per-argument key took 32 µs a call
against 182 µs a ``launch_conv`` call, most of it a Python generator calling a wrapper once per
argument.
``torch.add`` on a small CPU tensor is printed beside as the machine's yardstick.
"""

from __future__ import annotations

import argparse
import os
import timeit

os.environ.setdefault("TRITON_INTERPRET", "1")  # the kernels' module needs no GPU then

import torch  # noqa: E402

from encoders.fuzzytok import kernels as kn  # noqa: E402


def per_argument_key(la: kn.ThinLauncher, device: int, spec_args: tuple, consts: dict) -> tuple:
    """The key formed per argument, the reference for ``ThinLauncher.key``: a generator over the
    arguments, one Python call (which imported Triton's function) per argument."""
    def specialize(backend: object, arg: object, is_const: bool, sp: bool, al: bool) -> tuple:
        from triton._C.libtriton import native_specialize_impl as impl

        return impl(backend, arg, is_const, sp, al)

    backend = kn._spec_backend(la.jit, device)
    flags = list(zip(la.specialize, la.align)) or [(True, True)] * len(spec_args)
    spec = tuple(specialize(backend, a, False, sp, al) for a, (sp, al) in zip(spec_args, flags))
    return (device, (), tuple(consts.items()), spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    la = kn.LAUNCHERS["conv_tma"]
    x = torch.zeros(64)
    spec_args = (x, x, x, x, x, x, 1, 256, 2, 16)
    consts = dict(CI=64, CO=64, K=3, DIR=-1, HAS_BIAS=True, MODE=0, ACT=0, INTERP=True)
    if per_argument_key(la, -1, spec_args, consts) != la.key(-1, spec_args, consts):
        raise SystemExit("the two keys differ")
    calls = {
        "torch.add": lambda: torch.add(x, x),
        "key, per argument (before)": lambda: per_argument_key(la, -1, spec_args, consts),
        "key (ThinLauncher.key)": lambda: la.key(-1, spec_args, consts),
    }
    for name, fn in calls.items():
        best = min(timeit.repeat(fn, number=args.calls, repeat=5)) / args.calls * 1e6
        print(f"{name:28s} {best:6.2f} us per call (best of 5 x {args.calls})")


if __name__ == "__main__":
    main()
