"""Training MFU of every model in one or more finished runs' run.json, read again offline.

    python benchmarks/train_mfu.py RUN_JSON [RUN_JSON ...]

Prints, per file and model, the fields ``harness.pipeline.facts.train_mfu`` gives (the same function the run
uses for run.json's ``speed.train``) against the file's own GEMM ceiling
(``speed.gemm_bf16_tflops``): the whole training (``mfu``), the steps after the first
(``mfu_after_first_step``, only for records that hold the first step's FLOPs) and the median step
(``mfu_median_step``, from ``step_clock``), then what the steps beyond the median cost in seconds
and their p90. For records written before a field existed (e.g. older runs', which
lack ``first_step_flops_causal_attn_half``) the median step takes every step as equal in FLOPs.
CPU only; a file without a GEMM ceiling (a CPU run) has no MFU and says so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.pipeline.facts import train_mfu


def rows(path: Path) -> list[str]:
    """One line per model and seed of the run.json at ``path``."""
    r = json.loads(path.read_text())
    tflops = (r.get("speed") or {}).get("gemm_bf16_tflops")
    if not tflops:
        return [f"{path}: no GEMM ceiling in speed.gemm_bf16_tflops (a CPU run): no MFU"]
    out = [f"{path}: ceiling {tflops:.1f} TFLOP/s"]
    for label, facts in r.get("encoders", {}).items():
        for seed, meta in facts.get("seeds", {}).items():
            st = meta["train"]
            m = train_mfu(st, tflops * 1e12)
            clock = st.get("step_clock") or {}

            def pct(key: str, m: dict = m) -> str:
                return f"{m[key]:6.1%}" if key in m else "     -"

            extra = (f"  median step {clock['median_ms']:6.1f} ms, p90 {clock['p90_ms']:6.1f} ms, "
                     f"beyond the median {clock['excess_over_median_ms'] / 1e3:5.2f} s" if clock else "")
            out.append(f"  {label + ' s' + seed:<16} MFU whole {pct('mfu')}  after first step "
                       f"{pct('mfu_after_first_step')}  median step {pct('mfu_median_step')}{extra}")
    return out


def main() -> None:
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for arg in sys.argv[1:]:
        print("\n".join(rows(Path(arg))))


if __name__ == "__main__":
    main()
