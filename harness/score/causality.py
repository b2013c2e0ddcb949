"""The causality probe: no prediction of an autoregressive encoder may change when its own target
or a later byte changes. ``tokbench sanity`` runs it on every encoder kind; a run runs it on a
model trained elsewhere before scoring it (``harness.score.pretrained``)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from encoders.base import Encoder


@dataclass
class ProbeResult:
    encoder: str
    probe: str
    ok: bool
    detail: str
    value: float = math.nan


def probe_causality(enc: Encoder, data: bytes, rng: random.Random, n_positions: int = 12,
                    tol: float = 1e-5) -> ProbeResult:
    """Mutate byte t alone, and every byte >= t, and compare the prediction for position t."""
    enc.eval()
    name = getattr(enc, "registry_name", type(enc).__name__)
    ws = b" \t\n"
    starts = [i for i in range(1, len(data) - 1) if data[i] in ws]
    others = list(range(1, len(data) - 1))
    positions = rng.sample(starts, min(len(starts), n_positions // 2)) + rng.sample(others, n_positions // 2)
    alphabet = sorted(set(data))
    worst, checked = 0.0, 0
    for t in sorted(set(positions)):
        muts = []
        # byte t alone (whitespace stays whitespace, so a word boundary at t survives)
        pool = [b for b in (ws if data[t] in ws else alphabet) if b != data[t]] or [b for b in range(256) if b != data[t]]
        muts.append(data[:t] + bytes([rng.choice(pool)]) + data[t + 1 :])
        # every byte after t (from the text's alphabet), then every byte from t on (byte t as
        # above, the rest any byte value)
        muts.append(data[: t + 1] + bytes(rng.choice(alphabet) for _ in range(len(data) - t - 1)))
        muts.append(data[:t] + bytes([rng.choice(pool)])
                    + bytes(rng.randrange(256) for _ in range(len(data) - t - 1)))
        base = enc.predict_logprobs(data, [t])
        if t not in base:
            continue
        for m in muts:
            other = enc.predict_logprobs(m, [t])
            if t not in other:
                continue
            d = float((base[t].double() - other[t].double()).abs().max())
            worst = max(worst, d)
            checked += 1
    if checked < 3:
        return ProbeResult(name, "causality", False, f"only {checked} comparable positions (need >= 3)")
    ok = worst <= tol
    return ProbeResult(name, "causality", ok, f"max |Δ log p| = {worst:.2e} over {checked} mutations (tol {tol:g})", worst)


def causality_text() -> bytes:
    return (b"The quick brown fox jumps over the lazy dog. Bytes, tokens and patches: "
            b"tokenizer-free models read text as raw UTF-8 \xc3\xa9t\xc3\xa9 \xe2\x80\x94 "
            b"and the causality probe checks that no prediction sees its own target. " * 2)
