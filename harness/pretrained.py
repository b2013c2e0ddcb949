"""Encoders trained elsewhere (``Encoder.trained_elsewhere``: the ``hf`` encoder) in a run.

Such an encoder comes with its weights: the run never fits or trains it, and scores it through
the same ``score_items`` as the models it trains. Here:

* ``admit`` — the run's stand-in for fit + train: the loaded model on the device, refused (one
  line) unless the causality probe passes (``harness.sanity.probe_causality``: no prediction may
  change when its own target or a later byte changes), and its run.json facts: ``trained_elsewhere``
  true, no ``train`` stats and no training FLOPs (null), so no compute-matched number includes it.
* ``check_suite`` — suites that would need its training compute are refused when validated: a
  scaling grid, or ``match: flops`` whose reference it would be.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from encoders.base import Encoder
from harness import plugins
from harness.suite import BudgetConfig, EncoderSpec


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


def admit(enc: Encoder, label: str, key: str, device: torch.device, seed: int,
          log: Callable[[str], None] = print) -> dict[str, Any]:
    """Put ``enc`` (loaded, never trained) on ``device`` in eval mode, probe its causality and
    return its run.json facts (``meta``). Raises a one-line ValueError if a prediction sees its
    target. ``key``: the model key of its cells (it includes the checkpoint's sha256)."""
    from harness.sanity import causality_text, probe_causality

    enc.to(device).eval()
    probe = probe_causality(enc, causality_text(), random.Random(seed))
    if not probe.ok:
        raise ValueError(f"encoder {label!r} ({enc.describe().get('path', type(enc).__name__)}) is refused: "
                         f"the causality probe failed ({probe.detail}): its predictions see their targets")
    log(f"[model] {label} seed {seed}: trained elsewhere, loaded; causality probe passed ({probe.detail})")
    total = sum(p.numel() for p in enc.parameters())
    emb = enc.embedding_parameters()
    text = causality_text()
    batch = enc.collate([text], [0])
    return {
        "key": key,
        "trained_elsewhere": True,
        "fit": {},
        "causality": {"ok": True, "max_abs_dlogp": probe.value, "detail": probe.detail},
        "params_total": total,
        "params_embedding": emb,
        "params_non_embedding": total - emb,
        "flops_per_byte_train": None,  # never trained here: no compute to match
        "flops_per_byte_infer": enc.flops(batch) / max(1, batch.scored_bytes),
        "total_flops": None,
        "describe": enc.describe(),
    }
