"""Triton kernels for FuzzyTok's dilated causal convolutions, and the launchers that call them.

Layout: activations are channels-last ``(B, T, C)`` and contiguous, so one tile of rows is a
dense ``(BLOCK_T, BLOCK_C)`` block and each tap of the convolution is one ``tl.dot`` of that block
with a ``(C_in, C_out)`` weight slice (an implicit GEMM). Causal masking in the pointer kernels is
done on row indices in registers: rows before the start (or past the end) are masked loads that
read zeros, and the row index is clamped to 0 first so no pointer is ever formed from a negative
offset; the TMA kernel leaves it to the copy engine's out-of-bounds zero fill.

    y[b, t, o] = bias[o] + Σ_k Σ_i W[o, i, k] · x[b, t − (K−1−k)·d, i]      (zero for t − … < 0)

Kernels:
  * ``_conv_tma_kernel`` — forward (causal taps) or input gradient (anti-causal taps: dx is the
    transposed convolution of dy) on Hopper and newer when the channel counts fit its tiles: a
    persistent grid whose operands arrive by TMA from descriptors over (B, T, C), so a tap's rows
    before 0 or past T are zero-filled by the copy engine and the batch row is its own coordinate.
    One flattened loop over (tile, tap · channel block) keeps the next tile's loads in flight
    during an epilogue. Its kernel time (CUDA-graph replay) was below the pointer kernel's at every
    shape measured on an H200; a launch costs more host time (three descriptors).
  * ``_conv_kernel`` — the same function with pointer arithmetic and masked loads: any shape, any GPU.
    Both end in the same fused epilogue (``MODE``): bias, activation, residual, the activation's
    derivative times an incoming gradient, optionally writing a second output (the activation's
    derivative for the backward, or the layer below's pre-activation gradient with its per-tile
    column sums, i.e. that layer's bias gradient), on 1, 2 or 4 column pieces of the tile.
  * ``_mul_col_sums_kernel`` — g = a · s elementwise with g's per-tile column sums (the top layer
    of a stored block: incoming gradient times the saved activation derivative).
  * ``_conv_dw_kernel`` — weight gradient: per tap, ``dW_k = X_shiftedᵀ · G`` reduced over the
    B·T rows, split over row chunks into fp32 partial sums (deterministic, no atomics); with the
    bias gradient's partial sums from extra programs of the same launch.
  * ``_block_kernel`` — one residual block ``h ← h + act(conv_d(h) + b)`` for all its dilations in
    a single launch. A program owns a window of ``BLOCK_T`` rows and emits its last
    ``BLOCK_T − halo`` of them; the first ``halo`` rows are recomputed by the neighbouring window
    (halo recomputation), so the block's intermediates are never written as (B, T, C) tensors.
    They pass between layers through a per-program scratch tile (``BLOCK_T × C``) because
    Triton cannot shift the rows of a register tile; the grid is persistent (2 programs per SM),
    so the scratch is bounded (34 MB at C = 256 in bf16, about the H200's L2) whatever B·T is.
    Measured slower than one launch per layer on an H200 (BENCHMARKS.md), hence off by default.

Launches go through ``ThinLauncher``: Triton's autotuner and heuristics wrappers once per key
(tuning timed by CUDA-graph replay, ``_tune_bench``), then the compiled kernel's launcher directly.
Shapes whose channel counts are all ≤ ``SMALL_C`` tune over config lists of their own.

Accumulation is fp32 whatever the input dtype (bf16 or fp32; an fp32 ``tl.dot`` uses TF32 on GPU).
Without a GPU the kernels run only in Triton's interpreter (``TRITON_INTERPRET=1``); this module
then enables it before the kernels are defined, and autotuning keeps a single config. The kernels
call no ``@jit`` helper of ``triton.language.standard`` (``tl.zeros``, ``tl.cdiv``, …): those are
built when Triton is first imported — often by torch, before this module could enable the
interpreter — and would then refuse to run inside an interpreted kernel.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from itertools import repeat

import torch

if not torch.cuda.is_available():
    # Triton reads TRITON_INTERPRET when a kernel is *defined*; with no GPU the interpreter is the
    # only way these kernels can run (CPU CI checks them against the reference this way).
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import triton.testing  # noqa: E402
from triton._C.libtriton import native_specialize_impl  # noqa: E402
from triton.backends.compiler import BaseBackend  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
# A tuned key's choice is kept in Triton's on-disk cache (``ThinLauncher``'s ``_stored_choice``:
# keyed by Triton's version, the GPU target, the kernel's source, the tuning key and the configs
# timed), so a process that meets a key another one tuned — the run after the compile-ahead
# process (harness/overlap/compileahead.py), a second run — launches that config instead of compiling
# and timing every config again: FuzzyTok's first training step spent 3.7 s (H200) and 5.0 s
# (H100) on it with the kernels themselves already in Triton's cache (BENCHMARKS.md
# ). The choice is the config timed best over there; numbers may differ from a fresh
# tuning's as they already differ between two fresh tunings. ``TUNE_CACHE = False`` times them in
# every process. (Triton's own ``cache_results`` skips configs with a pre-hook: the
# TMA kernel's.)
TUNE_CACHE = True

# Activation codes (the ACT argument of the kernels).
ACT_NONE, ACT_GELU, ACT_RELU, ACT_SILU = 0, 1, 2, 3
ACTIVATIONS = {"none": ACT_NONE, "gelu": ACT_GELU, "relu": ACT_RELU, "silu": ACT_SILU}

# Epilogue modes of _conv_kernel and _conv_tma_kernel.
MODE_PLAIN = 0  # y = acc + bias
MODE_LAYER = 1  # y = res + act(acc + bias)              (a residual layer's forward)
MODE_ACTGRAD = 2  # y = res · act'(acc + bias)           (res = dy: gradient at the pre-activation)
MODE_ADD = 3  # y = acc + res                            (input gradient of a residual layer)
MODE_LAYER_SAVE = 4  # MODE_LAYER, and also aux = act'(acc + bias) (kept for the backward)
MODE_ADD_ACTGRAD = 5  # MODE_ADD, and also g = y · aux, (aux = the layer below's act'(pre-activation)),
#                       and q = Σ_rows g per column (the layer below's bias-gradient partial sums)

# The same codes as compile-time constants: a @triton.jit function may read a global only if it is
# a tl.constexpr, and comparing against them keeps every branch static (no runtime test).
_MODE_PLAIN = tl.constexpr(MODE_PLAIN)
_MODE_LAYER = tl.constexpr(MODE_LAYER)
_MODE_ACTGRAD = tl.constexpr(MODE_ACTGRAD)
_MODE_ADD = tl.constexpr(MODE_ADD)
_MODE_LAYER_SAVE = tl.constexpr(MODE_LAYER_SAVE)
_MODE_ADD_ACTGRAD = tl.constexpr(MODE_ADD_ACTGRAD)
_ACT_GELU = tl.constexpr(ACT_GELU)
_ACT_RELU = tl.constexpr(ACT_RELU)
_ACT_SILU = tl.constexpr(ACT_SILU)


def _configs(names: tuple[str, ...], entries: list[tuple[int, ...]],
             interpreted: tuple[int, ...] = (32, 32, 32)) -> list[triton.Config]:
    """Autotune configs from (block sizes…, num_warps, num_stages) entries. Under the interpreter a
    single small config instead (``interpreted``: its block sizes; 1 warp, 1 stage): the default
    benchmarker cannot run there, and smaller tiles are faster to emulate."""
    if INTERPRET:
        entries = [(*interpreted, 1, 1)]
    out = []
    for e in entries:
        *blocks, warps, stages = e
        out.append(triton.Config(dict(zip(names, blocks)), num_warps=warps, num_stages=stages))
    return out


def _sized_configs(names: tuple[str, ...], large: list[tuple[int, ...]], small: list[tuple[int, ...]],
                   interpreted: tuple[int, ...] = (32, 32, 32)) -> tuple[list[triton.Config], set[int]]:
    """(all configs, ids of the small-channel ones) for an autotuner whose early prune calls
    ``_by_width``: entries in both lists become two configs, one in each set. Under the
    interpreter one config, in neither set (``_by_width`` keeps it)."""
    if INTERPRET:
        return _configs(names, large, interpreted), set()
    big, little = _configs(names, large), _configs(names, small)
    return big + little, {id(c) for c in little}


def _by_width(configs: list[triton.Config], small_ids: set[int], ci: int, co: int) -> list[triton.Config]:
    """The configs of a shape's size class: the small-channel list when C_in and C_out are both
    ≤ SMALL_C, else the list for wide shapes (all configs when the sets are empty: interpreter)."""
    if not small_ids:
        return configs
    small = max(ci, co) <= SMALL_C
    return [c for c in configs if (id(c) in small_ids) == small]


# Short lists: every config compiles for every key. Shapes whose channel counts are all
# ≤ SMALL_C (32–128) take lists of their own (``_by_width``): narrower tiles and more programs per
# SM, since 64 channels give each output tile a short reduction (K · 64) and few tiles; the
# lists for C ≥ 256 stay as tuned there.
SMALL_C = 128
_FWD_NAMES = ("BLOCK_T", "BLOCK_N", "BLOCK_C")
_FWD_CONFIGS, _FWD_SMALL = _sized_configs(
    _FWD_NAMES,
    large=[(128, 128, 64, 8, 3), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 64, 64, 4, 4),
           (64, 128, 64, 4, 4)],
    small=[(128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (64, 64, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 4, 3)])
_DW_CONFIGS, _DW_SMALL = _sized_configs(
    ("BLOCK_T", "BLOCK_M", "BLOCK_N"),
    large=[(64, 128, 128, 8, 3), (64, 64, 128, 4, 3), (128, 64, 64, 4, 3), (64, 128, 256, 8, 3)],
    small=[(128, 64, 64, 4, 3), (64, 64, 64, 4, 3), (128, 32, 64, 4, 3), (64, 32, 32, 4, 4),
           (64, 128, 128, 8, 3), (64, 64, 128, 4, 3)])
_BLOCK_CONFIGS = _configs(_FWD_NAMES, [(128, 128, 64, 8, 3), (128, 64, 64, 4, 3), (64, 128, 64, 4, 3),
                                       (128, 256, 64, 8, 3)])
# The persistent TMA kernel (Hopper): channel counts must be multiples of a config's BLOCK_C and
# BLOCK_N (pruned per shape; others use _conv_kernel). Each config compiled for sm_90 with TMA
# loads, wgmma and no spills (benchmarks/fuzzytok_aot.py).
# PER_SM: persistent programs per SM. With PER_SM = 2 two small programs (128 × 128 tiles, 4 warps,
# 3 stages: about 100 KB of shared memory each in the epilogue modes) share an SM, so that one's
# epilogue could overlap the other's main loop. On an H200 adding them moved the epilogue launches
# by only 1–6 µs (BENCHMARKS.md, runs 5 and 6); the autotuner keeps them where they win. Small
# channel counts add 64-row and 32-column tiles with up to 4 programs per SM (C = 32 fits only these).
_TMA_CONFIGS, _TMA_SMALL = _sized_configs(
    ("BLOCK_T", "BLOCK_N", "BLOCK_C", "PER_SM"),
    large=[(128, 128, 64, 1, 4, 4), (128, 256, 64, 1, 8, 3), (128, 128, 64, 1, 8, 4), (128, 64, 64, 1, 4, 4),
           (128, 128, 64, 2, 4, 3), (128, 64, 64, 2, 4, 3)],
    small=[(128, 64, 64, 1, 4, 4), (128, 64, 64, 2, 4, 3), (64, 64, 64, 2, 4, 4), (64, 64, 64, 4, 4, 3),
           (256, 64, 64, 1, 8, 3), (128, 128, 64, 1, 4, 4), (128, 128, 64, 2, 4, 3), (128, 32, 32, 2, 4, 4),
           (64, 32, 32, 4, 4, 4)],
    interpreted=(32, 32, 32, 1))
# False forces the pointer kernel everywhere (benchmarks and tests compare the two).
USE_TMA = True
# Per-tile column sums (MODE_ADD_ACTGRAD, _mul_col_sums_kernel) get one row per tile of this height.
_Q_BLOCK_T = min(c.kwargs["BLOCK_T"] for c in _FWD_CONFIGS + _TMA_CONFIGS)
# The dW kernel splits the reduction over row chunks of this many rows (a multiple of every
# BLOCK_T above) so that even C = 64 fills the GPU with programs.
_DW_CHUNK_UNIT = 128


def first_that_runs(tuner: triton.runtime.Autotuner, tkey: tuple, configs: list[triton.Config],
                    launch: object) -> object:
    """Under torch's deterministic algorithms (tokbench's ``budget.deterministic``): the first of
    ``configs`` (a pruned list, in its order of preference) that the device can launch becomes
    ``tuner``'s choice for its key ``tkey``, without timing anything; ``launch()`` (the call as
    the caller makes it, through the autotuner) runs it. Returns what ``launch`` returns.

    Why not the timed winner: it can differ between runs, and tile widths set the order in which
    the channel sum is added up. Why not the first config alone: the lists are ordered for bf16,
    and a float32 call (scoring under ``eval.dtype: float32``) can need more shared memory than
    the device has for it — an H200 refused the first TMA config of a float32 key (262,200 of
    232,448 bytes; BENCHMARKS.md). Whether a config fits is a property of the device
    and the key, not of timing, so the choice is the same in every run. A config the device
    refuses raises before anything runs (Triton checks its resources while loading the binary)."""
    # the errors of a config the device cannot run: the ones the autotuner skips while timing
    from triton.runtime.errors import OutOfResources, PTXASError

    refused: BaseException | None = None
    for cfg in configs:
        tuner.cache[tkey] = cfg  # the autotuner launches its cached choice without timing
        try:
            return launch()  # type: ignore[operator]
        except (OutOfResources, PTXASError) as e:
            refused = e
    tuner.cache.pop(tkey, None)
    assert refused is not None, "first_that_runs: no configs"
    raise refused


def autotuner_key(tuner: triton.runtime.Autotuner, named: dict, consts: dict) -> tuple[tuple, list]:
    """(the autotuner's own key of a call with arguments ``named`` (name -> value, signature
    order) and constexprs ``consts``, as ``Autotuner.run`` forms it; the configs its ``run``
    would time for it: pruned)."""
    every = {**named, **consts}
    tkey = [every[k] for k in tuner.keys if k in every]
    tkey += [str(v.dtype) for k, v in every.items() if k in tuner.arg_names and hasattr(v, "dtype")]
    tuner.nargs = named
    try:
        configs = tuner.prune_configs(consts)
    finally:
        tuner.nargs = None
    return tuple(tkey), configs


def _prune_block_configs(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list:
    """Keep block-kernel configs whose window is at least twice the halo (≤ 50 % recompute)."""
    halo = named_args["HALO"]
    keep = [c for c in configs if c.kwargs["BLOCK_T"] >= 2 * halo]
    return keep or [max(configs, key=lambda c: c.kwargs["BLOCK_T"])]


# GELU without libdevice's erff. With x = |z|/√2, h = erfc(x)/2 = Φ(−|z|) comes from
# Abramowitz & Stegun 7.1.26, erfc(x) ≈ t·(a1 + t·(a2 + t·(a3 + t·(a4 + t·a5)))) · e^(−x²),
# t = 1 / (1 + p·x), |error| ≤ 1.5e-7 for x ≥ 0: below the rounding of the fp32/TF32 and bf16
# arithmetic around it (measured against float64 by benchmarks/fuzzytok_gelu.py, bounded in the tests).
# Then GELU(z) = z·Φ(z) = max(z, 0) − |z|·h and GELU'(z) = Φ(z) + z·φ(z), with Φ(z) = 1 − h or h
# by the sign of z (no cancellation in the left tail) and φ(z) = e^(−x²)/√(2π) from the same
# exponential. Ahead-of-time PTX for sm_90 (benchmarks/fuzzytok_aot.py --act-cost): 15 instructions
# per element for GELU where libdevice's erff took 39; the epilogues are issue-bound.
_AS_P = tl.constexpr(0.3275911 / 1.4142135623730951)  # p / √2: t from |z| directly
_AS_C1 = tl.constexpr(0.254829592 / 2)  # a_i / 2: h rather than erfc
_AS_C2 = tl.constexpr(-0.284496736 / 2)
_AS_C3 = tl.constexpr(1.421413741 / 2)
_AS_C4 = tl.constexpr(-1.453152027 / 2)
_AS_C5 = tl.constexpr(1.061405429 / 2)
_NEG_HALF_LOG2E = tl.constexpr(-0.5 * 1.4426950408889634)  # e^(−z²/2) = 2^(z² · this)
_INV_SQRT_2PI = tl.constexpr(0.3989422804014327)


@triton.jit
def _gelu_tail(z):
    """(h, e) elementwise in fp32: h = Φ(−|z|) (the normal CDF's tail), e = e^(−z²/2)."""
    t = 1.0 / (1.0 + _AS_P * tl.abs(z))
    e = tl.exp2(z * z * _NEG_HALF_LOG2E)
    h = t * (_AS_C1 + t * (_AS_C2 + t * (_AS_C3 + t * (_AS_C4 + t * _AS_C5)))) * e
    return h, e


@triton.jit
def _act_both(z, ACT: tl.constexpr):
    """(act(z), act'(z)) elementwise in fp32, sharing their common work (GELU's tail and
    exponential, SiLU's sigmoid). GELU is exact GELU (torch's approximate='none')."""
    if ACT == _ACT_GELU:  # z · Φ(z) and Φ(z) + z · φ(z)
        h, e = _gelu_tail(z)
        out = tl.maximum(z, 0.0) - tl.abs(z) * h
        grad = tl.where(z >= 0.0, 1.0 - h, h) + z * e * _INV_SQRT_2PI
    elif ACT == _ACT_RELU:
        out = tl.maximum(z, 0.0)
        grad = tl.where(z > 0.0, 1.0, 0.0)
    elif ACT == _ACT_SILU:
        s = 1.0 / (1.0 + tl.exp(-z))
        out = z * s
        grad = s * (1.0 + z * (1.0 - s))
    else:
        out = z
        grad = tl.full(z.shape, 1.0, tl.float32)
    return out, grad


# The compiler drops the unused half of _act_both (pure arithmetic): one place for each formula.
@triton.jit
def _act(z, ACT: tl.constexpr):
    out, _ = _act_both(z, ACT)
    return out


@triton.jit
def _act_grad(z, ACT: tl.constexpr):
    _, grad = _act_both(z, ACT)
    return grad


@triton.jit
def _taps(acc, src, rows, lo, hi, w, cols, CI: tl.constexpr, CO: tl.constexpr, dil,
          K: tl.constexpr, DIR: tl.constexpr, BLOCK_C: tl.constexpr):
    """acc (BT, BN) += Σ_k src[rows + DIR·(K−1−k)·dil, :] @ w[k, :, cols].

    src: base of a contiguous (rows, CI) matrix; rows outside [lo, hi) read as zeros.
    w: contiguous (K, CI, CO) weights.
    """
    cin = tl.arange(0, BLOCK_C)
    NC: tl.constexpr = (CI + BLOCK_C - 1) // BLOCK_C
    # One flat loop over (tap, channel block) so the software pipeline spans all K·NC steps
    # instead of restarting for every tap.
    for kc in range(K * NC):
        k = kc // NC
        ci = (kc % NC) * BLOCK_C + cin
        s = rows + DIR * (K - 1 - k) * dil
        valid = (s >= lo) & (s < hi)
        s = tl.where(valid, s, 0)
        xt = tl.load(src + s[:, None] * CI + ci[None, :],
                     mask=valid[:, None] & (ci[None, :] < CI), other=0.0)
        wt = tl.load(w + k * CI * CO + ci[:, None] * CO + cols[None, :],
                     mask=(ci[:, None] < CI) & (cols[None, :] < CO), other=0.0)
        acc = tl.dot(xt, wt, acc)
    return acc


@triton.jit
def _epilogue(z, rows, cols, T, b, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, CO: tl.constexpr,
              HAS_BIAS: tl.constexpr, MODE: tl.constexpr, ACT: tl.constexpr):
    """Bias, activation, residual and gradient epilogues of one (rows × cols) piece of a tile.
    q_ptr: this tile's row of MODE_ADD_ACTGRAD's column sums."""
    if HAS_BIAS:
        z += tl.load(b_ptr + cols, mask=cols < CO, other=0.0).to(tl.float32)[None, :]
    mask = (rows[:, None] < T) & (cols[None, :] < CO)
    off = b * T * CO + rows[:, None] * CO + cols[None, :]
    if MODE == _MODE_LAYER:
        res = tl.load(r_ptr + off, mask=mask, other=0.0).to(tl.float32)
        z = res + _act(z, ACT)
    elif MODE == _MODE_LAYER_SAVE:
        act, grad = _act_both(z, ACT)
        tl.store(z_ptr + off, grad.to(z_ptr.dtype.element_ty), mask=mask)
        res = tl.load(r_ptr + off, mask=mask, other=0.0).to(tl.float32)
        z = res + act
    elif MODE == _MODE_ACTGRAD:
        res = tl.load(r_ptr + off, mask=mask, other=0.0).to(tl.float32)
        z = res * _act_grad(z, ACT)
    elif MODE == _MODE_ADD or MODE == _MODE_ADD_ACTGRAD:
        res = tl.load(r_ptr + off, mask=mask, other=0.0).to(tl.float32)
        z = z + res
        if MODE == _MODE_ADD_ACTGRAD:
            g = z * tl.load(z_ptr + off, mask=mask, other=0.0).to(tl.float32)
            tl.store(g_ptr + off, g.to(g_ptr.dtype.element_ty), mask=mask)
            # The layer below's bias gradient, Σ_{b,t} g, as one partial sum per tile and column
            # (from g before its rounding to the activations' dtype).
            col_sum = tl.reduce(tl.where(mask, g, 0.0), 0, _add)  # tl.sum is a standard-library @jit
            tl.store(q_ptr + cols, col_sum, mask=cols < CO)
    tl.store(y_ptr + off, z.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _halves(t, R: tl.constexpr, N: tl.constexpr):
    """(R, N) → its left and right (R, N // 2) column halves."""
    return tl.split(tl.permute(tl.reshape(t, (R, 2, N // 2)), (0, 2, 1)))


@triton.jit
def _tile_epilogue(acc, rows, n0, T, b, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, CO: tl.constexpr,
                   HAS_BIAS: tl.constexpr, MODE: tl.constexpr, ACT: tl.constexpr, BLOCK_N: tl.constexpr,
                   SPLIT: tl.constexpr):
    """``_epilogue`` of a (rows × BLOCK_N from column n0) tile, on SPLIT column pieces in turn."""
    if SPLIT == 1:
        _epilogue(acc, rows, n0 + tl.arange(0, BLOCK_N), T, b, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, CO, HAS_BIAS,
                  MODE, ACT)
    else:
        # Column pieces of width BLOCK_N // SPLIT, left to right (SPLIT is 2 or 4).
        R: tl.constexpr = acc.shape[0]
        W: tl.constexpr = BLOCK_N // SPLIT
        c0 = n0 + tl.arange(0, W)
        a, b2 = _halves(acc, R, BLOCK_N)
        if SPLIT == 2:
            _epilogue(a, rows, c0, T, b, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, CO, HAS_BIAS, MODE, ACT)
            _epilogue(b2, rows, c0 + W, T, b, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, CO, HAS_BIAS, MODE, ACT)
        else:
            a0, a1 = _halves(a, R, BLOCK_N // 2)
            _epilogue(a0, rows, c0, T, b, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, CO, HAS_BIAS, MODE, ACT)
            _epilogue(a1, rows, c0 + W, T, b, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, CO, HAS_BIAS, MODE, ACT)
            b0, b1 = _halves(b2, R, BLOCK_N // 2)
            _epilogue(b0, rows, c0 + 2 * W, T, b, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, CO, HAS_BIAS, MODE, ACT)
            _epilogue(b1, rows, c0 + 3 * W, T, b, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, CO, HAS_BIAS, MODE, ACT)


def _split_epilogue(args: dict) -> int:
    # Epilogues that load a residual (and evaluate an activation) hold a second fp32 tile next to
    # the accumulator: at 128 × 256 (and 128 × 128 with 4 warps) that spilled registers (ptxas -v,
    # sm_90, up to 2 KB per thread). Working on quarters of the columns at a time keeps every
    # tile of the configs spill-free; halves were not enough.
    if args["MODE"] == MODE_PLAIN or args["BLOCK_N"] < 32:
        return 1
    return 4 if args["BLOCK_N"] >= 128 else 2


# The autotuner's timer. Triton's default (do_bench) times each config with the host's launch
# cost in the loop: on the lent VM that exceeded the kernels at C ≤ 128 (BENCHMARKS.md), so its
# choice there was noise. Replaying a CUDA graph of _TUNE_REPS launches times the kernel alone.
# Launches that cannot be captured fall back to Triton's timer.
TUNE_GRAPH = True
_TUNE_REPS = 10


def _tune_bench(fn, quantiles: tuple[float, ...] | None = None):  # noqa: ANN001, ANN201
    """Milliseconds of one ``fn()`` (a config's launch) as the autotuner wants them: [median, low,
    high] over 5 replays of a graph of _TUNE_REPS launches (quantiles given), or the median."""
    if not TUNE_GRAPH:
        return triton.testing.do_bench(fn, quantiles=quantiles)
    fn()  # compiles: a config that cannot compile raises here, and the autotuner skips it
    torch.cuda.synchronize()
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # thread_local: the default ("global") makes CUDA refuse unsafe calls from *every* thread
        # while this thread captures, and a first launch can tune while the scoring or training
        # prefetch thread pins the next batch (pin_memory: "operation not permitted when stream
        # is capturing", seen on an H200 in benchmarks/score_dtype_check.py).
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            for _ in range(_TUNE_REPS):
                fn()
        graph.replay()
        times = []
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / _TUNE_REPS)
        del graph
    except Exception:  # noqa: BLE001 - not capturable here: Triton's own timer
        torch.cuda.synchronize()
        return triton.testing.do_bench(fn, quantiles=quantiles)
    times.sort()
    return [times[2], times[0], times[-1]] if quantiles else times[2]


def _prune_fwd(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
    """The shape's size class (``_by_width``), without pointer-kernel tiles far wider than the
    output channels: at C_out ≤ 128 the 256-column tiles only compute padding, and with an
    activation epilogue they spilled registers (benchmarks/fuzzytok_aot.py)."""
    ci, co = int(kwargs["CI"]), int(kwargs["CO"])
    configs = _by_width(configs, _FWD_SMALL, ci, co)
    width = max(64, triton.next_power_of_2(co))
    return [c for c in configs if c.kwargs["BLOCK_N"] <= width] or configs[:1]


# reset_to_zero: a tuning trial with one tile height leaves column sums in rows that a taller
# tile (the chosen config) never writes; each trial and the real launch start from zeros.
@triton.autotune(configs=_FWD_CONFIGS, key=["CI", "CO", "K", "MODE", "DIR"],
                 prune_configs_by={"early_config_prune": _prune_fwd}, reset_to_zero=["q_ptr"], do_bench=_tune_bench)
@triton.heuristics({"SPLIT": _split_epilogue})
@triton.jit(do_not_specialize=["dil", "Q_ROWS"])
def _conv_kernel(x_ptr, w_ptr, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, T, dil, Q_ROWS,
                 CI: tl.constexpr, CO: tl.constexpr, K: tl.constexpr, DIR: tl.constexpr, HAS_BIAS: tl.constexpr, MODE: tl.constexpr,
                 ACT: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_C: tl.constexpr, SPLIT: tl.constexpr):
    """One (BLOCK_T rows × BLOCK_N output channels) tile of y (B, T, CO) from x (B, T, CI).

    DIR = −1: causal taps (forward); DIR = +1: anti-causal taps (input gradient, with w holding
    the transposed weight). Epilogue by MODE (see the MODE_* constants), applied to SPLIT column
    pieces of the tile one after another. q_ptr: (B · Q_ROWS, CO) column sums, one row per tile
    (MODE_ADD_ACTGRAD).
    """
    pid_t = tl.program_id(0)
    pid_n = tl.program_id(1)
    b = tl.program_id(2).to(tl.int64)
    rows = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.full((BLOCK_T, BLOCK_N), 0.0, tl.float32)
    acc = _taps(acc, x_ptr + b * T * CI, rows, 0, T, w_ptr, cols, CI, CO, dil, K, DIR, BLOCK_C)
    q_row = q_ptr + (b * Q_ROWS + pid_t) * CO
    _tile_epilogue(acc, rows, pid_n * BLOCK_N, T, b, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_row, CO, HAS_BIAS, MODE,
                   ACT, BLOCK_N, SPLIT)


def _prune_tma(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
    """Keep the shape's size class (``_by_width``) of TMA configs whose blocks divide the channel
    counts (``tma_fits`` checked that one exists)."""
    ci, co = int(kwargs["CI"]), int(kwargs["CO"])
    return [c for c in _by_width(configs, _TMA_SMALL, ci, co)
            if ci % c.kwargs["BLOCK_C"] == 0 and co % c.kwargs["BLOCK_N"] == 0]


def _prune_dw(configs: list[triton.Config], named_args: dict, **kwargs: object) -> list[triton.Config]:
    """The shape's size class (``_by_width``), without tiles more than twice as wide as the
    channels they cover (at C = 64 a 128-column tile is half padding)."""
    ci, co = int(kwargs["CI"]), int(kwargs["CO"])
    configs = _by_width(configs, _DW_SMALL, ci, co)
    mi, ni = max(32, triton.next_power_of_2(ci)), max(32, triton.next_power_of_2(co))
    return [c for c in configs if c.kwargs["BLOCK_M"] <= mi and c.kwargs["BLOCK_N"] <= ni] or configs[:1]


def _set_block_shapes(nargs: dict) -> None:
    """Autotune pre-hook (every launch): the descriptors' block shapes are the config's tiles."""
    bt, bn, bc = nargs["BLOCK_T"], nargs["BLOCK_N"], nargs["BLOCK_C"]
    nargs["x_desc"].block_shape = [1, bt, bc]
    nargs["w_desc"].block_shape = [bc, bn]
    nargs["y_desc"].block_shape = [1, bt, bn]


for _c in _TMA_CONFIGS:
    _c.pre_hook = _set_block_shapes


@triton.jit
def _tma_tile(tile, x_desc, w_desc, y_desc, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, T, n_t, dil, Q_ROWS,
              CI: tl.constexpr, CO: tl.constexpr, K: tl.constexpr, DIR: tl.constexpr, HAS_BIAS: tl.constexpr,
              MODE: tl.constexpr, ACT: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
              BLOCK_C: tl.constexpr, SPLIT: tl.constexpr):
    """Output tile number ``tile`` (CO tile fastest, then T tile, then batch row) of the TMA kernel."""
    NN: tl.constexpr = CO // BLOCK_N
    NC: tl.constexpr = CI // BLOCK_C
    bi = tile // (n_t * NN)
    t0 = ((tile // NN) % n_t) * BLOCK_T
    n0 = (tile % NN) * BLOCK_N
    acc = tl.full((BLOCK_T, BLOCK_N), 0.0, tl.float32)
    for kc in range(K * NC):
        k = kc // NC
        c0 = (kc % NC) * BLOCK_C
        # The tap's rows may start before 0 or end past T: the TMA unit reads those as zeros,
        # and the batch row is its own coordinate, so no tile reads a neighbouring sequence.
        xt = x_desc.load([bi, t0 + DIR * (K - 1 - k) * dil, c0]).reshape(BLOCK_T, BLOCK_C)
        wt = w_desc.load([k * CI + c0, n0])
        acc = tl.dot(xt, wt, acc)
    if MODE == _MODE_PLAIN:
        if HAS_BIAS:
            acc += tl.load(b_ptr + n0 + tl.arange(0, BLOCK_N)).to(tl.float32)[None, :]
        y_desc.store([bi, t0, n0], acc.to(y_desc.dtype).reshape(1, BLOCK_T, BLOCK_N))  # clips rows ≥ T
    else:
        q_row = q_ptr + (bi.to(tl.int64) * Q_ROWS + t0 // BLOCK_T) * CO
        _tile_epilogue(acc, t0 + tl.arange(0, BLOCK_T), n0, T, bi.to(tl.int64), b_ptr, r_ptr, y_ptr, z_ptr,
                       g_ptr, q_row, CO, HAS_BIAS, MODE, ACT, BLOCK_N, SPLIT)


@triton.autotune(configs=_TMA_CONFIGS, key=["CI", "CO", "K", "MODE", "DIR"],
                 prune_configs_by={"early_config_prune": _prune_tma}, reset_to_zero=["q_ptr"], do_bench=_tune_bench)
@triton.heuristics({"SPLIT": _split_epilogue})
@triton.jit(do_not_specialize=["B", "dil", "Q_ROWS"])
def _conv_tma_kernel(x_desc, w_desc, y_desc, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, B, T, dil, Q_ROWS,
                     CI: tl.constexpr, CO: tl.constexpr, K: tl.constexpr, DIR: tl.constexpr,
                     HAS_BIAS: tl.constexpr, MODE: tl.constexpr, ACT: tl.constexpr,
                     BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr,
                     PER_SM: tl.constexpr, SPLIT: tl.constexpr, INTERP: tl.constexpr):
    """``_conv_kernel``'s function (every DIR and MODE) with TMA descriptors, persistent grid.

    x_desc: x (B, T, CI) in blocks [1, BLOCK_T, BLOCK_C]; w_desc: w (K·CI, CO) in [BLOCK_C, BLOCK_N];
    y_desc: y (B, T, CO) in [1, BLOCK_T, BLOCK_N] (MODE_PLAIN stores through it; the other modes
    through y_ptr with the shared epilogue). Program p does tiles p, p + #programs, …
    """
    n_t = (T + BLOCK_T - 1) // BLOCK_T
    n_tiles = B * n_t * (CO // BLOCK_N)
    if INTERP:
        # Triton 3.6's interpreter cannot range() over run-time bounds (NumPy ≥ 2.4).
        tile = tl.program_id(0)
        while tile < n_tiles:
            _tma_tile(tile, x_desc, w_desc, y_desc, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, T, n_t, dil, Q_ROWS, CI, CO, K,
                      DIR, HAS_BIAS, MODE, ACT, BLOCK_T, BLOCK_N, BLOCK_C, SPLIT)
            tile += tl.num_programs(0)
    else:
        # One flattened (tile, tap · channel block) loop, so the next tile's loads are in flight
        # while this tile's epilogue runs (what Triton's persistent matmul does).
        for tile in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), flatten=True):
            _tma_tile(tile, x_desc, w_desc, y_desc, b_ptr, r_ptr, y_ptr, z_ptr, g_ptr, q_ptr, T, n_t, dil, Q_ROWS, CI, CO, K,
                      DIR, HAS_BIAS, MODE, ACT, BLOCK_T, BLOCK_N, BLOCK_C, SPLIT)


@triton.autotune(configs=_DW_CONFIGS, key=["CI", "CO", "K", "HAS_DB"],
                 prune_configs_by={"early_config_prune": _prune_dw}, do_bench=_tune_bench)
# Run-time integers that only enter address arithmetic are not specialised (Triton would compile
# separate variants for 1 and for multiples of 16).
@triton.jit(do_not_specialize=["dil", "n_chunks"])
def _conv_dw_kernel(x_ptr, g_ptr, p_ptr, q_ptr, T, dil, n_chunks,
                    CI: tl.constexpr, CO: tl.constexpr, K: tl.constexpr, CHUNK: tl.constexpr,
                    HAS_DB: tl.constexpr, DB_ROWS: tl.constexpr, BLOCK_T: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Partial weight gradient p[s, k, i, o] = Σ_{t in chunk s} x[b, t − (K−1−k)·dil, i] · g[b, t, o].

    Program axis 2 enumerates (chunk s, tap k); chunk s covers rows [c·CHUNK, (c+1)·CHUNK) of
    batch row b = s // n_chunks. Summing p over s gives dW in (K, CI, CO) layout. With HAS_DB the
    grid has one more program column on axis 0, whose programs write the bias gradient's partial
    sums q[s·K + k, o] (Σ over every K-th block of chunk s's rows of g[b, t, o]) instead; a
    separate column sum over g in ATen cost as much as this whole kernel at C = 256.
    Loop bounds are compile-time constants (channel counts and CHUNK are constexpr): Triton 3.6's
    interpreter cannot loop over run-time scalars with NumPy ≥ 2.4.
    """
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_s = tl.program_id(2)
    k = pid_s % K
    s = pid_s // K
    b = (s // n_chunks).to(tl.int64)
    c = s % n_chunks
    co = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    t_start = c * CHUNK
    g_base = g_ptr + b * T * CO
    NM: tl.constexpr = (CI + BLOCK_M - 1) // BLOCK_M
    if pid_m == NM:  # the bias-gradient column (only launched with HAS_DB)
        # Its K programs of a chunk take every K-th block of DB_ROWS rows: short serial chains of
        # wide loads (one program per chunk took as long as the whole dW, measured on an H200).
        db = tl.full((BLOCK_N,), 0.0, tl.float32)
        for j in range(CHUNK // DB_ROWS):
            if j % K == k:
                t = t_start + j * DB_ROWS + tl.arange(0, DB_ROWS)
                gt = tl.load(g_base + t[:, None] * CO + co[None, :],
                             mask=(t < T)[:, None] & (co[None, :] < CO), other=0.0)
                db += tl.reduce(gt.to(tl.float32), 0, _add)  # tl.sum is a standard-library @jit
        tl.store(q_ptr + pid_s.to(tl.int64) * CO + co, db, mask=co < CO)
    else:
        ci = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        shift = (K - 1 - k) * dil
        x_base = x_ptr + b * T * CI
        acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
        for j in range(CHUNK // BLOCK_T):
            t = t_start + j * BLOCK_T + tl.arange(0, BLOCK_T)
            in_chunk = t < T
            src = t - shift
            valid = in_chunk & (src >= 0)
            src = tl.where(valid, src, 0)
            xt = tl.load(x_base + src[None, :] * CI + ci[:, None],
                         mask=valid[None, :] & (ci[:, None] < CI), other=0.0)  # (BLOCK_M, BLOCK_T)
            gt = tl.load(g_base + t[:, None] * CO + co[None, :],
                         mask=in_chunk[:, None] & (co[None, :] < CO), other=0.0)  # (BLOCK_T, BLOCK_N)
            acc = tl.dot(xt, gt, acc)
        off = (s * K + k).to(tl.int64) * CI * CO + ci[:, None] * CO + co[None, :]
        tl.store(p_ptr + off, acc, mask=(ci[:, None] < CI) & (co[None, :] < CO))


@triton.autotune(configs=_BLOCK_CONFIGS, key=["C", "K", "HALO"],
                 prune_configs_by={"early_config_prune": _prune_block_configs})
@triton.jit
def _block_kernel(x_ptr, w_ptr, b_ptr, d_ptr, y_ptr, s_ptr, B, T, HALO,
                  C: tl.constexpr, L: tl.constexpr, K: tl.constexpr, ACT: tl.constexpr, HAS_BIAS: tl.constexpr,
                  BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_C: tl.constexpr):
    """A residual block of L layers h ← h + act(conv_{d_l}(h) + b_l), one launch, persistent grid.

    x, y: (B, T, C); w: (L, K, C, C) as (layer, tap, in, out); b: (L, C); d: (L,) int32
    dilations; s: scratch, 2 tiles of (BLOCK_T, C) per program. HALO = (K−1)·Σ_{l≥1} d_l rows at
    the start of each window are recomputed (only layer 0 reads x directly with its own shifts).
    """
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    useful = BLOCK_T - HALO
    n_t = (T + useful - 1) // useful
    n_tiles = B * n_t
    i = tl.arange(0, BLOCK_T)
    buf_a = s_ptr + pid.to(tl.int64) * 2 * BLOCK_T * C
    buf_b = buf_a + BLOCK_T * C
    tile = pid
    while tile < n_tiles:  # a while loop: Triton 3.6's interpreter can't range() run-time bounds
        bi = (tile // n_t).to(tl.int64)
        r = (tile % n_t) * useful - HALO + i  # global row of each window row
        x_base = x_ptr + bi * T * C
        for layer in tl.static_range(L):
            dil = tl.load(d_ptr + layer)
            w_l = w_ptr + layer * K * C * C
            if layer == 0:
                src = x_base
                src_rows = r
                hi = T
            elif layer % 2 == 1:
                src = buf_a
                src_rows = i
                hi = BLOCK_T
            else:
                src = buf_b
                src_rows = i
                hi = BLOCK_T
            for n0 in range(0, C, BLOCK_N):
                cols = n0 + tl.arange(0, BLOCK_N)
                cmask = cols < C
                acc = tl.full((BLOCK_T, BLOCK_N), 0.0, tl.float32)
                acc = _taps(acc, src, src_rows, 0, hi, w_l, cols, C, C, dil, K, -1, BLOCK_C)
                if HAS_BIAS:
                    acc += tl.load(b_ptr + layer * C + cols, mask=cmask, other=0.0).to(tl.float32)[None, :]
                row_ok = (src_rows >= 0) & (src_rows < hi)
                res = tl.load(src + tl.where(row_ok, src_rows, 0)[:, None] * C + cols[None, :],
                              mask=row_ok[:, None] & cmask[None, :], other=0.0).to(tl.float32)
                h = res + _act(acc, ACT)
                if layer == L - 1:
                    keep = (i >= HALO) & (r < T)
                    tl.store(y_ptr + bi * T * C + tl.where(keep, r, 0)[:, None] * C + cols[None, :],
                             h.to(y_ptr.dtype.element_ty), mask=keep[:, None] & cmask[None, :])
                else:
                    # Rows before the sequence start must read as zeros in the next layer's taps.
                    h = tl.where((r >= 0)[:, None], h, 0.0)
                    if layer % 2 == 0:
                        dst = buf_a
                    else:
                        dst = buf_b
                    tl.store(dst + i[:, None] * C + cols[None, :], h.to(dst.dtype.element_ty),
                             mask=cmask[None, :])
            # The next layer reads rows other threads of this program wrote.
            tl.debug_barrier()
        tile += nprog


# ------------------------------------------------------------------------------------------------
# Thin launches. ``kernel[grid](...)`` through ``@autotune`` and ``@heuristics`` rebuilds argument
# dicts, the tuning key and the heuristics' inputs, runs the config's pre-hook and then the JIT's
# own binding and cache lookup on every call: tens of µs of Python per launch, more than a
# C = 64 kernel runs. A ``ThinLauncher`` goes through those wrappers once per key and keeps what
# they chose (config, heuristics' values and, on a GPU, the compiled kernel); later calls launch
# that compiled kernel directly.

# False sends every launch through the wrappers (tests and benchmarks compare).
THIN = True
# False: a thin launch calls the compiled kernel's Python launcher (``CompiledKernel.run``)
# instead of the C function beneath it (benchmarks compare).
RAW_LAUNCH = True
# FUZZYTOK_PARALLEL_COMPILE=N compiles a new key's pruned configs in N threads before the
# autotuner times them (Triton's ``AsyncCompileMode``; the autotuner then finds them compiled).
# Default: min(8, usable CPUs); 0 or 1 turns it off. Why: a cold FuzzyTok first step on an H200
# was 24.7 s, ~23 s of it compiling 23 kernels one by one, and Triton's compiler releases the GIL.
# Measured on an H200 (BENCHMARKS.md; benchmarks/fuzzytok_cold.py --cases
# cold,threads): the standard front end's cold first step 23.3 -> 9.7 s with 8 threads, the same
# 23 kernels compiled and the same loss to the last digit (the autotuner times the same configs);
# in the standard suite's run FuzzyTok's first step went 30.3 -> 19.1 s. Any error in it is
# skipped, and the autotuner compiles what is missing as before.
def _parallel_compile_threads() -> int:
    """FUZZYTOK_PARALLEL_COMPILE, else min(8, the CPUs this process may run on)."""
    raw = os.environ.get("FUZZYTOK_PARALLEL_COMPILE", "").strip()
    if raw:
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"FUZZYTOK_PARALLEL_COMPILE={raw!r} is not a whole number "
                             "(compile threads; 0 turns them off)") from None
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return min(8, cpus)


PARALLEL_COMPILE = _parallel_compile_threads()


def _spec_backend(jit: object, device: int) -> object:
    """The backend whose argument specialisation Triton's JIT uses on ``device``."""
    caches = getattr(jit, "device_caches", None)
    if caches is not None and device in caches:
        return caches[device][3]  # (kernel cache, key cache, target, backend, binder)
    return BaseBackend


class ThinLauncher:
    """Launches one ``@triton.autotune``(``@triton.heuristics``)``@triton.jit`` kernel past its
    wrappers once a key has been through them.

    Key: the caller's constexprs (every value the autotuner keys on, and every other constexpr),
    the current device, and Triton's own specialisation of each run-time argument that is no
    descriptor (``native_specialize_impl``: dtype, 16-byte alignment of pointers, integers that are
    1 or multiples of 16, 32 or 64 bits): everything the chosen config and the compiled binary
    depend on. Descriptors are built from the entry's tiles (their dtype follows from the
    constexprs' caller key, ``static``). A new key goes through the autotuner (which tunes it if its
    own, coarser key is new) and is recorded. Under the interpreter the recorded config and
    heuristics' values are passed to the bare ``@jit`` function (no binary to call).
    """

    def __init__(self, tuner: triton.runtime.Autotuner, first_spec_arg: int = 0) -> None:
        inner = tuner.fn
        self.tuner = tuner
        self.heuristics = inner.values if isinstance(inner, triton.runtime.Heuristics) else {}
        self.jit = inner.fn if isinstance(inner, triton.runtime.Heuristics) else inner
        self.arg_names: list[str] = list(self.jit.arg_names)
        # Specialise? and specialise on alignment? of the run-time arguments from first_spec_arg
        # on, as the @jit declares them, as two lists that ``key`` maps over (empty under the
        # interpreter, whose function has no params: every flag is then True).
        params = getattr(self.jit, "params", [])[first_spec_arg:]
        runtime = [p for p in params if not p.is_constexpr]
        self.specialize = [not p.do_not_specialize for p in runtime]
        self.align = [not p.do_not_specialize_on_alignment for p in runtime]
        # key -> (meta, constexpr tail, launch, function handle, packed metadata, compiled kernel,
        # ``RawLaunch`` or None)
        self.entries: dict[tuple, tuple] = {}
        self.tuned_calls = 0  # calls that went through the wrappers (tests and benchmarks read them)
        self.direct_calls = 0
        self.tune_seconds = 0.0  # wall time of those calls: compiling configs and timing them

    def clear(self) -> None:
        """Forget every entry and the autotuner's choices (the next call of each key re-tunes)."""
        self.entries.clear()
        self.tuner.cache.clear()

    def __call__(self, grid, make_args, spec_args: tuple, consts: dict, static: tuple = ()) -> None:  # noqa: ANN001
        """Launch with run-time arguments ``make_args(meta)`` (signature order; ``meta`` is None on a
        tuned call, else the recorded config's constexprs), grid ``grid(meta)``, constexprs
        ``consts``. ``spec_args``: the run-time arguments other than descriptors."""
        if not THIN:
            self._tune(None, grid, make_args, consts)
            return
        device = -1 if INTERPRET else torch.cuda.current_device()
        key = self.key(device, spec_args, consts, static)
        entry = self.entries.get(key)
        if entry is None:
            self._tune(key, grid, make_args, consts)
            # The JIT's backend for this device exists now: record under the key it gives (the
            # lookup before the first launch on a device used Triton's base rules).
            final = self.key(device, spec_args, consts, static)
            if final != key and key in self.entries:
                self.entries[final] = self.entries.pop(key)
            return
        self.direct_calls += 1
        meta, tail, run, function, packed = entry[:5]
        args = make_args(meta)
        g = grid(meta)
        if run is None:  # interpreter
            self.jit[g](*args, **dict(zip(self.arg_names[len(args):], tail)))
            return
        stream = _get_stream(device)
        hooks = triton.knobs.runtime
        enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
        if _hooked(enter) or _hooked(leave):  # a profiler listens: what JITFunction.run passes it
            md = entry[5].launch_metadata(g, stream, *args, *tail)
        else:  # Triton's launcher skips None hooks (its own run calls two empty hook chains)
            raw = entry[6]
            if raw is not None and RAW_LAUNCH:
                raw(g, stream, function, packed, args, tail)
                return
            enter = leave = md = None
        run(g[0], g[1] if len(g) > 1 else 1, g[2] if len(g) > 2 else 1, stream, function, packed, md, enter, leave,
            *args, *tail)

    def key(self, device: int, spec_args: tuple, consts: dict, static: tuple = ()) -> tuple:
        """The entry key of a call (see the class docstring)."""
        backend = _spec_backend(self.jit, device)
        n = len(spec_args)
        sps, als = (self.specialize, self.align) if self.specialize else (repeat(True, n), repeat(True, n))
        # Triton's C function mapped over the arguments: no Python frame per argument (a generator
        # calling a wrapper took 12 of the key's 19 ms under cProfile, BENCHMARKS.md)
        spec = tuple(map(native_specialize_impl, repeat(backend, n), spec_args, repeat(False, n), sps, als))
        return (device, static, tuple(consts.items()), spec)

    def _precompile(self, grid, make_args, consts: dict, threads: int,  # noqa: ANN001
                    tuning: tuple[tuple, list] | None = None) -> int:
        """Compile every config the autotuner would time for this call in ``threads`` threads,
        each with the arguments a direct launch of it takes (``make_args(meta)``: for the TMA
        kernel the descriptors with that config's tiles, as its pre-hook sets them). ``tuning``:
        this call's ``_tuning`` if the caller has it. Returns how many were submitted (0 under
        the interpreter, or when there is nothing to gain)."""
        if INTERPRET or threads < 2:
            return 0
        from concurrent.futures import ThreadPoolExecutor

        from triton.runtime._async_compile import AsyncCompileMode

        tkey, configs = tuning or self._tuning(make_args, consts)
        if tkey in self.tuner.cache or len(configs) < 2:
            return 0  # tuned already: the autotuner compiles only its choice
        with ThreadPoolExecutor(threads) as pool, AsyncCompileMode(pool, ignore_errors=True):
            for cfg in configs:
                meta = {**consts, **cfg.kwargs}
                args = make_args(meta)
                named = dict(zip(self.arg_names, args))
                heur = {n: fn({**named, **consts, **cfg.all_kwargs()}) for n, fn in self.heuristics.items()}
                self.jit.warmup(*args, grid=grid(meta), **consts, **cfg.all_kwargs(), **heur)
        return len(configs)

    def _tuning(self, make_args, consts: dict) -> tuple[tuple, list]:  # noqa: ANN001
        """(the autotuner's own key of this call; the configs its ``run`` would time: pruned)."""
        return autotuner_key(self.tuner, dict(zip(self.arg_names, make_args(None))), consts)

    def _choice_file(self, tkey: tuple, configs: list) -> tuple[object, str]:
        """(Triton's cache manager, file name) of the stored choice among ``configs`` for ``tkey``."""
        from triton.compiler.compiler import make_backend
        from triton.runtime.cache import get_cache_manager, triton_key
        from triton.runtime.driver import driver

        parts = [triton_key(), make_backend(driver.active.get_current_target()).hash(), self.jit.cache_key,
                 str(tkey), *map(str, configs)]
        digest = hashlib.sha256("-".join(parts).encode()).hexdigest()
        return get_cache_manager(digest), f"{self.jit.__name__[:100]}.tokbench-choice.json"

    def _stored_choice(self, tkey: tuple, configs: list) -> triton.Config | None:
        """The config stored for ``tkey`` among ``configs`` (``TUNE_CACHE``), or None."""
        cache, name = self._choice_file(tkey, configs)
        path = cache.get_file(name)
        if path is None:
            return None
        try:
            with open(path, encoding="utf-8") as f:
                chosen = json.load(f)["config"]
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable: tuned again, and stored again
        return next((c for c in configs if str(c) == chosen), None)

    def _store_choice(self, tkey: tuple, configs: list, chosen: triton.Config) -> None:
        cache, name = self._choice_file(tkey, configs)
        cache.put(json.dumps({"key": [str(k) for k in tkey], "config": str(chosen)}), name, binary=False)

    def _tune(self, key: tuple | None, grid, make_args, consts: dict) -> None:  # noqa: ANN001
        t0 = time.perf_counter()
        try:
            self._tune_key(key, grid, make_args, consts)
        finally:
            self.tune_seconds += time.perf_counter() - t0

    def _tune_key(self, key: tuple | None, grid, make_args, consts: dict) -> None:  # noqa: ANN001
        store = tuning = None
        deterministic = torch.are_deterministic_algorithms_enabled()
        if deterministic:
            tuning = self._tuning(make_args, consts)  # the first config the device runs: ``first_that_runs``
        elif not INTERPRET and (TUNE_CACHE or PARALLEL_COMPILE >= 2):
            try:
                tuning = self._tuning(make_args, consts)  # once, for the stored choice and the precompile
            except Exception:  # noqa: BLE001 - an optimisation only: the autotuner tunes as before
                tuning = None
        if TUNE_CACHE and tuning is not None and not deterministic:  # a stored choice was timed
            tkey, configs = tuning
            try:
                if tkey not in self.tuner.cache and len(configs) > 1:
                    chosen = self._stored_choice(tkey, configs)
                    if chosen is not None:
                        self.tuner.cache[tkey] = chosen  # the autotuner launches it without timing
                    else:
                        store = tuning
            except Exception:  # noqa: BLE001 - an optimisation only: the autotuner tunes as before
                store = None
        if PARALLEL_COMPILE >= 2 and not deterministic:  # only the configs tried get compiled
            try:
                self._precompile(grid, make_args, consts, PARALLEL_COMPILE, tuning)
            except Exception:  # noqa: BLE001 - an optimisation only: the autotuner compiles as before
                pass
        args = make_args(None)
        if deterministic and tuning is not None and tuning[0] not in self.tuner.cache:
            compiled = first_that_runs(self.tuner, *tuning, lambda: self.tuner[grid](*args, **consts))
        else:
            compiled = self.tuner[grid](*args, **consts)
        self.tuned_calls += 1
        if store is not None and store[0] in self.tuner.cache:
            try:
                self._store_choice(*store, self.tuner.cache[store[0]])
            except Exception:  # noqa: BLE001 - a cache that cannot be written: the next process tunes
                pass
        if key is None:  # THIN off: nothing to record
            return
        cfg = self.tuner.best_config
        named = dict(zip(self.arg_names, args))
        meta = {**consts, **cfg.kwargs}
        for name, fn in self.heuristics.items():  # as Heuristics.run evaluates them
            meta[name] = fn({**named, **consts, **cfg.all_kwargs()})
        tail = tuple(meta[n] for n in self.arg_names[len(args):])
        if INTERPRET:
            self.entries[key] = (meta, tail, None, None, None, None, None)
        elif isinstance(compiled, triton.compiler.CompiledKernel):
            self.entries[key] = (meta, tail, compiled.run, compiled.function, compiled.packed_metadata, compiled,
                                 RawLaunch.of(compiled.run))


class RawLaunch:
    """The C launch function beneath a compiled kernel's Python launcher (Triton 3.6's
    ``CudaLauncher``), called with the arguments that launcher would pass it.

    Why: per launch, ``CudaLauncher.__call__`` defines and calls a scratch allocator, and for a
    kernel with tensor descriptors a Python wrapper walks every argument and encodes each
    descriptor as a CUDA tensor map (``make_tensordesc_arg``): that wrapper took 45 of the 162 µs a
    ``launch_conv`` call took under cProfile (``gpu_s15/call1_fuzzytok_host.log``). Here the arguments are laid out directly, and
    each encoded tensor map is kept, keyed by everything it encodes (address, shape, strides,
    padding; the element type, swizzle and tile come from the kernel's metadata, fixed per
    instance), so a later launch on the same memory reuses it. The map is a pure function of that
    key: memory freed and reused at the same address with the same layout gets the same map.

    ``of`` returns None for a launcher of any other shape (global or profile scratch, descriptors
    without metadata, another Triton); launches then go through ``CompiledKernel.run`` as before.
    """

    MAX_MAPS = 1024  # encoded tensor maps kept per kernel (each a few hundred bytes)

    def __init__(self, launch: object, cooperative: bool, pdl: bool, desc_meta: dict[int, dict],
                 expand: object) -> None:
        self.launch = launch
        self.cooperative = cooperative
        self.pdl = pdl
        self.desc_meta = desc_meta  # argument index -> the kernel's metadata of that descriptor
        self.expand = expand  # Triton's make_tensordesc_arg
        self.maps: dict[tuple, list] = {}

    @classmethod
    def of(cls, launcher: object) -> RawLaunch | None:
        """The raw launch of ``launcher`` (a ``CompiledKernel.run``), or None (see the class)."""
        try:
            from triton.backends.nvidia import driver as nv

            if not isinstance(launcher, nv.CudaLauncher):
                return None
            if launcher.global_scratch_size or launcher.profile_scratch_size or nv._BASE_ARGS_FORMAT != "iiiKKppOOOOOO":
                return None
            launch, desc_meta = launcher.launch, {}
            if getattr(launch, "__qualname__", "") == "wrap_handle_tensordesc.<locals>.inner":
                free = dict(zip(launch.__code__.co_freevars, (c.cell_contents for c in launch.__closure__ or ())))
                meta = free.get("tensordesc_meta")
                if not meta or any(m is None for m in meta):
                    return None  # descriptors decomposed on the host: left to Triton
                desc_meta = dict(zip(sorted(free["tensordesc_indices"]), meta))
                launch = free["launcher"]
            if getattr(launch, "__code__", None) is not None or not callable(launch):
                return None  # a Python wrapper this code does not know, not the compiled C function
            return cls(launch, bool(launcher.launch_cooperative_grid), bool(launcher.launch_pdl), desc_meta,
                       nv.make_tensordesc_arg)
        except (AttributeError, ImportError, KeyError, TypeError, ValueError):
            return None

    def arguments(self, args: tuple, tail: tuple) -> list:
        """The kernel's arguments as the C launch takes them: each descriptor expanded into its
        tensor map, shape and strides."""
        if not self.desc_meta:
            return [*args, *tail]
        out: list = []
        for i, a in enumerate((*args, *tail)):
            meta = self.desc_meta.get(i)
            if meta is None:
                out.append(a)
                continue
            key = (i, a.base.data_ptr(), *a.shape, *a.strides, a.padding)
            hit = self.maps.get(key)
            if hit is None:
                if len(self.maps) >= self.MAX_MAPS:
                    self.maps.clear()
                hit = self.maps[key] = self.expand(a, meta)
            out.extend(hit)
        return out

    def __call__(self, grid: tuple, stream: int, function: int, packed: object, args: tuple, tail: tuple) -> None:
        self.launch(grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1, stream, function,
                    self.cooperative, self.pdl, None, None, packed, None, None, None, *self.arguments(args, tail))


def _hooked(hook: object) -> bool:
    """Whether a launch hook (None, a function, or a ``HookChain``) would call anything."""
    return hook is not None and bool(getattr(hook, "calls", True))


@functools.cache
def _stream_getter():  # noqa: ANN202 - Triton's driver function
    return triton.runtime.driver.active.get_current_stream


def _get_stream(device: int) -> int:
    return _stream_getter()(device)


def _desc(t: torch.Tensor, shape: list[int], strides: list[int], block: list[int]) -> TensorDescriptor:
    """A TensorDescriptor without ``__post_init__``'s checks (alignment, strides, block shape):
    ``tma_fits`` checked the tensors and the key's first call built the same shapes checked."""
    d = TensorDescriptor.__new__(TensorDescriptor)
    d.base, d.shape, d.strides, d.block_shape, d.padding = t, shape, strides, block, "zero"
    return d


_CONV = ThinLauncher(_conv_kernel)
_CONV_TMA = ThinLauncher(_conv_tma_kernel, first_spec_arg=3)  # after the three descriptors
_CONV_DW = ThinLauncher(_conv_dw_kernel)
LAUNCHERS = {"conv": _CONV, "conv_tma": _CONV_TMA, "dw": _CONV_DW}


def tune_seconds() -> float:
    """Wall seconds this process spent in first calls of new kernel keys (compiling autotune
    configs and timing them), summed over the launchers: a model's cold-start cost that
    ``torch.compile``'s own clock does not see."""
    return sum(launcher.tune_seconds for launcher in LAUNCHERS.values())


def clear_tuning() -> None:
    """Forget every tuned config and recorded launch (benchmarks: small shapes must not choose
    the tiles that timed shapes then reuse)."""
    for launcher in LAUNCHERS.values():
        launcher.clear()
    _block_kernel.cache.clear()


# ------------------------------------------------------------------------------------------------
# Launchers. All take and return contiguous channels-last tensors; weights in torch's Conv1d
# layout (C_out, C_in, K).


def _cdiv(a: int, b: int) -> int:
    # Host-side integer math: triton.cdiv and triton.next_power_of_2 are Triton constexpr functions
    # whose Python calls cost several µs each on the lent VM (13 of them per eager fwd + bwd).
    return -(-a // b)


def _pow2(n: int) -> int:
    """The smallest power of two ≥ n (n ≥ 1)."""
    return 1 << (n - 1).bit_length()


def _dense(t: torch.Tensor) -> torch.Tensor:
    """t, or a contiguous copy: the check costs less host time than a no-op ``.contiguous()``."""
    return t if t.is_contiguous() else t.contiguous()


def _check(x: torch.Tensor, weight: torch.Tensor, transpose: bool = False) -> None:
    """x (B, T, C_in) for weight (C_out, C_in, K); with ``transpose``, x is dy (B, T, C_out)."""
    if x.dim() != 3 or weight.dim() != 3 or x.shape[2] != weight.shape[0 if transpose else 1]:
        raise ValueError(
            f"dilated_causal_conv: x must be (B, T, C_in) and weight (C_out, C_in, K); "
            f"got x {tuple(x.shape)}, weight {tuple(weight.shape)}{' (input gradient: x is dy)' if transpose else ''}"
        )
    if x.device.type != "cuda" and not INTERPRET:
        raise ValueError(
            f"the Triton path needs a CUDA tensor (got {x.device}); use impl='torch' or set TRITON_INTERPRET=1"
        )


def conv_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dilation: int,
                 *, mode: int = MODE_PLAIN, act: str = "none", res: torch.Tensor | None = None,
                 transpose: bool = False, out: torch.Tensor | None = None, pre: torch.Tensor | None = None,
                 grad_out: torch.Tensor | None = None) -> torch.Tensor:
    """Causal conv of x (B, T, C_in) with weight (C_out, C_in, K) → (B, T, C_out), fused epilogue.

    ``transpose=True`` computes the input gradient instead: x is then dy (B, T, C_out) and the
    result is Σ_k dy[t + (K−1−k)·d] @ W[:, :, k] of shape (B, T, C_in). ``out``, ``pre``,
    ``grad_out``: see ``launch_conv``.
    """
    _check(x, weight, transpose)
    return launch_conv(x, gemm_weight(weight, transpose, x.dtype), bias, dilation, mode=mode, act=act,
                       res=res, transpose=transpose, out=out, pre=pre, grad_out=grad_out)


def gemm_weight(weight: torch.Tensor, transpose: bool, dtype: torch.dtype) -> torch.Tensor:
    """Conv1d weight (C_out, C_in, K) → the kernel's contiguous (K, C_in, C_out), or (K, C_out, C_in)
    for the input gradient, in the activations' dtype. ``gemm_weights``' layout for one layer,
    without its unsqueeze and select: two ATen calls fewer per eager forward and input gradient."""
    return _dense_in(weight.permute(*((2, 0, 1) if transpose else (2, 1, 0))), dtype)


def gemm_weights(weight: torch.Tensor, transpose: bool, dtype: torch.dtype) -> torch.Tensor:
    """A block's (L, C_out, C_in, K) weights → (L, K, C_in, C_out) (or (L, K, C_out, C_in) for input
    gradients) in one copy: ``gemm_weight`` of every layer at once (one launch, not L)."""
    return _dense_in(weight.permute(*((0, 3, 1, 2) if transpose else (0, 3, 2, 1))), dtype)


def _dense_in(w: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A contiguous copy of the view ``w`` in ``dtype``: re-laid out and cast in one copy (not a
    contiguous copy, then a cast)."""
    if w.dtype == dtype:
        return w.contiguous()
    return torch.empty(w.shape, device=w.device, dtype=dtype).copy_(w)


def launch_conv(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, dilation: int,
                *, mode: int = MODE_PLAIN, act: str = "none", res: torch.Tensor | None = None,
                transpose: bool = False, out: torch.Tensor | None = None, pre: torch.Tensor | None = None,
                grad_out: torch.Tensor | None = None, col_sums: torch.Tensor | None = None) -> torch.Tensor:
    """Convolve x (B, T, w.shape[1]) with a ``gemm_weight`` w (K, C_in', C_out'): ``_conv_tma_kernel``
    where ``tma_fits``, else ``_conv_kernel``.

    Returns y (B, T, C_out'), written into ``out`` when given (contiguous). ``pre`` (B, T, C_out'):
    where MODE_LAYER_SAVE writes act'(pre-activation), or where MODE_ADD_ACTGRAD reads the layer
    below's; ``grad_out`` (B, T, C_out'): where MODE_ADD_ACTGRAD writes g = y · pre, and
    ``col_sums`` (a ``col_sum_buffer``) where it adds up g's columns per tile (``.sum(0)`` of it is
    Σ_{b,t} g, the layer below's bias gradient).
    """
    x = _dense(x)
    B, T, _ = x.shape
    K, ci, co = w.shape
    y = torch.empty(B, T, co, device=x.device, dtype=x.dtype) if out is None else out
    q_rows = _cdiv(T, _Q_BLOCK_T)
    if out is not None or pre is not None or grad_out is not None or col_sums is not None or mode in _AUX_MODES:
        _check_buffers(mode, B, T, co, q_rows, out, pre, grad_out, col_sums)  # the plain call skips it
    if B == 0 or T == 0:
        return y
    r = _dense(res) if res is not None else y
    b = _dense(bias) if bias is not None else y  # the epilogues read bias[cols] densely

    aux = pre if pre is not None else y
    gout = grad_out if grad_out is not None else y
    # Without col_sums, q_ptr is a one-element scratch tensor: the autotuner zeroes q_ptr.
    q = col_sums if col_sums is not None else _scratch(x.device)
    consts = dict(CI=ci, CO=co, K=K, DIR=1 if transpose else -1, HAS_BIAS=bias is not None, MODE=mode,
                  ACT=ACTIVATIONS[act])
    if tma_fits(x, w, y, r, aux, gout):
        sms = _num_sms(x.device)
        w2 = w.view(K * ci, co)
        rest = (b, r, y, aux, gout, q, B, T, dilation, q_rows)

        def make_args(meta: dict | None) -> tuple:
            if meta is None:  # a call through the autotuner: its pre-hook sets the tiles
                return (TensorDescriptor(x, [B, T, ci], [T * ci, ci, 1], [1, 32, 32]),
                        TensorDescriptor(w2, [K * ci, co], [co, 1], [32, 32]),
                        TensorDescriptor(y, [B, T, co], [T * co, co, 1], [1, 32, 32]), *rest)
            bt, bn, bc = meta["BLOCK_T"], meta["BLOCK_N"], meta["BLOCK_C"]
            return (_desc(x, [B, T, ci], [T * ci, ci, 1], [1, bt, bc]), _desc(w2, [K * ci, co], [co, 1], [bc, bn]),
                    _desc(y, [B, T, co], [T * co, co, 1], [1, bt, bn]), *rest)

        def pgrid(meta: dict) -> tuple[int]:
            return (min(meta["PER_SM"] * sms, B * _cdiv(T, meta["BLOCK_T"]) * (co // meta["BLOCK_N"])),)

        consts["INTERP"] = INTERPRET  # the TMA kernel's own constexpr
        _CONV_TMA(pgrid, make_args, rest, consts, static=(x.dtype, w.dtype))
        return y

    def grid(meta: dict) -> tuple[int, int, int]:
        return (_cdiv(T, meta["BLOCK_T"]), _cdiv(co, meta["BLOCK_N"]), B)

    args = (x, w, b, r, y, aux, gout, q, T, dilation, q_rows)
    _CONV(grid, lambda meta: args, args, consts)
    return y


# Modes that read or write ``pre`` (and MODE_ADD_ACTGRAD also ``grad_out`` and ``col_sums``).
_AUX_MODES = frozenset((MODE_LAYER_SAVE, MODE_ADD_ACTGRAD))


def _check_buffers(mode: int, B: int, T: int, co: int, q_rows: int, out: torch.Tensor | None,
                   pre: torch.Tensor | None, grad_out: torch.Tensor | None, col_sums: torch.Tensor | None) -> None:
    """``launch_conv``'s optional buffers against its mode and shapes (ValueError naming the first
    that does not fit)."""
    if (mode in _AUX_MODES) != (pre is not None) or (
            (mode == MODE_ADD_ACTGRAD) != (grad_out is not None) or (grad_out is None) != (col_sums is None)):
        raise ValueError(f"launch_conv: mode {mode} got pre={pre is not None}, grad_out={grad_out is not None}, "
                         f"col_sums={col_sums is not None}")
    if col_sums is not None and (col_sums.shape != (B * q_rows, co) or col_sums.dtype != torch.float32
                                 or not col_sums.is_contiguous()):
        raise ValueError(f"launch_conv: col_sums must be col_sum_buffer({B}, {T}, {co}), got {tuple(col_sums.shape)}")
    for name, t in (("out", out), ("pre", pre), ("grad_out", grad_out)):
        if t is not None and (t.shape != (B, T, co) or not t.is_contiguous()):
            raise ValueError(f"launch_conv: {name} must be contiguous {(B, T, co)}, got {tuple(t.shape)}")


@functools.cache
def _scratch(device: torch.device) -> torch.Tensor:
    return torch.zeros(1, device=device, dtype=torch.float32)


def col_sum_buffer(B: int, T: int, C: int, device: torch.device) -> torch.Tensor:
    """Zeros (B · ⌈T / _Q_BLOCK_T⌉, C) fp32 for per-tile column sums: one row per row tile of the
    smallest tile height any config has (taller tiles leave rows at zero)."""
    return torch.zeros(B * _cdiv(T, _Q_BLOCK_T), C, device=device, dtype=torch.float32)


@triton.jit
def _mul_col_sums_kernel(a_ptr, s_ptr, g_ptr, q_ptr, T, Q_ROWS, C: tl.constexpr, BLOCK_T: tl.constexpr,
                         BLOCK_N: tl.constexpr):
    """g = a · s elementwise over (B, T, C), and q[b · Q_ROWS + tile, c] = Σ_{t in tile} g[b, t, c]."""
    pid_t = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    b = tl.program_id(2).to(tl.int64)
    rows = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    mask = (rows < T)[:, None] & (cols < C)[None, :]
    off = b * T * C + rows[:, None] * C + cols[None, :]
    g = tl.load(a_ptr + off, mask=mask, other=0.0).to(tl.float32) * tl.load(s_ptr + off, mask=mask,
                                                                             other=0.0).to(tl.float32)
    tl.store(g_ptr + off, g.to(g_ptr.dtype.element_ty), mask=mask)
    tl.store(q_ptr + (b * Q_ROWS + pid_t) * C + cols, tl.reduce(g, 0, _add), mask=cols < C)


def mul_col_sums(a: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(g, q) for a, s (B, T, C): g = a · s in a's dtype, and q a ``col_sum_buffer`` of g's per-tile
    column sums (``q.sum(0)`` = Σ_{b,t} g, in fp32 from g before its rounding)."""
    a, s = _dense(a), _dense(s)
    B, T, C = a.shape
    g = torch.empty_like(a)
    q = col_sum_buffer(B, T, C, a.device)
    if B == 0 or T == 0:
        return g, q
    bn = min(128, _pow2(C))
    q_rows = q.shape[0] // B
    _mul_col_sums_kernel[(q_rows, _cdiv(C, bn), B)](a, s, g, q, T, q_rows, C=C, BLOCK_T=_Q_BLOCK_T,
                                                          BLOCK_N=bn, num_warps=4)
    return g, q


def tma_fits(x: torch.Tensor, w: torch.Tensor, *others: torch.Tensor) -> bool:
    """Whether ``_conv_tma_kernel`` can run: Hopper or newer (or the interpreter), channel counts
    that some TMA config's tiles divide, and 16-byte aligned contiguous tensors (TMA's rules)."""
    if not USE_TMA:
        return False
    if not INTERPRET and not (x.is_cuda and _cuda_facts(
            x.device.index if x.device.index is not None else torch.cuda.current_device())[1] >= 9):
        return False
    _, ci, co = w.shape
    if not _tma_shape_fits(ci, co):
        return False
    for t in {id(t): t for t in (x, w, *others)}.values():  # each tensor once: y often stands in for several
        if not t.is_contiguous() or t.data_ptr() % 16:
            return False
    return True


@functools.cache
def _tma_shape_fits(ci: int, co: int) -> bool:
    return bool(_prune_tma(_TMA_CONFIGS, {}, CI=ci, CO=co))


def conv_weight_grad(x: torch.Tensor, g: torch.Tensor, dilation: int, K: int, *,
                     with_bias: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """dW (C_out, C_in, K) fp32 of y = conv(x, W) given g = dL/dy (B, T, C_out), x (B, T, C_in);
    with ``with_bias``, (dW, db) with db (C_out,) fp32 = Σ_{b,t} g, from the same launch."""
    x, g = _dense(x), _dense(g)
    B, T, C_in = x.shape
    C_out = g.shape[2]
    if B == 0 or T == 0:
        dw = torch.zeros(C_out, C_in, K, device=x.device, dtype=torch.float32)
        return (dw, dw.new_zeros(C_out)) if with_bias else dw
    tiles = _cdiv(C_in, 64) * _cdiv(C_out, 128) * K
    target = 4 * _num_sms(x.device)  # enough programs to fill the GPU several times over
    per_b = max(1, min(_cdiv(T, _DW_CHUNK_UNIT), _cdiv(target, max(1, tiles * B))))
    # A power of two ≥ 128 (a multiple of every BLOCK_T): few distinct compiled variants.
    chunk = max(_DW_CHUNK_UNIT, _pow2(_cdiv(T, per_b)))
    n_chunks = _cdiv(T, chunk)
    p = torch.empty(B * n_chunks, K, C_in, C_out, device=x.device, dtype=torch.float32)
    q = torch.empty(B * n_chunks * K, C_out, device=x.device, dtype=torch.float32) if with_bias else p

    def grid(meta: dict) -> tuple[int, int, int]:
        return (_cdiv(C_in, meta["BLOCK_M"]) + with_bias, _cdiv(C_out, meta["BLOCK_N"]),
                B * n_chunks * K)

    args = (x, g, p, q, T, dilation, n_chunks)
    _CONV_DW(grid, lambda meta: args, args, dict(CI=C_in, CO=C_out, K=K, CHUNK=chunk, HAS_DB=with_bias,
                                                 DB_ROWS=min(chunk, 32 if INTERPRET else 256)))
    dw = p.sum(0).permute(2, 1, 0)  # (K, C_in, C_out) -> (C_out, C_in, K)
    return (dw, q.sum(0)) if with_bias else dw


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return _cuda_facts(device.index if device.index is not None else torch.cuda.current_device())[0]
    return 2  # interpreter: few programs, it runs them one after another anyway


@functools.cache
def _cuda_facts(index: int) -> tuple[int, int]:
    """(SM count, compute-capability major) of a CUDA device: asked once, not per launch."""
    props = torch.cuda.get_device_properties(index)
    return props.multi_processor_count, props.major


def block_halo(dilations: tuple[int, ...] | list[int], K: int) -> int:
    """Rows a block-kernel window recomputes: the reach of every layer but the first."""
    return (K - 1) * sum(dilations[1:])


# A block whose halo exceeds half the longest window falls back to one launch per layer.
MAX_BLOCK_HALO = max(c.kwargs["BLOCK_T"] for c in _BLOCK_CONFIGS) // 2


def block_forward(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                  dilations: list[int], act: str) -> torch.Tensor:
    """One fused launch of a residual block. x (B, T, C); weight (L, C, C, K); bias (L, C) or None."""
    x = x.contiguous()
    B, T, C = x.shape
    L, _, _, K = weight.shape
    halo = block_halo(dilations, K)
    if halo > MAX_BLOCK_HALO:
        raise ValueError(f"block halo {halo} > {MAX_BLOCK_HALO}: use the per-layer path")
    y = torch.empty_like(x)
    if B == 0 or T == 0:
        return y
    w = weight.permute(0, 3, 2, 1).contiguous().to(x.dtype)  # (L, K, C_in, C_out)
    d = torch.tensor(list(dilations), dtype=torch.int32, device=x.device)
    max_bt = max(c.kwargs["BLOCK_T"] for c in _BLOCK_CONFIGS)
    nprog = 2 * _num_sms(x.device)
    scratch = torch.empty(nprog, 2, max_bt, C, device=x.device, dtype=x.dtype)
    b = bias if bias is not None else x

    def grid(meta: dict) -> tuple[int]:
        useful = meta["BLOCK_T"] - halo
        return (min(nprog, B * _cdiv(T, useful)),)

    args = (x, w, b, d, y, scratch, B, T, halo)
    consts = {"C": C, "L": L, "K": K, "ACT": ACTIVATIONS[act], "HAS_BIAS": bias is not None}
    if torch.are_deterministic_algorithms_enabled():
        tkey, configs = autotuner_key(_block_kernel, dict(zip(_block_kernel.arg_names, args)), consts)
        if tkey not in _block_kernel.cache:
            first_that_runs(_block_kernel, tkey, configs, lambda: _block_kernel[grid](*args, **consts))
            return y
    _block_kernel[grid](*args, **consts)
    return y
