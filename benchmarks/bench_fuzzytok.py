"""FuzzyTok kernel benchmarks on one CUDA GPU (not a test: numbers go to BENCHMARKS.md).

    python benchmarks/bench_fuzzytok.py [--quick] [--out DIR] [--timer graph|eager]
                                        [--parts check,peak,layer,stack,memory,gemm,profile,launch,
                                                 host,eager,thincheck] [--precompile N]

Parts:
  check   Triton vs fp64 reference, fp32 (TF32 dots) and bf16: outputs, dx, dW, db; single convs and
          blocks (fused and per layer). Relative error ‖got − ref‖ / ‖ref‖.
  peak    bf16 8192³ matmul through torch: the TFLOP/s ceiling the ratios use.
  layer   one conv layer, bf16, C ∈ {64,128,256,512} × K ∈ {3,7} × d ∈ {1,2,4} × B·T ∈ {128k, 256k}:
          forward of ours / cuDNN (F.conv1d on pre-padded NCT input) / a naive Triton kernel, and
          backward dx, dW of ours / cuDNN (aten.convolution_backward). Median of do_bench.
  stack   9-layer stack (3 blocks × dilations 1,2,4; K=3, C=256, GELU + residual, bf16,
          B·T = 131072) forward+backward: PyTorch/cuDNN reference and ours (layers, store, fused).
  memory  peak training memory (fwd+bwd) of that stack at 1k, 8k, 64k context (batch 8): reference,
          ours (fused, layers, store), and the shared transformer backbone (2 layers, dim 256, SDPA)
          on the same input.
  gemm    cuBLAS (torch.matmul) on the GEMM a conv layer is, (B·T, K·C) @ (K·C, C), beside our
          kernel with each epilogue (plain, layer, layer + saved pre-activation, act-grad, dx + act-grad).
  profile kernel time by name (torch.profiler) over fwd+bwd steps of the stack, layers and store.
  launch  host (CPU) microseconds per call of each launcher, and a cProfile of one.
  host    host µs per call of the single-op path (B=1, T=256, C=64, K=3, bf16): thin launches vs
          the path through Triton's autotuner/heuristics wrappers (kernels.THIN), the eager
          autograd.Function vs the custom op (ops.EAGER_FUNCTION), cuDNN's F.conv1d, torch.add;
          a cProfile of the eager fwd+bwd.
  eager   the public single op (dilated_causal_conv + autograd) in eager mode vs cuDNN (F.conv1d on
          pre-padded (B, C, T) input): C ∈ {32,64,128,256,512} × K ∈ {3,5,7} × d ∈ {1,2,4},
          B = 16, T = 8192, bf16; fwd and bwd (y.backward(dy, retain_graph=True)), do_bench
          (host included) and CUDA-graph replay (GPU time).
  thincheck  thin launches vs the wrapped path bit for bit, and vs float64 (bf16 inputs).
--precompile N compiles the eager grid's configs from N processes first (Triton's disk cache).

Stacks: layers = one launch per layer, backward recomputes (recompute: true); store = one launch
per layer, every layer's input and pre-activation kept (recompute: false, the default); fused = one
launch per block, recompute. Stack rows also time a CUDA-graph replay of the same step (launch cost).

TFLOP/s count 2 FLOPs per multiply-add of the convolution proper (dx and dW: one conv each).
``--timer graph`` (default) times single launches in the layer and gemm parts by CUDA-graph replay;
``--timer eager`` with do_bench, as runs 1-7 in BENCHMARKS.md did.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402
from triton.testing import do_bench, do_bench_cudagraph  # noqa: E402

from encoders.backbone import Backbone, BackboneConfig  # noqa: E402
from encoders.fuzzytok import kernels as kn  # noqa: E402
from encoders.fuzzytok.ops import conv_block, dilated_causal_conv  # noqa: E402
from encoders.fuzzytok.reference import conv_block_ref, dilated_causal_conv_ref  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzzytok_naive import naive_conv_forward  # noqa: E402

RESULTS: dict = {}
CHECK_DTYPES = {"fp32": (torch.float32,), "bf16": (torch.bfloat16,), "both": (torch.float32, torch.bfloat16)}


def log(msg: str) -> None:
    print(msg, flush=True)


TIMER = "graph"  # --timer: how part layer and part gemm time single launches


def kernel_bench(fn) -> float:  # noqa: ANN001
    """Median milliseconds of one launch: replayed from a CUDA graph (``--timer graph``: the kernel
    alone, without the host's launch cost, which on the lent VM exceeds small kernels' run time),
    or ``bench`` (``--timer eager``: what an eager caller waits)."""
    if TIMER == "graph":
        try:
            fn()  # compile and autotune outside the capture
            torch.cuda.synchronize()
            return float(do_bench_cudagraph(fn, rep=20, return_mode="median"))
        except Exception as e:  # noqa: BLE001 - e.g. a launch that cannot be captured: time it eagerly
            log(f"(graph timing failed: {type(e).__name__}: {str(e)[:120]}; timing eagerly)")
    return bench(fn)


def bench(fn, warmup: int = 10, rep: int = 50, grad_to_none=None) -> float:  # noqa: ANN001
    """Median milliseconds of fn() over CUDA events."""
    return float(do_bench(fn, warmup=warmup, rep=rep, grad_to_none=grad_to_none, return_mode="median"))


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    if not torch.isfinite(a).all():
        return float("nan")
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _block(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, dils: tuple[int, ...], act: str,
           variant: str) -> torch.Tensor:
    """One residual block on the Triton path: fused (one launch, recompute in backward), layers
    (one launch per layer, recompute in backward) or store (one launch per layer, intermediates kept)."""
    return conv_block(x, w, b, dils, act, impl="triton", fused=variant == "fused", recompute=variant != "store")


# -- check -----------------------------------------------------------------------------------------


def part_check(quick: bool, dtypes: tuple[torch.dtype, ...] = (torch.float32, torch.bfloat16)) -> None:
    dev = "cuda"
    tol = {torch.float32: 3e-3, torch.bfloat16: 2e-2}
    rows = []
    fails = 0
    conv_cases = [(2, 1000, 96, 80, 3, 2, True), (3, 517, 256, 256, 7, 4, False), (1, 4099, 64, 64, 3, 1, True),
                  (2, 300, 512, 128, 1, 1, True), (1, 77, 13, 5, 4, 9, True)]
    # ReLU is checked exactly on CPU (tests/encoders): against an fp64 reference, TF32/bf16 rounding
    # flips the sign of pre-activations near 0 and with it the whole derivative, which fails any
    # relative-norm tolerance without any kernel error.
    block_cases = [(2, 1500, 256, 3, (1, 2, 4), "gelu"), (1, 999, 128, 7, (1, 2, 4), "silu"),
                   (2, 700, 72, 3, (1, 2, 4, 8, 16), "gelu")]
    for dtype in dtypes:
        for B, T, ci, co, K, d, has_b in conv_cases:
            g = torch.Generator(device=dev).manual_seed(T + ci)
            x = torch.randn(B, T, ci, device=dev, generator=g).to(dtype).requires_grad_()
            w = (torch.randn(co, ci, K, device=dev, generator=g) / (ci * K) ** 0.5).to(dtype).requires_grad_()
            b = torch.randn(co, device=dev, generator=g).to(dtype).requires_grad_() if has_b else None
            ins = [x, w] + ([b] if has_b else [])
            y = dilated_causal_conv(x, w, b, d, impl="triton")
            dy = torch.randn(y.shape, device=dev, generator=g).to(dtype)
            got = [y, *torch.autograd.grad(y, ins, dy)]
            ins64 = [t.detach().double().requires_grad_() for t in ins]
            y64 = dilated_causal_conv_ref(ins64[0], ins64[1], ins64[2] if has_b else None, d)
            want = [y64, *torch.autograd.grad(y64, ins64, dy.double())]
            errs = [rel(a, c) for a, c in zip(got, want)]
            ok = all(e <= tol[dtype] for e in errs)
            fails += not ok
            rows.append(dict(kind="conv", dtype=str(dtype), shape=[B, T, ci, co, K, d, has_b], errs=errs, ok=ok))
            log(f"check conv  {str(dtype):15s} B{B} T{T} Ci{ci} Co{co} K{K} d{d} bias={has_b}: "
                + " ".join(f"{n}={e:.1e}" for n, e in zip(["y", "dx", "dW", "db"], errs)) + ("" if ok else "  FAIL"))
        for B, T, C, K, dils, act in block_cases:
            g = torch.Generator(device=dev).manual_seed(T + C)
            L = len(dils)
            x = torch.randn(B, T, C, device=dev, generator=g).to(dtype).requires_grad_()
            w = (0.5 * torch.randn(L, C, C, K, device=dev, generator=g) / (C * K) ** 0.5).to(dtype).requires_grad_()
            b = (0.1 * torch.randn(L, C, device=dev, generator=g)).to(dtype).requires_grad_()
            ins64 = [t.detach().double().requires_grad_() for t in (x, w, b)]
            y64 = conv_block_ref(*ins64, dils, act)
            dy = torch.randn(y64.shape, device=dev, generator=g).to(dtype)
            want = [y64, *torch.autograd.grad(y64, ins64, dy.double())]
            for variant in ("fused", "layers", "store"):
                y = _block(x, w, b, dils, act, variant)
                got = [y, *torch.autograd.grad(y, [x, w, b], dy)]
                errs = [rel(a, c) for a, c in zip(got, want)]
                ok = all(e <= tol[dtype] for e in errs)
                fails += not ok
                rows.append(dict(kind="block", variant=variant, dtype=str(dtype), shape=[B, T, C, K, list(dils), act],
                                 errs=errs, ok=ok))
                log(f"check block {str(dtype):15s} B{B} T{T} C{C} K{K} d{dils} {act} {variant}: "
                    + " ".join(f"{n}={e:.1e}" for n, e in zip(["y", "dx", "dW", "db"], errs)) + ("" if ok else "  FAIL"))
    RESULTS["check"] = dict(rows=rows, failures=fails, tolerance={str(k): v for k, v in tol.items()})
    # These small shapes must not choose the tiles that the timed shapes then reuse.
    kn.clear_tuning()
    log(f"check: {fails} failures")


# -- peak ------------------------------------------------------------------------------------------


def part_peak(quick: bool) -> float:
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    ms = bench(lambda: a @ b, warmup=50, rep=300)
    tf = 2 * n**3 / ms / 1e9
    RESULTS["peak"] = dict(n=n, ms=ms, tflops=tf)
    log(f"peak: bf16 {n}^3 matmul {ms:.3f} ms = {tf:.0f} TFLOP/s")
    return tf


# -- layer -----------------------------------------------------------------------------------------


def _layer_row(B: int, T: int, C: int, K: int, d: int, dt: torch.dtype, peak: float) -> dict:
    flop = 2 * B * T * C * C * K
    x = torch.randn(B, T, C, device="cuda", dtype=dt)
    wt = (torch.randn(C, C, K, device="cuda") / (C * K) ** 0.5).to(dt)
    gy = torch.randn(B, T, C, device="cuda", dtype=dt)
    w_f = kn.gemm_weight(wt, False, dt)
    w_t = kn.gemm_weight(wt, True, dt)
    pad = (K - 1) * d
    xp = F.pad(x.transpose(1, 2), (pad, 0)).contiguous()  # (B, C, T + pad), cuDNN's layout
    gyc = gy.transpose(1, 2).contiguous()  # (B, C, T)
    t = {}
    t["fwd_ours"] = kernel_bench(lambda: kn.launch_conv(x, w_f, None, d))
    kn.USE_TMA = False  # the pointer kernel (the only one before the TMA kernel), for comparison
    t["fwd_ptr"] = kernel_bench(lambda: kn.launch_conv(x, w_f, None, d))
    kn.USE_TMA = True
    t["fwd_cudnn"] = kernel_bench(lambda: F.conv1d(xp, wt, None, dilation=d))
    t["fwd_naive"] = kernel_bench(lambda: naive_conv_forward(x, w_f, d))
    t["dx_ours"] = kernel_bench(lambda: kn.launch_conv(gy, w_t, None, d, transpose=True))
    t["dx_cudnn"] = kernel_bench(lambda: torch.ops.aten.convolution_backward(
        gyc, xp, wt, None, [1], [0], [d], False, [0], 1, [True, False, False]))
    t["dW_ours"] = kernel_bench(lambda: kn.conv_weight_grad(x, gy, d, K))
    t["dW_cudnn"] = kernel_bench(lambda: torch.ops.aten.convolution_backward(
        gyc, xp, wt, None, [1], [0], [d], False, [0], 1, [False, True, False]))
    tf = {k: flop / v / 1e9 for k, v in t.items()}
    row = dict(B=B, T=T, C=C, K=K, d=d, flop=flop, ms=t, tflops=tf,
               ours_over_peak={k: tf[f"{k}_ours"] / peak for k in ("fwd", "dx", "dW")},
               ours_over_cudnn={k: t[f"{k}_cudnn"] / t[f"{k}_ours"] for k in ("fwd", "dx", "dW")})
    log(f"{C:4d} {K:2d} {d:2d} {B * T:7d} | {tf['fwd_ours']:8.0f} {tf['fwd_ptr']:6.0f} {tf['fwd_cudnn']:6.0f} "
        f"{tf['fwd_naive']:6.0f} | {tf['dx_ours']:7.0f} {tf['dx_cudnn']:6.0f} | "
        f"{tf['dW_ours']:7.0f} {tf['dW_cudnn']:6.0f}   "
        f"{row['ours_over_peak']['fwd']:.2f} {row['ours_over_peak']['dx']:.2f} "
        f"{row['ours_over_peak']['dW']:.2f}; x{row['ours_over_cudnn']['fwd']:.2f}")
    return row


def part_layer(quick: bool, peak: float) -> None:
    torch.backends.cudnn.benchmark = True
    dt = torch.bfloat16
    Cs = [128, 256] if quick else [64, 128, 256, 512]
    Ks = [3, 7]
    Ds = [1, 4] if quick else [1, 2, 4]
    BTs = [(32, 4096)] if quick else [(32, 4096), (64, 4096)]
    rows = []
    log(f"{'C':>4} {'K':>2} {'d':>2} {'B*T':>7} | {'fwd ours':>8} {'ptr':>6} {'cudnn':>6} {'naive':>6} | "
        f"{'dx ours':>7} {'cudnn':>6} | {'dW ours':>7} {'cudnn':>6}   TFLOP/s; ours/peak fwd dx dW; ours/cudnn fwd")
    for B, T in BTs:
        for C in Cs:
            for K in Ks:
                for d in Ds:
                    rows.append(_layer_row(B, T, C, K, d, dt, peak))
    RESULTS["layer"] = rows
    RESULTS["autotune"] = {
        name: {str(k): str(v) for k, v in fn.cache.items()}
        for name, fn in (("conv", kn._conv_kernel), ("conv_tma", kn._conv_tma_kernel), ("dw", kn._conv_dw_kernel),
                         ("block", kn._block_kernel))
    }  # (the autotuners' own caches: the thin launchers record their choices per finer key)


# -- stack -----------------------------------------------------------------------------------------


def _stack_params(C: int, K: int, dils: tuple[int, ...], blocks: int, dt: torch.dtype) -> list:
    g = torch.Generator(device="cuda").manual_seed(0)
    L = len(dils)
    ps = []
    for _ in range(blocks):
        w = (torch.randn(L, C, C, K, device="cuda", generator=g) / (C * K) ** 0.5 / 3).to(dt).requires_grad_()
        b = torch.zeros(L, C, device="cuda", dtype=dt).requires_grad_()
        ps.append((w, b))
    return ps


def _stack(x: torch.Tensor, ps: list, dils: tuple[int, ...], impl: str) -> torch.Tensor:
    if impl == "cudnn_nct":  # PyTorch at its best: x kept (B, C, T) as cuDNN wants, no transposes
        for w, b in ps:
            for i, d in enumerate(dils):
                pad = (w.shape[3] - 1) * d
                x = x + F.gelu(F.conv1d(F.pad(x, (pad, 0)), w[i], b[i], dilation=d))
        return x
    for w, b in ps:
        if impl == "torch":
            x = conv_block_ref(x, w, b, dils, "gelu")
        else:
            x = _block(x, w, b, dils, "gelu", impl)
    return x


TRITON_STACKS = ("layers", "store", "fused")


def _graphed(step, params: list):  # noqa: ANN001, ANN202
    """Capture step() (forward + backward, kernels already compiled and tuned) in a CUDA graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            for p in params:
                p.grad = None
            step()
    torch.cuda.current_stream().wait_stream(side)
    for p in params:
        p.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def _stack_step(x: torch.Tensor, dy: torch.Tensor, ps: list, dils: tuple[int, ...], impl: str) -> None:
    if impl == "backbone":
        ps(x).backward(dy)  # ps is the backbone module here
    else:
        _stack(x, ps, dils, impl).backward(dy)


def part_stack(quick: bool, peak: float) -> None:
    dt = torch.bfloat16
    C, K, dils, blocks = 256, 3, (1, 2, 4), 3
    B, T = 32, 4096
    ps = _stack_params(C, K, dils, blocks, dt)
    x = torch.randn(B, T, C, device="cuda", dtype=dt).requires_grad_()
    dy = torch.randn(B, T, C, device="cuda", dtype=dt)
    params = [x] + [p for wb in ps for p in wb]
    flop_fwd = 2 * B * T * C * C * K * len(dils) * blocks
    x_nct = x.detach().transpose(1, 2).contiguous().requires_grad_()
    dy_nct = dy.transpose(1, 2).contiguous()
    # Correctness at the timed shape, against the reference stack in bf16 (same rounding points).
    y_ref = _stack(x, ps, dils, "torch")
    g_ref = torch.autograd.grad(y_ref, params, dy)
    check = {}
    for impl in TRITON_STACKS:
        y = _stack(x, ps, dils, impl)
        g = torch.autograd.grad(y, params, dy)
        check[impl] = dict(y=rel(y, y_ref), dx=rel(g[0], g_ref[0]),
                           dW=max(rel(a, b) for a, b in zip(g[1::2], g_ref[1::2])),
                           db=max(rel(a, b) for a, b in zip(g[2::2], g_ref[2::2])))
        log(f"stack check {impl}: " + " ".join(f"{k}={v:.1e}" for k, v in check[impl].items()))
    del y_ref, g_ref, y, g
    rows = {}
    for impl in ("cudnn_nct", "torch", *TRITON_STACKS):
        xi, dyi = (x_nct, dy_nct) if impl == "cudnn_nct" else (x, dy)
        fwd = bench(partial(_stack, xi, ps, dils, impl))
        fb = bench(partial(_stack_step, xi, dyi, ps, dils, impl), grad_to_none=[xi] + params[1:])
        rows[impl] = dict(fwd_ms=fwd, fwd_bwd_ms=fb, fwd_tflops=flop_fwd / fwd / 1e9, fwd_bwd_tflops=3 * flop_fwd / fb / 1e9)
        log(f"stack {impl:9s}: fwd {fwd:.3f} ms ({flop_fwd / fwd / 1e9:.0f} TFLOP/s), "
            f"fwd+bwd {fb:.3f} ms ({3 * flop_fwd / fb / 1e9:.0f} TFLOP/s model FLOPs)")
        if impl != "fused":  # the fused launcher copies the dilations to the GPU: not capturable
            # Replaying a CUDA graph of the same step removes the CPU's launch and dispatch costs:
            # the difference to the eager time is what launching costs.
            try:
                replay = _graphed(partial(_stack_step, xi, dyi, ps, dils, impl), [xi] + params[1:])
                gms = bench(replay)
                rows[impl]["fwd_bwd_graph_ms"] = gms
                log(f"stack {impl:9s}: fwd+bwd as a CUDA graph {gms:.3f} ms")
            except Exception as e:  # noqa: BLE001 - a capture failure must not lose the other rows
                log(f"stack {impl:9s}: CUDA graph capture failed: {type(e).__name__}: {str(e)[:200]}")
    best_torch = min(rows["torch"]["fwd_bwd_ms"], rows["cudnn_nct"]["fwd_bwd_ms"])
    for impl in TRITON_STACKS:
        rows[impl]["fwd_bwd_over_torch"] = rows[impl]["fwd_bwd_ms"] / best_torch
        log(f"stack {impl}: fwd+bwd = {rows[impl]['fwd_bwd_over_torch']:.2f} x the faster PyTorch/cuDNN stack")
    RESULTS["stack"] = dict(B=B, T=T, C=C, K=K, dilations=list(dils), blocks=blocks, rows=rows, peak=peak,
                            check=check)


# -- gemm: what the same GEMM costs in cuBLAS, and what our epilogues cost ----------------------------


def part_gemm(quick: bool, peak: float) -> None:
    """A K-tap conv over C channels is a GEMM (B·T, K·C) @ (K·C, C_out): time torch.matmul on that
    shape (cuBLAS's rate at this short reduction) beside ours, and our epilogue modes at C = 256."""
    shapes = ((128, 3), (256, 3)) if quick else ((128, 3), (256, 3), (256, 7), (512, 3))
    RESULTS["gemm"] = [_gemm_row(C, K, peak) for C, K in shapes]


def _gemm_row(C: int, K: int, peak: float) -> dict:
    dt = torch.bfloat16
    B, T = 32, 4096
    flop = 2 * B * T * C * C * K
    a = torch.randn(B * T, K * C, device="cuda", dtype=dt)
    bm = torch.randn(K * C, C, device="cuda", dtype=dt) / (K * C) ** 0.5
    x = torch.randn(B, T, C, device="cuda", dtype=dt)
    res = torch.randn(B, T, C, device="cuda", dtype=dt)
    wt = (torch.randn(C, C, K, device="cuda") / (C * K) ** 0.5).to(dt)
    bias = torch.randn(C, device="cuda", dtype=dt)
    w_f, w_t = kn.gemm_weight(wt, False, dt), kn.gemm_weight(wt, True, dt)
    pre, gout = torch.empty_like(x), torch.empty_like(x)
    t = {"cublas_gemm": kernel_bench(lambda: a @ bm)}
    q = kn.col_sum_buffer(B, T, C, x.device)
    try:
        for kernel in ("ptr", "tma"):
            # ptr: the pointer-arithmetic kernel (_conv_kernel); tma: the persistent TMA kernel.
            kn.USE_TMA = kernel == "tma"
            t[f"{kernel}_plain"] = kernel_bench(lambda: kn.launch_conv(x, w_f, None, 1))
            t[f"{kernel}_layer"] = kernel_bench(lambda: kn.launch_conv(x, w_f, bias, 1, mode=kn.MODE_LAYER, act="gelu",
                                                                       res=res))
            t[f"{kernel}_layer_save"] = kernel_bench(lambda: kn.launch_conv(x, w_f, bias, 1, mode=kn.MODE_LAYER_SAVE,
                                                                            act="gelu", res=res, pre=pre))
            t[f"{kernel}_actgrad"] = kernel_bench(lambda: kn.launch_conv(x, w_f, bias, 1, mode=kn.MODE_ACTGRAD,
                                                                         act="gelu", res=res))
            t[f"{kernel}_dx_add_actgrad"] = kernel_bench(lambda: kn.launch_conv(
                x, w_t, None, 1, mode=kn.MODE_ADD_ACTGRAD, res=res, transpose=True, pre=pre, grad_out=gout,
                col_sums=q))
    finally:
        kn.USE_TMA = True  # the parts after this one time the default path
    t["dW"] = kernel_bench(lambda: kn.conv_weight_grad(x, res, 1, K))
    t["dW_db"] = kernel_bench(lambda: kn.conv_weight_grad(x, res, 1, K, with_bias=True))
    t["aten_db_sum"] = kernel_bench(lambda: res.sum((0, 1), dtype=torch.float32))
    tf = {k: flop / v / 1e9 for k, v in t.items()}
    log(f"gemm C{C} K{K}: " + ", ".join(f"{k} {v * 1e3:.0f} us {tf[k]:.0f} TF ({tf[k] / peak:.2f})"
                                          for k, v in t.items() if "db" not in k))
    log(f"gemm C{C} K{K}: dW {t['dW'] * 1e3:.0f} us, dW + db in one launch {t['dW_db'] * 1e3:.0f} us, "
        f"ATen g.sum((0, 1)) {t['aten_db_sum'] * 1e3:.0f} us")
    return dict(C=C, K=K, B=B, T=T, ms=t, tflops=tf, over_peak={k: v / peak for k, v in tf.items()})


# -- profile: where the stack's time goes ------------------------------------------------------------


def part_profile(quick: bool) -> None:
    """Kernel time by kernel name (torch.profiler, CUPTI) over a few fwd+bwd steps of the stack."""
    from torch.profiler import ProfilerActivity, profile

    dt = torch.bfloat16
    C, K, dils, blocks, B, T = 256, 3, (1, 2, 4), 3, 32, 4096
    ps = _stack_params(C, K, dils, blocks, dt)
    x = torch.randn(B, T, C, device="cuda", dtype=dt).requires_grad_()
    dy = torch.randn(B, T, C, device="cuda", dtype=dt)
    params = [x] + [p for wb in ps for p in wb]
    steps = 5
    out = {}
    for impl in ("layers", "store"):
        step = partial(_stack_step, x, dy, ps, dils, impl)
        for _ in range(3):
            for p in params:
                p.grad = None
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            t0 = time.perf_counter()
            for _ in range(steps):
                for p in params:
                    p.grad = None
                step()
            torch.cuda.synchronize()
            wall = (time.perf_counter() - t0) / steps * 1e3
        by_name: dict[str, list[float]] = {}
        for e in prof.events():
            if str(getattr(e, "device_type", "")).endswith("CUDA"):
                us = e.time_range.elapsed_us()
                by_name.setdefault(e.name, []).append(us)
        busy = sum(sum(v) for v in by_name.values()) / steps / 1e3
        top = sorted(by_name.items(), key=lambda kv: -sum(kv[1]))
        out[impl] = dict(wall_ms_under_profiler=wall, kernel_ms_per_step=busy,
                         kernels=[dict(name=n[:120], calls_per_step=len(v) / steps, ms_per_step=sum(v) / steps / 1e3)
                                  for n, v in top[:25]])
        log(f"profile {impl}: {busy:.3f} ms of kernels per step; {wall:.3f} ms per step under the profiler")
        for r in out[impl]["kernels"][:12]:
            log(f"   {r['ms_per_step']:7.3f} ms  {r['calls_per_step']:5.1f}x  {r['name'][:90]}")
    RESULTS["profile"] = out


# -- launch: host (CPU) time per call --------------------------------------------------------------


def part_launch(quick: bool) -> None:
    """Host microseconds per call, on shapes so small that the GPU never makes the CPU wait; and a
    cProfile of the TMA launch path. The stack is launch-bound when these add up to more than its
    kernels' time (compare the stack's eager and CUDA-graph times)."""
    import cProfile
    import io
    import pstats

    from triton.tools.tensor_descriptor import TensorDescriptor

    dt = torch.bfloat16
    B, T, C, K = 1, 256, 128, 3
    x = torch.randn(B, T, C, device="cuda", dtype=dt)
    res = torch.randn(B, T, C, device="cuda", dtype=dt)
    wt = (torch.randn(C, C, K, device="cuda") / (C * K) ** 0.5).to(dt)
    w_f = kn.gemm_weight(wt, False, dt)
    bias = torch.zeros(C, device="cuda", dtype=dt)
    wb = (torch.randn(3, C, C, K, device="cuda") / (C * K) ** 0.5).to(dt)
    bb = torch.zeros(3, C, device="cuda", dtype=dt)

    def with_tma(flag: bool, fn):  # noqa: ANN001, ANN202
        def run() -> None:
            kn.USE_TMA = flag
            fn()
        return run

    calls = {
        "torch_add": lambda: x.add(1),
        "ptr_plain": with_tma(False, lambda: kn.launch_conv(x, w_f, None, 1)),
        "tma_plain": with_tma(True, lambda: kn.launch_conv(x, w_f, None, 1)),
        "tma_layer": with_tma(True, lambda: kn.launch_conv(x, w_f, bias, 1, mode=kn.MODE_LAYER, act="gelu", res=res)),
        "three_descriptors": lambda: [TensorDescriptor(x, [B, T, C], [T * C, C, 1], [1, 128, 64]) for _ in range(3)],
        "gemm_weight": lambda: kn.gemm_weight(wt, False, dt),
        "dw_db": lambda: kn.conv_weight_grad(x, res, 1, K, with_bias=True),
        "op_conv_fwd": lambda: torch.ops.fuzzytok.dilated_causal_conv(x, wt, bias, 1),
        "block_store_fwd_3_layers": lambda: conv_block(x, wb, bb, (1, 2, 4), "gelu", impl="triton", fused=False,
                                                       recompute=False),
        "block_layers_fwd_3_layers": lambda: conv_block(x, wb, bb, (1, 2, 4), "gelu", impl="triton", fused=False),
    }
    out = {}
    n = 200
    for name, fn in calls.items():
        for _ in range(20):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        host_us = (time.perf_counter() - t0) / n * 1e6
        torch.cuda.synchronize()
        out[name] = host_us
        log(f"launch {name:26s}: {host_us:7.1f} us host time per call")
    kn.USE_TMA = True
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(n):
        kn.launch_conv(x, w_f, bias, 1, mode=kn.MODE_LAYER, act="gelu", res=res)
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(14)
    text = buf.getvalue()
    log("cProfile of 200 TMA MODE_LAYER launches (tottime):\n" + "\n".join(text.splitlines()[:40]))
    RESULTS["launch"] = dict(host_us=out, cprofile=text)


# -- host / eager: the single-op path users call in eager mode ------------------------------------

EAGER_B, EAGER_T = 16, 8192  # the shape (131k rows)
EAGER_CS = (32, 64, 128, 256, 512)
EAGER_KS = (3, 5, 7)
EAGER_DS = (1, 2, 4)


def _host_us(fn, n: int = 300) -> float:  # noqa: ANN001
    """Host microseconds per call: n calls back to back, then one synchronisation. On shapes this
    small the GPU finishes each call before the host issues the next, so this is the host's time."""
    for _ in range(30):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    us = (time.perf_counter() - t0) / n * 1e6
    torch.cuda.synchronize()
    return us


def _host_calls(B: int, T: int, C: int, K: int, d: int, dt: torch.dtype) -> tuple[dict, Callable[[], None]]:
    """``part_host``'s calls by name on one tiny shape (tensors made here), and the public op's
    forward and backward, which it profiles."""
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(B, T, C, device="cuda", dtype=dt, generator=g).requires_grad_()
    wt = (torch.randn(C, C, K, device="cuda", generator=g) / (C * K) ** 0.5).to(dt).requires_grad_()
    bias = torch.zeros(C, device="cuda", dtype=dt).requires_grad_()
    dy = torch.randn(B, T, C, device="cuda", dtype=dt, generator=g)
    w_f = kn.gemm_weight(wt.detach(), False, dt)
    xd, wd, bd = x.detach(), wt.detach(), bias.detach()
    xp = F.pad(xd.transpose(1, 2), ((K - 1) * d, 0)).contiguous().requires_grad_()
    dyc = dy.transpose(1, 2).contiguous()

    def fwd_bwd(conv):  # noqa: ANN001, ANN202
        def run() -> None:
            x.grad = wt.grad = bias.grad = None
            conv().backward(dy)
        return run

    def cudnn_fwd_bwd() -> None:
        xp.grad = wt.grad = bias.grad = None
        F.conv1d(xp, wt, bias, dilation=d).backward(dyc)

    floor_out = torch.empty(B, T, C, device="cuda", dtype=dt)

    # The dispatcher's own cost: a custom op of the same schema (and an autograd formula, as ours
    # has) whose body does nothing. ``op_fwd_nograd`` minus this is our Python inside the op.
    @torch.library.custom_op("tokbench_bench::conv_floor", mutates_args=())
    def conv_floor(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dilation: int) -> torch.Tensor:
        return floor_out

    conv_floor.register_fake(lambda x, weight, bias, dilation: x.new_empty(x.shape[0], x.shape[1], weight.shape[0]))
    conv_floor.register_autograd(lambda ctx, dy: (dy, None, None, None), setup_context=lambda ctx, inputs, output: None)

    def raw_launch(flag: bool):  # noqa: ANN202
        def run() -> None:
            kn.RAW_LAUNCH = flag
            try:
                kn.launch_conv(xd, w_f, bd, d)
            finally:
                kn.RAW_LAUNCH = True
        return run

    calls = {
        "torch_add": lambda: xd.add(1),
        "op_floor_nograd": lambda: torch.ops.tokbench_bench.conv_floor(xd, wd, bd, d),
        "cudnn_fwd_nograd": lambda: F.conv1d(xp.detach(), wd, bd, dilation=d),
        "cudnn_fwd_bwd": cudnn_fwd_bwd,
        "launch_fwd_tma": lambda: kn.launch_conv(xd, w_f, bd, d),
        "launch_fwd_tma_raw0": raw_launch(False),
        "launch_fwd_tma_raw1": raw_launch(True),
        "conv_weight_grad": lambda: kn.conv_weight_grad(xd, dy, d, K, with_bias=True),
        "gemm_weight": lambda: kn.gemm_weight(wd, False, dt),
        "op_fwd_nograd": lambda: torch.ops.fuzzytok.dilated_causal_conv(xd, wd, bd, d),
        "op_bwd_nograd": lambda: torch.ops.fuzzytok.dilated_causal_conv_backward(dy, xd, wd, d),
        "public_fwd_nograd": lambda: dilated_causal_conv(xd, wd, bd, d),
        "public_fwd_grad": lambda: dilated_causal_conv(x, wt, bias, d),
        "public_fwd_bwd": fwd_bwd(lambda: dilated_causal_conv(x, wt, bias, d)),
    }
    return calls, fwd_bwd(lambda: dilated_causal_conv(x, wt, bias, d))


def part_host(quick: bool) -> None:
    """Host µs per call, thin launches against the path through Triton's wrappers, the eager
    autograd.Function against the custom op, and cuDNN (F.conv1d) on the same tiny shape."""
    import cProfile
    import io
    import pstats

    from encoders.fuzzytok import ops

    dt = torch.bfloat16
    B, T, C, K, d = 1, 256, 64, 3, 2
    calls, fb = _host_calls(B, T, C, K, d, dt)
    out: dict = {}
    for thin in (True, False):
        kn.THIN = thin
        for eager_fn in ((True, False) if thin else (False,)):
            ops.EAGER_FUNCTION = eager_fn
            tag = f"thin={int(thin)} eager_function={int(eager_fn)}"
            for name, fn in calls.items():
                if not thin and name.startswith(("torch_", "cudnn_", "op_floor", "launch_fwd_tma_raw")):
                    continue
                if not eager_fn and not name.startswith("public_"):
                    continue
                us = _host_us(fn, 100 if quick else 300)
                out.setdefault(tag, {})[name] = us
                log(f"host {tag:28s} {name:20s}: {us:7.1f} us per call")
    kn.THIN, ops.EAGER_FUNCTION = True, True
    thin = out["thin=1 eager_function=1"]
    ours = thin["op_fwd_nograd"] - thin["op_floor_nograd"]
    log(f"host: our Python inside a custom-op call (op_fwd_nograd - op_floor_nograd): {ours:.1f} us; "
        f"the raw launch saves {thin['launch_fwd_tma_raw0'] - thin['launch_fwd_tma_raw1']:.1f} us a TMA launch")
    calls_per = {name: (la.tuned_calls, la.direct_calls) for name, la in kn.LAUNCHERS.items()}
    log(f"host: launcher calls (through the wrappers, direct): {calls_per}")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(200):
        fb()
    prof.disable()
    torch.cuda.synchronize()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(18)
    text = buf.getvalue()
    log("cProfile of 200 eager fwd+bwd calls (thin launches, autograd.Function), by tottime:\n"
        + "\n".join(text.splitlines()[:44]))
    RESULTS["host"] = dict(shape=dict(B=B, T=T, C=C, K=K, d=d), host_us=out, cprofile=text, launcher_calls=calls_per)
    kn.clear_tuning()  # this tiny shape must not choose the tiles that the timed shapes then reuse


def _eager_row(C: int, K: int, d: int) -> dict:
    """Eager (do_bench, host included) and graph-replayed (GPU only) fwd and bwd of the public
    single op against cuDNN: F.conv1d on pre-padded (B, C, T) input, its best case (no pad, no
    transposes). Backward = y.backward(dy, retain_graph=True) on a recorded graph: dx, dW, db."""
    dt = torch.bfloat16
    B, T = EAGER_B, EAGER_T
    g = torch.Generator(device="cuda").manual_seed(C * 100 + K * 10 + d)
    x = torch.randn(B, T, C, device="cuda", dtype=dt, generator=g).requires_grad_()
    w = (torch.randn(C, C, K, device="cuda", generator=g) / (C * K) ** 0.5).to(dt).requires_grad_()
    b = (0.1 * torch.randn(C, device="cuda", generator=g)).to(dt).requires_grad_()
    dy = torch.randn(B, T, C, device="cuda", dtype=dt, generator=g)
    xp = F.pad(x.detach().transpose(1, 2), ((K - 1) * d, 0)).contiguous().requires_grad_()
    dyc = dy.transpose(1, 2).contiguous()
    flop = 2 * B * T * C * C * K
    y = dilated_causal_conv(x, w, b, d)
    yc = F.conv1d(xp, w, b, dilation=d)
    eager = {
        "ours_fwd": lambda: dilated_causal_conv(x, w, b, d),
        "ours_bwd": lambda: y.backward(dy, retain_graph=True),
        "ours_fb": lambda: dilated_causal_conv(x, w, b, d).backward(dy),
        "cudnn_fwd": lambda: F.conv1d(xp, w, b, dilation=d),
        "cudnn_bwd": lambda: yc.backward(dyc, retain_graph=True),
        "cudnn_fb": lambda: F.conv1d(xp, w, b, dilation=d).backward(dyc),
    }
    grads = {"ours": [x, w, b], "cudnn": [xp, w, b]}
    t: dict = {}
    for name, fn in eager.items():
        fn()  # tune, compile
        torch.cuda.synchronize()
        gtn = grads[name.split("_")[0]] if not name.endswith("fwd") else None
        t[f"{name}_eager"] = float(do_bench(fn, warmup=5, rep=25, grad_to_none=gtn, return_mode="median"))
    # Graph replay: forward, and forward + backward in one capture (a backward runs on its
    # forward's stream, so it is captured with it); backward = the difference. Fresh leaves: the
    # graphs recorded above keep their leaves' gradient accumulators on the default stream, which
    # would invalidate a capture on another stream.
    eager.clear()
    y = yc = None  # noqa: F841 - frees the recorded graphs (the closures above hold these cells)
    x, w, b, xp = (t_.detach().requires_grad_() for t_ in (x, w, b, xp))
    graphed = {
        "ours_fwd": lambda: dilated_causal_conv(x, w, b, d),
        "ours_fb": lambda: dilated_causal_conv(x, w, b, d).backward(dy),
        "cudnn_fwd": lambda: F.conv1d(xp, w, b, dilation=d),
        "cudnn_fb": lambda: F.conv1d(xp, w, b, dilation=d).backward(dyc),
    }
    grads = {"ours": [x, w, b], "cudnn": [xp, w, b]}
    for name, fn in graphed.items():
        gtn = grads[name.split("_")[0]] if name.endswith("fb") else None
        try:
            t[f"{name}_graph"] = float(do_bench_cudagraph(fn, rep=15, grad_to_none=gtn, return_mode="median"))
        except Exception as e:  # noqa: BLE001 - keep the eager numbers
            log(f"(graph timing of {name} failed: {type(e).__name__}: {str(e)[:120]})")
            t[f"{name}_graph"] = float("nan")
    for who in ("ours", "cudnn"):
        t[f"{who}_bwd_graph"] = t[f"{who}_fb_graph"] - t[f"{who}_fwd_graph"]
    ratio = {f"{p}_{m}": t[f"cudnn_{p}_{m}"] / t[f"ours_{p}_{m}"]
             for p in ("fwd", "bwd", "fb") for m in ("eager", "graph")}
    row = dict(B=B, T=T, C=C, K=K, d=d, flop=flop, ms=t, cudnn_over_ours=ratio)
    log(f"{C:4d} {K:2d} {d:2d} | {t['ours_fwd_eager'] * 1e3:7.1f} {t['cudnn_fwd_eager'] * 1e3:7.1f} "
        f"{ratio['fwd_eager']:5.2f} | {t['ours_bwd_eager'] * 1e3:7.1f} {t['cudnn_bwd_eager'] * 1e3:7.1f} "
        f"{ratio['bwd_eager']:5.2f} | {t['ours_fwd_graph'] * 1e3:7.1f} {t['cudnn_fwd_graph'] * 1e3:7.1f} "
        f"{ratio['fwd_graph']:5.2f} | {t['ours_bwd_graph'] * 1e3:7.1f} {t['cudnn_bwd_graph'] * 1e3:7.1f} "
        f"{ratio['bwd_graph']:5.2f}")
    return row


def part_eager(quick: bool) -> None:
    """The issue's grid: C × K × d, B = 16, T = 8192, bf16; µs and cuDNN ÷ ours (> 1: ours faster)."""
    torch.backends.cudnn.benchmark = True
    Cs = (64, 256) if quick else EAGER_CS
    log(f"{'C':>4} {'K':>2} {'d':>2} | {'fwd us':>7} {'cudnn':>7} {'ratio':>5} | {'bwd us':>7} {'cudnn':>7} "
        f"{'ratio':>5} | graph: {'fwd':>7} {'cudnn':>7} {'ratio':>5} | {'bwd':>7} {'cudnn':>7} {'ratio':>5}")
    rows = []
    for C in Cs:
        for K in EAGER_KS:
            for d in EAGER_DS:
                rows.append(_eager_row(C, K, d))
    worst = {k: min(r["cudnn_over_ours"][k] for r in rows if r["C"] >= 64) for k in rows[0]["cudnn_over_ours"]}
    log("eager part, C >= 64: worst cuDNN / ours " + ", ".join(f"{k} {v:.2f}" for k, v in worst.items()))
    RESULTS["eager"] = dict(rows=rows, worst_c_ge_64=worst, autotune={
        name: {str(k): str(v) for k, v in la.tuner.cache.items()} for name, la in kn.LAUNCHERS.items()})


def part_thin_check(quick: bool) -> None:
    """GPU correctness of the thin launches: the same outputs and gradients bit for bit as the
    path through Triton's wrappers, and against a float64 reference (bf16 inputs)."""
    from encoders.fuzzytok import ops

    fails = 0
    rows = []
    for C, K, d in ((64, 3, 2), (256, 5, 1), (32, 7, 4)):
        g = torch.Generator(device="cuda").manual_seed(C + K + d)
        B, T = 2, 1024
        x = torch.randn(B, T, C, device="cuda", generator=g).to(torch.bfloat16).requires_grad_()
        w = (torch.randn(C, C, K, device="cuda", generator=g) / (C * K) ** 0.5).to(torch.bfloat16).requires_grad_()
        b = torch.randn(C, device="cuda", generator=g).to(torch.bfloat16).requires_grad_()
        dy = torch.randn(B, T, C, device="cuda", generator=g).to(torch.bfloat16)
        got = {}
        for name, thin, eager_fn, raw in (("wrapped_op", False, False, True), ("thin_op", True, False, True),
                                          ("thin_function", True, True, True), ("thin_no_raw", True, True, False)):
            kn.THIN, ops.EAGER_FUNCTION, kn.RAW_LAUNCH = thin, eager_fn, raw
            for _ in range(3):  # the second call of a key is the direct one (the third reuses tensor maps)
                y = dilated_causal_conv(x, w, b, d)
                got[name] = [y, *torch.autograd.grad(y, [x, w, b], dy)]
        kn.THIN, ops.EAGER_FUNCTION, kn.RAW_LAUNCH = True, True, True
        raws = sum(e[6] is not None for la in kn.LAUNCHERS.values() for e in la.entries.values())
        log(f"thin check C{C} K{K} d{d}: {raws} of {sum(len(la.entries) for la in kn.LAUNCHERS.values())} "
            "recorded launches have a raw launch")
        same = all(torch.equal(a, c) for n in ("thin_op", "thin_function", "thin_no_raw")
                   for a, c in zip(got[n], got["wrapped_op"]))
        ins64 = [t.detach().double().requires_grad_() for t in (x, w, b)]
        y64 = dilated_causal_conv_ref(*ins64, d)
        want = [y64, *torch.autograd.grad(y64, ins64, dy.double())]
        errs = [rel(a, c) for a, c in zip(got["thin_function"], want)]
        ok = same and all(e <= 2e-2 for e in errs)
        fails += not ok
        rows.append(dict(C=C, K=K, d=d, bitwise_equal=same, errs=errs, ok=ok))
        log(f"thin check C{C} K{K} d{d}: thin == wrapped bit for bit: {same}; vs fp64 "
            + " ".join(f"{n}={e:.1e}" for n, e in zip(["y", "dx", "dW", "db"], errs)) + ("" if ok else "  FAIL"))
    RESULTS["thin_check"] = dict(rows=rows, failures=fails)
    kn.clear_tuning()
    log(f"thin check: {fails} failures")


def _warm_one(job: str) -> None:
    """Child process (``--warm C,K,what``): compile every config the autotuner would time for one
    eager-grid key into Triton's on-disk cache, running each once instead of timing it."""
    C, K, what = job.split(",")
    C, K = int(C), int(K)
    for la in kn.LAUNCHERS.values():
        la.tuner.__dict__["do_bench"] = lambda fn, quantiles=None: (fn(), [1.0, 1.0, 1.0])[1]
    dt = torch.bfloat16
    x = torch.randn(EAGER_B, EAGER_T, C, device="cuda", dtype=dt)
    w = torch.randn(C, C, K, device="cuda", dtype=dt)
    if what == "fwd":
        kn.conv_forward(x, w, torch.zeros(C, device="cuda", dtype=dt), 2)
    elif what == "dx":
        kn.conv_forward(x, w, None, 2, transpose=True)
    else:
        kn.conv_weight_grad(x, x, 2, K, with_bias=True)
    torch.cuda.synchronize()


def precompile(workers: int, quick: bool) -> None:
    """Fill Triton's cache for the eager grid from ``workers`` processes at once (the device's
    CPUs compile in parallel what the autotuner would otherwise compile one config at a time)."""
    import subprocess

    Cs = (64, 256) if quick else EAGER_CS
    jobs = [f"{C},{K},{what}" for C in Cs for K in EAGER_KS for what in ("fwd", "dx", "dw")]
    t0 = time.time()
    running: list = []
    failed = 0
    for job in jobs:
        while len(running) >= workers:
            for p in running:
                if p.poll() is not None:
                    failed += p.returncode != 0
                    running.remove(p)
                    break
            else:
                time.sleep(0.05)
        running.append(subprocess.Popen([sys.executable, __file__, "--warm", job], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
    for p in running:
        failed += p.wait() != 0
    log(f"precompile: {len(jobs)} jobs on {workers} processes in {time.time() - t0:.0f} s, {failed} failed")
    RESULTS["precompile"] = dict(jobs=len(jobs), workers=workers, seconds=time.time() - t0, failed=failed)


# -- memory ----------------------------------------------------------------------------------------


def _peak_training_bytes(fn, inputs: list) -> int:  # noqa: ANN001
    """Peak bytes allocated during fwd+bwd above what was allocated before it."""
    for t in inputs:
        t.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def part_memory(quick: bool) -> None:
    dt = torch.bfloat16
    C, K, dils, blocks, B = 256, 3, (1, 2, 4), 3, 8
    ps = _stack_params(C, K, dils, blocks, dt)
    bb = Backbone(BackboneConfig(layers=2, dim=C, heads=4)).cuda().to(dt)
    rows = []
    for T in (1024, 8192, 65536):
        x = torch.randn(B, T, C, device="cuda", dtype=dt).requires_grad_()
        dy = torch.randn(B, T, C, device="cuda", dtype=dt)
        ins = [x] + [p for wb in ps for p in wb] + list(bb.parameters())
        row = dict(T=T, B=B, act_tensor_bytes=x.numel() * x.element_size())
        for impl in ("torch", "fused", "layers", "store"):
            row[impl] = _peak_training_bytes(partial(_stack_step, x, dy, ps, dils, impl), ins)
        x_nct = x.detach().transpose(1, 2).contiguous().requires_grad_()
        dy_nct = dy.transpose(1, 2).contiguous()
        row["cudnn_nct"] = _peak_training_bytes(partial(_stack_step, x_nct, dy_nct, ps, dils, "cudnn_nct"),
                                                [x_nct] + ins[1:])
        del x_nct, dy_nct
        row["backbone_sdpa"] = _peak_training_bytes(partial(_stack_step, x, dy, bb, dils, "backbone"), ins)
        row["fused_over_torch"] = row["fused"] / row["torch"]
        row["store_over_torch"] = row["store"] / row["torch"]
        rows.append(row)
        log(f"memory T={T:6d} B={B}: torch {row['torch'] / 2**20:8.0f} MiB, fused {row['fused'] / 2**20:8.0f} MiB "
            f"({row['fused_over_torch']:.2f}x), cudnn_nct {row['cudnn_nct'] / 2**20:8.0f} MiB, layers {row['layers'] / 2**20:8.0f} MiB, "
            f"store {row['store'] / 2**20:8.0f} MiB ({row['store_over_torch']:.2f}x), "
            f"backbone(2x256, SDPA) {row['backbone_sdpa'] / 2**20:8.0f} MiB; one (B,T,C) tensor = "
            f"{row['act_tensor_bytes'] / 2**20:.0f} MiB")

    RESULTS["memory"] = rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer layer shapes")
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="folder for bench_fuzzytok.json")
    ap.add_argument("--parts", default="check,peak,layer,stack,memory")
    ap.add_argument("--check-dtype", choices=tuple(CHECK_DTYPES), default="both",
                    help="check part: fp32 inputs (TF32 dots), bf16, or both (each compiles its own kernels)")
    ap.add_argument("--precompile", type=int, default=0, metavar="N",
                    help="before the parts, compile the eager grid's configs from N processes at once")
    ap.add_argument("--warm", default=None, help=argparse.SUPPRESS)  # child of --precompile
    ap.add_argument("--timer", choices=("graph", "eager"), default="graph",
                    help="layer and gemm parts: CUDA-graph replay (kernel time) or eager do_bench (host included)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_fuzzytok.py needs a CUDA GPU")
    if args.warm:
        _warm_one(args.warm)
        return
    parts = args.parts.split(",")
    global TIMER
    TIMER = args.timer
    RESULTS["env"] = dict(
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        gpu=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
        cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(), command=" ".join(sys.argv), timer=args.timer,
    )
    log(json.dumps(RESULTS["env"]))
    t0 = time.time()
    peak = 0.0
    out = Path(args.out) / "bench_fuzzytok.json"
    if args.precompile:
        precompile(args.precompile, args.quick)
    for part in parts:
        t = time.time()
        try:
            if part == "check":
                part_check(args.quick, CHECK_DTYPES[args.check_dtype])
            elif part == "peak":
                peak = part_peak(args.quick)
            elif part == "layer":
                part_layer(args.quick, peak or part_peak(args.quick))
            elif part == "stack":
                part_stack(args.quick, peak)
            elif part == "memory":
                part_memory(args.quick)
            elif part == "gemm":
                part_gemm(args.quick, peak or part_peak(args.quick))
            elif part == "profile":
                part_profile(args.quick)
            elif part == "launch":
                part_launch(args.quick)
            elif part == "host":
                part_host(args.quick)
            elif part == "eager":
                part_eager(args.quick)
            elif part == "thincheck":
                part_thin_check(args.quick)
            else:
                raise SystemExit(f"--parts: unknown part {part!r}")
        except SystemExit:
            raise
        except Exception:  # noqa: BLE001 - one failing part must not lose the others
            log(f"[{part} FAILED]\n{traceback.format_exc()[-3000:]}")
        RESULTS.setdefault("seconds", {})[part] = time.time() - t
        out.write_text(json.dumps(RESULTS, indent=1))  # after every part: a timeout keeps the rest
        log(f"[{part} done in {time.time() - t:.0f} s, total {time.time() - t0:.0f} s]")


if __name__ == "__main__":
    main()
