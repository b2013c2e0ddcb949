"""Ahead-of-time sm_90 (H200) compile check of FuzzyTok's Triton conv kernels, on CPU, no GPU.

Register spills and software pipelining are properties of the compiled code, not of a run: they
can be read on any machine from Triton's PTX and from ``ptxas -v`` (the ptxas bundled with
Triton). This script compiles every autotune config of ``_conv_kernel`` (pointer loads),
``_conv_tma_kernel`` (persistent, TMA loads) and ``_conv_dw_kernel`` (weight and bias gradient)
for ``GPUTarget("cuda", 90, 32)``, bf16, C_in = C_out = C ∈ {64, 128, 256, 512}, K ∈ {3, 7}, with
the constexprs a real launch gets:

* conv kernels: the epilogue modes with the directions that occur (forward, DIR = −1: MODE 0, 1,
  2, 4 with a bias; input gradient, DIR = +1: MODE 0, 3, 5 without), SPLIT from
  ``kernels._split_epilogue``, GELU in the modes that evaluate it (1, 2, 4; MODE 5 multiplies by a
  saved derivative and is launched without one); only the configs the kernels' early prunes keep for C (TMA:
  BLOCK_C must divide C_in and BLOCK_N C_out; pointer: no tile far wider than C_out);
* dW: HAS_DB False and True, CHUNK = 4096, DB_ROWS = 256.

Pointer arguments and ``T`` get ``tt.divisibility = 16``, as a launch with 16-byte aligned tensors
and T % 16 == 0 specialises them; without it Triton does not pipeline the pointer kernels' loads.
One line per compile: registers, spill bytes (stores + loads), shared memory, the counts of
``wgmma.mma_async``, TMA loads (``cp.async.bulk.tensor`` global → shared), ``cp.async`` (pipelined
pointer loads), and how many programs fit on one SM (registers and shared memory; the TMA
kernel's PER_SM = 2 configs rely on 2). A config that fails to compile, or needs more shared memory
than an H200 block may have, would be skipped by the autotuner on the GPU: listed, not fatal.

    .venv/bin/python benchmarks/fuzzytok_aot.py [--quick] [--json PATH] [--workers N]

``--quick``: C = 256, K = 3 only (85 compiles, about 25 s on 2 cores; all 610 take about 3
minutes). Line info stays on, as in a launch's compile: without it LLVM's code differs a little
(register counts a few apart, at no real saving of time). Kernels are compiled into a temporary Triton cache (removed afterwards), so every run compiles from scratch
and reads ptxas's report of that very compile. ``tests/encoders/test_fuzzytok_aot.py`` runs a
subset of this.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# Real compilation even without a GPU: kernels.py would otherwise switch to the interpreter (and
# its single interpreter config). It only does setdefault, so this must come before its import.
os.environ["TRITON_INTERPRET"] = "0"
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from encoders.fuzzytok import kernels as kn  # noqa: E402

if kn.INTERPRET:
    raise RuntimeError("encoders.fuzzytok.kernels was imported with TRITON_INTERPRET=1 before this "
                       "module: run it in a fresh process (its config lists are the interpreter's)")

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
TARGET = GPUTarget("cuda", 90, 32)
ARCH = "sm_90a"  # what Triton compiles capability 90 for (wgmma and TMA need the "a")
SMEM_PER_BLOCK = 232448  # H100/H200: 227 KB of shared memory per block at most (opt-in)
SMEM_PER_SM = 233472  # 228 KB per SM, of which the system reserves 1 KB per resident block
REGS_PER_SM = 65536

ALL_C = (64, 128, 256, 512)
ALL_K = (3, 7)
# (MODE, DIR) pairs that launches use: ops.py's forward and input-gradient calls.
CONV_MODES = ((0, -1), (1, -1), (2, -1), (4, -1), (0, 1), (3, 1), (5, 1))
DW_CHUNK = 4096
DW_DB_ROWS = 256
KERNELS = ("ptr", "tma", "dw")

_PTR_SIG = {"x_ptr": "*bf16", "w_ptr": "*bf16", "b_ptr": "*bf16", "r_ptr": "*bf16", "y_ptr": "*bf16",
            "z_ptr": "*bf16", "g_ptr": "*bf16", "q_ptr": "*fp32", "T": "i32", "dil": "i32", "Q_ROWS": "i32"}
_DW_SIG = {"x_ptr": "*bf16", "g_ptr": "*bf16", "p_ptr": "*fp32", "q_ptr": "*fp32", "T": "i32",
           "dil": "i32", "n_chunks": "i32"}


def configs(kernel: str, C: int | None = None) -> list[tuple[int, ...]]:
    """The GPU autotune list of a kernel as tuples: its block sizes, then num_warps, num_stages;
    with C, only those the kernel's own early prune keeps for C_in = C_out = C."""
    lst = {"ptr": kn._FWD_CONFIGS, "tma": kn._TMA_CONFIGS, "dw": kn._DW_CONFIGS}[kernel]
    prune = {"ptr": kn._prune_fwd, "tma": kn._prune_tma, "dw": kn._prune_dw}.get(kernel)
    if C is not None and prune is not None:
        lst = prune(list(lst), {}, CI=C, CO=C)
    return [(*c.kwargs.values(), c.num_warps, c.num_stages) for c in lst]


def config_name(kernel: str, cfg: tuple[int, ...]) -> str:
    if kernel == "tma":
        bt, bn, bc, per_sm, w, s = cfg
        return f"{bt}x{bn}x{bc} ps{per_sm} w{w} s{s}"
    *blocks, w, s = cfg
    return f"{'x'.join(map(str, blocks))} w{w} s{s}"


def make_jobs(cs: tuple[int, ...] = ALL_C, ks: tuple[int, ...] = ALL_K,
              kernels: tuple[str, ...] = KERNELS, modes: tuple[tuple[int, int], ...] = CONV_MODES,
              has_db: tuple[bool, ...] = (False, True),
              only: dict[str, list[tuple[int, ...]]] | None = None) -> list[dict]:
    """Every compile to do, as plain dicts (picklable). ``only``: per kernel, the configs to keep."""
    jobs = []
    for C in cs:
        for K in ks:
            for kernel in kernels:
                for cfg in configs(kernel, C):  # as the autotuner's early prune leaves them
                    if only is not None and tuple(cfg) not in {tuple(c) for c in only.get(kernel, [])}:
                        continue
                    base = dict(kernel=kernel, C=C, K=K, cfg=list(cfg), config=config_name(kernel, cfg))
                    if kernel == "dw":
                        jobs += [dict(base, mode=None, dir=None, has_db=db) for db in has_db]
                    else:
                        jobs += [dict(base, mode=m, dir=d, has_db=None) for m, d in modes]
    return jobs


def _source(job: dict) -> tuple[object, dict, dict, int, int]:
    """(JITFunction, signature, constexprs, num_warps, num_stages) of one job."""
    C, K, cfg = job["C"], job["K"], job["cfg"]
    if job["kernel"] == "dw":
        bt, bm, bn, warps, stages = cfg
        sig = dict(_DW_SIG)
        const = dict(CI=C, CO=C, K=K, CHUNK=DW_CHUNK, HAS_DB=job["has_db"], DB_ROWS=DW_DB_ROWS,
                     BLOCK_T=bt, BLOCK_M=bm, BLOCK_N=bn)
        return kn._conv_dw_kernel.fn, sig | dict.fromkeys(const, "constexpr"), const, warps, stages
    mode, direction = job["mode"], job["dir"]
    act = job.get("act") or ("gelu" if mode in (1, 2, 4) else "none")
    epi = dict(CI=C, CO=C, K=K, DIR=direction, HAS_BIAS=direction == -1, MODE=mode, ACT=kn.ACTIVATIONS[act])
    if job["kernel"] == "ptr":
        bt, bn, bc, warps, stages = cfg
        const = epi | dict(BLOCK_T=bt, BLOCK_N=bn, BLOCK_C=bc,
                           SPLIT=kn._split_epilogue(dict(MODE=mode, BLOCK_N=bn)))
        sig = dict(_PTR_SIG)
        fn = kn._conv_kernel.fn.fn  # autotune -> heuristics -> jit
    else:
        bt, bn, bc, per_sm, warps, stages = cfg
        const = epi | dict(BLOCK_T=bt, BLOCK_N=bn, BLOCK_C=bc, PER_SM=per_sm,
                           SPLIT=kn._split_epilogue(dict(MODE=mode, BLOCK_N=bn)), INTERP=False)
        sig = {"x_desc": f"tensordesc<bf16[1,{bt},{bc}]>", "w_desc": f"tensordesc<bf16[{bc},{bn}]>",
               "y_desc": f"tensordesc<bf16[1,{bt},{bn}]>"}
        sig |= {"b_ptr": "*bf16", "r_ptr": "*bf16", "y_ptr": "*bf16", "z_ptr": "*bf16", "g_ptr": "*bf16",
                "q_ptr": "*fp32", "B": "i32", "T": "i32", "dil": "i32", "Q_ROWS": "i32"}
        fn = kn._conv_tma_kernel.fn.fn
    return fn, sig | dict.fromkeys(const, "constexpr"), const, warps, stages


def _parse_ptxas(log: str) -> dict | None:
    regs = re.search(r"Used (\d+) registers", log)
    if regs is None:
        return None
    num = {key: re.search(rf"(\d+) bytes {key}", log) for key in ("stack frame", "spill stores", "spill loads")}
    num = {key: int(m.group(1)) if m else 0 for key, m in num.items()}
    return dict(regs=int(regs.group(1)), stack=num["stack frame"], spill_stores=num["spill stores"],
                spill_loads=num["spill loads"])


def _count_instructions(ptx: str) -> int:
    """PTX instructions in a kernel (lines that are not directives, labels, braces or comments)."""
    return sum(1 for line in ptx.splitlines()
               if line.strip() and not line.strip().startswith(("//", ".", "$", "{", "}", "@$")))


def act_cost(workers: int) -> None:
    """PTX instructions per output element that each activation adds to the forward layer epilogue
    (MODE 1: bias + act + residual) of the TMA kernel's 128 × 256 tile on 8 warps (128 elements per
    thread), C = 256, K = 3: (instructions with the activation − with none) / 128."""
    cfg = [128, 256, 64, 1, 8, 3]
    per_thread = 128 * 256 // (32 * 8)
    jobs = [dict(kernel="tma", C=256, K=3, cfg=cfg, config=config_name("tma", cfg), mode=1, dir=-1, has_db=None,
                 act=act) for act in kn.ACTIVATIONS]
    res = {r["act"]: r for r in run_jobs(jobs, workers)}
    base = res["none"]["ptx_instrs"]
    for act, r in res.items():
        print(f"{act:5s}: {r['ptx_instrs']} PTX instructions, {(r['ptx_instrs'] - base) / per_thread:.1f} per element "
              f"for the activation")


def _run_ptxas(ptx: str) -> str:
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        src.write_text(ptx)
        out = subprocess.run([str(PTXAS), f"-arch={ARCH}", "-v", str(src), "-o", str(Path(d) / "k.cubin")],
                             capture_output=True, text=True)
    return out.stderr


def compile_job(job: dict) -> dict:
    """Compile one job for sm_90; return the job with its measurements (or ``error``)."""
    t0 = time.perf_counter()
    res = dict(job)
    try:
        fn, sig, const, warps, stages = _source(job)
        assert list(sig) == fn.arg_names, (list(sig), fn.arg_names)  # attrs are keyed by position
        attrs = {(i,): [["tt.divisibility", 16]] for i, (name, ty) in enumerate(sig.items())
                 if ty.startswith("*") or name == "T"}
        # Triton itself runs `ptxas -v --gpu-name=sm_90a` to build the cubin; with this knob it
        # prints ptxas's report, which saves running ptxas a second time (~1/3 of a compile).
        log = io.StringIO()
        with contextlib.redirect_stdout(log):
            triton.knobs.nvidia.dump_ptxas_log = True
            try:
                c = triton.compile(ASTSource(fn, sig, const, attrs), target=TARGET,
                                   options=dict(num_warps=warps, num_stages=stages))
            finally:
                triton.knobs.nvidia.dump_ptxas_log = False
        ptx = c.asm["ptx"]
        stats = _parse_ptxas(log.getvalue())
        if stats is None:  # a cache hit (no ptxas run): run the bundled ptxas on the PTX ourselves
            stats = _parse_ptxas(_run_ptxas(ptx))
        if stats is None:
            raise RuntimeError("no register count in ptxas -v output")
        smem = c.metadata.shared
        threads = 32 * warps
        fit = min(REGS_PER_SM // (-(-stats["regs"] // 8) * 8 * threads), SMEM_PER_SM // (smem + 1024))
        res |= stats | dict(
            split=const.get("SPLIT"), warps=warps, spill=stats["spill_stores"] + stats["spill_loads"],
            smem=smem, per_sm_fit=fit,
            wgmma=ptx.count("wgmma.mma_async"),
            ptx_instrs=_count_instructions(ptx),
            tma_load=len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global", ptx)),
            tma_store=len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared", ptx)),
            cp_async=len(re.findall(r"cp\.async\.c[ag]\.", ptx)),
            error=None if smem <= SMEM_PER_BLOCK else f"shared memory {smem} > {SMEM_PER_BLOCK} per block")
    except Exception as e:  # reported, as the autotuner would skip the config
        lines = str(e).strip().splitlines()
        res["error"] = f"{type(e).__name__}: {lines[0][:300] if lines else ''}"
    res["seconds"] = round(time.perf_counter() - t0, 2)
    return res


def format_result(r: dict) -> str:
    what = f"db={int(r['has_db'])}" if r["kernel"] == "dw" else f"m{r['mode']} d{r['dir']:+d}"
    head = f"{r['kernel']:3s} C={r['C']:<3d} K={r['K']} {r['config']:20s} {what:7s}"
    if r.get("regs") is None:
        return f"{head} FAILED {r['error']}"
    line = (f"{head} regs {r['regs']:3d} spill {r['spill']:4d} smem {r['smem']:6d} fit {r['per_sm_fit']} "
            f"wgmma {r['wgmma']:2d} tma {r['tma_load']:2d}/{r['tma_store']} cp.async {r['cp_async']:3d}")
    return line + (f"  FAILED {r['error']}" if r["error"] else "")


def _init_worker(cache_dir: str) -> None:
    os.environ["TRITON_CACHE_DIR"] = cache_dir


def run_jobs(jobs: list[dict], workers: int = 2, echo: bool = True) -> list[dict]:
    """Compile ``jobs`` with a pool of ``workers`` processes, in a temporary Triton cache."""
    cache = tempfile.mkdtemp(prefix="fuzzytok_aot_cache_")
    try:
        if workers <= 1:
            _init_worker(cache)
            results = []
            for j in jobs:
                results.append(compile_job(j))
                if echo:
                    print(format_result(results[-1]), flush=True)
            return results
        with ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(cache,)) as pool:
            results = []
            for r in pool.map(compile_job, jobs):
                results.append(r)
                if echo:
                    print(format_result(r), flush=True)
            return results
    finally:
        shutil.rmtree(cache, ignore_errors=True)


def summarize(results: list[dict]) -> dict:
    def tag(r: dict) -> str:
        return format_result(r).split(" regs ")[0].split(" FAILED")[0].rstrip()

    ok = [r for r in results if r["error"] is None]
    return dict(compiled=len([r for r in results if r.get("regs") is not None]),
                total=len(results),
                spills=[tag(r) + f" ({r['spill']} B)" for r in results if r.get("spill")],
                failed=[f"{tag(r)}: {r['error']}" for r in results if r["error"] is not None],
                max_regs=max((r["regs"] for r in ok), default=None))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="C = 256, K = 3 only")
    ap.add_argument("--json", type=Path, help="write every result and the summary here")
    ap.add_argument("--act-cost", action="store_true",
                    help="only: instructions per element each activation adds to the layer epilogue")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                    help="compile processes (default: min(2, CPUs))")
    args = ap.parse_args(argv)
    if args.act_cost:
        act_cost(args.workers)
        return
    cs, ks = ((256,), (3,)) if args.quick else (ALL_C, ALL_K)
    jobs = make_jobs(cs, ks)
    print(f"{len(jobs)} compiles for {ARCH} (triton {triton.__version__}), {args.workers} workers", flush=True)
    t0 = time.perf_counter()
    results = run_jobs(jobs, args.workers)
    wall = time.perf_counter() - t0
    s = summarize(results)
    print(f"\nsummary: {s['compiled']}/{s['total']} compiled in {wall:.0f} s, max {s['max_regs']} registers; "
          f"{len(s['spills'])} with spills, {len(s['failed'])} failed")
    for line in s["spills"]:
        print(f"  spill: {line}")
    for line in s["failed"]:
        print(f"  failed: {line}")
    if args.json:
        args.json.write_text(json.dumps(dict(arch=ARCH, triton=triton.__version__, seconds=round(wall, 1),
                                             summary=s, results=results), indent=1))


if __name__ == "__main__":
    main()
