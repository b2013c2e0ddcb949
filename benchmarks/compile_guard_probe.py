"""Does a graph compiled at one batch serve another from torch.compile's disk caches? Each batch
runs in a fresh process (one training step of a compiled ``Backbone``: symbolic batch and length,
as ``harness.accel.compile_backbones`` compiles them) on one shared, initially empty inductor
cache; prints each process's FX-graph and AOTAutograd cache counters, then the guards stored
with the AOTAutograd entries (a cached graph serves a call only where its guards hold):

    python benchmarks/compile_guard_probe.py --device cpu --batches 2 16 64
    python benchmarks/compile_guard_probe.py --device cuda --dim 384 --context 1024 --batches 8 128 256

Why: the compile-ahead process warms the caches on fewer windows than the run trains on
(``harness.compileahead.warm_windows``), and only a batch on the run's side of every guard
helps. Prints only: numbers go to BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(a: argparse.Namespace, batch: int) -> None:
    sys.path.insert(0, str(ROOT))
    import torch
    from torch._dynamo.utils import counters

    from encoders.backbone import Backbone, BackboneConfig
    from harness.accel import compile_backbones

    dev = torch.device(a.device)
    torch.manual_seed(0)
    m = Backbone(BackboneConfig(layers=a.layers, dim=a.dim, heads=a.heads)).to(dev)
    compile_backbones(m)
    auto = torch.autocast("cuda", dtype=torch.bfloat16) if dev.type == "cuda" else torch.autocast("cpu", enabled=False)
    x = torch.randn(batch, a.context, a.dim, device=dev)
    t0 = time.perf_counter()
    with auto:
        y = m(x)
    y.float().square().mean().backward()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    seen = {k: v for group in ("inductor", "aot_autograd") for k, v in counters[group].items() if "cache" in k}
    print(json.dumps({"batch": batch, "rows": batch * a.context, "seconds": round(time.perf_counter() - t0, 1),
                      "cache": seen}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--context", type=int, default=128)
    ap.add_argument("--batches", type=int, nargs="+", default=[2, 16, 64])
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        child(a, a.child)
        return
    with tempfile.TemporaryDirectory(prefix="guard-probe-") as tmp:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": f"{tmp}/inductor", "TRITON_CACHE_DIR": f"{tmp}/triton"}
        for batch in a.batches:
            cmd = [sys.executable, __file__, "--device", a.device, "--dim", str(a.dim), "--layers", str(a.layers),
                   "--heads", str(a.heads), "--context", str(a.context), "--batches", "0", "--child", str(batch)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
            print(out.strip().splitlines()[-1], flush=True)
        sys.path.insert(0, str(ROOT))
        import torch  # noqa: F401 - the entries unpickle into torch's classes

        guards = set()
        for path in glob.glob(f"{tmp}/inductor/aotautograd/*/*"):
            with open(path, "rb") as f:  # written by this probe's own processes, a moment ago
                entry = pickle.load(f)  # noqa: S301
            guards.add(str(getattr(entry, "guards_expr", None)))
        print("AOTAutograd entries' guards:")
        for g in sorted(guards):
            print("  ", g)


if __name__ == "__main__":
    main()
