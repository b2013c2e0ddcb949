"""Per-layer forward times without host launch cost (CUDA-graph replay), on one GPU.

    python3 benchmarks/fuzzytok_graph_layer.py

`do_bench` times a call from the host: when a launch's Python (descriptors, autotuner dispatch,
~100 µs on the lent VM) takes longer than the kernel (C ≤ 256, K = 3: 30–90 µs), it measures the
host. `do_bench_cudagraph` replays the captured launches, so it times the kernel alone.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from triton.testing import do_bench, do_bench_cudagraph  # noqa: E402

from encoders.fuzzytok import kernels as kn  # noqa: E402


def main() -> None:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    peak = 2 * 8192**3 / do_bench(lambda: a @ a, warmup=20, rep=100, return_mode="median") / 1e9
    print(f"peak bf16 8192^3 matmul {peak:.0f} TFLOP/s", flush=True)
    for C, K in ((128, 3), (256, 3)):
        for B in (32, 64):
            T = 4096
            x = torch.randn(B, T, C, device="cuda", dtype=torch.bfloat16)
            w = kn.gemm_weight((torch.randn(C, C, K, device="cuda") / (C * K) ** 0.5), False, torch.bfloat16)
            flop = 2 * B * T * C * C * K
            row = []
            for name, tma in (("tma", True), ("ptr", False)):
                kn.USE_TMA = tma
                kn.launch_conv(x, w, None, 1)  # tune outside the capture
                torch.cuda.synchronize()
                ms = do_bench_cudagraph(lambda x=x, w=w: kn.launch_conv(x, w, None, 1), rep=20, return_mode="median")
                row.append(f"{name} {ms * 1e3:6.1f} us {flop / ms / 1e9:4.0f} TF/s ({flop / ms / 1e9 / peak:.2f})")
            print(f"C={C} K={K} B*T={B * T}: " + " | ".join(row), flush=True)


if __name__ == "__main__":
    main()
