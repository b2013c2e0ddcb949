"""Experimental: the forward dilated causal convolution with TMA tensor descriptors (Hopper).

Same semantics as ``kernels._conv_kernel`` in its plain forward mode (``MODE_PLAIN``, ``DIR = -1``):
x (B, T, CI) channels-last contiguous, w the ``kernels.gemm_weight`` layout (K, CI, CO),

    y[b, t, o] = bias[o] + Σ_k Σ_i w[k, i, o] · x[b, t − (K−1−k)·d, i]      (zero for t − … < 0)

Instead of pointer arithmetic and masks, every operand goes through a host-built
``TensorDescriptor``:
  * x as a 3-D tensor [B, T, CI] with block [1, BLOCK_T, BLOCK_C]. A tap's tile is loaded at
    coordinates [b, t0 − shift, c0]; rows with a negative (or ≥ T) coordinate are out of bounds
    and the TMA unit fills them with zeros, so causal masking costs nothing and a tile never reads
    the previous batch row (the batch is its own coordinate).
  * w as 2-D [K·CI, CO] with block [BLOCK_C, BLOCK_N]; tap k, channel block c0 is row k·CI + c0.
  * y as 3-D [B, T, CO] with block [1, BLOCK_T, BLOCK_N]; rows ≥ T of the last tile are clipped
    by the TMA store.

Two kernels: ``_tma_conv_kernel`` (one program per output tile) and ``_tma_conv_persistent_kernel``
(one program per SM looping over tiles). This is an experiment for the benchmark shapes: CI must
be a multiple of BLOCK_C and CO of BLOCK_N (``ValueError`` otherwise), forward only, bias
epilogue only. Under Triton's interpreter (no GPU) a single small config runs, as in
``kernels.py``; the kernels call no ``@jit`` helper of ``triton.language.standard``.
"""

from __future__ import annotations

import os

import torch

if not torch.cuda.is_available():
    # Triton reads TRITON_INTERPRET when a kernel is defined (see kernels.py).
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"

_NAMES = ("BLOCK_T", "BLOCK_N", "BLOCK_C")


def _configs(entries: list[tuple[int, ...]]) -> list[triton.Config]:
    out = []
    for e in entries:
        *blocks, warps, stages = e
        out.append(triton.Config(dict(zip(_NAMES, blocks)), num_warps=warps, num_stages=stages))
    return out


# (BLOCK_T, BLOCK_N, BLOCK_C, warps, stages). All checked ahead of time for sm_90 with
# benchmarks/fuzzytok_tma_aot.py: TMA loads and wgmma, no spills.
TMA_CONFIG_ENTRIES = [(128, 128, 64, 4, 4), (128, 256, 64, 8, 3), (128, 128, 64, 8, 4), (256, 128, 64, 8, 3)]
PERSISTENT_CONFIG_ENTRIES = [(128, 128, 64, 4, 4), (128, 256, 64, 8, 3), (128, 128, 64, 8, 4)]
_INTERP_ENTRIES = [(32, 32, 32, 1, 1)]

_TMA_CONFIGS = _configs(_INTERP_ENTRIES if INTERPRET else TMA_CONFIG_ENTRIES)
_PERSISTENT_CONFIGS = _configs(_INTERP_ENTRIES if INTERPRET else PERSISTENT_CONFIG_ENTRIES)


def _prune(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
    """Keep configs whose blocks divide the channel counts (the launcher checks the smallest)."""
    ci, co = kwargs["CI"], kwargs["CO"]  # constexpr keywords of the launch, not in named_args
    keep = [c for c in configs if ci % c.kwargs["BLOCK_C"] == 0 and co % c.kwargs["BLOCK_N"] == 0]
    return keep or configs[:1]


def _set_block_shapes(nargs: dict) -> None:
    """Autotune pre-hook: give the host descriptors the block shapes of the config being run."""
    bt, bn, bc = nargs["BLOCK_T"], nargs["BLOCK_N"], nargs["BLOCK_C"]
    nargs["x_desc"].block_shape = [1, bt, bc]
    nargs["w_desc"].block_shape = [bc, bn]
    nargs["y_desc"].block_shape = [1, bt, bn]


for _c in _TMA_CONFIGS + _PERSISTENT_CONFIGS:
    _c.pre_hook = _set_block_shapes


@triton.jit
def _tile(x_desc, w_desc, y_desc, b_ptr, bi, t0, n0, dil, CI: tl.constexpr, K: tl.constexpr,
          HAS_BIAS: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
          BLOCK_C: tl.constexpr):
    """y[bi, t0 : t0+BLOCK_T, n0 : n0+BLOCK_N] from K · CI/BLOCK_C TMA loads and dots."""
    NC: tl.constexpr = CI // BLOCK_C
    acc = tl.full((BLOCK_T, BLOCK_N), 0.0, tl.float32)
    # One flat loop over (tap, channel block) so the pipeline spans all K·NC steps.
    for kc in range(K * NC):
        k = kc // NC
        c0 = (kc % NC) * BLOCK_C
        # Rows t0 − shift … may start before 0: TMA zero-fills out-of-bounds coordinates.
        xt = x_desc.load([bi, t0 - (K - 1 - k) * dil, c0]).reshape(BLOCK_T, BLOCK_C)
        wt = w_desc.load([k * CI + c0, n0])
        acc = tl.dot(xt, wt, acc)
    if HAS_BIAS:
        acc += tl.load(b_ptr + n0 + tl.arange(0, BLOCK_N)).to(tl.float32)[None, :]
    y_desc.store([bi, t0, n0], acc.to(y_desc.dtype).reshape(1, BLOCK_T, BLOCK_N))


@triton.autotune(configs=_TMA_CONFIGS, key=["CI", "CO", "K"],
                 prune_configs_by={"early_config_prune": _prune})
@triton.jit
def _tma_conv_kernel(x_desc, w_desc, y_desc, b_ptr, dil,
                     CI: tl.constexpr, CO: tl.constexpr, K: tl.constexpr, HAS_BIAS: tl.constexpr,
                     BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr):
    """Grid (T tiles, CO tiles, B): one (BLOCK_T × BLOCK_N) output tile per program."""
    _tile(x_desc, w_desc, y_desc, b_ptr, tl.program_id(2), tl.program_id(0) * BLOCK_T,
          tl.program_id(1) * BLOCK_N, dil, CI, K, HAS_BIAS, BLOCK_T, BLOCK_N, BLOCK_C)


@triton.autotune(configs=_PERSISTENT_CONFIGS, key=["CI", "CO", "K"],
                 prune_configs_by={"early_config_prune": _prune})
@triton.jit
def _tma_conv_persistent_kernel(x_desc, w_desc, y_desc, b_ptr, B, T, dil,
                                CI: tl.constexpr, CO: tl.constexpr, K: tl.constexpr,
                                HAS_BIAS: tl.constexpr, BLOCK_T: tl.constexpr,
                                BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr,
                                INTERP: tl.constexpr):
    """Grid ≤ #SMs; program p does tiles p, p + #programs, … Tile order: CO tile fastest, then the
    T tile, then the batch row, so programs running together share x rows (w stays in L2)."""
    NN: tl.constexpr = CO // BLOCK_N
    NC: tl.constexpr = CI // BLOCK_C
    n_t = (T + BLOCK_T - 1) // BLOCK_T
    n_tiles = B * n_t * NN
    start = tl.program_id(0)
    step = tl.num_programs(0)
    if INTERP:
        # Triton 3.6's interpreter cannot range() over run-time bounds (NumPy ≥ 2.4).
        tile = start
        while tile < n_tiles:
            _tile(x_desc, w_desc, y_desc, b_ptr, tile // (n_t * NN), ((tile // NN) % n_t) * BLOCK_T,
                  (tile % NN) * BLOCK_N, dil, CI, K, HAS_BIAS, BLOCK_T, BLOCK_N, BLOCK_C)
            tile += step
    else:
        # Flattened (tile, tap·channel block) loop, as Triton's persistent TMA matmul does, so the
        # loads of the next tile are issued while the current tile's epilogue runs.
        for tile in tl.range(start, n_tiles, step, flatten=True):
            bi = tile // (n_t * NN)
            t0 = ((tile // NN) % n_t) * BLOCK_T
            n0 = (tile % NN) * BLOCK_N
            acc = tl.full((BLOCK_T, BLOCK_N), 0.0, tl.float32)
            for kc in range(K * NC):
                k = kc // NC
                c0 = (kc % NC) * BLOCK_C
                xt = x_desc.load([bi, t0 - (K - 1 - k) * dil, c0]).reshape(BLOCK_T, BLOCK_C)
                wt = w_desc.load([k * CI + c0, n0])
                acc = tl.dot(xt, wt, acc)
            if HAS_BIAS:
                acc += tl.load(b_ptr + n0 + tl.arange(0, BLOCK_N)).to(tl.float32)[None, :]
            y_desc.store([bi, t0, n0], acc.to(y_desc.dtype).reshape(1, BLOCK_T, BLOCK_N))


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 2


def _descriptors(x: torch.Tensor, w_kio: torch.Tensor, y: torch.Tensor) -> tuple:
    B, T, ci = x.shape
    K, _, co = w_kio.shape
    # Placeholder block shapes (the smallest config's); the autotune pre-hook sets the real ones.
    bt, bn, bc = _TMA_CONFIGS[0].kwargs["BLOCK_T"], _TMA_CONFIGS[0].kwargs["BLOCK_N"], _TMA_CONFIGS[0].kwargs["BLOCK_C"]
    x_desc = TensorDescriptor(x, [B, T, ci], [T * ci, ci, 1], [1, bt, bc])
    w_desc = TensorDescriptor(w_kio, [K * ci, co], [co, 1], [bc, bn])
    y_desc = TensorDescriptor(y, [B, T, co], [T * co, co, 1], [1, bt, bn])
    return x_desc, w_desc, y_desc


def _prepare(x: torch.Tensor, w_kio: torch.Tensor, bias: torch.Tensor | None, configs: list) -> tuple:
    if x.dim() != 3 or w_kio.dim() != 3 or x.shape[2] != w_kio.shape[1]:
        raise ValueError(f"tma_conv_forward: x must be (B, T, CI) and w_kio (K, CI, CO); "
                         f"got x {tuple(x.shape)}, w_kio {tuple(w_kio.shape)}")
    if x.device.type != "cuda" and not INTERPRET:
        raise ValueError(f"tma_conv_forward needs a CUDA tensor (got {x.device}) or TRITON_INTERPRET=1")
    K, ci, co = w_kio.shape
    bc = min(c.kwargs["BLOCK_C"] for c in configs)
    bn = min(c.kwargs["BLOCK_N"] for c in configs)
    if ci % bc or co % bn:
        raise ValueError(f"tma_conv_forward: CI ({ci}) must be a multiple of {bc} and CO ({co}) of {bn}")
    if bias is not None and bias.shape != (co,):
        raise ValueError(f"tma_conv_forward: bias must be ({co},), got {tuple(bias.shape)}")
    x = x.contiguous()
    w_kio = w_kio.contiguous().to(x.dtype)
    B, T, _ = x.shape
    y = torch.empty(B, T, co, device=x.device, dtype=x.dtype)
    return x, w_kio, y


def tma_conv_forward(x: torch.Tensor, w_kio: torch.Tensor, bias: torch.Tensor | None,
                     dilation: int) -> torch.Tensor:
    """y (B, T, CO) = causal dilated conv of x (B, T, CI) with w_kio (K, CI, CO) (+ bias (CO,))."""
    x, w_kio, y = _prepare(x, w_kio, bias, _TMA_CONFIGS)
    B, T, ci = x.shape
    K, _, co = w_kio.shape
    if B == 0 or T == 0:
        return y
    x_desc, w_desc, y_desc = _descriptors(x, w_kio, y)

    def grid(meta: dict) -> tuple[int, int, int]:
        return (triton.cdiv(T, meta["BLOCK_T"]), co // meta["BLOCK_N"], B)

    _tma_conv_kernel[grid](x_desc, w_desc, y_desc, bias if bias is not None else y, dilation,
                           CI=ci, CO=co, K=K, HAS_BIAS=bias is not None)
    return y


def tma_conv_forward_persistent(x: torch.Tensor, w_kio: torch.Tensor, bias: torch.Tensor | None,
                                dilation: int) -> torch.Tensor:
    """As ``tma_conv_forward``, with the persistent kernel (one program per SM)."""
    x, w_kio, y = _prepare(x, w_kio, bias, _PERSISTENT_CONFIGS)
    B, T, ci = x.shape
    K, _, co = w_kio.shape
    if B == 0 or T == 0:
        return y
    x_desc, w_desc, y_desc = _descriptors(x, w_kio, y)
    sms = _num_sms(x.device)

    def grid(meta: dict) -> tuple[int]:
        return (min(sms, B * triton.cdiv(T, meta["BLOCK_T"]) * (co // meta["BLOCK_N"])),)

    _tma_conv_persistent_kernel[grid](x_desc, w_desc, y_desc, bias if bias is not None else y, B, T,
                                      dilation, CI=ci, CO=co, K=K, HAS_BIAS=bias is not None,
                                      INTERP=INTERPRET)
    return y
