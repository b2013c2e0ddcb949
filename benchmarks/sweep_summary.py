"""Print a scaling sweep's speed from its run.json (``speed.sweep``, harness/pipeline/sweep_speed.py): the
command's wall, the grid's training FLOPs (causal attention at half), TFLOP/s and % of the GEMM
rate the run measured over the training wall, per-rung MFU, and how each point's steps ran (a
point of a stack, ``scaling.stack``: its share of the stack's wall, and the stack's size).

    python benchmarks/sweep_summary.py RUN_DIR [COMMAND_WALL_SECONDS]      # run.json or run.json.gz
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path


def summary(run: Path, command_wall: float | None = None) -> str:
    # committed results keep run.json gzipped (benchmarks/results)
    path = run / "run.json"
    facts = json.loads(path.read_text() if path.exists() else gzip.decompress((run / "run.json.gz").read_bytes()))
    sp = facts["speed"]
    sw = sp["sweep"]
    gemm = sp.get("gemm_bf16_tflops")
    pct = (f"{100 * sw['mfu']:.1f} % of the {gemm:.0f} TFLOP/s bf16 GEMM measured"
           if sw.get("mfu") is not None else "no GEMM rate (CPU)")
    ranks = facts.get("distributed", {}).get("world_size", 1)
    lines = [f"{run.name}: {ranks} rank(s) on {sw['gpus']} GPU(s)"
             + (f"; command wall {command_wall:.1f} s" if command_wall else ""),
             f"  training wall {sw['wall_seconds']:.1f} s, grid training FLOPs {sw['flops']:.3g}, "
             f"{sw['tflops']:.1f} TFLOP/s = {pct}"]
    for name, r in sorted(sw["rungs"].items(), key=lambda kv: kv[1]["params_non_embedding"]):
        own = f"{100 * r['mfu_own']:.1f} %" if r.get("mfu_own") is not None else "-"
        share = f"{100 * r['mfu_share']:.1f} %" if r.get("mfu_share") is not None else "-"
        lines.append(f"  {name:<10} N {r['params_non_embedding'] / 1e6:6.3f} M  {r['points']} point(s)  "
                     f"{r['flops']:.3g} FLOPs in {r['train_seconds']:.1f} s of its loops: "
                     f"{r['tflops_own']:.1f} TFLOP/s, MFU {own} alone, {share} of the wall's")
    for label, f in facts["encoders"].items():
        for seed, meta in f.get("seeds", {}).items():
            st = meta["train"]
            stack = st.get("stack")
            # a stacked point's seconds are its share of the stack's wall (harness/train/stacked_loop.py)
            beside = f", {stack['at_once']} stacks at once" if stack and stack.get("at_once", 1) > 1 else ""
            how = (f" in a stack of {stack['members']}{beside} (its share; the stack's wall {stack['wall_seconds']:.1f} s when it "
                   f"ended{', vmap ran one model at a time: ' + ', '.join(stack['vmap_fallback']) if stack.get('vmap_fallback') else ''})"
                   if stack else "")
            lines.append(f"  {label} s{seed}: {st['steps']} steps, {1e3 * st['seconds'] / max(1, st['steps']):.2f} ms a step{how}, "
                         f"{st.get('cuda_graph_steps', 0)} as CUDA graph replays ({st.get('cuda_graphs', 0)} graph(s))")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else None))
