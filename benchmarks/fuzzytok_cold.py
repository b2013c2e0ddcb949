"""Where FuzzyTok's cold first training step goes (issue 16: 29-30 s on an H200 before compiling in threads).

    python3 benchmarks/fuzzytok_cold.py [--windows 256] [--context 1024] [--steps 3]

The standard suite's FuzzyTok front end (dim 256, K = 3, dilations (1, 2, 4), 3 blocks, GELU,
then LayerNorm and the projection to 384; no backbone: the backbone's cold compile is
inductor's, shared with the byte model) trains a few steps under bf16 autocast, in a fresh
process per case:

* ``cold``: an empty Triton cache — every autotune config of every kernel key compiles (one at
  a time: ``FUZZYTOK_PARALLEL_COMPILE=0``, as in the first two cases), then the autotuner
  times them;
* ``warm``: the same cache again in a new process — the compiled configs load from disk, the
  autotuner still times them (Triton keeps its choices in memory only);
* ``cold, N compile threads``: an empty cache with ``FUZZYTOK_PARALLEL_COMPILE=N`` (``--threads``;
  a run's default is min(8, CPUs)): each new key's configs compiled in N threads before the
  autotuner times them.

cold − warm is compile time; warm − a steady step is tuning time. Each case prints its step
times and how many kernels its cache holds (compiled binaries: ``*.cubin``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(windows: int, context: int, steps: int) -> None:
    """Train ``steps`` steps of the front end; print one JSON line of step seconds."""
    sys.path.insert(0, str(ROOT))
    import torch

    from encoders.fuzzytok import FuzzyTokConfig, FuzzyTokEncoder

    torch.manual_seed(0)
    cfg = FuzzyTokConfig(dim=256, kernel_size=3, dilations=(1, 2, 4), blocks=3, activation="gelu", impl="auto")
    enc = FuzzyTokEncoder(cfg, None).cuda()
    enc.proj = torch.nn.Linear(256, 384).cuda()  # the standard suite's projection width
    opt = torch.optim.AdamW(enc.parameters(), lr=1e-4, fused=True)
    x = torch.randint(0, 256, (windows, context), device="cuda")
    out = []
    for _ in range(steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = enc.features(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    print(json.dumps({"steps": out, "loss": float(loss)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--windows", type=int, default=256)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=8, help="FUZZYTOK_PARALLEL_COMPILE of the last case")
    ap.add_argument("--cases", default="cold,warm,threads",
                    help="which cases to run, comma-separated, in this order: cold, warm (needs cold), threads")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.windows, args.context, args.steps)
        return
    cmd = [sys.executable, __file__, "--child", "--windows", str(args.windows), "--context", str(args.context),
           "--steps", str(args.steps)]
    with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as c:
        serial = {"FUZZYTOK_PARALLEL_COMPILE": "0"}  # the compile-ahead threads are on by default
        every = {"cold": ("cold", a, serial), "warm": ("warm", a, serial),
                 "threads": (f"cold, {args.threads} compile threads", c, {"FUZZYTOK_PARALLEL_COMPILE": str(args.threads)})}
        picked = [k.strip() for k in args.cases.split(",") if k.strip()]
        if unknown := [k for k in picked if k not in every]:
            raise SystemExit(f"--cases: unknown case {unknown[0]!r} (one of {', '.join(every)})")
        cases = [every[k] for k in picked]
        print(f"FuzzyTok front end (3 blocks x (1, 2, 4), C 256 -> 384), {args.windows} windows of "
              f"{args.context} bytes, bf16 autocast; a fresh process per case")
        for name, cache, env in cases:
            t0 = time.perf_counter()
            r = subprocess.run(cmd, env={**os.environ, "TRITON_CACHE_DIR": cache, **env}, capture_output=True,
                               text=True, check=False)
            wall = time.perf_counter() - t0
            if r.returncode:
                print(f"{name}: failed ({r.returncode}): {r.stderr.strip().splitlines()[-1:]}")
                continue
            got = json.loads(r.stdout.strip().splitlines()[-1])
            steps = got["steps"]
            kernels = sum(1 for _ in Path(cache).rglob("*.cubin"))
            print(f"{name:<22} first step {steps[0]:7.2f} s, then {', '.join(f'{s * 1e3:.1f} ms' for s in steps[1:])}; "
                  f"process {wall:.1f} s; {kernels} compiled kernels in the cache; last loss {got['loss']:.6g}")


if __name__ == "__main__":
    main()
