"""Value ranges and cross-field rules of the suite schema (the dataclasses stay plain; the loader
owns the checks)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from encoders.backbone import BackboneConfig
from harness.config.bounds import MIN_LR
from harness.config.suite import BaselineConfig, BudgetConfig, DataConfig, EvalConfig, OverlapConfig
from harness.config.where import Where, show_value

# --------------------------------------------------------------------------------------------
# Value ranges of the suite schema (the dataclasses stay plain; the loader owns the checks)

_Rule = tuple[Callable[[Any], bool], str]
_POS: _Rule = (lambda v: v > 0, "must be > 0")
_NONNEG: _Rule = (lambda v: v >= 0, "must be >= 0")
_FRAC: _Rule = (lambda v: 0 <= v <= 1, "must be between 0 and 1")
_FRAC_OPEN_HI: _Rule = (lambda v: 0 <= v < 1, "must be >= 0 and < 1")
_FRAC_OPEN: _Rule = (lambda v: 0 < v < 1, "must be > 0 and < 1")
_TWO: _Rule = (lambda v: v >= 2, "must be >= 2 (a standard error needs two samples)")

_RANGES: dict[type, dict[str, _Rule]] = {
    BudgetConfig: {
        "train_bytes": _POS,
        "context_bytes": _POS,
        "batch_bytes": _POS,
        "lr": _POS,
        "min_lr_ratio": _FRAC,
        "warmup_bytes": _NONNEG,
        "weight_decay": _NONNEG,
        "beta1": _FRAC_OPEN_HI,
        "beta2": _FRAC_OPEN_HI,
        "grad_clip": _NONNEG,
        "micro_batch_bytes": _NONNEG,
    },
    BackboneConfig: {
        "layers": _POS,
        "dim": _POS,
        "heads": _POS,
        "mlp_ratio": _POS,
        "dropout": _FRAC_OPEN_HI,
        "rope_base": _POS,
    },
    DataConfig: {"valid_fraction": _FRAC_OPEN_HI, "test_fraction": _FRAC_OPEN_HI},
    BaselineConfig: {"dictionary_bytes": _NONNEG},
    OverlapConfig: {"compile_ahead_workers": (lambda v: 1 <= v <= 4, "must be between 1 and 4"),
                    "compile_ahead_windows": _NONNEG},
    EvalConfig: {
        "max_docs": _POS,
        "stride_bytes": _POS,
        "context_fraction": _FRAC_OPEN,
        "target_bytes": _POS,
        "min_doc_bytes": _NONNEG,
        "sample_docs": _NONNEG,
        "batch_windows": _POS,
        "mc_samples": _TWO,
    },
}


def check_ranges(obj: Any, where: Where) -> None:
    for name, (ok, text) in _RANGES.get(type(obj), {}).items():
        value = getattr(obj, name)
        if value is not None and (isinstance(value, float) and math.isnan(value) or not ok(value)):
            raise where.at(name).error(f"{text}, got {show_value(value)}")


def check_backbone(bb: BackboneConfig, where: Where) -> None:
    check_ranges(bb, where)
    if bb.dim % bb.heads:
        raise where.at("heads").error(f"dim {bb.dim} is not divisible by heads {bb.heads}")
    if (bb.dim // bb.heads) % 2:
        raise where.at("heads").error(
            f"head size dim/heads = {bb.dim // bb.heads} must be even (RoPE rotates channel pairs)"
        )


def check_budget(b: BudgetConfig, where: Where) -> None:
    check_ranges(b, where)
    if b.context_bytes > b.train_bytes:
        raise where.at("context_bytes").error(
            f"context_bytes ({b.context_bytes}) must be <= train_bytes ({b.train_bytes})"
        )
    if b.batch_bytes < b.context_bytes:
        raise where.at("batch_bytes").error(
            f"batch_bytes ({b.batch_bytes}) must be >= context_bytes ({b.context_bytes}): a step holds whole windows"
        )
    if b.batch_bytes > b.train_bytes:
        raise where.at("batch_bytes").error(
            f"batch_bytes ({b.batch_bytes}) must be <= train_bytes ({b.train_bytes}): not even one step"
        )
    if b.micro_batch_bytes and not b.context_bytes <= b.micro_batch_bytes <= b.batch_bytes:
        raise where.at("micro_batch_bytes").error(
            f"micro_batch_bytes ({b.micro_batch_bytes}) must be 0 or between context_bytes ({b.context_bytes}) "
            f"and batch_bytes ({b.batch_bytes})"
        )
    if b.warmup_bytes > b.train_bytes:
        raise where.at("warmup_bytes").error(
            f"warmup_bytes ({b.warmup_bytes}) must be <= train_bytes ({b.train_bytes})"
        )
    if b.idle_steps is not None and not 0 <= b.idle_steps[0] < b.idle_steps[1]:
        raise where.at("idle_steps").error(
            f"must be [first, last] with 0 <= first < last, got {show_value(b.idle_steps)}"
        )


def check_lr(lr: float, where: Where, what: str = "the learning rate") -> None:
    """Refuse a learning rate that is not finite or too small to train (``MIN_LR``)."""
    if not math.isfinite(lr) or lr < MIN_LR:
        raise where.error(f"{what} is {lr:.3g}; it must be finite and >= {MIN_LR:g}, or the model "
                          "does not train")


def check_scaling_lr(scaling: Any, base_lr: float, where: Where) -> None:
    """Every rung's width-rule learning rate, ``base_lr · (lr_ref_dim / dim) ** lr_width_power``,
    computed in log space (a large power overflows a float) and refused like ``check_lr``."""
    for r in scaling.ladder:
        log_lr = math.log(base_lr) + scaling.lr_width_power * math.log(scaling.lr_ref_dim / r.dim)
        lr = math.exp(log_lr) if log_lr < 700 else math.inf
        check_lr(lr, where.at("lr_width_power"),
                 f"the learning rate of ladder size {r.name!r} (dim {r.dim}), budget.lr · "
                 f"(lr_ref_dim / dim) ** lr_width_power,")


def check_eval(e: EvalConfig, budget: BudgetConfig, where: Where) -> None:
    check_ranges(e, where)
    if not e.modes:
        raise where.at("modes").error("needs at least one mode (full, clean_target)")
    if len(set(e.modes)) != len(e.modes):
        raise where.at("modes").error(f"modes repeat: {list(e.modes)}")
    if e.stride_bytes is not None and e.stride_bytes > budget.context_bytes:
        raise where.at("stride_bytes").error(
            f"stride_bytes ({e.stride_bytes}) must be <= budget.context_bytes ({budget.context_bytes})"
        )
    if "clean_target" in e.modes and e.target_bytes >= budget.context_bytes:
        raise where.at("target_bytes").error(
            f"target_bytes ({e.target_bytes}) must be < budget.context_bytes ({budget.context_bytes}) "
            "so the scored window keeps some prefix context"
        )
