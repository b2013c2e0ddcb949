"""IsoFLOP sweeps: the ``scaling:`` suite section and the grid of (budget, model size, encoder).

    tokbench run suites/scaling_smoke.yaml --dry-run          # the grid, refusals, estimated time
    tokbench run scaling --set 'scaling.only_budgets=[1e15]' --out runs/scaling/b1e15

Per grid point the training bytes follow from the FLOP budget and the model's own FLOP accounting:
train_bytes = (budget − fit FLOPs) / training FLOPs per byte, where FLOPs per byte are 3 × the
encoder's analytic forward FLOPs on a probe of real training batches, with causal attention counted
at half its dense cost (the headline convention; ``train_flops_full_attn`` records the other).
The loop then trains until the budget is spent (``budget.match: flops`` semantics), so
``train_flops`` ≈ the budget for every point. Warm-up is ``warmup_fraction`` of each run's bytes;
the learning rate follows the width rule ``lr = budget.lr · (lr_ref_dim / dim) ** lr_width_power``.
A point is refused, with its reason, when the budget does not buy ``min_steps`` optimizer steps,
when the fit stage alone spends the budget, or when its bytes would repeat the train part more than
``max_passes`` times. Fitting and the report live in ``reports/scaling.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from encoders.backbone import BackboneConfig

# Budgets and ladder sizes of one sweep, at most: an IsoFLOP fit needs 5 of each, and the dry run
# builds, fits and times every (encoder, size) once (a 2000-size ladder kept it silent for minutes).
MAX_POINTS = 32
HEADLINE_ATTENTION = 0.5  # causal attention counted at half its dense cost in train_flops


@dataclass(frozen=True, kw_only=True)
class Rung:
    """One model size of the ladder: the shared backbone's depth and width.

    name: label of the size in results (``model_size``) and encoder labels (``bytes@1e15:s3``).
    layers: transformer blocks.
    dim: model width (every encoder's backbone width at this rung).
    heads: attention heads (dim / heads must be even).
    """

    name: str
    layers: int
    dim: int
    heads: int


@dataclass(frozen=True, kw_only=True)
class ScalingConfig:
    """An IsoFLOP sweep: every encoder trained at every (budget, size) with compute fixed.

    budgets: training FLOPs per model (causal attention at half cost, fit stages included); at
    least 5, ascending, log-spaced.
    ladder: model sizes (backbone depth x width); at least 5 with distinct (layers, dim).
    warmup_fraction: linear warm-up over this fraction of each run's training bytes.
    min_steps: a point whose budget buys fewer optimizer steps is refused.
    max_passes: a point whose bytes would repeat the train part more often is refused.
    lr_ref_dim: the width at which ``budget.lr`` applies.
    lr_width_power: lr = budget.lr * (lr_ref_dim / dim) ** lr_width_power (0 = one lr for all).
    only_budgets: train only these budgets (one piece of the grid per command); empty = all.
    points_at_once: grid points one process trains at the same time, each in its own thread
    (and CUDA stream): the small models' kernels then share the GPU. Each point is trained as
    alone (its own windows, schedule, seed and optimizer); 1 = one after another.
    """

    budgets: tuple[float, ...]
    ladder: tuple[Rung, ...]
    warmup_fraction: float = 0.05
    min_steps: int = 200
    max_passes: float = 4.0
    lr_ref_dim: int = 256
    lr_width_power: float = 0.5
    only_budgets: tuple[float, ...] = ()
    points_at_once: int = 1

    def __post_init__(self) -> None:
        b = self.budgets
        if len(b) < 5:
            raise ValueError(f"budgets: at least 5 FLOP budgets are needed for a fit, got {len(b)}")
        if any(x <= 0 or not math.isfinite(x) for x in b):
            raise ValueError(f"budgets: every budget must be a positive number of FLOPs, got {list(b)}")
        if any(y <= x for x, y in zip(b, b[1:])):
            raise ValueError(f"budgets: must be strictly ascending, got {list(b)}")
        gaps = [math.log10(y / x) for x, y in zip(b, b[1:])]
        if max(gaps) > 2.5 * min(gaps):
            raise ValueError(
                f"budgets: not log-spaced (ratios between neighbours {', '.join(f'{10**g:.3g}' for g in gaps)}); "
                "use a constant factor, e.g. 1e14, 3e14, 1e15, 3e15, 1e16")
        if len(b) > MAX_POINTS or len(self.ladder) > MAX_POINTS:  # each size is built and timed by --dry-run
            key, n = ("budgets", len(b)) if len(b) > MAX_POINTS else ("ladder", len(self.ladder))
            raise ValueError(f"{key}: at most {MAX_POINTS} entries, got {n}")
        if len(self.ladder) < 5:
            raise ValueError(f"ladder: at least 5 model sizes are needed for an IsoFLOP parabola, got {len(self.ladder)}")
        names = [r.name for r in self.ladder]
        if len(set(names)) != len(names):
            raise ValueError(f"ladder: size names repeat: {names}")
        shapes = [(r.layers, r.dim) for r in self.ladder]
        if len(set(shapes)) != len(shapes):
            raise ValueError(f"ladder: (layers, dim) pairs repeat: {shapes}")
        for r in self.ladder:
            if r.layers < 1 or r.dim < 2 or r.heads < 1 or r.dim % r.heads or (r.dim // r.heads) % 2:
                raise ValueError(f"ladder: size {r.name!r}: need layers >= 1 and dim divisible by heads "
                                 f"with an even head size, got layers={r.layers} dim={r.dim} heads={r.heads}")
            if any(c in r.name for c in "@:/ ,") or r.name[:1] in ("", "=", "+", "-"):
                raise ValueError(f"ladder: size name {r.name!r} may not be empty, contain '@', ':', '/', spaces or commas, "
                                 "or start with '=', '+' or '-' (a formula in results.csv)")
        if not 0 <= self.warmup_fraction < 1:
            raise ValueError(f"warmup_fraction: must be in [0, 1), got {self.warmup_fraction}")
        if self.min_steps < 1 or self.max_passes <= 0 or self.lr_ref_dim < 1 or self.points_at_once < 1:
            raise ValueError("min_steps, max_passes, lr_ref_dim and points_at_once must be positive")
        for x in self.only_budgets:
            if not any(math.isclose(x, y, rel_tol=1e-9) for y in b):
                raise ValueError(f"only_budgets: {x:g} is not one of the budgets {', '.join(f'{y:g}' for y in b)}")

    def selected(self) -> list[float]:
        """The budgets this command trains (``only_budgets`` or all)."""
        if not self.only_budgets:
            return list(self.budgets)
        return [y for y in self.budgets if any(math.isclose(x, y, rel_tol=1e-9) for x in self.only_budgets)]

    def lr(self, base_lr: float, dim: int) -> float:
        """Width rule: base_lr at lr_ref_dim, scaled by (lr_ref_dim / dim) ** lr_width_power
        (power 1 is μP's rule for Adam on hidden matrices; 0.5 the default, a milder compromise
        because one LR also drives the embeddings)."""
        return base_lr * (self.lr_ref_dim / dim) ** self.lr_width_power

    def backbone(self, base: BackboneConfig, rung: Rung) -> BackboneConfig:
        return replace(base, layers=rung.layers, dim=rung.dim, heads=rung.heads)


@dataclass
class GridPoint:
    """One (budget, size, encoder) model of the sweep, planned before training.

    flops_per_byte / flops_per_byte_full: training FLOPs per training byte with causal attention
    at half / full cost. fit_flops: the encoder's fit stage (BLT entropy model; 0 for BPE merges).
    train_bytes: bytes the budget buys after the fit; steps: optimizer steps of batch_bytes.
    refused: "" or why the point is not trained.
    """

    budget: float
    rung: Rung
    encoder: str  # the suite's encoder label
    label: str  # the sweep label bytes@1e15:s3
    params_non_embedding: int = 0
    flops_per_byte: float = math.nan
    flops_per_byte_full: float = math.nan
    fit_flops: float = 0.0
    train_bytes: int = 0
    steps: int = 0
    passes: float = 0.0
    lr: float = math.nan
    warmup_bytes: int = 0
    refused: str = ""
    seconds_per_step: float = math.nan
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def est_seconds(self) -> float:
        return self.seconds_per_step * self.steps if not self.refused else 0.0


def plan_point(cfg: ScalingConfig, point: GridPoint, *, base_lr: float, batch_bytes: int,
               train_part_bytes: int) -> GridPoint:
    """Fill a point's bytes, steps, passes, lr and warm-up from its FLOPs per byte, and refuse it
    (``refused`` set) when it breaks the suite's limits. Pure arithmetic (tests call it directly)."""
    point.lr = cfg.lr(base_lr, point.rung.dim)
    left = point.budget - point.fit_flops
    if left <= 0:
        point.refused = (f"the fit stage alone spends {point.fit_flops:.3g} FLOPs, the whole budget "
                         f"{point.budget:.3g}")
        return point
    point.train_bytes = int(left / point.flops_per_byte)
    point.steps = point.train_bytes // batch_bytes
    point.passes = point.train_bytes / max(1, train_part_bytes)
    point.warmup_bytes = int(cfg.warmup_fraction * point.train_bytes)
    if point.steps < cfg.min_steps:
        point.refused = (f"{point.budget:.3g} FLOPs buy {point.train_bytes:,} bytes = {point.steps} steps of "
                         f"budget.batch_bytes={batch_bytes:,} at {point.flops_per_byte:.3g} FLOPs/byte; "
                         f"scaling.min_steps is {cfg.min_steps} (raise the budget, shrink the model or the batch)")
    elif point.passes > cfg.max_passes:
        point.refused = (f"{point.train_bytes:,} training bytes would repeat the train part "
                         f"({train_part_bytes:,} bytes) {point.passes:.1f} times; scaling.max_passes is "
                         f"{cfg.max_passes:g} (add text or drop this budget/size)")
    return point


def grid(cfg: ScalingConfig, encoders: Sequence[str], budgets: Sequence[float] | None = None) -> list[GridPoint]:
    """The grid in run order: budget, then size, then encoder."""
    from reports.scaling import sweep_label

    out = []
    for b in budgets if budgets is not None else cfg.selected():
        for r in cfg.ladder:
            for e in encoders:
                out.append(GridPoint(budget=b, rung=r, encoder=e, label=sweep_label(e, b, r.name)))
    return out


def sweep_columns(point: GridPoint | None, train_flops: float | None = None,
                  fit_flops: float = 0.0) -> dict[str, Any]:
    """The results.csv sweep columns of one model (all empty outside sweeps).

    train_flops: FLOPs the loop spent (half convention) plus the fit; the full-attention count
    scales it by the model's own full/half FLOPs-per-byte ratio (fit stages by the same ratio)."""
    if point is None:
        return {k: "" for k in ("flop_budget", "model_size", "params_non_embedding", "train_bytes",
                                "train_flops", "train_flops_full_attn")}
    spent = train_flops if train_flops is not None else point.budget
    ratio = point.flops_per_byte_full / point.flops_per_byte
    return {"flop_budget": point.budget, "model_size": point.rung.name,
            "params_non_embedding": point.params_non_embedding, "train_bytes": point.train_bytes,
            "train_flops": spent, "train_flops_full_attn": spent * ratio}


def point_facts(point: GridPoint, train_part_bytes: int, train_fingerprint: str) -> dict[str, Any]:
    """run.json's ``scaling`` entry of one trained point (``encoders[label].scaling``).

    Call it after ``point.train_bytes`` holds the bytes the loop actually read. ``passes`` is
    that D over the train part (what the report's "passes at D_opt" needs); ``planned_passes``
    is the plan's, kept for the refusal rule. Mixing the two — actual bytes over planned
    passes — inflated the text size the report derives by actual/planned. ``train_part_bytes``
    and ``train_fingerprint`` are stored outright, so the report need not derive the one and
    can refuse to pool points trained on different text."""
    part = max(1, int(train_part_bytes))
    return {"flop_budget": point.budget, "model_size": point.rung.name, "layers": point.rung.layers,
            "dim": point.rung.dim, "lr": point.lr, "warmup_bytes": point.warmup_bytes,
            "planned_steps": point.steps, "planned_passes": point.passes,
            "passes": point.train_bytes / part, "train_part_bytes": part,
            "train_fingerprint": train_fingerprint}


def grid_table(points: Sequence[GridPoint], fmt_time: Callable[[float], str]) -> str:
    """``--dry-run`` text: one line per point, refusals with reasons, time per budget."""
    lines = [f"{'model':<26} {'layers x dim':>12} {'N (non-emb)':>12} {'FLOPs/byte':>11} {'train bytes':>13} "
             f"{'steps':>7} {'passes':>7} {'lr':>9} {'est. time':>10}"]
    per_budget: dict[float, float] = {}
    refused = []
    for p in points:
        shape = f"{p.rung.layers} x {p.rung.dim}"
        if p.refused:
            refused.append(f"  {p.label}: {p.refused}")
            lines.append(f"{p.label:<26} {shape:>12} {p.params_non_embedding:>12,} {p.flops_per_byte:>11.3g} "
                         f"{'REFUSED':>13}")
            continue
        per_budget[p.budget] = per_budget.get(p.budget, 0.0) + p.est_seconds
        lines.append(f"{p.label:<26} {shape:>12} {p.params_non_embedding:>12,} {p.flops_per_byte:>11.3g} "
                     f"{p.train_bytes:>13,} {p.steps:>7,} {p.passes:>7.2f} {p.lr:>9.3g} {fmt_time(p.est_seconds):>10}")
    lines.append("")
    for b, s in per_budget.items():
        lines.append(f"budget {b:.3g} FLOPs: estimated training time {fmt_time(s)} "
                     f"(one command: --set 'scaling.only_budgets=[{b:g}]')")
    if refused:
        lines += ["", f"refused ({len(refused)}):"] + refused
    return "\n".join(lines)


def flops_per_byte(enc: Any, probe: list[bytes], per_step: int, micro: int) -> tuple[float, float]:
    """Training FLOPs per scored byte of ``enc`` on a probe of training windows, with causal
    attention at half and at full cost: (3·forward − 2·frozen) / scored bytes, counted as the
    loop counts them — the probe cut into steps of ``per_step`` windows and each step into
    micro-batches of ``micro``, each collated (padded) on its own. Padding the whole probe as one
    batch would count padding to the longest window of eight steps: for BPE 7–12 % more FLOPs per
    byte than the loop spends, so the plan under-reads and the loop ran ~10 % past the planned
    bytes (and past the end of its LR schedule)."""
    from encoders.backbone import causal_attention_cost

    batches = [enc.collate(step[j: j + micro], [0] * len(step[j: j + micro]))
               for i in range(0, len(probe), per_step) for step in [probe[i: i + per_step]]
               for j in range(0, len(step), micro)]
    scored = max(1, sum(batch.scored_bytes for batch in batches))
    out = []
    for frac in (HEADLINE_ATTENTION, 1.0):
        with causal_attention_cost(frac):
            total = 0.0
            for batch in batches:
                frozen = enc.frozen_flops(batch) if hasattr(enc, "frozen_flops") else 0.0
                total += 3.0 * enc.flops(batch) - 2.0 * frozen
            out.append(total / scored)
    return out[0], out[1]


# ---------------------------------------------------------------------------------------------
# Training the grid and the dry run (the Runner calls these; torch lives below this line)


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


def train_sweep(runner: Any, seed: int, train: Any,
                owned: Callable[[str], bool] | None = None) -> dict[str, tuple[Any, dict[str, Any], Any]]:
    """Train (or load) every grid point of the selected budgets for one seed (with ``owned``,
    only the points whose label it accepts: this rank's share, ``harness.sweep_ranks``), up to
    ``scaling.points_at_once`` at the same time (``train_together``).

    Returns label → (encoder, meta, spec) like the Runner's own models, in grid order;
    meta["sweep"] holds the results.csv sweep columns. A refused point is logged, recorded in
    run.json (``scaling.refused``) and cached as refused, so a re-run skips it without refitting."""
    import json
    import time

    import torch

    from encoders.backbone import causal_attention_cost
    from harness.data import training_windows
    from harness.results import atomic_torch_save, atomic_write_json
    from harness.train import Checkpointer, fit_context, train_encoder

    cfg: ScalingConfig = runner.suite.scaling
    b = runner.budget
    specs = {s.label: s for s in runner.suite.encoders}
    refused: dict[str, str] = runner.scaling_facts.setdefault("refused", {})
    probe = list(training_windows(train.docs, 8 * b.batch_bytes, b.context_bytes, seed))
    done: dict[str, tuple[Any, dict[str, Any], Any]] = {}
    pending: list[dict[str, Any]] = []  # planned points, trained together by ``flush``
    # threads share torch's global generator: only models that draw nothing from it in training
    at_once = cfg.points_at_once if all(s.backbone is None or s.backbone.dropout == 0 for s in specs.values()) else 1

    def train_one(job: dict[str, Any]) -> None:
        p, key = job["point"], job["key"]
        with causal_attention_cost(HEADLINE_ATTENTION):
            job["stats"] = train_encoder(
                job["enc"], training_windows(train.docs, 10 * p.train_bytes + b.batch_bytes, b.context_bytes, seed),
                p.train_bytes, job["budget"], runner.device, max_flops=p.budget - p.fit_flops,
                checkpoint=Checkpointer(runner.rd.partial_path(key), runner.opts.checkpoint_seconds),
                progress=runner._bar(f"train {p.label} s{seed}", p.train_bytes))

    def flush() -> None:
        train_together(pending, train_one, runner.device)
        for job in pending:
            p, enc, stats, total = job["point"], job["enc"], job["stats"], job["total"]
            spent = stats["flops"] + p.fit_flops
            p.train_bytes = int(stats["bytes"])  # what the loop actually read (D of the fits)
            meta = {
                "key": job["key"], "fit": job["fit"], "train": stats, "params_total": total,
                "params_embedding": total - p.params_non_embedding,
                "params_non_embedding": p.params_non_embedding,
                "flops_per_byte_train": p.flops_per_byte, "flops_per_byte_train_full_attn": p.flops_per_byte_full,
                "flops_per_byte_infer": stats["forward_flops"] / max(1, stats["bytes"]),
                "total_flops": spent, "describe": enc.describe(),
                "scaling": point_facts(p, train.n_bytes, train.fingerprint),
                "sweep": sweep_columns(p, spent),
            }
            atomic_torch_save(enc.state_dict(), job["path"])
            atomic_write_json(job["meta_path"], meta)
            runner.log(f"[model] {p.label} seed {seed}: {stats['bytes']:,} bytes, {spent:.3g} FLOPs in "
                       f"{stats['seconds']:.1f}s, final loss {stats['final_loss_bpb']:.3f} bpb")
            done[p.label] = (enc, meta, job["spec"])
        pending.clear()

    points = [p for p in grid(cfg, list(specs)) if owned is None or owned(p.label)]
    for p in points:
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
            done[p.label] = (enc, meta, spec)
            continue
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
        runner.log(f"[model] {p.label} seed {seed}: {p.budget:.3g} FLOPs = ~{p.train_bytes:,} bytes, "
                   f"{p.steps} steps, lr {p.lr:.3g} ({runner.device})")
        pending.append({"point": p, "spec": spec, "key": key, "path": path, "meta_path": meta_path, "enc": enc,
                        "fit": fit, "total": total,
                        "budget": replace(b, train_bytes=p.train_bytes, warmup_bytes=p.warmup_bytes, lr=p.lr)})
        if len(pending) >= at_once:
            flush()
    flush()
    models: dict[str, tuple[Any, dict[str, Any], Any]] = {}
    for p in points:  # grid order, whatever order the points finished in
        if p.label in done:
            models[p.label] = done[p.label]
            runner.record_encoder_facts(p.label, done[p.label][2], seed, done[p.label][1], extra=("scaling",))
    if not models and refused and owned is None:  # nothing to score: say why instead of an empty report
        label, why = next(iter(refused.items()))
        raise ValueError(f"scaling: every point of the selected budgets was refused, so nothing is trained "
                         f"(first, {label}: {why}); change scaling.budgets or scaling.ladder")
    return models


def train_together(jobs: Sequence[Any], train_one: Callable[[Any], None], device: Any) -> None:
    """``train_one(job)`` for every job: one after another when there is one; else each in its
    own thread — on CUDA on its own stream, so the jobs' kernels run side by side — in a copy of
    the caller's context (``causal_attention_cost`` is a context variable). A job's error is
    raised here once all have stopped."""
    import contextlib
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    import torch

    if len(jobs) <= 1:
        for job in jobs:
            train_one(job)
        return

    def run(job: Any) -> None:
        stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            train_one(job)

    from harness.accel import loops_at_once

    with loops_at_once(len(jobs)), ThreadPoolExecutor(len(jobs), thread_name_prefix="tokbench-point") as pool:
        futures = [pool.submit(contextvars.copy_context().run, run, job) for job in jobs]
    for f in futures:
        f.result()


def sweep_dry_run(suite: Any, train: Any, device: Any, base_dir: Any, ranks: int = 1) -> str:
    """``--dry-run`` of a scaling suite: per point its size, FLOPs per byte, bytes, steps, passes,
    lr, refusals and an estimated training time (the training loop's own step — a CUDA-graph
    replay where ``budget.cuda_graphs`` makes the run replay it — timed on this device for each
    (encoder, size), times the point's steps; fit stages are fitted on about a batch, so BLT
    is approximate and their cost is not in the time), and the sweep's wall on ``ranks``
    processes sharing this device (``harness.sweep_estimate``)."""
    from encoders.backbone import causal_attention_cost
    from harness.data import training_windows
    from harness.estimate import _fmt, _step_time
    from harness.run import build_encoder
    from harness.train import fit_context

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
    from harness.sweep_estimate import sweep_wall

    trained = [p for p in points if not p.refused] * len(suite.seeds)
    lanes = ranks * cfg.points_at_once  # points trained at the same time
    wall = sweep_wall(trained, lanes, 1)
    engine = (f"{lanes} at a time ({ranks} rank(s) x scaling.points_at_once {cfg.points_at_once}) on this "
              f"device: {_fmt(wall['wall'])} (the larger of their makespan {_fmt(wall['makespan'])} and the "
              f"device's work one step after another {_fmt(wall['gpu_work'])}; more ranks: --nproc N with --dry-run)")
    return "\n".join([head, "", grid_table(points, _fmt), "",
                      f"estimated training time, all selected budgets and seeds: {_fmt(total)} one point at a "
                      f"time, {engine} (fit stages and scoring not included)"])


def _engine_step_times(enc: Any, batch: Any, suite: Any, device: Any, eager: float) -> tuple[float, float]:
    """(wall, device) seconds of a step as the run takes it: the CUDA-graph replay where
    ``budget.cuda_graphs`` applies (``harness.graph_step``), else the eager step (whose wall
    ``eager`` is measured already)."""
    from harness.graph_step import GraphStep, graph_capable
    from harness.sweep_estimate import step_times
    from harness.train import autocast_for, make_optimizer, train_step

    b = suite.budget
    graphs = b.cuda_graphs and device.type == "cuda" and graph_capable(enc)
    opt = make_optimizer(enc, b, device, capturable=graphs)
    if graphs:
        gs = GraphStep(enc, opt, b, device, list(enc.parameters()))
        return step_times(lambda: gs(batch, b.lr, batch.scored_bytes), device)
    autocast = autocast_for(b, device)
    _, gpu = step_times(lambda: train_step(enc, batch, opt, b.lr, b, autocast), device)
    return eager, gpu
