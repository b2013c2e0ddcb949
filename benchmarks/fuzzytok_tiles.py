"""Tile-shape sweep of the forward conv kernel for one shape, bypassing the autotuner (needs CUDA).

    python benchmarks/fuzzytok_tiles.py [C] [K]      # default C=256, K=3; B·T = 131072, bf16, d = 1

Prints TFLOP/s per (BLOCK_T, BLOCK_N, BLOCK_C, num_warps, num_stages); a config that does not fit
(shared memory, registers) is reported as such. Used to choose the autotune list in kernels.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import triton  # noqa: E402
from triton.testing import do_bench  # noqa: E402

from encoders.fuzzytok import kernels as kn  # noqa: E402

CANDIDATES = [
    (128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 256, 32, 8, 5), (128, 256, 128, 8, 2),
    (256, 128, 64, 8, 3), (128, 128, 64, 8, 4), (128, 128, 128, 8, 3), (256, 256, 64, 8, 3),
]


def main() -> None:
    C = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    K = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    B, T, d = 32, 4096, 1
    x = torch.randn(B, T, C, device="cuda", dtype=torch.bfloat16)
    w = kn.gemm_weight((torch.randn(C, C, K, device="cuda") / (C * K) ** 0.5), False, torch.bfloat16)
    ref = kn.launch_conv(x, w, None, d).float()
    flop = 2 * B * T * C * C * K
    for bt, bn, bc, warps, stages in CANDIDATES:
        y = torch.empty(B, T, C, device="cuda", dtype=torch.bfloat16)
        grid = (triton.cdiv(T, bt), triton.cdiv(C, bn), B)

        def run(bt=bt, bn=bn, bc=bc, warps=warps, stages=stages, y=y, grid=grid) -> None:  # noqa: ANN001
            # .fn.fn: past the autotuner and the epilogue-split heuristic, to the raw kernel.
            kn._conv_kernel.fn.fn[grid](x, w, y, y, y, y, y, y, T, d, 1, CI=C, CO=C, K=K, DIR=-1, HAS_BIAS=False,
                                        MODE=kn.MODE_PLAIN, ACT=0, BLOCK_T=bt, BLOCK_N=bn, BLOCK_C=bc,
                                        SPLIT=1, num_warps=warps, num_stages=stages)

        try:
            run()
            err = float((y.float() - ref).norm() / ref.norm())
            ms = do_bench(run, warmup=10, rep=50, return_mode="median")
            print(f"C{C} K{K} BT{bt} BN{bn} BC{bc} w{warps} s{stages}: {flop / ms / 1e9:5.0f} TFLOP/s "
                  f"(rel diff to autotuned {err:.0e})", flush=True)
        except Exception as e:  # noqa: BLE001 - report configs that do not fit and go on
            print(f"C{C} K{K} BT{bt} BN{bn} BC{bc} w{warps} s{stages}: does not run ({type(e).__name__})", flush=True)


if __name__ == "__main__":
    main()
