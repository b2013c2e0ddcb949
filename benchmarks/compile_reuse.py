"""Cold-compile cost of a standard-suite-like sequence of models, with batch and length compiled
static first (``--static-first``: ``harness.infra.accel.COMPILE_DYNAMIC = False``, torch's default) or symbolic from the first call
(tokbench's default, ``Backbone.dynamic_shapes``), each mode in a fresh process with empty
inductor / Triton caches:

    python benchmarks/compile_reuse.py                                  # GPU, the standard backbone
    python benchmarks/compile_reuse.py --device cpu --dim 64 --layers 2 --heads 4 --batch 4 --context 128

The sequence mirrors what one run of suites/standard.yaml compiles, through
``harness.infra.accel.compile_backbones``: a byte model's training steps and its last, partial batch; a
second model of the same width (FuzzyTok); a BPE model whose token counts vary per batch; a
narrower sub-model (BLT's entropy model); scoring in inference mode with a shorter batch and a
partial one. Prints, per call, wall seconds and the graphs dynamo compiled, then per mode: compile
events, their seconds, and the byte model's steady step time (so a symbolic graph's speed is
compared with the static one's at the same shape). Prints only: numbers go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(a: argparse.Namespace) -> dict[str, object]:
    """One mode, in this process (its caches were set by the parent)."""
    sys.path.insert(0, str(ROOT))
    import torch
    from torch._dynamo.utils import counters

    from encoders.backbone import Backbone, BackboneConfig
    from harness.infra import accel
    from harness.infra.accel import compile_backbones

    accel.COMPILE_DYNAMIC = not a.static_first

    dev = torch.device(a.device)
    torch.manual_seed(0)
    auto = torch.autocast("cuda", dtype=torch.bfloat16) if dev.type == "cuda" else torch.autocast("cpu", enabled=False)
    events: list[dict[str, object]] = []

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    def call(m: Backbone, label: str, B: int, T: int, train: bool) -> float:
        x = torch.randn(B, T, m.cfg.dim, device=dev)
        g0 = counters["stats"]["unique_graphs"]
        sync()
        t0 = time.perf_counter()
        if train:
            with auto:
                y = m(x)
            y.float().square().mean().backward()
        else:
            with torch.inference_mode(), auto:
                m(x)
        sync()
        dt = time.perf_counter() - t0
        new = counters["stats"]["unique_graphs"] - g0
        events.append({"model": label, "B": B, "T": T, "mode": "train" if train else "infer",
                       "seconds": round(dt, 3), "new_graphs": new})
        print(f"  {label:<10} {'train' if train else 'infer'} B {B:>4} T {T:>5}: {dt:7.2f} s, new graphs {new}",
              flush=True)
        return dt

    def model(dim: int) -> Backbone:
        m = Backbone(BackboneConfig(layers=a.layers, dim=dim, heads=a.heads)).to(dev)
        compile_backbones(m)
        return m

    B, T = a.batch, a.context
    last = max(2, B * 2 // 3)  # the last step of a byte budget is rarely a whole batch
    bytes_m = model(a.dim)
    for _ in range(2):
        call(bytes_m, "bytes", B, T, True)
    steady = [call(bytes_m, "bytes", B, T, True) for _ in range(3)]
    call(bytes_m, "bytes", last, T, True)
    fuzzy = model(a.dim)
    for _ in range(2):
        call(fuzzy, "fuzzytok", B, T, True)
    bpe = model(a.dim)
    for k in range(4):
        call(bpe, "bpe", B, T * 2 // 7 + 3 * k, True)  # ~3.5 bytes a token, varying per batch
    ent = model(max(a.heads * 8, a.dim // 3))
    for _ in range(2):
        call(ent, "entropy", B, T, True)
    call(ent, "entropy", last, T, True)
    for Tn in (T, T * 7 // 10):
        call(bytes_m, "score", B, Tn, False)
    call(bytes_m, "score", last, T, False)
    compiles = [e for e in events if e["new_graphs"]]
    return {"compile_events": len(compiles), "compile_call_seconds": round(sum(float(e["seconds"]) for e in compiles), 2),
            "bytes_steady_step_seconds": round(statistics.median(steady), 4), "events": events}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--static-first", action="store_true",
                    help="(a mode's child) compile static first: harness.infra.accel.COMPILE_DYNAMIC = False; "
                         "without --child both modes run, each in a child")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print("RESULT " + json.dumps(child(a)), flush=True)
        return 0
    results = {}
    args = [x for x in sys.argv[1:] if x != "--static-first"]
    for mode, flags in (("static first", ["--static-first"]), ("dynamic from the first call", [])):
        print(f"{mode} (COMPILE_DYNAMIC = {not flags}), empty caches:", flush=True)
        with tempfile.TemporaryDirectory(prefix="tokbench-compile-") as tmp:
            env = {**os.environ, "PYTHONPATH": str(ROOT),
                   "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor"),
                   "TRITON_CACHE_DIR": os.path.join(tmp, "triton")}
            out = subprocess.run([sys.executable, __file__, "--child", *flags, *args], env=env,
                                 capture_output=True, text=True)
        for line in out.stdout.splitlines():
            if line.startswith("RESULT "):
                results[mode] = json.loads(line[7:])
            else:
                print(line)
        if out.returncode:
            print(out.stderr[-3000:], file=sys.stderr)
            return out.returncode
    print()
    for mode, r in results.items():
        print(f"{mode:<30} compile events {r['compile_events']}, their calls {r['compile_call_seconds']:.1f} s; "
              f"bytes steady step {r['bytes_steady_step_seconds'] * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
