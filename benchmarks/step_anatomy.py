"""Where a training step's GPU time goes at the standard suite's sizes, and what its ops can reach.

Two parts, each against the bf16 8192^3 GEMM rate measured in the same process (MFU's ceiling):

* ``ops`` — the rates of the ops one backbone layer is made of, alone, at the training step's
  shapes (B windows x N positions, dim, heads from the suite): every linear layer's forward and
  both backward GEMMs, causal SDPA forward and forward+backward per backend (flash, memory-
  efficient, cuDNN), and an RMSNorm's memory-bound pass. From them, the step's floor: one
  layer's FLOPs over the time those ops take at their measured rates — the MFU a perfect fusion
  of everything else would still be held to.
* ``steps`` — the one training loop (``train_encoder``, compiled as the run compiles) for each
  chosen encoder: a few warm-up steps (compile), then ``--steps`` steps under the torch profiler;
  prints ms per step (profiled), GPU kernel time per step by kind (GEMM, attention, inductor's
  fused Triton kernels, FuzzyTok's kernels, optimizer, copies, other) and the top kernels.

    python3 benchmarks/step_anatomy.py suites/standard.yaml --parts ops,steps \
        --encoders bytes,bpe-1024 [--steps 6] [--set budget.train_bytes=...]

On a CPU machine only ``steps`` runs (tiny suites; the ops part needs CUDA events).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.accel import attention_backends, gemm_tflops  # noqa: E402
from harness.config.build import load_suite  # noqa: E402
from harness.data import default_cache_dir, load_data, source_context, training_windows  # noqa: E402
from harness.run import build_encoder, pick_device  # noqa: E402
from harness.train import fit_context, train_encoder  # noqa: E402


def cuda_ms(fn: Callable[[], object], reps: int = 10) -> float:
    """Median milliseconds of ``fn()`` over ``reps`` calls (CUDA events) after 3 warm-up calls."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out)


def gemm_ms(m: int, k: int, nout: int, g: torch.Generator) -> tuple[float, float, float]:
    """Milliseconds of a linear layer's forward (m x k -> nout) and of its two backward GEMMs
    (dX = dY W, dW = dY^T X), bf16."""
    dev, bf = torch.device("cuda"), torch.bfloat16
    x = torch.randn(m, k, device=dev, dtype=bf, generator=g)
    w = torch.randn(nout, k, device=dev, dtype=bf, generator=g)
    dy = torch.randn(m, nout, device=dev, dtype=bf, generator=g)
    return cuda_ms(lambda: F.linear(x, w)), cuda_ms(lambda: dy @ w), cuda_ms(lambda: dy.t() @ x)


def sdpa_ms(windows: int, heads: int, n: int, hd: int, backend: object,
            g: torch.Generator) -> tuple[float, float, float]:
    """(forward ms, forward+backward ms, host ms a forward+backward) of causal SDPA on
    (windows, heads, n, hd) bf16 under one backend; raises RuntimeError where it cannot run."""
    from torch.nn.attention import sdpa_kernel

    dev, bf = torch.device("cuda"), torch.bfloat16
    q, k, v = (torch.randn(windows, heads, n, hd, device=dev, dtype=bf, generator=g, requires_grad=True)
               for _ in range(3))
    do = torch.randn(windows, heads, n, hd, device=dev, dtype=bf, generator=g)

    def fb() -> None:
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(do)

    with sdpa_kernel([backend]):
        t_f = cuda_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        t_fb = cuda_ms(fb)
        torch.cuda.synchronize()
        t0 = time.perf_counter()  # host time of back-to-back calls: what a launch costs the CPU
        for _ in range(5):
            fb()
        host = (time.perf_counter() - t0) / 5 * 1e3
        torch.cuda.synchronize()
    return t_f, t_fb, host


def sdpa_agreement(windows: int, heads: int, n: int, hd: int, g: torch.Generator) -> None:
    """How far flash and cuDNN causal attention (output and q/k/v gradients, bf16) are from a
    float32 math-backend reference, on the backbone's own layout: q, k, v as (B, H, N, hd)
    views of a position-major (B, N, 3, H, hd) tensor (``CausalSelfAttention``)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dev = torch.device("cuda")
    base = torch.randn(windows, n, 3, heads, hd, device=dev, generator=g)
    dy = torch.randn(windows, heads, n, hd, device=dev, generator=g)
    results = {}
    for label, be, dt in (("math fp32", SDPBackend.MATH, torch.float32), ("flash", SDPBackend.FLASH_ATTENTION, torch.bfloat16),
                          ("cudnn", SDPBackend.CUDNN_ATTENTION, torch.bfloat16)):
        qkv = base.to(dt).detach().requires_grad_()  # a leaf of its own for each backend
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        try:
            with sdpa_kernel([be]):
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                y.backward(dy.to(dt))
        except RuntimeError as e:
            print(f"agreement {label}: not available ({str(e).splitlines()[0][:100]})")
            continue
        results[label] = (y.float(), qkv.grad.float())
    ref_y, ref_g = results["math fp32"]
    for label in ("flash", "cudnn"):
        if label in results:
            y, gr = results[label]
            print(f"agreement {label:<5} vs fp32 math ({windows} x {n}, the backbone's layout): output max |diff| "
                  f"{(y - ref_y).abs().max().item():.2e} (max |y| {ref_y.abs().max().item():.2f}), grads max |diff| "
                  f"{(gr - ref_g).abs().max().item():.2e} (max |grad| {ref_g.abs().max().item():.2f})")


def ops_part(windows: int, n: int, dim: int, heads: int, mlp: int, peak: float) -> None:
    """Rates of one layer's ops at (windows, n, dim); prints each and the layer's floor."""
    from torch.nn.attention import SDPBackend

    dev = torch.device("cuda")
    m = windows * n
    g = torch.Generator(device=dev).manual_seed(0)
    print(f"\n== ops at {windows} windows x {n} positions, dim {dim}, {heads} heads "
          f"(ceiling {peak:.0f} TFLOP/s)")
    layer_ms = 0.0
    layer_flops = 0.0
    for name, k, nout in (("qkv", dim, 3 * dim), ("proj", dim, dim), ("fc", dim, mlp * dim), ("out", mlp * dim, dim)):
        f = 2.0 * m * k * nout
        times = gemm_ms(m, k, nout, g)
        for what, t in zip(("fwd", "dX", "dW"), times):
            print(f"gemm {name:<5} {what:<3} ({m} x {k} -> {nout}): {t:7.3f} ms  {f / t / 1e9:6.1f} TFLOP/s "
                  f"= {f / t / 1e9 / peak:5.1%}")
        layer_ms += sum(times)
        layer_flops += 3 * f
    f_att = 2 * 2 * windows * heads * n * n * (dim // heads) * 0.5  # QK^T and AV, causal half
    best_att = None
    for label, be in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                      ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            t_f, t_fb, host = sdpa_ms(windows, heads, n, dim // heads, be, g)
        except RuntimeError as e:
            print(f"sdpa {label:<9}: not available ({str(e).splitlines()[0][:100]})")
            continue
        print(f"sdpa {label:<9} causal fwd {t_f:7.3f} ms {f_att / t_f / 1e9:6.1f} TFLOP/s = {f_att / t_f / 1e9 / peak:5.1%}; "
              f"fwd+bwd {t_fb:7.3f} ms {3.5 * f_att / t_fb / 1e9:6.1f} TFLOP/s (bwd at 2.5x fwd FLOPs); "
              f"host {host:.2f} ms a fwd+bwd (back-to-back)")
        if best_att is None or t_fb < best_att[1]:
            best_att = (label, t_fb)
    sdpa_agreement(8, heads, n, dim // heads, g)
    x = torch.randn(m, dim, device=dev, dtype=torch.bfloat16, generator=g)
    wn = torch.ones(dim, device=dev, dtype=torch.bfloat16)

    def rms() -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype) * wn

    t_e, t_c = cuda_ms(rms), cuda_ms(torch.compile(rms))
    moved = 2 * m * dim * 2  # read + write, bf16
    print(f"rmsnorm ({m} x {dim}) eager {t_e:.3f} ms, compiled {t_c:.3f} ms = {moved / t_c / 1e9:.2f} TB/s")
    if best_att is not None:
        layer_ms += best_att[1]
        layer_flops += 3.5 * f_att
        print(f"one layer's GEMMs + {best_att[0]} attention, nothing else: {layer_ms:.2f} ms, "
              f"{layer_flops / layer_ms / 1e9:.0f} TFLOP/s = {layer_flops / layer_ms / 1e9 / peak:.1%} of the ceiling "
              f"(the step's floor without norms, RoPE, GELU, residuals, embedding, head, loss, optimizer)")


KINDS = (
    ("attention", ("flash", "fmha", "attention", "sdpa", "cudnn")),
    ("gemm", ("gemm", "nvjet", "cutlass", "sm90_", "sm80_", "xmma", "ampere_", "cublas")),
    ("optimizer", ("multi_tensor", "adam", "fused_adam")),
    ("copy", ("memcpy", "memset", "copy_kernel", "copy_")),
    ("inductor triton", ("triton_",)),
)


def kind_of(name: str) -> str:
    low = name.lower()
    for kind, keys in KINDS:
        if any(k in low for k in keys):
            return kind
    if "conv" in low or "fuzzy" in low or low.startswith("_"):
        return "fuzzytok/own triton"
    return "other"


def steps_part(suite_path: str, sets: list[str], labels: list[str], steps: int, warm: int,
               device: torch.device, cache: str | None, top: int) -> None:
    suite = load_suite(suite_path, sets)
    ctx = source_context(suite, Path(cache) if cache else default_cache_dir(), print)
    data = load_data(suite, ctx, prepare=False)
    docs = data.train.docs
    b = suite.budget
    for spec in suite.encoders:
        if labels and spec.label not in labels:
            continue
        t0 = time.perf_counter()
        enc = build_encoder(spec, 0, Path(suite_path).resolve().parent).to(device)
        enc.fit(fit_context(docs, b, device, 0))
        t_fit = time.perf_counter() - t0
        t0 = time.perf_counter()
        wb = replace(b, train_bytes=warm * b.batch_bytes, warmup_bytes=0)
        train_encoder(enc, training_windows(docs, 4 * warm * b.batch_bytes, b.context_bytes, 0),
                      warm * b.batch_bytes, wb, device)
        t_warm = time.perf_counter() - t0
        pb = replace(b, train_bytes=steps * b.batch_bytes, warmup_bytes=0)
        acts = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=acts) as prof:
            st = train_encoder(enc, training_windows(docs, 4 * steps * b.batch_bytes, b.context_bytes, 1),
                               steps * b.batch_bytes, pb, device)
        n = max(1, st["steps"])
        by_kind: dict[str, float] = defaultdict(float)
        rows = []
        for e in prof.key_averages():
            if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
                continue
            t = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0.0)
            if t <= 0:
                continue
            by_kind[kind_of(e.key)] += t
            rows.append((t, e.count, e.key))
        total = sum(by_kind.values()) / 1e3 / n  # ms of kernel time per step
        wall = st["seconds"] / n * 1e3
        fl = st.get("flops_causal_attn_half", st["flops"]) / n
        print(f"\n== {spec.label}: fit {t_fit:.1f} s, {warm} warm-up steps {t_warm:.1f} s; {n} profiled steps: "
              f"{wall:.1f} ms a step (profiled wall), GPU kernels {total:.1f} ms a step, "
              f"{fl / 1e12:.2f} TFLOP a step (causal half) -> {fl / max(total / 1e3, 1e-12) / 1e12:.0f} TFLOP/s in kernels")
        for kind, t in sorted(by_kind.items(), key=lambda kv: -kv[1]):
            print(f"  {kind:<20} {t / 1e3 / n:8.2f} ms a step  {t / 1e3 / n / max(total, 1e-12):6.1%}")
        rows.sort(reverse=True)
        for t, count, key in rows[:top]:
            print(f"  {t / 1e3 / n:8.3f} ms a step  x{count / n:5.1f}  [{kind_of(key)}] {key[:110]}")
        del enc
        if device.type == "cuda":
            torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite")
    ap.add_argument("--set", action="append", default=[], dest="sets")
    ap.add_argument("--parts", default="ops,steps", help="ops, ops320 (the ops at BPE-1024's length too), steps, agree (flash and cuDNN against fp32 alone)")
    ap.add_argument("--encoders", default="", help="comma-separated labels (default: all)")
    ap.add_argument("--steps", type=int, default=6, help="profiled steps per encoder")
    ap.add_argument("--warm", type=int, default=8, help="warm-up steps per encoder (compile)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--cache", default=None)
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    device = pick_device(a.device)
    parts = set(a.parts.split(","))
    if device.type == "cuda":
        attention_backends()  # as the run chooses them
        peak = gemm_tflops(device) or float("nan")
        print(f"gemm bf16 8192^3: {peak:.1f} TFLOP/s; torch {torch.__version__}, {torch.cuda.get_device_name()}")
        if "agree" in parts and "ops" not in parts:  # the agreement check alone (ops runs it too)
            suite = load_suite(a.suite, a.sets)
            bb, bu = suite.backbone, suite.budget
            sdpa_agreement(8, bb.heads, bu.context_bytes, bb.dim // bb.heads, torch.Generator(device=device).manual_seed(0))
        if "ops" in parts:
            suite = load_suite(a.suite, a.sets)
            bb, bu = suite.backbone, suite.budget
            ops_part(bu.windows_per_step, bu.context_bytes, bb.dim, bb.heads, bb.mlp_ratio, peak)
            # BPE-1024's shape: ~3 bytes a token (its training windows are shorter in positions)
            if "ops320" in parts:
                ops_part(bu.windows_per_step, 320, bb.dim, bb.heads, bb.mlp_ratio, peak)
    if "steps" in parts:
        steps_part(a.suite, a.sets, [s for s in a.encoders.split(",") if s], a.steps, a.warm, device,
                   a.cache, a.top)


if __name__ == "__main__":
    main()
