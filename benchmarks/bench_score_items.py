"""The scoring loop itself (``harness.score.items.score_items``) at the standard suite's shapes, without a
run: where its wall time goes between the GPU and the host.

    python3 benchmarks/bench_score_items.py                       # on a GPU: the grid below
    python3 benchmarks/bench_score_items.py --device cpu --dim 64 --layers 2 --heads 4 --docs 4 --grid 0:8

Why: in the standard suite's runs scoring ran at 9-13 % of the bf16
GEMM ceiling *inside* its forwards while the same backbone, compiled, runs at 35 % in
``bench_score_forward.py`` — the forwards' spans on the GPU hold idle time, so something on the
host paces them. This scores the byte model (untrained weights: the speed does not depend on
them) of the standard backbone (6 x 384, bf16 autocast, ``OutputHead`` as scoring runs it) on
rolling 1 KB windows (stride 512) of ``--docs`` documents made of Python's own library sources,
for each (compiled?, windows a forward) of ``--grid`` (``--vocab N``: a BPE model instead,
merges fitted on the same documents), and prints wall seconds, the forwards'
device span (``device_seconds``), MFU over the wall and over that span (``--blt``: the standard suite's BLT). ``--profile N`` then runs
N batches of the last grid point under ``torch.profiler`` and prints the ops with the most host
time and the most device time.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch

from encoders.backbone import BackboneConfig
from encoders.base import Encoder, FitContext
from encoders.blt import BltConfig, BltEncoder
from encoders.bpe import BpeConfig, BpeEncoder
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.infra.accel import attention_backends, compile_backbones
from harness.infra.meters import gemm_tflops
from harness.score.items import ScoreItem, plan_full, score_items


def documents(n: int, size: int) -> list[bytes]:
    """``n`` documents of ``size`` bytes cut from Python's library sources (sorted: the same
    text on every machine with the same Python)."""
    lib = Path(os.__file__).parent
    out: list[bytes] = []
    for p in sorted(lib.glob("*.py")):
        data = p.read_bytes()
        for k in range(0, len(data) - size + 1, size):
            out.append(data[k : k + size])
            if len(out) == n:
                return out
    return out


# suites/standard.yaml's BLT entry (``--blt``)
STANDARD_BLT = {"target_patch_size": 4.0, "entropy_dim": 128, "entropy_layers": 2, "local_dim": 192,
                "local_heads": 4, "decoder_layers": 2, "ngram_table_size": 16384}


def build(args: argparse.Namespace, docs: list[bytes], dev: torch.device) -> Encoder:
    """The byte model, with ``--vocab`` a BPE model whose merges are fitted on ``docs``, or with
    ``--blt`` the standard suite's BLT, its patch threshold fitted on ``docs`` (its entropy model
    untrained: patches of about 4 bytes, as trained, but placed by an untrained model). Weights
    untrained in every case: the speed does not depend on them, only on the shapes."""
    torch.manual_seed(0)
    bb = BackboneConfig(layers=args.layers, dim=args.dim, heads=args.heads)
    if not args.vocab and not args.blt:
        return ByteEncoder(ByteConfig(), bb).to(dev).eval()
    enc: Encoder = BltEncoder(BltConfig(**STANDARD_BLT), bb) if args.blt else BpeEncoder(BpeConfig(vocab_size=args.vocab), bb)
    enc.to(dev)
    enc.fit(FitContext(train_docs=lambda: iter(docs), train_bytes=sum(map(len, docs)), context_bytes=1024, seed=0,
                       device=dev, train=lambda e, n: {"bytes": 0, "flops": 0.0, "seconds": 0.0}, log=lambda s: None))
    return enc.to(dev).eval()


@contextmanager
def module_ranges(enc: Encoder) -> Iterator[None]:
    """Each direct child module of ``enc`` (and BLT's entropy model) inside a profiler range named
    ``module:NAME`` while it runs, so the profile's device time adds up per part of the model
    (ranges of the prefetch thread's calls too: BLT patches there)."""
    from torch.autograd.profiler import record_function

    handles = []
    for name, mod in enc.named_children():
        def pre(m: torch.nn.Module, a: object, name: str = name) -> None:
            rf = record_function(f"module:{name}")
            rf.__enter__()
            m.__dict__.setdefault("_bench_ranges", []).append(rf)

        def post(m: torch.nn.Module, a: object, out: object) -> None:
            m.__dict__["_bench_ranges"].pop().__exit__(None, None, None)

        handles += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    entropies = getattr(enc, "entropies", None)  # BLT calls its entropy model's logits, not forward
    if entropies is not None:
        def timed_entropies(inputs: torch.Tensor) -> torch.Tensor:
            with record_function("module:entropy_model"):
                return entropies(inputs)

        enc.entropies = timed_entropies  # type: ignore[method-assign]
    try:
        yield
    finally:
        for h in handles:
            h.remove()
        if entropies is not None:
            del enc.entropies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--docs", type=int, default=600, help="documents (each --doc-bytes long)")
    ap.add_argument("--doc-bytes", type=int, default=8192)
    ap.add_argument("--grid", nargs="+", default=["0:64", "1:64", "1:256"],
                    help="COMPILED:WINDOWS[:WORKERS] points (compiled 0/1, windows a forward, collate_workers: "
                         "0 = collate in the prefetch thread, - or absent = as a run picks)")
    ap.add_argument("--profile", type=int, default=0, help="batches to profile at the last grid point")
    ap.add_argument("--vocab", type=int, default=0,
                    help="a BPE model of this vocabulary (merges fitted on the documents first) instead of the byte model")
    ap.add_argument("--blt", action="store_true", help="the standard suite's BLT instead of the byte model")
    args = ap.parse_args()
    dev = torch.device(args.device)
    if dev.type == "cuda":
        attention_backends()
    ceiling = gemm_tflops(dev) if dev.type == "cuda" else None
    docs = documents(args.docs, args.doc_bytes)
    items: list[ScoreItem] = [plan_full(d, 1024, 512) for d in docs]
    n_win = sum(len(it.windows) for it in items)
    model = "BLT model" if args.blt else f"BPE-{args.vocab} model" if args.vocab else "byte model"
    print(f"device {dev}, torch {torch.__version__}; {model} {args.layers} x {args.dim}; {len(docs)} documents, "
          f"{n_win} windows; GEMM ceiling {ceiling or 0:.1f} TFLOP/s")
    print(f"{'compiled':>8} {'windows':>7} {'wall s':>7} {'device s':>8} {'busy':>5} {'MFU wall':>8} {'MFU dev':>8}")
    # one model for the whole grid (a BPE fit is paid once); compiling is in place, so eager
    # points must come before compiled ones
    enc = build(args, docs, dev)
    was_compiled = False
    for point in args.grid:
        fields = point.split(":")
        compiled, windows = int(fields[0]), int(fields[1])
        # collate_workers: None = as a run picks
        workers = int(fields[2]) if len(fields) > 2 and fields[2] not in ("", "-") else None
        if was_compiled and not compiled:
            raise SystemExit(f"--grid: the eager point {point} must come before every compiled one")
        if compiled:
            compile_backbones(enc)
            was_compiled = True
        score_items(enc, items[:8], dev, windows, bf16=True)  # warm-up: compiles, autotunes
        if dev.type == "cuda":
            torch.cuda.synchronize()
        st: dict = {}
        t0 = time.perf_counter()
        score_items(enc, items, dev, windows, bf16=True, stats=st, collate_workers=workers)
        wall = time.perf_counter() - t0
        dev_s = st.get("device_seconds", 0.0)
        mfu = (st["forward_flops"] / wall / 1e12 / ceiling) if ceiling else 0.0
        mfu_dev = (st["forward_flops"] / dev_s / 1e12 / ceiling) if ceiling and dev_s else 0.0
        print(f"{compiled:>8} {windows:>7}{'' if workers is None else f' (collate_workers {workers})'} {wall:7.2f} "
              f"{dev_s:8.2f} {dev_s / wall:5.0%} {mfu:8.1%} {mfu_dev:8.1%}")
        print("         the loop's thread: " + ", ".join(f"{k} {st.get(f'loop_{k}_seconds', 0.0):.2f} s"
                                                    for k in ("wait", "launch", "sync", "finish"))
              + "; its CPU s: " + ", ".join(f"{k} {st.get(f'loop_{k}_cpu_seconds', 0.0):.2f}" for k in ("launch", "sync", "finish"))
              + f"; the prefetch thread's CPU {st.get('prefetch_cpu_seconds', 0.0):.2f} s")
    if args.profile and enc is not None:
        from torch.profiler import ProfilerActivity, profile

        windows = int(args.grid[-1].split(":")[1])
        per_forward = enc.score_windows_per_batch(windows)  # BPE: 4x the windows a forward
        sub: list[ScoreItem] = []
        for it in items:  # about --profile batches' worth of windows
            if sum(len(s.windows) for s in sub) >= args.profile * per_forward:
                break
            sub.append(it)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
        with profile(activities=acts) as prof, module_ranges(enc):
            score_items(enc, sub, dev, windows, bf16=True)
            if dev.type == "cuda":
                torch.cuda.synchronize()
        ka = prof.key_averages()
        print(ka.table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=60))
        if dev.type == "cuda":
            print(ka.table(sort_by="self_device_time_total", row_limit=20, max_name_column_width=60))
        parts = [e for e in ka if e.key.startswith("module:")]
        print("device time by part of the model (module ranges; the rest of a forward is outside them):")
        for e in sorted(parts, key=lambda e: -e.device_time_total):
            print(f"  {e.key:<28} calls {e.count:>5}  device {e.device_time_total / 1e3:9.1f} ms  host {e.cpu_time_total / 1e3:9.1f} ms")


if __name__ == "__main__":
    main()
