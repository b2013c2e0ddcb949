"""A scaling sweep run and estimated: every grid point of ``harness.config.scaling`` trained for a seed
(``train_sweep``, called by the run for a suite with ``scaling:``), and its ``--dry-run``
(``sweep_dry_run``) timing the training loop's own step per (encoder, size)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.config.scaling import (
    HEADLINE_ATTENTION,
    GridPoint,
    ScalingConfig,
    flops_per_byte,
    grid,
    grid_table,
    plan_point,
    point_facts,
    sweep_columns,
)


def _point_key(runner: Any, spec: Any, seed: int, train_fp: str, cfg: ScalingConfig, budget: float) -> str:
    """The model-cache key of one grid point: the Runner's key plus everything that shapes its
    training here (the budget, the warm-up fraction, the width rule, the limits)."""
    facts = {"flop_budget": budget, "warmup_fraction": cfg.warmup_fraction, "lr_ref_dim": cfg.lr_ref_dim,
             "lr_width_power": cfg.lr_width_power, "min_steps": cfg.min_steps, "max_passes": cfg.max_passes,
             "attention": HEADLINE_ATTENTION}
    return runner.model_key(spec, seed, train_fp, {"scaling": facts})


def point_spec(cfg: ScalingConfig, spec: Any, point: GridPoint) -> Any:
    """The encoder spec of one grid point: its sweep label and the rung's backbone."""
    if spec.backbone is None:
        raise ValueError(f"scaling: encoder {spec.label!r} has no shared backbone (backbone: null), so the "
                         "ladder cannot size it; drop it from a scaling suite")
    return replace(spec, label=point.label, backbone=cfg.backbone(spec.backbone, point.rung))


def train_sweep(runner: Any, seed: int, train: Any) -> dict[str, tuple[Any, dict[str, Any], Any]]:
    """Train (or load) every grid point of the selected budgets for one seed.

    Returns label → (encoder, meta, spec) like the Runner's own models; meta["sweep"] holds the
    results.csv sweep columns. A refused point is logged, recorded in run.json (``scaling.refused``)
    and cached as refused, so a re-run skips it without refitting."""
    import json
    import time

    import torch

    from encoders.backbone import causal_attention_cost
    from harness.data.load import training_windows
    from harness.infra.writes import atomic_torch_save, atomic_write_json
    from harness.train.loop import Checkpointer, fit_context, train_encoder

    cfg: ScalingConfig = runner.suite.scaling
    b = runner.budget
    specs = {s.label: s for s in runner.suite.encoders}
    refused: dict[str, str] = runner.scaling_facts.setdefault("refused", {})
    probe = list(training_windows(train.docs, 8 * b.batch_bytes, b.context_bytes, seed))
    models: dict[str, tuple[Any, dict[str, Any], Any]] = {}
    for p in grid(cfg, list(specs)):
        spec = point_spec(cfg, specs[p.encoder], p)
        key = _point_key(runner, spec, seed, train.fingerprint, cfg, p.budget)
        path, meta_path = runner.rd.model_path(key), runner.rd.model_meta_path(key)
        meta: dict[str, Any] | None = json.loads(meta_path.read_text()) if meta_path.exists() else None
        if meta is not None and meta.get("refused"):
            refused[p.label] = meta["refused"]
            runner.log(f"[scaling] {p.label}: refused (cached): {meta['refused']}")
            continue
        enc = runner.build(spec, seed)
        if meta is not None and path.exists():
            enc.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
            enc.to(runner.device).eval()
            runner.log(f"[model] {p.label} seed {seed}: loaded from cache {path.name}")
        else:
            enc.to(runner.device)
            t0 = time.perf_counter()
            # Everything this point spends — fit stage included — is counted in the headline
            # convention, so the loop stops when the budget is spent under it.
            with causal_attention_cost(HEADLINE_ATTENTION):
                ctx = fit_context(train.docs, b, runner.device, seed, log=runner.log,
                                  progress=lambda what, n, lb=p.label: runner._bar(f"{lb} ({what})", n))
                fit = enc.fit(ctx) or {}
                fit.setdefault("seconds", time.perf_counter() - t0)
                p.flops_per_byte, p.flops_per_byte_full = flops_per_byte(enc, probe, b.windows_per_step,
                                                                          b.windows_per_micro_batch)
                p.fit_flops = float(fit.get("flops", 0.0))
                total = sum(x.numel() for x in enc.parameters())
                p.params_non_embedding = total - enc.embedding_parameters()
                plan_point(cfg, p, base_lr=b.lr, batch_bytes=b.batch_bytes, train_part_bytes=train.n_bytes)
                if p.refused:
                    refused[p.label] = p.refused
                    runner.log(f"[scaling] {p.label}: refused: {p.refused}")
                    atomic_write_json(meta_path, {"key": key, "refused": p.refused})
                    continue
                run_budget = replace(b, train_bytes=p.train_bytes, warmup_bytes=p.warmup_bytes, lr=p.lr)
                runner.log(f"[model] {p.label} seed {seed}: {p.budget:.3g} FLOPs = ~{p.train_bytes:,} bytes, "
                           f"{p.steps} steps, lr {p.lr:.3g} ({runner.device})")
                stats = train_encoder(
                    enc, training_windows(train.docs, 10 * p.train_bytes + b.batch_bytes, b.context_bytes, seed),
                    p.train_bytes, run_budget, runner.device, max_flops=p.budget - p.fit_flops,
                    checkpoint=Checkpointer(runner.rd.partial_path(key), runner.opts.checkpoint_seconds),
                    progress=runner._bar(f"train {p.label} s{seed}", p.train_bytes))
            spent = stats["flops"] + p.fit_flops
            p.train_bytes = int(stats["bytes"])  # what the loop actually read (D of the fits)
            meta = {
                "key": key, "fit": fit, "train": stats, "params_total": total,
                "params_embedding": total - p.params_non_embedding,
                "params_non_embedding": p.params_non_embedding,
                "flops_per_byte_train": p.flops_per_byte, "flops_per_byte_train_full_attn": p.flops_per_byte_full,
                "flops_per_byte_infer": stats["forward_flops"] / max(1, stats["bytes"]),
                "total_flops": spent, "describe": enc.describe(),
                "scaling": point_facts(p, train.n_bytes, train.fingerprint),
                "sweep": sweep_columns(p, spent),
            }
            atomic_torch_save(enc.state_dict(), path)
            atomic_write_json(meta_path, meta)
            runner.log(f"[model] {p.label} seed {seed}: {stats['bytes']:,} bytes, {spent:.3g} FLOPs in "
                       f"{stats['seconds']:.1f}s, final loss {stats['final_loss_bpb']:.3f} bpb")
        models[p.label] = (enc, meta, spec)
        runner.record_encoder_facts(p.label, spec, seed, meta, extra=("scaling",))
    return models


def sweep_dry_run(suite: Any, train: Any, device: Any, base_dir: Any) -> str:
    """``--dry-run`` of a scaling suite: per point its size, FLOPs per byte, bytes, steps, passes,
    lr, refusals and an estimated training time (the training loop's own step, timed on this device
    for each (encoder, size), times the point's steps; fit stages are fitted on about a batch, so BLT
    is approximate and their cost is not in the time)."""
    from encoders.backbone import causal_attention_cost
    from harness.data.load import training_windows
    from harness.train.loop import build_encoder, fit_context
    from harness.train.measure import _fmt, _step_time

    cfg: ScalingConfig = suite.scaling
    b = suite.budget
    seed = suite.seeds[0]
    probe = list(training_windows(train.docs, 8 * b.batch_bytes, b.context_bytes, seed))
    step_probe = probe[: b.windows_per_step]
    specs = {s.label: s for s in suite.encoders}
    measured: dict[tuple[str, str], tuple[float, float, int, float, float]] = {}
    points = grid(cfg, list(specs))
    for p in points:
        k = (p.encoder, p.rung.name)
        if k not in measured:
            enc = build_encoder(point_spec(cfg, specs[p.encoder], p), seed, base_dir).to(device)
            # The whole merge sample, as the run learns it (once per process: later sizes reuse
            # the merges): FLOPs per byte decide refusals, and BPE learned on 1 MB compresses
            # worse (in suites/scaling.yaml ~9 % more FLOPs per byte, enough to flip a point
            # across min_steps). Sub-models still train on only a batch.
            with causal_attention_cost(HEADLINE_ATTENTION):
                fit = enc.fit(fit_context(train.docs, b, device, seed, sub_bytes_cap=b.batch_bytes,
                                          log=lambda s: None)) or {}
                half, full = flops_per_byte(enc, probe, b.windows_per_step, b.windows_per_micro_batch)
            batch = enc.collate(step_probe, [0] * len(step_probe)).to(device)
            dt = _step_time(enc, batch, suite, device)
            n = sum(x.numel() for x in enc.parameters()) - enc.embedding_parameters()
            measured[k] = (half, full, n, float(fit.get("flops", 0.0)), dt)
        half, full, n, fit_flops, dt = measured[k]
        p.flops_per_byte, p.flops_per_byte_full, p.params_non_embedding, p.fit_flops = half, full, n, fit_flops
        p.seconds_per_step = dt
        plan_point(cfg, p, base_lr=b.lr, batch_bytes=b.batch_bytes, train_part_bytes=train.n_bytes)
    head = (f"scaling suite '{suite.name}': {len(cfg.selected())} of {len(cfg.budgets)} budget(s) x "
            f"{len(cfg.ladder)} size(s) x {len(specs)} encoder(s) x {len(suite.seeds)} seed(s) on {device}; "
            f"train part {train.n_bytes:,} bytes. FLOPs: causal attention at half cost (headline).")
    total = sum(p.est_seconds for p in points) * len(suite.seeds)
    return "\n".join([head, "", grid_table(points, _fmt), "",
                      f"estimated training time, all selected budgets and seeds: {_fmt(total)} "
                      "(fit stages and scoring not included)"])
