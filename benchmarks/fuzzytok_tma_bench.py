"""Experimental TMA conv forward (encoders/fuzzytok/kernels_tma.py) vs our pointer-based kernel.

    python3 benchmarks/fuzzytok_tma_bench.py [--quick]

One CUDA GPU (an H200 in mind). bf16, B = 32, T = 4096, C_in = C_out = C ∈ {128, 256, 512},
K ∈ {3, 7}, d ∈ {1, 4}, with bias. For each shape:
  * check: ‖a − b‖ / ‖b‖ of each TMA kernel vs ``kernels.launch_conv`` (must be < 1e-2), and of
    ``launch_conv`` vs the fp32 reference (cuDNN conv1d on the fp32 copies of the same inputs);
  * time (do_bench median, L2 flushed before each call): ours (``launch_conv``), TMA one-tile-per-
    program, TMA persistent, and torch.matmul of the GEMM the conv is, (B·T, K·C) @ (K·C, C) — the
    cuBLAS ceiling at this shape (no shifting, no causal zeros);
  * TFLOP/s = 2·B·T·C·C·K / time, and its fraction of a measured bf16 8192³ torch.matmul peak.
Also a CUDA-graph replay time of ours and of the TMA kernel (no host launch cost in it).

Prints a table at the end; writes JSON to $OUT/fuzzytok_tma.json when $OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from triton.testing import do_bench, do_bench_cudagraph  # noqa: E402

from encoders.fuzzytok import kernels as kn  # noqa: E402
from encoders.fuzzytok import kernels_tma as kt  # noqa: E402
from encoders.fuzzytok.reference import dilated_causal_conv_ref  # noqa: E402

B, T = 32, 4096
DTYPE = torch.bfloat16
T0 = time.time()


def log(msg: str) -> None:
    print(f"[{time.time() - T0:6.1f}s] {msg}", flush=True)


def bench(fn, rep: int = 100) -> float:
    """Median milliseconds."""
    return float(do_bench(fn, warmup=25, rep=rep, return_mode="median"))


def bench_graph(fn) -> float | None:
    try:
        return float(do_bench_cudagraph(fn, rep=20, return_mode="median"))
    except Exception as e:  # graph capture is a sanity check only
        log(f"  cudagraph failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
        return None


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def peak_tflops() -> float:
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=DTYPE)
    b = torch.randn(n, n, device="cuda", dtype=DTYPE)
    ms = bench(lambda: torch.matmul(a, b))
    return 2 * n**3 / (ms * 1e-3) / 1e12


def run_shape(C: int, K: int, d: int, peak: float) -> dict:
    g = torch.Generator(device="cuda").manual_seed(C * 100 + K * 10 + d)
    x32 = torch.randn(B, T, C, device="cuda", generator=g)
    w32 = torch.randn(C, C, K, device="cuda", generator=g) / (C * K) ** 0.5
    b32 = torch.randn(C, device="cuda", generator=g)
    x, bias = x32.to(DTYPE), b32.to(DTYPE)
    w_kio = kn.gemm_weight(w32, False, DTYPE)

    fns = {
        "ours": lambda: kn.launch_conv(x, w_kio, bias, d),
        "tma": lambda: kt.tma_conv_forward(x, w_kio, bias, d),
        "tma_persistent": lambda: kt.tma_conv_forward_persistent(x, w_kio, bias, d),
    }
    out: dict = dict(C=C, K=K, d=d, B=B, T=T)
    # First calls autotune (and compile); keep it apart from the timed runs.
    t = time.time()
    y = {name: f() for name, f in fns.items()}
    torch.cuda.synchronize()
    out["first_call_s"] = round(time.time() - t, 2)
    ref = dilated_causal_conv_ref(x.float(), w32.to(DTYPE).float(), bias.float(), d)
    out["err_ours_vs_ref"] = rel(y["ours"], ref)
    ok = True
    for name in ("tma", "tma_persistent"):
        e = rel(y[name], y["ours"])
        out[f"err_{name}_vs_ours"] = e
        ok &= e < 1e-2
    out["check_ok"] = bool(ok)
    out["configs"] = {
        "ours": str(kn._conv_kernel.best_config),
        "tma": str(kt._tma_conv_kernel.best_config),
        "tma_persistent": str(kt._tma_conv_persistent_kernel.best_config),
    }
    del y, ref

    flops = 2 * B * T * C * C * K
    a = torch.randn(B * T, K * C, device="cuda", dtype=DTYPE)
    bm = torch.randn(K * C, C, device="cuda", dtype=DTYPE)
    fns["cublas_gemm"] = lambda: torch.matmul(a, bm)
    for name, f in fns.items():
        ms = bench(f)
        out[f"{name}_ms"] = ms
        out[f"{name}_tflops"] = flops / (ms * 1e-3) / 1e12
        out[f"{name}_of_peak"] = out[f"{name}_tflops"] / peak
    for name in ("ours", "tma"):
        ms = bench_graph(fns[name])
        out[f"{name}_graph_ms"] = ms
    out["tma_speedup"] = out["ours_ms"] / out["tma_ms"]
    out["tma_persistent_speedup"] = out["ours_ms"] / out["tma_persistent_ms"]
    log(f"C={C} K={K} d={d}: err tma {out['err_tma_vs_ours']:.1e} pers {out['err_tma_persistent_vs_ours']:.1e} "
        f"ours-vs-ref {out['err_ours_vs_ref']:.1e} | ms ours {out['ours_ms']:.4f} tma {out['tma_ms']:.4f} "
        f"pers {out['tma_persistent_ms']:.4f} cublas {out['cublas_gemm_ms']:.4f} | first call {out['first_call_s']}s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="C ∈ {128, 256}, K = 3, d = 1 only")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    props = torch.cuda.get_device_properties(0)
    log(f"{props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
        f"triton {__import__('triton').__version__}")
    peak = peak_tflops()
    log(f"bf16 8192^3 torch.matmul: {peak:.1f} TFLOP/s")
    shapes = ([(C, 3, 1) for C in (128, 256)] if args.quick
              else [(C, K, d) for C in (128, 256, 512) for K in (3, 7) for d in (1, 4)])
    rows = []
    for C, K, d in shapes:
        try:
            rows.append(run_shape(C, K, d, peak))
        except Exception as e:
            traceback.print_exc()
            rows.append(dict(C=C, K=K, d=d, error=f"{type(e).__name__}: {e}"))
        torch.cuda.empty_cache()

    hdr = (f"{'C':>4} {'K':>2} {'d':>2} | {'ours ms':>8} {'TF/s':>6} {'%pk':>4} | {'tma ms':>8} {'TF/s':>6} {'%pk':>4} "
           f"{'x':>5} | {'pers ms':>8} {'TF/s':>6} {'x':>5} | {'cuBLAS ms':>9} {'TF/s':>6} {'%pk':>4} | "
           f"{'graph ours':>10} {'graph tma':>9} | {'err tma':>7} {'err pers':>8} ok")
    print("\n" + hdr)
    print("-" * len(hdr))
    for r in rows:
        if "error" in r:
            print(f"{r['C']:>4} {r['K']:>2} {r['d']:>2} | ERROR {r['error'][:150]}")
            continue

        def gms(v: float | None) -> str:
            return f"{v:.4f}" if v is not None else "-"

        print(f"{r['C']:>4} {r['K']:>2} {r['d']:>2} | {r['ours_ms']:8.4f} {r['ours_tflops']:6.1f} "
              f"{100 * r['ours_of_peak']:4.0f} | {r['tma_ms']:8.4f} {r['tma_tflops']:6.1f} "
              f"{100 * r['tma_of_peak']:4.0f} {r['tma_speedup']:5.2f} | {r['tma_persistent_ms']:8.4f} "
              f"{r['tma_persistent_tflops']:6.1f} {r['tma_persistent_speedup']:5.2f} | "
              f"{r['cublas_gemm_ms']:9.4f} {r['cublas_gemm_tflops']:6.1f} {100 * r['cublas_gemm_of_peak']:4.0f} | "
              f"{gms(r['ours_graph_ms']):>10} {gms(r['tma_graph_ms']):>9} | "
              f"{r['err_tma_vs_ours']:7.1e} {r['err_tma_persistent_vs_ours']:8.1e} {'ok' if r['check_ok'] else 'FAIL'}")
    print("x = speed-up over ours (ours ms / tma ms); %pk = share of the 8192^3 bf16 matmul peak.")
    print("best configs:")
    for r in rows:
        if "configs" in r:
            print(f"  C={r['C']} K={r['K']} d={r['d']}: " + "; ".join(f"{k}: {v}" for k, v in r["configs"].items()))
    result = dict(device=props.name, sms=props.multi_processor_count, torch=torch.__version__,
                  peak_tflops=peak, B=B, T=T, dtype=str(DTYPE), rows=rows, total_s=time.time() - T0)
    if os.environ.get("OUT"):
        path = Path(os.environ["OUT"]) / "fuzzytok_tma.json"
        path.write_text(json.dumps(result, indent=1))
        log(f"wrote {path}")
    log("done")


if __name__ == "__main__":
    main()
