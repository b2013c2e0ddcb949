"""run.json's ``speed.sweep``: a scaling sweep's model-FLOP utilisation over its whole training
wall, per rung and in total.

    mfu = Σ training FLOPs (causal attention at half) / (wall seconds × GPUs × GEMM FLOP/s)

The wall is the sweep's training phase as the run measured it (fit stages, cached loads and the
gaps between points included; under torchrun the slowest rank's); the GEMM rate is the bf16
product rate the run measured on one of its GPUs. Per rung, ``mfu_share`` is the rung's FLOPs
over the same denominator (the shares sum to the total) and ``mfu_own`` its FLOPs over the
seconds its points' training loops ran (the pace a rung reaches alone). Rungs are named
``<encoder>:<size>`` (the same size is a different model for each encoder).
"""

from __future__ import annotations

import math
from typing import Any


def sweep_speed(encoder_facts: dict[str, dict[str, Any]], wall_seconds: float, peak_flops: float | None,
                gpus: int = 1) -> dict[str, Any]:
    """``speed.sweep`` from run.json's ``encoders`` (grid points with ``scaling`` facts; cached
    points count with the FLOPs and seconds they were trained in). ``peak_flops``: one GPU's
    measured GEMM FLOP/s (None on CPU: no MFU, the FLOP rates still given)."""
    rungs: dict[str, dict[str, float]] = {}
    total_flops = 0.0
    for label, facts in encoder_facts.items():
        sc = facts.get("scaling")
        if not sc:
            continue
        # a rung per encoder: "bytes:s4" (the same rung is another model size for each encoder)
        name = f"{label.split('@')[0]}:{sc['model_size']}"
        r = rungs.setdefault(name, {"points": 0, "flops": 0.0, "train_seconds": 0.0,
                                                "params_non_embedding": facts.get("params_non_embedding", 0)})
        for meta in facts.get("seeds", {}).values():
            st = meta["train"]
            flops = float(st.get("flops_causal_attn_half", st.get("flops", 0.0)))
            r["points"] += 1
            r["flops"] += flops
            r["train_seconds"] += float(st.get("seconds", 0.0))
            total_flops += flops
    denom = wall_seconds * max(1, gpus)

    def mfu(flops: float, seconds: float) -> float | None:
        if not peak_flops or seconds <= 0:
            return None
        return flops / seconds / peak_flops

    per_rung = {}
    for name, r in rungs.items():
        per_rung[name] = {**r, "tflops_own": r["flops"] / r["train_seconds"] / 1e12 if r["train_seconds"] else math.nan,
                          "mfu_own": mfu(r["flops"], r["train_seconds"]), "mfu_share": mfu(r["flops"], denom)}
    return {"wall_seconds": wall_seconds, "gpus": max(1, gpus), "flops": total_flops,
            "tflops": total_flops / denom / 1e12 if denom > 0 else math.nan,
            "mfu": mfu(total_flops, denom), "rungs": per_rung}
