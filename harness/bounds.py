"""Upper bounds on sizes in a suite: a typo such as ``layers: 100000000000000000000`` is refused
at validate time on one line instead of dying in the allocator after training starts.

The bounds are by field name, so they apply to every config dataclass built from YAML (the
suite's own and every encoder's / perturbation's) through one hook in the loader:

    check_upper_bounds(cls, kwargs, where)   # before cls(**kwargs); raises where.error(...)

They are far above anything that fits one machine today (the memory guard in
``harness.memory`` refuses what does not fit *this* device); they exist to turn absurd numbers into
a clear message. Any other number above ``ABSURD`` (1e15) is refused too, except in fields
named like FLOP counts (``*flop*``, ``*budget*``: a scaling sweep's budgets reach 1e18+).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

ABSURD = 1e15

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
}


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
        return f"must be <= {limit:,.0f}, got {shown}"
    if abs(value) > ABSURD and not any(w in name for w in ("flop", "budget")):  # FLOPs: 1e18+ is fine
        return f"absurdly large ({value:.3g}); tokbench refuses numbers beyond {ABSURD:.0e} here"
    return None


def check_upper_bounds(cls: type, kwargs: Mapping[str, Any], where: Any) -> None:
    """Raise ``where.at(field).error(...)`` (a one-line ConfigError) for the first value over its
    bound. ``where`` is the loader's ``Where``; ``cls`` is unused but names the hook's target."""
    for name, value in kwargs.items():
        problem = bound_problem(name, value)
        if problem:
            raise where.at(name).error(problem)
