"""Bounds on sizes in a suite: a typo such as ``layers: 100000000000000000000`` is refused at
validate time on one line instead of dying in the allocator after training starts, and so is a
size that is zero or negative where that is nonsense (``max_bytes: -1`` used to train on one
document; ``max_types: -1`` silently dropped the last word type through ``types[:-1]``).

The bounds are by field name, so they apply to every config dataclass built from YAML (the
suite's own and every source's / encoder's / perturbation's / analysis's) through one hook in
the loader (its name is older than the lower bounds; it checks both):

    check_upper_bounds(cls, kwargs, where)   # before cls(**kwargs); raises where.error(...)

Lower bounds (``LOWER_BOUNDS``) hold for every field of that name: a null value is never
checked (in ``X | None`` fields null means "no limit", "all" or a default), and the message
says that null is accepted where the field allows it. Fields where 0 means something (``0 =
none``: ``warmup_bytes``, ``micro_batch_bytes``, ``dictionary_bytes``, ``sample_docs``,
``min_*``) get ``>= 0``; a plugin's own stricter rules stay in its ``__post_init__``.

They are far above anything that fits one machine today (the memory guard in
``harness.infra.memory`` refuses what does not fit *this* device); they exist to turn absurd numbers into
a clear message. Any other number above ``ABSURD`` (1e15) is refused too, except in fields
named like FLOP counts (``*flop*``, ``*budget*``: a scaling sweep's budgets reach 1e18+).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

ABSURD = 1e15

# An AdamW step moves a weight by about lr; below this a float32 weight of magnitude 1e-3 (its
# precision ~1e-10) never changes, so a model would stay untrained without any error.
MIN_LR = 1e-10

# field name -> largest accepted value (inclusive)
UPPER_BOUNDS: dict[str, float] = {
    # backbone and encoder shapes
    "layers": 1024,
    "encoder_layers": 1024,
    "decoder_layers": 1024,
    "entropy_layers": 1024,
    "dim": 65_536,
    "local_dim": 65_536,
    "entropy_dim": 65_536,
    "heads": 1024,
    "local_heads": 1024,
    "entropy_heads": 1024,
    "mlp_ratio": 64,
    "vocab_size": 4_194_304,  # 2**22 tokens
    "ngram_table_size": 67_108_864,  # 2**26 rows
    # budget (bytes)
    "train_bytes": 1e14,  # 100 TB of text
    "warmup_bytes": 1e14,
    "context_bytes": 16_777_216,  # 16 MiB per window
    "batch_bytes": 17_179_869_184,  # 16 GiB per step
    "threshold_fit_bytes": 1e12,
    # eval
    "target_bytes": 16_777_216,
    "stride_bytes": 16_777_216,
    "max_docs": 1e9,
    "batch_windows": 1_048_576,
    "sample_docs": 1_000_000,
    # perturbations: every built-in severity is a probability or fraction (0-1); 100 leaves room
    # for a plugin's count-like severity while refusing 1e300
    "severity": 100,
    # compressor baselines: every scored window compresses dictionary ‖ context ‖ text, so each
    # window's cost grows with the dictionary (deflate itself keeps only the last 32 KiB)
    "dictionary_bytes": 16_777_216,
    # scaling FLOP budgets: 1e30 is ~10,000x the largest published training runs; above it every
    # grid point is refused (it buys more bytes than any corpus) and the run ends with no results
    "budgets": 1e30,
    "only_budgets": 1e30,
}

# field name -> smallest accepted value (inclusive). Sizes and counts only; every name here is
# a size in every config that uses it (the survey of docs/suite_reference.md).
LOWER_BOUNDS: dict[str, int] = {
    # shapes (backbone, encoders, scaling.ladder)
    "layers": 1,
    "dim": 1,
    "local_dim": 1,
    "entropy_dim": 1,
    "heads": 1,
    "local_heads": 1,
    "entropy_heads": 1,
    "mlp_ratio": 1,
    "kernel_size": 1,
    "vocab_size": 1,  # bpe asks for >= 256 itself (the single bytes)
    "bpe_vocab": 256,  # the morphology analysis trains a BPE of this many tokens
    "ngram_table_size": 1,
    "max_patch_bytes": 1,
    "mdm_span": 1,
    "min_frequency": 1,
    # byte budgets: training, fit stages, data sources (null = all, where allowed)
    "train_bytes": 1,
    "context_bytes": 1,
    "batch_bytes": 1,
    "fit_bytes": 1,
    "entropy_train_bytes": 1,
    "threshold_fit_bytes": 1,
    "bpe_train_bytes": 1,
    "max_bytes": 1,
    "member_bytes": 1,
    "warmup_bytes": 0,
    "micro_batch_bytes": 0,
    "dictionary_bytes": 0,
    "min_bytes": 0,
    # counts
    "max_docs": 1,
    "max_pages": 1,
    "max_types": 1,
    "min_types": 0,
    "max_repeats": 1,
    "min_word_len": 0,
    "min_part_len": 1,
    "min_doc_bytes": 0,
    # eval
    "target_bytes": 1,
    "stride_bytes": 1,
    "batch_windows": 1,
    "sample_docs": 0,
    # scaling
    "min_steps": 1,
    "lr_ref_dim": 1,
}


def lower_bound_problem(name: str, value: Any, nullable: bool = False) -> str | None:
    """Why ``value`` is too small for field ``name`` (None when it is fine or not a number);
    ``nullable``: the field accepts null, which the message then offers as "no limit"."""
    if isinstance(value, (tuple, list)):
        return next((p for v in value if (p := lower_bound_problem(name, v, nullable))), None)
    low = LOWER_BOUNDS.get(name)
    if low is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    # 1 reads "> 0": a float field (``mlp_ratio: 0.5``) may be fractional; an int one cannot
    too_small = value <= 0 if low == 1 else value < low
    if isinstance(value, float) and math.isnan(value) or too_small:
        need = "must be > 0" if low == 1 else f"must be >= {low}"
        return f"{need}{' (or null)' if nullable else ''}, got {value!r}"
    return None


def _nullable(cls: type, name: str) -> bool:
    """Whether field ``name`` of dataclass ``cls`` is annotated ``X | None`` (from its text:
    annotations are strings under ``from __future__ import annotations``)."""
    for f in getattr(cls, "__dataclass_fields__", {}).values():
        if f.name == name:
            text = f.type if isinstance(f.type, str) else repr(f.type)
            return "None" in text or "Optional" in text
    return False


def bound_problem(name: str, value: Any) -> str | None:
    """Why ``value`` is too large for field ``name`` (None when it is fine)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, (tuple, list)):
            for v in value:
                p = bound_problem(name, v)
                if p:
                    return p
        return None
    if isinstance(value, float) and math.isnan(value):
        return None  # NaN is the range checks' business
    limit = UPPER_BOUNDS.get(name)
    if limit is not None and value > limit:
        shown = f"{value:,}" if isinstance(value, int) and value < 1e12 else f"{float(value):.3g}"
        return f"must be <= {limit:,.0f}, got {shown}" if limit < 1e15 else f"must be <= {limit:.3g}, got {shown}"
    if abs(value) > ABSURD and not any(w in name for w in ("flop", "budget")):  # FLOPs: 1e18+ is fine
        return f"absurdly large ({value:.3g}); tokbench refuses numbers beyond {ABSURD:.0e} here"
    return None


def check_upper_bounds(cls: type, kwargs: Mapping[str, Any], where: Any) -> None:
    """Raise ``where.at(field).error(...)`` (a one-line ConfigError) for the first value over its
    upper bound or under its lower bound. ``where`` is the loader's ``Where``; ``cls`` tells
    which fields accept null (for the message)."""
    for name, value in kwargs.items():
        problem = lower_bound_problem(name, value, _nullable(cls, name)) or bound_problem(name, value)
        if problem:
            raise where.at(name).error(problem)
