"""A scaling sweep run and estimated: every grid point of ``harness.config.scaling`` trained for a seed
(``train_sweep``, called by the run for a suite with ``scaling:``), and its ``--dry-run``
(``sweep_dry_run``) timing the training loop's own step per (encoder, size)."""

from __future__ import annotations

from collections.abc import Callable
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


def point_meta(job: dict[str, Any], train: Any) -> dict[str, Any]:
    """The model-cache meta of a trained grid point (``job["stats"]``: its loop's facts); sets the
    point's ``train_bytes`` to what the loop read (D of the fits)."""
    p, enc, stats, total = job["point"], job["enc"], job["stats"], job["total"]
    spent = stats["flops"] + p.fit_flops
    p.train_bytes = int(stats["bytes"])
    return {
        "key": job["key"], "fit": job["fit"], "train": stats, "params_total": total,
        "params_embedding": total - p.params_non_embedding,
        "params_non_embedding": p.params_non_embedding,
        "flops_per_byte_train": p.flops_per_byte, "flops_per_byte_train_full_attn": p.flops_per_byte_full,
        "flops_per_byte_infer": stats["forward_flops"] / max(1, stats["bytes"]),
        "total_flops": spent, "describe": enc.describe(),
        "scaling": point_facts(p, train.n_bytes, train.fingerprint),
        "sweep": sweep_columns(p, spent),
    }


def train_sweep(runner: Any, seed: int, train: Any,
                owned: Callable[[str], bool] | None = None) -> dict[str, tuple[Any, dict[str, Any], Any]]:
    """Train (or load) every grid point of the selected budgets for one seed (with ``owned``,
    only the points whose label it accepts: this rank's share, ``harness.pipeline.sweep_ranks``),
    one after another, or a rung's points as one stacked model under ``scaling.stack``, several
    stacks at once under ``scaling.streams``.

    Returns label → (encoder, meta, spec) like the Runner's own models, in grid order;
    meta["sweep"] holds the results.csv sweep columns. A refused point is logged, recorded in
    run.json (``scaling.refused``) and cached as refused, so a re-run skips it without refitting."""
    from harness.data.load import training_windows

    cfg: ScalingConfig = runner.suite.scaling
    b = runner.budget
    specs = {s.label: s for s in runner.suite.encoders}
    refused: dict[str, str] = runner.scaling_facts.setdefault("refused", {})
    probe = list(training_windows(train.docs, 8 * b.batch_bytes, b.context_bytes, seed))
    done: dict[str, tuple[Any, dict[str, Any], Any]] = {}
    pending: list[dict[str, Any]] = []  # planned points, stacked once all are planned

    def train_alone(job: dict[str, Any]) -> None:
        _train_point(runner, train, seed, job)
        _finish_point(runner, train, seed, job, done)

    points = [p for p in grid(cfg, list(specs)) if owned is None or owned(p.label)]
    for p in points:
        job = _plan_point(runner, p, specs[p.encoder], seed, train, probe, refused, done)
        if job is None:  # refused, or loaded from the model cache
            continue
        if cfg.stack or cfg.streams > 1:  # stacked: all planned first, then grouped
            pending.append(job)
        else:
            train_alone(job)
    if pending:
        from harness.pipeline.sweep_stack import train_stacks

        for job in train_stacks(pending, runner, train, seed,
                                lambda job: _finish_point(runner, train, seed, job, done)):
            train_alone(job)
    return _grid_models(runner, seed, points, done, refused, owned)


def _plan_point(runner: Any, p: GridPoint, base_spec: Any, seed: int, train: Any, probe: list[Any],
                refused: dict[str, str],
                done: dict[str, tuple[Any, dict[str, Any], Any]]) -> dict[str, Any] | None:
    """Build, fit and plan one grid point; returns its training job, or None where the point is
    refused (recorded in ``refused``, cached as refused) or loaded from the model cache (into ``done``)."""
    import json
    import time

    import torch

    from encoders.backbone import causal_attention_cost
    from harness.infra.writes import atomic_write_json
    from harness.train.loop import fit_context

    cfg: ScalingConfig = runner.suite.scaling
    b = runner.budget
    spec = point_spec(cfg, base_spec, p)
    key = _point_key(runner, spec, seed, train.fingerprint, cfg, p.budget)
    path, meta_path = runner.rd.model_path(key), runner.rd.model_meta_path(key)
    meta: dict[str, Any] | None = json.loads(meta_path.read_text()) if meta_path.exists() else None
    if meta is not None and meta.get("refused"):
        refused[p.label] = meta["refused"]
        runner.log(f"[scaling] {p.label}: refused (cached): {meta['refused']}")
        return None
    enc = runner.build(spec, seed)
    if meta is not None and path.exists():
        enc.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        enc.to(runner.device).eval()
        runner.log(f"[model] {p.label} seed {seed}: loaded from cache {path.name}")
        done[p.label] = (enc, meta, spec)
        return None
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
        return None
    runner.log(f"[model] {p.label} seed {seed}: {p.budget:.3g} FLOPs = ~{p.train_bytes:,} bytes, "
               f"{p.steps} steps, lr {p.lr:.3g} ({runner.device})")
    return {"point": p, "spec": spec, "key": key, "path": path, "meta_path": meta_path, "enc": enc,
            "fit": fit, "total": total,
            "budget": replace(b, train_bytes=p.train_bytes, warmup_bytes=p.warmup_bytes, lr=p.lr)}


def _train_point(runner: Any, train: Any, seed: int, job: dict[str, Any]) -> None:
    """Train one planned point (``job`` from ``_plan_point``) to its FLOP budget; sets
    ``job["stats"]`` (the loop's facts)."""
    from encoders.backbone import causal_attention_cost
    from harness.data.load import training_windows
    from harness.train.loop import Checkpointer, train_encoder

    p, key, b = job["point"], job["key"], runner.budget
    with causal_attention_cost(HEADLINE_ATTENTION):
        job["stats"] = train_encoder(
            job["enc"], training_windows(train.docs, 10 * p.train_bytes + b.batch_bytes, b.context_bytes, seed),
            p.train_bytes, job["budget"], runner.device, max_flops=p.budget - p.fit_flops,
            checkpoint=Checkpointer(runner.rd.partial_path(key), runner.opts.checkpoint_seconds),
            progress=runner._bar(f"train {p.label} s{seed}", p.train_bytes))


def _finish_point(runner: Any, train: Any, seed: int, job: dict[str, Any],
                  done: dict[str, tuple[Any, dict[str, Any], Any]]) -> None:
    """Record a trained point (its ``stats`` set): the sweep facts, the model cache, the log;
    adds it to ``done``."""
    from harness.infra.writes import atomic_torch_save, atomic_write_json

    p, stats, meta = job["point"], job["stats"], point_meta(job, train)
    atomic_torch_save(job["enc"].state_dict(), job["path"])
    atomic_write_json(job["meta_path"], meta)
    runner.log(f"[model] {p.label} seed {seed}: {stats['bytes']:,} bytes, {meta['total_flops']:.3g} FLOPs in "
               f"{stats['seconds']:.1f}s, final loss {stats['final_loss_bpb']:.3f} bpb")
    done[p.label] = (job["enc"], meta, job["spec"])


def _grid_models(runner: Any, seed: int, points: list[GridPoint],
                 done: dict[str, tuple[Any, dict[str, Any], Any]], refused: dict[str, str],
                 owned: Callable[[str], bool] | None) -> dict[str, tuple[Any, dict[str, Any], Any]]:
    """The trained and loaded points in grid order, whatever order they finished in, their facts
    recorded in run.json; raises ValueError where every point was refused (``owned`` unset)."""
    models: dict[str, tuple[Any, dict[str, Any], Any]] = {}
    for p in points:
        if p.label in done:
            models[p.label] = done[p.label]
            runner.record_encoder_facts(p.label, done[p.label][2], seed, done[p.label][1], extra=("scaling",))
    if not models and refused and owned is None:  # nothing to score: say why instead of an empty report
        label, why = next(iter(refused.items()))
        raise ValueError(f"scaling: every point of the selected budgets was refused, so nothing is trained "
                         f"(first, {label}: {why}); change scaling.budgets or scaling.ladder")
    return models


def sweep_dry_run(suite: Any, train: Any, device: Any, base_dir: Any, ranks: int = 1) -> str:
    """``--dry-run`` of a scaling suite: per point its size, FLOPs per byte, bytes, steps, passes,
    lr, refusals and an estimated training time (the training loop's own step — a CUDA-graph
    replay where ``budget.cuda_graphs`` makes the run replay it — timed on this device for each
    (encoder, size), times the point's steps; fit stages are fitted on about a batch, so BLT
    is approximate and their cost is not in the time), and the sweep's wall on ``ranks``
    processes sharing this device (``harness.pipeline.sweep_estimate``)."""
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
    built: dict[tuple[str, str], tuple[Any, Any]] = {}  # (encoder, size): its model and a step's batch
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
            built[k] = (enc, batch)
            dt = _step_time(enc, batch, suite, device)
            dt, dt_gpu = _engine_step_times(enc, batch, suite, device, dt)
            n = sum(x.numel() for x in enc.parameters()) - enc.embedding_parameters()
            measured[k] = (half, full, n, float(fit.get("flops", 0.0)), dt, dt_gpu)
        half, full, n, fit_flops, dt, dt_gpu = measured[k]
        p.flops_per_byte, p.flops_per_byte_full, p.params_non_embedding, p.fit_flops = half, full, n, fit_flops
        p.seconds_per_step = dt
        p.extra["gpu_seconds_per_step"] = dt_gpu
        plan_point(cfg, p, base_lr=b.lr, batch_bytes=b.batch_bytes, train_part_bytes=train.n_bytes)
    head = (f"scaling suite '{suite.name}': {len(cfg.selected())} of {len(cfg.budgets)} budget(s) x "
            f"{len(cfg.ladder)} size(s) x {len(specs)} encoder(s) x {len(suite.seeds)} seed(s) on {device}; "
            f"train part {train.n_bytes:,} bytes. FLOPs: causal attention at half cost (headline).")
    total = sum(p.est_seconds for p in points) * len(suite.seeds)
    from harness.pipeline.sweep_estimate import sweep_wall

    trained = [p for p in points if not p.refused] * len(suite.seeds)
    wall = sweep_wall(trained, ranks, 1)
    engine = (f"{ranks} rank(s) on this device: {_fmt(wall['wall'])} (the larger of their makespan "
              f"{_fmt(wall['makespan'])} and the device's work one step after another "
              f"{_fmt(wall['gpu_work'])}; more ranks: --nproc N with --dry-run)")
    if cfg.stack or cfg.streams > 1:  # stacks, in one process
        from harness.pipeline.sweep_estimate import stack_estimate

        what = " + ".join(x for x, on in (("scaling.stack", cfg.stack), (f"scaling.streams {cfg.streams}", cfg.streams > 1)) if on)
        engine += (f"; {what}, one process: "
                   f"{_fmt(stack_estimate(points, built, b, device, cfg.stack, cfg.streams) * len(suite.seeds))}")
    return "\n".join([head, "", grid_table(points, _fmt), "",
                      f"estimated training time, all selected budgets and seeds: {_fmt(total)} one point at a "
                      f"time, {engine} (fit stages and scoring not included)"])


def _engine_step_times(enc: Any, batch: Any, suite: Any, device: Any, eager: float) -> tuple[float, float]:
    """(wall, device) seconds of a step as the run takes it: the CUDA-graph replay where
    ``budget.cuda_graphs`` applies (``harness.train.graph_step``), else the eager step (whose wall
    ``eager`` is measured already)."""
    from harness.pipeline.sweep_estimate import step_times
    from harness.train.graph_step import GraphStep, graph_capable
    from harness.train.loop import autocast_for, make_optimizer, train_step

    b = suite.budget
    graphs = b.cuda_graphs and device.type == "cuda" and graph_capable(enc)
    opt = make_optimizer(enc, b, device, capturable=graphs)
    if graphs:
        gs = GraphStep(enc, opt, b, device, list(enc.parameters()))
        return step_times(lambda: gs(batch, b.lr, batch.scored_bytes), device)
    autocast = autocast_for(b, device)
    _, gpu = step_times(lambda: train_step(enc, batch, opt, b.lr, b, autocast), device)
    return eager, gpu
