"""How much of a compile torch.compile's disk caches save: the same small backbone compiled in
two fresh processes, the first with empty caches, the second with the caches the first left
(what ``harness.overlap.compileahead`` relies on). One training step and one inference forward each;
``--batch A B [C ...]`` trains the first process at batch A, the second at B, and so on, each on
the caches the ones before it left (the graphs are symbolic in the batch, but a cached graph
serves only where the guards stored with it hold: ``--guards`` prints those of the AOTAutograd
entries at the end; on the CPU inductor's C++ reductions guard on batch × length ≤ 4096). ``--fixed``: the "fixed" cuDNN mode the harness sets on CUDA
(``encoders.backbone.CUDNN_FIXED``: ``sdpa_kernel`` inside the graphs, on the CPU too);
``--unmarked``: without ``harness.infra.accel.cacheable_attention_graphs``'s marks (the code before
them: such graphs bypassed AOTAutograd's cache).

    PYTHONPATH=. python benchmarks/compile_cache_probe.py [--batch 4 4] [--fixed] [--unmarked] [--guards]

Prints, per process: wall seconds, seconds compiling, and the cache hit / miss counters.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def child(batch: int, fixed: bool, unmarked: bool) -> None:
    import torch
    import torch._inductor.config as inductor_config

    from encoders import backbone
    from encoders.backbone import Backbone, BackboneConfig
    from harness.infra.accel import cache_counts, compile_backbones, compile_clock

    backbone.CUDNN_FIXED = fixed
    torch.manual_seed(0)
    bb = Backbone(BackboneConfig(layers=2, dim=64, heads=4))
    compile_backbones(bb)
    if unmarked:
        inductor_config.unsafe_marked_cacheable_functions = {}
    t0 = time.perf_counter()
    bb(torch.randn(batch, 128, 64, requires_grad=True)).sum().backward()  # (B, N, C)
    with torch.inference_mode():
        bb(torch.randn(3, 100, 64))
    print(json.dumps({"batch": batch, "wall_s": round(time.perf_counter() - t0, 2),
                      "compile_s": round(compile_clock()["graph"], 2), **cache_counts()}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, nargs="+", default=[4, 4], help="each process's batch, in order")
    ap.add_argument("--fixed", action="store_true", help="the harness's CUDA attention mode (sdpa_kernel in graphs)")
    ap.add_argument("--unmarked", action="store_true", help="without the cache marks for sdpa_kernel's helpers")
    ap.add_argument("--guards", action="store_true", help="print the guards stored with the AOTAutograd entries")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child is not None:
        child(a.child, a.fixed, a.unmarked)
        return
    flags = [f for f, on in (("--fixed", a.fixed), ("--unmarked", a.unmarked)) if on]
    with tempfile.TemporaryDirectory(prefix="tokbench-cache-probe-") as tmp:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor"),
               "TRITON_CACHE_DIR": os.path.join(tmp, "triton")}
        for i, b in enumerate(a.batch):
            out = subprocess.run([sys.executable, __file__, "--child", str(b), *flags], env=env, check=True,
                                 capture_output=True, text=True).stdout.strip().splitlines()[-1]
            print(f"{'empty caches' if i == 0 else 'warm caches'}: {out}", flush=True)
        if a.guards:
            print("guards of the AOTAutograd entries:")
            for g in sorted(_guards(os.path.join(tmp, "inductor"))):
                print("  ", g)


def _guards(inductor_dir: str) -> set[str]:
    """The ``guards_expr`` of every AOTAutograd cache entry under ``inductor_dir`` (the files this
    probe's own processes wrote a moment ago)."""
    import glob
    import pickle

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import torch  # noqa: F401 - the entries unpickle into torch's classes

    out = set()
    for path in glob.glob(os.path.join(inductor_dir, "aotautograd", "*", "*")):
        with open(path, "rb") as f:
            out.add(str(getattr(pickle.load(f), "guards_expr", None)))  # noqa: S301 - our own files
    return out


if __name__ == "__main__":
    main()
