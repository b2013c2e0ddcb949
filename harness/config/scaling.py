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
MAX_STREAMS = 64  # stacks in flight on one GPU: each holds its graphs, buffers and a feed thread
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
    stack: train the points of one rung (same encoder and size, every selected budget) as one
    stacked model — weights with a leading axis of the points, one batched step for all, each
    point with its own schedule and stop, finished and saved as it would be alone
    (``harness.pipeline.sweep_stack``). Byte-level and BPE models with the autoregressive objective,
    no dropout and one micro-batch a step; other points train one at a time.
    streams: how many stacks (a point that qualifies for ``stack`` but is not stacked: a stack of
    one) train at once on one GPU, each on its own CUDA stream, stepped in turn by one host
    thread (``harness.train.stacked_loop.train_at_once``): one small model's step leaves most of
    the GPU idle. 1: one after another, as without it. Speed only: the points are the same.
    """

    budgets: tuple[float, ...]
    ladder: tuple[Rung, ...]
    warmup_fraction: float = 0.05
    min_steps: int = 200
    max_passes: float = 4.0
    lr_ref_dim: int = 256
    lr_width_power: float = 0.5
    only_budgets: tuple[float, ...] = ()
    stack: bool = False
    streams: int = 1

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
        if self.min_steps < 1 or self.max_passes <= 0 or self.lr_ref_dim < 1:
            raise ValueError("min_steps, max_passes and lr_ref_dim must be positive")
        if not 1 <= self.streams <= MAX_STREAMS:
            raise ValueError(f"streams: stacks trained at once must be 1 to {MAX_STREAMS}, got {self.streams}")
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


