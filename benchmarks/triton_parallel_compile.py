"""Does Triton's compiler run in parallel threads? Compiles the FuzzyTok pointer kernel's autotune
configs (``encoders.fuzzytok.kernels._conv_kernel``, C = 256, the standard suite's modes) for an
sm_90 target — no GPU needed: Triton ships ptxas — serially and in a thread pool, each in an
empty Triton cache.

    PYTHONPATH=$PWD python benchmarks/triton_parallel_compile.py [--threads 2] [--modes 0 1 4 5]

Why: on an H200 FuzzyTok's cold first step was 24.7 s, 23 kernels compiled one after another by
the autotuner (BENCHMARKS.md, session 10). If compiling releases the GIL, a key's configs could
compile in threads (Triton 3.6's ``AsyncCompileMode``) before the autotuner times them.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import tempfile
import time

# compiled kernels, not the interpreter the module picks on a machine without a GPU
os.environ["TRITON_INTERPRET"] = "0"

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from encoders.fuzzytok import kernels as K  # noqa: E402

TARGET = GPUTarget("cuda", 90, 32)


def jobs(modes: list[int]) -> list[tuple[dict, dict]]:
    """(constexprs, options) of every pruned config of ``_conv_kernel`` for C_in = C_out = 256,
    K = 3, causal, with bias, GELU, per mode."""
    out = []
    for mode in modes:
        consts = dict(CI=256, CO=256, K=3, DIR=-1, HAS_BIAS=True, MODE=mode, ACT=K.ACTIVATIONS["gelu"])
        for cfg in K._prune_fwd(K._FWD_CONFIGS, {}, CI=256, CO=256):
            c = {**consts, **cfg.kwargs}
            c["SPLIT"] = K._split_epilogue(c)
            out.append((c, {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}))
    return out


def compile_one(job: tuple[dict, dict]) -> None:
    consts, options = job
    jit = K._conv_kernel.fn.fn
    sig = {n: ("constexpr" if n in consts else "i32" if n in ("T", "dil", "Q_ROWS") else
               "*fp32" if n == "q_ptr" else "*bf16") for n in jit.arg_names}
    triton.compile(ASTSource(jit, sig, consts), target=TARGET, options=options)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--modes", type=int, nargs="+", default=[K.MODE_LAYER, K.MODE_LAYER_SAVE, K.MODE_ADD_ACTGRAD])
    args = ap.parse_args()
    todo = jobs(args.modes)
    print(f"triton {triton.__version__}, {len(todo)} configs of _conv_kernel for sm_90, {os.cpu_count()} CPUs")
    for how in ("serial", f"{args.threads} threads", "serial", f"{args.threads} threads"):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["TRITON_CACHE_DIR"] = cache
            t0 = time.perf_counter()
            if how == "serial":
                for j in todo:
                    compile_one(j)
            else:
                with cf.ThreadPoolExecutor(args.threads) as ex:
                    list(ex.map(compile_one, todo))
            print(f"{how:<12} {time.perf_counter() - t0:6.2f} s")


if __name__ == "__main__":
    main()
