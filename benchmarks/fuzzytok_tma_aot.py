"""Ahead-of-time sm_90 compile check of the TMA conv kernels (no GPU needed).

For every config of ``kernels_tma`` (both kernels, C ∈ {128, 256}, K = 3, bf16): compile for
``GPUTarget("cuda", 90, 32)``, run ptxas -arch=sm_90a -v on the PTX and report registers, spills,
shared memory and the counts of TMA loads/stores (``cp.async.bulk.tensor``) and ``wgmma.mma_async``.

    TRITON_INTERPRET=0 .venv/bin/python benchmarks/fuzzytok_tma_aot.py
"""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "0"  # real compilation even without a GPU
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from encoders.fuzzytok import kernels_tma as kt  # noqa: E402

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"


def compile_one(fn, sig: dict, const: dict, warps: int, stages: int) -> dict:
    # Divisibility hints (16) for pointers and for ints that are multiples of 16, as the launcher's
    # specialisation gives them on the GPU; without them Triton does not pipeline pointer loads.
    attrs = {(i,): [["tt.divisibility", 16]] for i, (n, t) in enumerate(sig.items())
             if t.startswith("*") or n in ("T", "B")}
    c = triton.compile(ASTSource(fn, sig, const, attrs), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=warps, num_stages=stages))
    ptx = c.asm["ptx"]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "k.ptx"
        p.write_text(ptx)
        err = subprocess.run([str(PTXAS), "-arch=sm_90a", "-v", str(p), "-o", str(Path(d) / "k.cubin")],
                             capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", err)
    spill_st = re.search(r"(\d+) bytes spill stores", err)
    spill_ld = re.search(r"(\d+) bytes spill loads", err)
    return dict(regs=int(regs.group(1)) if regs else None,
                spill_stores=int(spill_st.group(1)) if spill_st else None,
                spill_loads=int(spill_ld.group(1)) if spill_ld else None,
                shared=c.metadata.shared,
                tma_load=len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.shared::cluster\.global", ptx)),
                tma_store=len(re.findall(r"cp\.async\.bulk\.tensor\.\dd\.global\.shared", ptx)),
                tma_total=ptx.count("cp.async.bulk.tensor"),
                wgmma=ptx.count("wgmma.mma_async"),
                wgmma_wait=ptx.count("wgmma.wait_group"),
                ld_global=ptx.count("ld.global"))


def main() -> None:
    rows = []
    for name, fn, entries in (("tile", kt._tma_conv_kernel.fn, kt.TMA_CONFIG_ENTRIES),
                              ("persistent", kt._tma_conv_persistent_kernel.fn, kt.PERSISTENT_CONFIG_ENTRIES)):
        for C in (128, 256):
            for bt, bn, bc, warps, stages in entries:
                if C % bn or C % bc:
                    continue
                sig = {"x_desc": f"tensordesc<bf16[1,{bt},{bc}]>", "w_desc": f"tensordesc<bf16[{bc},{bn}]>",
                       "y_desc": f"tensordesc<bf16[1,{bt},{bn}]>", "b_ptr": "*bf16"}
                if name == "persistent":
                    sig |= {"B": "i32", "T": "i32"}
                sig |= {"dil": "i32", "CI": "constexpr", "CO": "constexpr", "K": "constexpr",
                        "HAS_BIAS": "constexpr", "BLOCK_T": "constexpr", "BLOCK_N": "constexpr",
                        "BLOCK_C": "constexpr"}
                const = dict(CI=C, CO=C, K=3, HAS_BIAS=True, BLOCK_T=bt, BLOCK_N=bn, BLOCK_C=bc)
                if name == "persistent":
                    sig["INTERP"] = "constexpr"
                    const["INTERP"] = False
                tag = f"{name:10s} C={C:3d} {bt}x{bn}x{bc} w{warps} s{stages}"
                try:
                    r = compile_one(fn, sig, const, warps, stages)
                except Exception as e:  # report and go on
                    print(f"{tag}: FAILED {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
                    continue
                rows.append((tag, r))
                print(f"{tag}: regs {r['regs']} spill st/ld {r['spill_stores']}/{r['spill_loads']} "
                      f"smem {r['shared']} TMA ld/st {r['tma_load']}/{r['tma_store']} (all {r['tma_total']}) "
                      f"wgmma {r['wgmma']} wait {r['wgmma_wait']} ld.global {r['ld_global']}", flush=True)


if __name__ == "__main__":
    main()
