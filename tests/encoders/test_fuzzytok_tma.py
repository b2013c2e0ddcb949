"""The experimental TMA conv kernels (encoders/fuzzytok/kernels_tma.py) vs the PyTorch reference,
fp32, in Triton's interpreter on CPU. bf16 and real TMA are checked on the GPU by
benchmarks/fuzzytok_tma_bench.py."""

import os

# Triton decides interpreted vs compiled when a kernel is defined: set this before any import.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from encoders.fuzzytok.kernels import gemm_weight  # noqa: E402
from encoders.fuzzytok.kernels_tma import tma_conv_forward, tma_conv_forward_persistent  # noqa: E402
from encoders.fuzzytok.reference import dilated_causal_conv_ref  # noqa: E402

if torch.cuda.is_available():
    pytest.skip(
        "CPU interpreter tests; the GPU is covered by benchmarks/fuzzytok_tma_bench.py",
        allow_module_level=True,
    )

FORWARDS = {"tile": tma_conv_forward, "persistent": tma_conv_forward_persistent}


@triton.jit
def _load_rows_kernel(x_desc, out_ptr, row0, BT: tl.constexpr, BC: tl.constexpr):
    blk = x_desc.load([1, row0, 0]).reshape(BT, BC)
    r = tl.arange(0, BT)
    c = tl.arange(0, BC)
    tl.store(out_ptr + r[:, None] * BC + c[None, :], blk)


@pytest.mark.parametrize("row0", [-5, -32, 20])
def test_descriptor_out_of_bounds_rows_read_zero(row0: int) -> None:
    """What the kernels rely on: rows before 0 (negative coordinates) and past T read as zeros, and a
    3-D [B, T, C] descriptor never reads another batch row."""
    B, T, C, BT = 3, 40, 32, 32
    x = torch.arange(B * T * C, dtype=torch.float32).reshape(B, T, C) + 1.0
    desc = TensorDescriptor(x, [B, T, C], [T * C, C, 1], [1, BT, C])
    out = torch.full((BT, C), -1.0)
    _load_rows_kernel[(1,)](desc, out, row0, BT=BT, BC=C)
    want = torch.zeros(BT, C)
    lo, hi = max(row0, 0), min(row0 + BT, T)
    if hi > lo:
        want[lo - row0:hi - row0] = x[1, lo:hi]
    assert torch.equal(out, want)


# T = 45: not a multiple of the 32-row tile, so the last tile's store is clipped.
@pytest.mark.parametrize("kind", sorted(FORWARDS))
@pytest.mark.parametrize("C", [32, 64])
@pytest.mark.parametrize("K", [1, 3])
@pytest.mark.parametrize("dilation", [1, 2, 5])
def test_tma_conv_matches_reference(kind: str, C: int, K: int, dilation: int) -> None:
    B, T = 2, 45
    g = torch.Generator().manual_seed(1000 * C + 10 * K + dilation)
    x = torch.randn(B, T, C, generator=g)
    w = torch.randn(C, C, K, generator=g)
    for bias in (None, torch.randn(C, generator=g)):
        y = FORWARDS[kind](x, gemm_weight(w, False, x.dtype), bias, dilation)
        want = dilated_causal_conv_ref(x, w, bias, dilation)
        torch.testing.assert_close(y, want, atol=5e-5, rtol=1e-4)


@pytest.mark.parametrize("kind", sorted(FORWARDS))
@pytest.mark.parametrize(("B", "T", "ci", "co", "K", "dilation"), [
    (2, 3, 32, 32, 3, 5),     # T < (K−1)·d: every tap but the last is entirely before the start
    (2, 10, 32, 64, 3, 5),    # T = (K−1)·d, C_in ≠ C_out
    (3, 33, 64, 32, 4, 11),   # K = 4, T just over a tile, shift > 32 rows
    (1, 1, 32, 32, 3, 1),
])
def test_tma_conv_short_sequences(kind: str, B: int, T: int, ci: int, co: int, K: int, dilation: int) -> None:
    g = torch.Generator().manual_seed(T * 100 + K)
    x = torch.randn(B, T, ci, generator=g)
    w = torch.randn(co, ci, K, generator=g)
    b = torch.randn(co, generator=g)
    y = FORWARDS[kind](x, gemm_weight(w, False, x.dtype), b, dilation)
    torch.testing.assert_close(y, dilated_causal_conv_ref(x, w, b, dilation), atol=5e-5, rtol=1e-4)


def test_tma_conv_rejects_unaligned_channels() -> None:
    x = torch.randn(1, 8, 48)
    with pytest.raises(ValueError, match="multiple"):
        tma_conv_forward(x, torch.randn(3, 48, 32), None, 1)
    with pytest.raises(ValueError, match="multiple"):
        tma_conv_forward_persistent(torch.randn(1, 8, 32), torch.randn(3, 32, 40), None, 1)


def test_tma_conv_empty() -> None:
    y = tma_conv_forward(torch.randn(2, 0, 32), torch.randn(3, 32, 32), None, 1)
    assert y.shape == (2, 0, 32)
