"""What CUDA graphs would save in scoring's forwards: the shared backbone of a suite (default
suites/standard.yaml: 6 × 384), its blocks compiled as a run compiles them, in inference mode under
the suite's dtype, timed per forward called directly (the host launches every kernel, as
``harness.score.items.score_items`` does now) and replayed from one captured ``torch.cuda.CUDAGraph``
(the host launches one graph). The difference is the host's launch cost per forward that a graph
would take off scoring's loop; the replay's pace is about the GPU's own time.

    PYTHONPATH=$PWD python benchmarks/score_graphs.py [SUITE] [--device cuda] [--shapes 64x1024,256x384]
                                                      [--reps 30] [--compile blocks|whole|none]

Shapes are BATCHxLENGTH of the backbone's input: 128 × 1024 is a byte-level model's scoring
batch in the standard suite (``eval.batch_windows`` windows of ``context_bytes``); BPE feeds 4× the
windows, at ≈ 270–410 tokens a 1 KB window by vocabulary (512 × 384 stands for them now). Weights are
the initialisation's: a forward's cost does not depend on their values. Prints per shape the
direct and replayed ms per forward, what a graph saves, and max |Δ| between the two outputs (the
same kernels, so 0 is expected), and the host's ms to launch one forward on an idle GPU (queued
forwards hide it while it is below their GPU time). On a CPU only the direct forward is timed
(graphs are CUDA's). On the GPU machine install the carried wheels first (docs/gpu.md): loading
the suite imports its perturbations. Measured: BENCHMARKS.md, "CUDA graphs would not help scoring".

``--compile``: ``blocks`` (default) compiles each block and the final norm as a run does
(``harness.infra.accel.compile_backbones``); ``whole`` compiles the backbone's forward as one graph
instead (symbolic batch and length unless ``--static-first``), so the host ms to launch
one forward compare one compiled call against one per block — on a slow GPU host those calls pace
scoring's loop; ``none`` (or ``--no-compile``) leaves it eager. ``--static-first`` compiles
batch and length static first (``harness.infra.accel.COMPILE_DYNAMIC = False``; torch's default).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from encoders.backbone import Backbone
from harness.cli import find_suite
from harness.config import load_suite
from harness.infra import accel
from harness.infra.accel import compile_backbones


def parse_shapes(text: str) -> list[tuple[int, int]]:
    """'64x1024,256x384' -> [(64, 1024), (256, 384)]; a ValueError names a bad item."""
    out = []
    for item in text.split(","):
        b, sep, n = item.strip().partition("x")
        if not sep or not b.isdigit() or not n.isdigit() or int(b) < 1 or int(n) < 1:
            raise ValueError(f"--shapes: {item.strip()!r} is not BATCHxLENGTH (e.g. 64x1024)")
        out.append((int(b), int(n)))
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def scoring_mode(device: torch.device, bf16: bool) -> Iterator[None]:
    """Inference mode and, on CUDA with bf16, autocast as scoring runs it — its weight-cast cache
    off, which graph capture needs (a cached cast would be made once, outside the graph)."""
    amp = (torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False) if bf16 and device.type == "cuda"
           else contextlib.nullcontext())
    with torch.inference_mode(), amp:
        yield


def per_call_ms(fn: Callable[[], Any], device: torch.device, reps: int) -> float:
    """Wall ms per call of ``fn`` over ``reps`` calls queued back to back, synchronised at both
    ends: the pace of whichever of host and GPU is slower."""
    sync(device)
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    sync(device)
    return (time.perf_counter() - t0) / reps * 1e3


def host_ms(fn: Callable[[], Any], device: torch.device, reps: int) -> float:
    """Median wall ms until one call of ``fn`` returns, each started on an idle device (synchronised
    before): the host's own cost of launching a forward, which queued forwards hide while it is
    below their GPU time."""
    times = []
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    sync(device)
    return sorted(times)[len(times) // 2]


def measure(model: Backbone, shape: tuple[int, int], device: torch.device, bf16: bool, reps: int,
            warmup: int = 3) -> dict[str, float | None]:
    """Direct and graph-replayed ms per forward of ``model`` on a (B, N, dim) input of ``shape``;
    ``graph_ms``, ``saved_ms`` and ``max_abs_diff`` are None on a CPU."""
    b, n = shape
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(b, n, model.cfg.dim, generator=g).to(device)
    with scoring_mode(device, bf16):
        for _ in range(warmup):  # compiles (first shape) and fills the RoPE table outside any graph
            model(x)
        direct = per_call_ms(lambda: model(x), device, reps)
        host = host_ms(lambda: model(x), device, reps)
        ref = model(x).float()
    out: dict[str, float | None] = {"direct_ms": direct, "host_ms": host, "graph_ms": None, "saved_ms": None,
                                    "max_abs_diff": None}
    if device.type != "cuda":
        return out
    static_x = x.clone()
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side), scoring_mode(device, bf16):  # warm-up on a side stream, as capture asks
        for _ in range(warmup):
            model(static_x)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with scoring_mode(device, bf16), torch.cuda.graph(graph):
        static_y = model(static_x)
    replay = per_call_ms(graph.replay, device, reps)
    graph.replay()
    sync(device)
    out.update(graph_ms=replay, saved_ms=direct - replay,
               max_abs_diff=float((static_y.float() - ref).abs().max()))
    return out


COMPILE_MODES = ("blocks", "whole", "none")


def prepare(model: Backbone, how: str, dynamic: bool = True) -> None:
    """Compile ``model`` in place as ``--compile`` says (see the module docstring), batch and
    length symbolic from the first call when ``dynamic``; compiling is lazy, so nothing is
    traced before the first forward."""
    accel.COMPILE_DYNAMIC = dynamic
    if how == "blocks":
        compile_backbones(model)
    elif how == "whole":
        # symbolic batch and length through compile's own switch: the forward's marking of them
        # (``Backbone.dynamic_shapes``) is for blocks compiled beneath an eager forward, and
        # Dynamo does not trace it; attention then stays in the graph at every length
        model.dynamic_shapes = False
        model.compile(dynamic=dynamic)
    elif how != "none":
        raise ValueError(f"--compile: {how!r} is not one of {', '.join(COMPILE_MODES)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("suite", nargs="?", default="standard")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--shapes", default="64x1024,256x384", help="BATCHxLENGTH,... of the backbone's input")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--compile", choices=COMPILE_MODES, default="blocks",
                    help="each block compiled as a run does, the whole backbone as one graph, or eager")
    ap.add_argument("--no-compile", action="store_true", help="the same as --compile none")
    ap.add_argument("--static-first", action="store_true",
                    help="compile batch and length static first (torch's default), not symbolic from the first call")
    args = ap.parse_args()
    try:
        shapes = parse_shapes(args.shapes)
    except ValueError as e:
        ap.error(str(e))  # one line, exit 2
    suite = load_suite(find_suite(args.suite), [])
    device = torch.device(args.device)
    bf16 = suite.budget.dtype == "bfloat16"
    model = Backbone(suite.backbone).to(device).eval()
    how = "none" if args.no_compile else args.compile
    prepare(model, how, dynamic=not args.static_first)
    cfg = suite.backbone
    print(f"backbone {cfg.layers} x {cfg.dim} ({cfg.heads} heads), {device}, "
          f"{'bf16 autocast' if bf16 and device.type == 'cuda' else 'float32'}, "
          f"{dict(blocks='compiled blocks', whole='compiled as one graph', none='eager')[how]}, "
          f"{args.reps} forwards a timing")
    for shape in shapes:
        r = measure(model, shape, device, bf16, args.reps)
        line = (f"{shape[0]:>4} x {shape[1]:<5} direct {r['direct_ms']:8.2f} ms/forward "
                f"(host {r['host_ms']:.2f} ms to launch one)")
        if r["graph_ms"] is not None:
            line += (f"  graph replay {r['graph_ms']:8.2f} ms  saved {r['saved_ms']:7.2f} ms "
                     f"({r['saved_ms'] / r['direct_ms']:.0%})  max |diff| {r['max_abs_diff']:.2e}")
        else:
            line += "  (CUDA graphs: CUDA only)"
        print(line, flush=True)


if __name__ == "__main__":
    main()
