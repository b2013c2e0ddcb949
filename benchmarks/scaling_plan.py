"""Plan a scaling suite's grid on any machine, without timing steps (not a test).

    python benchmarks/scaling_plan.py suites/scaling.yaml [--set KEY=VALUE ...] [--cache DIR]
                                      [--rate bytes=0.55e6 --rate bpe=0.33e6]

``tokbench run SUITE --dry-run`` times two training steps per (encoder, size) on the device it runs
on; sizing a GPU suite from a CPU machine needs the grid without that. This prints, per point, the
non-embedding parameters, training FLOPs per byte (causal attention at half cost, and the full/half
ratio), the bytes the budget buys, steps, refusals, and a time = bytes / an assumed training rate in
bytes/s per encoder (``--rate LABEL=B_PER_S``); per budget, the sum. FLOPs come from the encoders'
own accounting on real training windows, exactly as ``harness.pipeline.sweep.train_sweep`` plans them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from encoders.backbone import causal_attention_cost
from harness.config import load_suite
from harness.config.scaling import HEADLINE_ATTENTION, flops_per_byte, grid, plan_point
from harness.data.load import load_data, source_context, training_windows
from harness.pipeline.sweep import point_spec
from harness.train.loop import build_encoder, fit_context


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite")
    ap.add_argument("--set", action="append", default=[], help="suite override, as in tokbench run")
    ap.add_argument("--cache", type=Path, default=None, help="data cache (TOKBENCH_CACHE)")
    ap.add_argument("--rate", action="append", default=[], help="LABEL=BYTES_PER_S assumed training rate")
    a = ap.parse_args()
    suite = load_suite(a.suite, a.set)
    rates = {k: float(v) for k, v in (r.split("=", 1) for r in a.rate)}
    ctx = source_context(suite, a.cache, lambda s: None)
    train = load_data(suite, ctx, prepare=False, log=lambda s: None).train
    cfg, b = suite.scaling, suite.budget
    assert cfg is not None, "not a scaling suite"
    probe = list(training_windows(train.docs, 8 * b.batch_bytes, b.context_bytes, suite.seeds[0]))
    specs = {s.label: s for s in suite.encoders}
    cache: dict[tuple[str, str], tuple[float, float, int]] = {}
    per_budget: dict[float, float] = {}
    print(f"train part {train.n_bytes:,} bytes; rates (bytes/s): {rates or 'none given'}")
    for p in grid(cfg, list(specs)):
        k = (p.encoder, p.rung.name)
        if k not in cache:
            enc = build_encoder(point_spec(cfg, specs[p.encoder], p), suite.seeds[0], ctx.base_dir)
            with torch.no_grad(), causal_attention_cost(HEADLINE_ATTENTION):
                # the whole merge sample, as the run (harness.pipeline.sweep.sweep_dry_run says why)
                enc.fit(fit_context(train.docs, b, torch.device("cpu"), suite.seeds[0], sub_bytes_cap=b.batch_bytes,
                                    log=lambda s: None))
                half, full = flops_per_byte(enc, probe, b.windows_per_step, b.windows_per_micro_batch)
            cache[k] = (half, full, sum(x.numel() for x in enc.parameters()) - enc.embedding_parameters())
        p.flops_per_byte, p.flops_per_byte_full, p.params_non_embedding = cache[k]
        plan_point(cfg, p, base_lr=b.lr, batch_bytes=b.batch_bytes, train_part_bytes=train.n_bytes)
        t = p.train_bytes / rates[p.encoder] if p.encoder in rates and not p.refused else 0.0
        per_budget[p.budget] = per_budget.get(p.budget, 0.0) + t
        tail = f"REFUSED: {p.refused}" if p.refused else f"t ~ {t:5.0f} s"
        print(f"{p.label:<18} N={p.params_non_embedding:>12,} FLOPs/byte={p.flops_per_byte:9.3g} "
              f"full/half={p.flops_per_byte_full / p.flops_per_byte:5.3f} D={p.train_bytes / 1e6:7.1f} MB "
              f"steps={p.steps:6} lr={p.lr:.3g}  {tail}")
    for c, s in per_budget.items():
        print(f"budget {c:.3g} FLOPs: ~{s:.0f} s of training at the given rates")


if __name__ == "__main__":
    main()
