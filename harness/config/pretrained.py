"""Encoders trained elsewhere (``Encoder.trained_elsewhere``: the ``hf`` encoder) in a suite.

Such an encoder comes with its weights: the run never fits or trains it, and scores it through
the same ``score_items`` as the models it trains. Here:

* ``admit`` (``harness.score.pretrained``) — the run's stand-in for fit + train.
* ``check_suite`` — suites that would need its training compute are refused when validated: a
  scaling grid, or ``match: flops`` whose reference it would be.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.config.suite import BudgetConfig, EncoderSpec
from harness.infra import plugins


def is_trained_elsewhere(obj: Any) -> bool:
    """Whether an encoder (class or instance) comes trained (``trained_elsewhere``)."""
    return bool(getattr(obj if isinstance(obj, type) else type(obj), "trained_elsewhere", False))


def check_suite(encoders: Sequence[EncoderSpec], budget: BudgetConfig, scaling: Any,
                error: Callable[[tuple[Any, ...], str], Exception], search_paths: Sequence[Path]) -> None:
    """Refuse suites that would train or compute-match an encoder trained elsewhere. ``error(keys,
    problem)`` makes the located ConfigError for a suite key path."""
    elsewhere = [i for i, e in enumerate(encoders)
                 if is_trained_elsewhere(plugins.resolve("encoder", e.name, search_paths))]
    if not elsewhere:
        return
    first = encoders[elsewhere[0]].label
    if scaling is not None:
        raise error(("encoders", elsewhere[0]), f"encoder {first!r} is trained elsewhere: a scaling grid "
                    "trains every model it fits, so it cannot hold one")
    if budget.match == "flops":
        ref = budget.flops_reference or encoders[0].label
        for i in elsewhere:
            if encoders[i].label == ref:
                keys = ("budget", "flops_reference") if budget.flops_reference else ("budget", "match")
                raise error(keys, f"encoder {ref!r} is trained elsewhere (its training FLOPs are unknown), "
                            "so it cannot set the FLOP budget: name a trained encoder in budget.flops_reference")
