"""Where a scoring forward's time goes: the standard suite's backbone (6 x 384) under
``torch.inference_mode`` and bf16 autocast, eager or compiled as the run compiles it
(``--compile``), at the scoring shapes of each encoder family (bytes: 1 KB windows of 1024
positions; BPE: ~3.5 bytes a token, so ~290 positions), timed in parts — backbone alone, + the
output head in each scoring mode (``OutputHead``: float32 logits from float32 operands, "mixed"
float32 logits from bf16 operands, TF32, or bf16 logits as training computes them), + the
per-token NLL (fp32 log-softmax and gather) — each against the bf16 8192^3 GEMM rate measured
in the same process.

Why: on an H200 scoring ran at 8-11 % of that rate for BPE and
16-17 % for bytes whether a forward held 64 or 256 windows, so its cost is in the kernels of a
forward, not in launches; this says which.

    python3 benchmarks/bench_score_forward.py --compile both    # on a GPU
    python3 benchmarks/bench_score_forward.py --device cpu --windows 2 --dim 64 --layers 2 --heads 4 --reps 2
    python3 benchmarks/bench_score_forward.py --floor --compile skip    # the kernels' floor alone

``--floor``: the same families' forwards reduced to their tensor-core work — each matmul of a
block (qkv, proj, MLP in and out) at its shape, causal attention (SDPA as the run picks it) and the
head in bf16, each timed alone, the block's summed over the layers. The sum is the least time a
forward of this width and batch can take with these kernels, everything else (norms, RoPE,
GELU, residual adds, the fp32 head's extra work, the host) free; its MFU is the most any scoring
forward of this shape could reach with them — the yardstick for the run's scoring MFU.

Times are medians of ``--reps`` forwards after 2 warm-up ones (CUDA events on a GPU). FLOPs: 2
per multiply-add of every linear layer (and the head), causal attention at half (QK^T and AV:
2 * 2 * N^2 * dim / 2 per sequence and layer), as ``Backbone.flops`` counts them.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F

import encoders.backbone as backbone_mod
from encoders.backbone import Backbone, BackboneConfig, OutputHead, causal_attention_cost
from harness.infra.accel import attention_backends, compile_backbones


def timed(fn: Callable[[], object], reps: int, device: torch.device) -> float:
    """Median seconds of ``fn()`` over ``reps`` calls after two warm-up calls."""
    for _ in range(2):
        fn()
    out = []
    for _ in range(reps):
        if device.type == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            out.append(a.elapsed_time(b) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return statistics.median(out)


def gemm_rate(device: torch.device, n: int) -> float:
    """FLOP/s of one bf16 (GPU; fp32 on CPU) n x n x n matmul."""
    dt = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dt)
    b = torch.randn(n, n, device=device, dtype=dt)
    return 2 * n**3 / timed(lambda: a @ b, 5, device)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--windows", type=int, default=256, help="windows per forward (eval.batch_windows)")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--gemm", type=int, default=8192, help="side of the ceiling's GEMM")
    ap.add_argument("--floor", action="store_true",
                    help="also time each tensor-core op of a forward alone (see the module docstring)")
    ap.add_argument("--compile", choices=["no", "yes", "both", "skip"], default="no",
                    help="the backbone eager (no), compiled as the run compiles it (yes: "
                         "harness.infra.accel.compile_backbones, batch and length symbolic), each in turn, "
                         "or not at all (skip: with --floor, the floor alone)")
    args = ap.parse_args()
    dev = torch.device(args.device)
    torch.manual_seed(0)
    if dev.type == "cuda":
        attention_backends()  # as the run chooses them
    cfg = BackboneConfig(layers=args.layers, dim=args.dim, heads=args.heads)
    ceiling = gemm_rate(dev, args.gemm)
    print(f"device {dev} ({torch.cuda.get_device_name(dev) if dev.type == 'cuda' else 'cpu'}), "
          f"torch {torch.__version__}; backbone {args.layers} x {args.dim}, {args.windows} windows; "
          f"GEMM ceiling {ceiling / 1e12:.1f} TFLOP/s")
    autocast = torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda")
    if args.floor:
        print("-- the kernels' floor: each tensor-core op alone, a block's summed over the layers")
        table("op", lambda vocab, n: floor_parts(cfg, vocab, n, args.windows, args.reps, dev), autocast, ceiling, dev)
    for compiled in {"no": [False], "yes": [True], "both": [False, True], "skip": []}[args.compile]:
        torch.manual_seed(0)
        bb = Backbone(cfg).to(dev).eval()
        if compiled:
            compile_backbones(bb)
        print(f"-- backbone {'compiled (symbolic batch and length)' if compiled else 'eager'}")
        table("part", lambda vocab, n, bb=bb: parts(bb, vocab, n, args.windows, args.reps, dev), autocast, ceiling, dev)


def table(what: str, rows: Callable[[int, int], list[tuple[str, float, float]]], autocast: object,
          ceiling: float, dev: torch.device) -> None:
    """Print ``rows(vocab, positions)`` — (name, seconds, FLOPs) — for each family, under inference
    mode and ``autocast``: ms, TFLOP/s and the share of the GEMM ceiling (FLOP/s)."""
    print(f"{'case':<12} {'positions':>9} {what:<34} {'ms':>8} {'TFLOP/s':>8} {'of ceiling':>10}")
    for name, vocab, n in FAMILIES:
        with torch.inference_mode(), autocast:  # type: ignore[attr-defined]
            for part, sec, flops in rows(vocab, n):
                print(f"{name:<12} {n:>9} {part:<34} {sec * 1e3:8.2f} {flops / sec / 1e12:8.1f} "
                      f"{flops / sec / ceiling:9.1%}")
        if dev.type == "cuda":
            torch.cuda.empty_cache()

# (family, vocabulary, positions a scoring window): bytes 1 KB windows of 1024 positions; BPE ~3.5
# bytes a token
FAMILIES = (("bytes", 256, 1024), ("bpe-4096", 4096, 290), ("bpe-16384", 16384, 256))


def floor_parts(cfg: BackboneConfig, vocab: int, n: int, windows: int, reps: int, dev: torch.device
                ) -> list[tuple[str, float, float]]:
    """(op, median seconds, FLOPs) of each tensor-core op of one family's scoring forward, timed
    alone on random bf16 operands (fp32 on a CPU) under the caller's autocast: a block's four
    matmuls on M = windows * n rows, causal SDPA on (windows, heads, n, dim / heads), and the
    head; then "block ops x layers" and "floor: + head", the summed time with the FLOPs
    ``Backbone.flops`` counts (attention at half) and the head's 2 * M * dim * vocab."""
    d, h, m = cfg.dim, cfg.mlp_ratio * cfg.dim, windows * n
    dt = torch.bfloat16 if dev.type == "cuda" else torch.float32
    hd = d // cfg.heads
    rows = [(f"qkv {m} x {d} -> {3 * d}", m, d, 3 * d), (f"proj {m} x {d} -> {d}", m, d, d),
            (f"mlp in {m} x {d} -> {h}", m, d, h), (f"mlp out {m} x {h} -> {d}", m, h, d)]
    out = []
    for op, rows_, k, cols in rows:
        a = torch.randn(rows_, k, device=dev, dtype=dt)
        w = torch.randn(cols, k, device=dev, dtype=dt)
        out.append((op, timed(lambda a=a, w=w: F.linear(a, w), reps, dev), 2.0 * rows_ * k * cols))
    q, k_, v = (torch.randn(windows, cfg.heads, n, hd, device=dev, dtype=dt) for _ in range(3))
    attn_flops = 2 * 2 * n * n * d * 0.5 * windows  # QK^T and AV, causal at half
    out.append((f"attention {windows} x {cfg.heads} x {n} x {hd}",
                timed(lambda: F.scaled_dot_product_attention(q, k_, v, is_causal=True), reps, dev), attn_flops))
    block_s, block_f = sum(s for _, s, _ in out), sum(f for *_, f in out)
    out.append((f"block ops x {cfg.layers}", cfg.layers * block_s, cfg.layers * block_f))
    a = torch.randn(m, d, device=dev, dtype=dt)
    w = torch.randn(vocab, d, device=dev, dtype=dt)
    head_f = 2.0 * m * d * vocab
    head_s = timed(lambda: F.linear(a, w), reps, dev)
    out.append((f"head {m} x {d} -> {vocab}", head_s, head_f))
    out.append(("floor: block ops x layers + head", cfg.layers * block_s + head_s, cfg.layers * block_f + head_f))
    return out


@contextmanager
def score_head(mode: str) -> Iterator[None]:
    """``OutputHead``'s scoring mode (``encoders.backbone.SCORE_HEAD``) for the duration."""
    old, backbone_mod.SCORE_HEAD = backbone_mod.SCORE_HEAD, mode
    try:
        yield
    finally:
        backbone_mod.SCORE_HEAD = old


def parts(bb: Backbone, vocab: int, n: int, windows: int, reps: int, dev: torch.device
          ) -> list[tuple[str, float, float]]:
    """(part, median seconds, FLOPs) of the cumulative parts of one family's forward: the
    backbone, + the head in each scoring mode (OutputHead's fp32 / split / mixed / bf16, and an fp32
    head through TF32 tensor cores), + the fp32 head and the per-token NLL; last, the whole
    forward in fp32 without autocast, as ``eval.dtype: float32`` scores (beside "+ head split +
    NLL", the bf16 run's path: what full-precision scoring costs)."""
    dim = bb.cfg.dim
    head = OutputHead(dim, vocab).to(dev)
    x = torch.randn(windows, n, dim, device=dev)
    tgt = torch.randint(0, vocab, (windows, n), device=dev)
    with causal_attention_cost(0.5):
        f_bb = bb.flops(windows, n)
    f_all = f_bb + 2.0 * windows * n * dim * vocab

    def with_nll() -> torch.Tensor:
        logits = head(bb(x)).float()
        return -logits.log_softmax(-1).gather(-1, tgt.unsqueeze(-1)).squeeze(-1)

    def tf32_head() -> torch.Tensor:
        h = bb(x)
        old = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            with torch.autocast(dev.type, enabled=False):
                return F.linear(h.float(), head.weight)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = old

    def fp32_forward() -> torch.Tensor:
        # ``eval.dtype: float32``: the whole forward without autocast (fp32 GEMMs; the run does
        # not turn TF32 on), fp32 head and NLL
        with torch.autocast(dev.type, enabled=False):
            return with_nll()

    cases: list[tuple[str, Callable[[], object], float, str]] = [
        ("backbone", lambda: bb(x), f_bb, "fp32"),
        ("+ head, fp32 (OutputHead fp32)", lambda: head(bb(x)), f_all, "fp32"),  # no grad + autocast
        ("+ head, split (OutputHead split)", lambda: head(bb(x)), f_all, "split"),
        ("+ head, mixed (OutputHead mixed)", lambda: head(bb(x)), f_all, "mixed"),
        ("+ head, fp32 via TF32", tf32_head, f_all, "fp32"),
        ("+ head, bf16 (autocast)", lambda: head(bb(x)), f_all, "bf16"),
        ("+ head fp32 + NLL", with_nll, f_all, "fp32"),
        ("+ head split + NLL", with_nll, f_all, "split"),
        ("+ head mixed + NLL", with_nll, f_all, "mixed"),
        ("all fp32, no autocast + NLL", fp32_forward, f_all, "fp32"),
    ]
    out = []
    for part, fn, flops, mode in cases:
        with score_head(mode):
            out.append((part, timed(fn, reps, dev), flops))
    return out


if __name__ == "__main__":
    main()
