"""The baseline the FuzzyTok kernels must beat: the original design's plain Triton forward kernel.

One program per (64 rows × 32 output channels) tile, 32-wide input-channel blocks, one ``tl.dot``
per tap and channel block, causal masking on row indices, no autotuning, no fusion. Shapes as
``encoders.fuzzytok.kernels.conv_forward``: x (B, T, C_in), weight (C_out, C_in, K) → (B, T, C_out).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def _naive_conv_kernel(x_ptr, w_ptr, y_ptr, T, CI, CO, dil, K: tl.constexpr,
                       BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr):
    pid_t = tl.program_id(0)
    pid_n = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    rows = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cin = tl.arange(0, BLOCK_C)
    acc = tl.full((BLOCK_T, BLOCK_N), 0.0, tl.float32)
    for k in tl.static_range(K):
        src = rows - (K - 1 - k) * dil
        valid = (src >= 0) & (src < T)
        src = tl.where(valid, src, 0)
        for c0 in range(0, CI, BLOCK_C):
            ci = c0 + cin
            xt = tl.load(x_ptr + b * T * CI + src[:, None] * CI + ci[None, :],
                         mask=valid[:, None] & (ci[None, :] < CI), other=0.0)
            wt = tl.load(w_ptr + k * CI * CO + ci[:, None] * CO + cols[None, :],
                         mask=(ci[:, None] < CI) & (cols[None, :] < CO), other=0.0)
            acc = tl.dot(xt, wt, acc)
    mask = (rows[:, None] < T) & (cols[None, :] < CO)
    tl.store(y_ptr + b * T * CO + rows[:, None] * CO + cols[None, :], acc.to(y_ptr.dtype.element_ty), mask=mask)


def naive_conv_forward(x: torch.Tensor, w_kio: torch.Tensor, dilation: int) -> torch.Tensor:
    """x (B, T, C_in) contiguous; w_kio (K, C_in, C_out) contiguous → y (B, T, C_out)."""
    B, T, ci = x.shape
    K, _, co = w_kio.shape
    y = torch.empty(B, T, co, device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(T, 64), triton.cdiv(co, 32), B)
    _naive_conv_kernel[grid](x, w_kio, y, T, ci, co, dilation, K=K, BLOCK_T=64, BLOCK_N=32, BLOCK_C=32,
                             num_warps=4, num_stages=2)
    return y
