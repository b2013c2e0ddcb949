"""FuzzyTok's kernels under deterministic kernels (``budget.deterministic``) on a GPU: one residual
block of the standard suite's shape (C = 256, K = 3, dilations 1, 2, 4, GELU) run twice, each time
with every tuned choice forgotten, in bf16 and in float32 — scoring's forward (inference mode) and
a training step's forward and backward. Per case: whether the two runs gave the same output and
gradients bit for bit, the largest difference from the PyTorch reference path (``impl="torch"``,
the same dtype), and the config each kernel chose (``first_that_runs``: the first of its pruned
list that the device runs; an H200 refuses the first TMA config of a float32 key).

    PYTHONPATH=$PWD python3 benchmarks/fuzzytok_deterministic_check.py [--dim 256] [--batch 8 --length 1024]

Runs on a CPU too (Triton's interpreter: ``TRITON_INTERPRET=1``, small shapes, float32 only).
Exit code 1 when a case differs between its two runs.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

from encoders.fuzzytok import kernels as kn
from encoders.fuzzytok.model import ConvBlock
from harness.infra.determinism import deterministic_kernels


def run_block(block: ConvBlock, x: torch.Tensor, impl: str, train: bool) -> list[torch.Tensor]:
    """[y] of a scoring forward, or [y, dx, dW, db] of a training step (a fixed upstream gradient)."""
    if not train:
        with torch.inference_mode():
            return [block(x, impl, False, False)]
    xg = x.detach().requires_grad_()
    block.zero_grad(set_to_none=True)
    y = block(xg, impl, False, False)
    dy = torch.linspace(-1, 1, y.numel(), device=y.device, dtype=torch.float32).view_as(y).to(y.dtype)
    y.backward(dy)
    return [y.detach(), xg.grad, block.weight.grad, block.bias.grad]


def choices() -> dict[str, list[str]]:
    """Each launcher's chosen configs (one per tuned key), as Triton prints them."""
    out = {name: [str(c) for c in la.tuner.cache.values()] for name, la in kn.LAUNCHERS.items()}
    return {k: v for k, v in out.items() if v}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--length", type=int, default=1024)
    args = ap.parse_args()
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    dev = torch.device("cpu" if interpret or not torch.cuda.is_available() else "cuda")
    dtypes = [torch.float32] if dev.type == "cpu" else [torch.bfloat16, torch.float32]
    print(f"device {torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu (interpreter)'}, "
          f"torch {torch.__version__}; block C={args.dim} K=3 d=1,2,4 gelu; x ({args.batch}, {args.length}, {args.dim})")
    failures = 0
    for dtype in dtypes:
        for train in (False, True):
            torch.manual_seed(0)
            block = ConvBlock(args.dim, 3, (1, 2, 4), "gelu", init_std=args.dim ** -0.5).to(dev, dtype)
            with torch.no_grad():
                block.bias.normal_(0, 0.1)
            x = torch.randn(args.batch, args.length, args.dim, device=dev, dtype=dtype)
            runs = []
            with deterministic_kernels(True):
                for _ in range(2):
                    kn.clear_tuning()
                    runs.append(run_block(block, x, "triton", train))
                picked = choices()
            ref = run_block(block, x, "torch", train)
            same = all(torch.equal(a, b) for a, b in zip(*runs))
            err = max(float((a.float() - r.float()).abs().max() / r.float().abs().max().clamp_min(1e-30))
                      for a, r in zip(runs[0], ref))
            failures += not same
            print(f"{str(dtype).removeprefix('torch.'):<9} {'train' if train else 'score':<5} "
                  f"two runs identical: {same}; max |Δ| / max |ref| vs the PyTorch path {err:.1e}")
            for name, cfgs in picked.items():
                print(f"    {name}: {'; '.join(sorted(set(cfgs)))}")
    kn.clear_tuning()
    print(f"{failures} case(s) differ between their two runs")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
