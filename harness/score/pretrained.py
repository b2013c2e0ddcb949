"""A model trained elsewhere (``Encoder.trained_elsewhere``: the ``hf`` encoder) admitted to a run:
the run's stand-in for fit + train. The loaded model goes on the device, is refused (one line)
unless the causality probe passes (``harness.score.causality``: no prediction may change when
its own target or a later byte changes), and gets its run.json facts: ``trained_elsewhere`` true,
no ``train`` stats and no training FLOPs (null), so no compute-matched number includes it."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch

from encoders.base import Encoder
from harness.score.causality import causality_text, probe_causality


def admit(enc: Encoder, label: str, key: str, device: torch.device, seed: int,
          log: Callable[[str], None] = print) -> dict[str, Any]:
    """Put ``enc`` (loaded, never trained) on ``device`` in eval mode, probe its causality and
    return its run.json facts (``meta``). Raises a one-line ValueError if a prediction sees its
    target. ``key``: the model key of its cells (it includes the checkpoint's sha256)."""
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
