"""Sanity probes for masked-diffusion (``objective: mdm``) encoders; ``tokbench sanity`` runs them
for every encoder whose config has an ``objective`` field (labelled ``<name>[mdm]``).

1. leak — the predicted distribution of a masked unit never depends on the true value of any
   masked unit: (a) change the unit itself, (b) change every masked unit at once; the log-probs of
   the masked units must not move (|Δ log p| ≤ 1e-5). A model that hides only the unit it predicts
   (one forward per masked unit, the others visible) passes (a) and fails (b); (b) is the test
   that matters, since the NELBO assumes every masked unit is hidden from every prediction.
2. known entropy — on an order-2 Markov source, the model's NELBO (an upper bound on its NLL) must
   not be more than 3 standard errors below the source's entropy given the same context; the
   standard error combines sampling over windows and the Monte Carlo noise of the estimate.

The probes use the harness's one training loop and scoring function.
"""

from __future__ import annotations

import dataclasses
import math
import random
from pathlib import Path

import numpy as np
import torch

from core.metrics import LN2
from encoders.backbone import BackboneConfig
from encoders.base import Encoder
from harness.infra import plugins
from harness.sanity.probes import (
    TINY_BACKBONE,
    TINY_BUDGET,
    ProbeResult,
    briefly_trained,
    markov_trained,
    window_context_lengths,
)
from harness.score.items import plan_full, score_items

ENTROPY_MC_SAMPLES = 8  # Monte Carlo samples per window in the known-entropy probe


def supports_mdm(name: str) -> bool:
    """Whether the encoder's config declares ``objective`` with ``mdm`` among its values."""
    cls = plugins.resolve("encoder", name, search_paths=[Path.cwd()])
    f = {x.name: x for x in dataclasses.fields(cls.Config)}.get("objective")
    return f is not None and "mdm" in str(f.type)


def tiny_mdm_encoder(name: str, seed: int = 0, backbone: BackboneConfig | None = TINY_BACKBONE,
                     **overrides: object) -> Encoder:
    """The encoder's sanity (or default) config with ``objective: mdm`` and a tiny backbone."""
    cls = plugins.resolve("encoder", name, search_paths=[Path.cwd()])
    cfg = cls.sanity_config() if hasattr(cls, "sanity_config") else cls.Config()
    cfg = dataclasses.replace(cfg, objective="mdm", **overrides)
    torch.manual_seed(seed)
    return cls(cfg, backbone)


@torch.no_grad()
def mdm_leak_deltas(enc: Encoder, data: bytes, rng: random.Random, score_from: int | None = None,
                    n_single: int = 6) -> tuple[float, float, int]:
    """Mask about half of the scored units of ``data``; return the largest |Δ log p| of the masked
    units after (a) replacing one masked unit's true id (for that unit's own prediction) and (b)
    replacing the true ids of all masked units at once (for every masked prediction), and the
    number of masked units."""
    enc.eval()
    sf = len(data) // 4 if score_from is None else score_from
    ids, scored = enc.mdm_probe_input(data, sf)  # type: ignore[attr-defined]
    dev = next(enc.parameters()).device
    slots = scored[0].nonzero().flatten().tolist()
    masked = sorted(rng.sample(slots, max(2, len(slots) // 2)))
    mask = torch.zeros_like(scored)
    mask[0, masked] = True
    valid = torch.ones_like(scored)
    n_out = int(enc.n_out)  # type: ignore[attr-defined]

    def logp(x: torch.Tensor) -> torch.Tensor:  # (len(masked), n_out) float64
        lg = enc.mdm_logits(x.to(dev), mask.to(dev), valid.to(dev))  # type: ignore[attr-defined]
        return torch.log_softmax(lg[0, masked].double(), dim=-1).cpu()

    def other(v: int) -> int:
        return (v + rng.randrange(1, n_out)) % n_out

    base = logp(ids)
    worst_one = 0.0
    for j in rng.sample(range(len(masked)), min(n_single, len(masked))):
        x = ids.clone()
        x[0, masked[j]] = other(int(x[0, masked[j]]))
        worst_one = max(worst_one, float((logp(x)[j] - base[j]).abs().max()))
    x = ids.clone()
    for s in masked:
        x[0, s] = other(int(x[0, s]))
    worst_all = float((logp(x) - base).abs().max())
    return worst_one, worst_all, len(masked)


def probe_mdm_leak(enc: Encoder, data: bytes, rng: random.Random, score_from: int | None = None,
                   tol: float = 1e-5) -> ProbeResult:
    """``mdm_leak_deltas`` (a) and (b) must both stay within ``tol``."""
    name = getattr(enc, "registry_name", type(enc).__name__) + "[mdm]"
    worst_one, worst_all, n_masked = mdm_leak_deltas(enc, data, rng, score_from)
    ok = worst_one <= tol and worst_all <= tol
    detail = (f"max |Δ log p| = {worst_one:.2e} changing one masked unit, {worst_all:.2e} changing all "
              f"{n_masked} at once (tol {tol:g})")
    return ProbeResult(name, "mdm_leak", ok, detail, max(worst_one, worst_all))


def probe_mdm_leak_trained(name: str, device: torch.device, seed: int = 0) -> ProbeResult:
    """The leak probe on a briefly trained MDM encoder (BPE needs merges)."""
    enc = tiny_mdm_encoder(name, seed)
    text = briefly_trained(enc, device)
    return probe_mdm_leak(enc, text, random.Random(seed))


def probe_mdm_entropy(name: str, device: torch.device, train_bytes: int = 250_000, seed: int = 0,
                      mc_samples: int = ENTROPY_MC_SAMPLES) -> ProbeResult:
    """Known-entropy probe under MDM: NELBO bpb ≥ source entropy − 3·SE. The SE is over windows
    (each window's NELBO minus its oracle NLL is one draw: it carries both the text's and the
    Monte Carlo variance)."""
    src, evals, enc = markov_trained(lambda: tiny_mdm_encoder(name, seed), device, train_bytes, seed)
    context = TINY_BUDGET.context_bytes
    items = [plan_full(d, context, context // 2) for d in evals]
    scores = score_items(enc, items, device, mc_samples=mc_samples)
    diffs, nll, oracle_nll, n = [], 0.0, 0.0, 0
    for d, it, sc in zip(evals, items, scores):
        oracle = src.oracle_nll(d, window_context_lengths(d, context))
        oracle_nll += float(oracle.sum())
        k = 0
        for w in it.windows:
            m = w.end - w.score_start
            diffs.append(float(sc.byte_nll[k : k + m].sum() - oracle[w.score_start : w.end].sum()))
            k += m
        nll += sc.nll
        n += len(d)
    oracle_bpb = oracle_nll / (LN2 * n)
    bpb = nll / (LN2 * n)
    dd = np.asarray(diffs)
    se = float(dd.std(ddof=1) * math.sqrt(dd.size) / (LN2 * n))
    gap = bpb - oracle_bpb
    label = name + "[mdm]"
    if gap < -3 * se:
        return ProbeResult(label, "mdm_entropy", False,
                           f"NELBO BEATS the source: {bpb:.4f} < entropy {oracle_bpb:.4f} - 3·SE ({se:.4f}): leak or weighting bug", bpb)
    return ProbeResult(label, "mdm_entropy", True,
                       f"NELBO {bpb:.4f} bpb >= entropy {oracle_bpb:.4f} - 3·SE ({se:.4f}); ratio {bpb / oracle_bpb:.3f} "
                       f"({mc_samples} MC samples/window)", bpb)


__all__ = ["mdm_leak_deltas", "probe_mdm_entropy", "probe_mdm_leak", "probe_mdm_leak_trained", "supports_mdm", "tiny_mdm_encoder"]
