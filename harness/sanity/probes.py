"""Sanity probes run for every registered encoder (``tokbench sanity``; the tests run them too).

1. causality — the predicted distribution for byte t (for BPE: for the token starting at t) is
   unchanged (|Δ log p| ≤ 1e-5) when byte t or any later byte changes. Seeing one's own target is
   the classic leak; this probe catches it whatever the encoder does inside.
2. random bytes — after training on uniform random bytes, fresh random bytes score ≥ 7.98 bits
   per byte. Less would mean the model extracts information that is not there.
3. Markov source — on text from an order-2 Markov source (so looking ahead would pay), a tiny
   model gets within 10 % of the oracle's NLL on the same sample, and never below it by more
   than 3 standard errors. A model that beats its source has a bug (leakage or normalisation).

All three use the harness's own training loop and scoring function. Encoders that support
``objective: mdm`` also get the masked-diffusion leak and known-entropy probes
(``harness/sanity/mdm.py``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core.metrics import LN2, bpb
from encoders.backbone import BackboneConfig
from encoders.base import Encoder
from harness.config.suite import BudgetConfig
from harness.data.load import training_windows
from harness.infra import plugins
from harness.score.causality import ProbeResult, causality_text, probe_causality
from harness.score.items import plan_full, score_items
from harness.train.loop import fit_context, train_encoder
from sources.base import Document

TINY_BACKBONE = BackboneConfig(layers=2, dim=64, heads=4)
# Small batches (many steps) let a tiny model learn a low-order source in ~200 KB of bytes.
TINY_BUDGET = BudgetConfig(train_bytes=250_000, context_bytes=64, batch_bytes=1024, lr=3e-3,
                           warmup_bytes=5_000, min_lr_ratio=0.1)


def tiny_encoder(name: str, seed: int = 0, backbone: BackboneConfig | None = TINY_BACKBONE) -> Encoder:
    """An encoder with its class's ``sanity_config()`` (or default config) and a tiny backbone."""
    cls = plugins.resolve("encoder", name, search_paths=[Path.cwd()])
    cfg = cls.sanity_config() if hasattr(cls, "sanity_config") else cls.Config()
    torch.manual_seed(seed)
    return cls(cfg, backbone)


def fit_and_train(enc: Encoder, docs: list[bytes], n_bytes: int, device: torch.device,
                  budget: BudgetConfig = TINY_BUDGET, seed: int = 0) -> dict[str, Any]:
    """Fit (BPE merges, BLT entropy model) and train ``enc`` on ``docs`` with the harness loop."""
    ds = [Document(id=str(i), data=d) for i, d in enumerate(docs)]
    enc.to(device)
    enc.fit(fit_context(ds, budget, device, seed, log=lambda s: None, train_bytes=n_bytes))
    if n_bytes <= 0:
        enc.eval()
        return {}
    return train_encoder(enc, training_windows(ds, n_bytes, budget.context_bytes, seed), n_bytes, budget, device)


# ---------------------------------------------------------------------------------------------
# 1. causality


# ---------------------------------------------------------------------------------------------
# 2. random bytes


def score_bpb(enc: Encoder, docs: Sequence[bytes], device: torch.device, context: int) -> tuple[float, np.ndarray]:
    """BPB of ``docs`` with the harness's scoring function; also per-byte NLL (nats), concatenated."""
    items = [plan_full(d, context, context // 2) for d in docs]
    scores = score_items(enc, items, device)
    nll = sum(s.nll for s in scores)
    n = sum(len(d) for d in docs)
    return bpb(nll, n), np.concatenate([s.byte_nll for s in scores])


def probe_random_bytes(name: str, device: torch.device, train_bytes: int = 100_000, seed: int = 0) -> ProbeResult:
    rng = np.random.default_rng(seed)
    docs = [rng.integers(0, 256, 4096, dtype=np.uint8).tobytes() for _ in range(64)]
    evals = [rng.integers(0, 256, 2048, dtype=np.uint8).tobytes() for _ in range(8)]
    enc = tiny_encoder(name, seed)
    fit_and_train(enc, docs, train_bytes, device)
    bpb, _ = score_bpb(enc, evals, device, TINY_BUDGET.context_bytes)
    ok = bpb >= 7.98
    return ProbeResult(name, "random_bytes", ok, f"{bpb:.4f} bits/byte on fresh uniform bytes (must be >= 7.98)", bpb)


# ---------------------------------------------------------------------------------------------
# 3. Markov source


@dataclass
class MarkovSource:
    """Order-2 Markov chain over a small alphabet; ``P[a, b]`` is the distribution of the next
    symbol after (a, b). Provides exact per-position oracle NLL given the available context."""

    alphabet: bytes
    P: np.ndarray  # (A, A, A)

    @classmethod
    def make(cls, seed: int = 0, alphabet: bytes = b"abc ", concentration: float = 0.5) -> MarkovSource:
        # A space in the alphabet makes the source text-like: scoring windows are then cut at
        # word boundaries, as the harness does for real text. Without one, every stride cut would
        # force a token boundary BPE never sees in training (~20 % worse BPB for a tiny BPE model:
        # a real cost of BPE on text without spaces, but not what this probe is about).
        rng = np.random.default_rng(seed)
        A = len(alphabet)
        P = rng.dirichlet([concentration] * A, size=(A, A))
        return cls(alphabet, P)

    def stationary_pairs(self) -> np.ndarray:
        """Stationary distribution over (previous, current) pairs, by power iteration."""
        A = len(self.alphabet)
        pi = np.full((A, A), 1.0 / A**2)
        for _ in range(2000):
            nxt = np.einsum("ab,abc->bc", pi, self.P)
            if np.abs(nxt - pi).max() < 1e-15:
                break
            pi = nxt
        return pi

    def sample(self, n: int, rng: np.random.Generator) -> bytes:
        A = len(self.alphabet)
        pi = self.stationary_pairs().ravel()
        k = rng.choice(A * A, p=pi)
        out = [k // A, k % A]
        cum = np.cumsum(self.P, axis=-1)
        u = rng.random(n)
        for i in range(n - 2):
            row = cum[out[-2], out[-1]]
            out.append(min(int(np.searchsorted(row, u[i])), A - 1))
        return bytes(self.alphabet[i] for i in out[:n])

    def oracle_nll(self, data: bytes, context_len: np.ndarray) -> np.ndarray:
        """NLL (nats) of each byte given at most ``context_len[t]`` preceding bytes (what the
        model could see in its window): marginal for 0, pair-marginal for 1, exact for >= 2."""
        idx = {b: i for i, b in enumerate(self.alphabet)}
        x = [idx[b] for b in data]
        pi = self.stationary_pairs()
        p1 = pi.sum(0)  # marginal of the current symbol
        cond1 = np.einsum("ab,abc->bc", pi, self.P) / p1[:, None]  # p(next | current)
        out = np.empty(len(x))
        for t, c in enumerate(x):
            k = context_len[t]
            if k <= 0:
                out[t] = -math.log(p1[c])
            elif k == 1:
                out[t] = -math.log(cond1[x[t - 1], c])
            else:
                out[t] = -math.log(self.P[x[t - 2], x[t - 1], c])
        return out


def window_context_lengths(data: bytes, context: int) -> np.ndarray:
    """For each byte, how many preceding bytes the scoring windows showed the model."""
    item = plan_full(data, context, context // 2)
    ctx = np.zeros(len(data), dtype=np.int64)
    for w in item.windows:
        ctx[w.score_start : w.end] = np.arange(w.score_start, w.end) - w.start
    return ctx


def markov_trained(make_encoder: Callable[[], Encoder], device: torch.device, train_bytes: int,
                   seed: int) -> tuple[MarkovSource, list[bytes], Encoder]:
    """The Markov probes' shared set-up: the source for ``seed``, 40 training documents of 8192
    bytes and 5 eval documents of 4096 bytes drawn from it, and the encoder ``make_encoder``
    builds, fitted and trained on ``train_bytes`` of the training documents.
    Returns (source, eval documents, trained encoder)."""
    src = MarkovSource.make(seed)
    rng = np.random.default_rng(seed + 1)
    docs = [src.sample(8192, rng) for _ in range(40)]
    evals = [src.sample(4096, rng) for _ in range(5)]
    enc = make_encoder()
    fit_and_train(enc, docs, train_bytes, device)
    return src, evals, enc


def probe_markov(name: str, device: torch.device, train_bytes: int = 250_000, seed: int = 0) -> ProbeResult:
    src, evals, enc = markov_trained(lambda: tiny_encoder(name, seed), device, train_bytes, seed)
    context = TINY_BUDGET.context_bytes
    bpb, model_nll = score_bpb(enc, evals, device, context)
    oracle = np.concatenate([src.oracle_nll(d, window_context_lengths(d, context)) for d in evals])
    oracle_bpb = oracle.sum() / (LN2 * oracle.size)
    diff = (model_nll - oracle) / LN2
    se = diff.std(ddof=1) / math.sqrt(diff.size)
    gap = bpb - oracle_bpb
    if gap < -3 * se:
        return ProbeResult(name, "markov", False, f"BEATS the source: {bpb:.4f} < oracle {oracle_bpb:.4f} - 3·SE ({se:.4f}): leak or normalisation bug", bpb)
    ok = bpb <= 1.10 * oracle_bpb
    return ProbeResult(name, "markov", ok, f"{bpb:.4f} bpb vs oracle {oracle_bpb:.4f} (ratio {bpb / oracle_bpb:.3f}, must be <= 1.10; SE {se:.4f})", bpb)


# ---------------------------------------------------------------------------------------------


def briefly_trained(enc: Encoder, device: torch.device) -> bytes:
    """Fit and train ``enc`` on 20 kB of rotations of ``causality_text()`` (BPE needs merges, BLT
    an entropy model); returns that text, which the probes then perturb."""
    text = causality_text()
    corpus = [text[i:] + text[:i] for i in range(0, len(text), 7)]
    fit_and_train(enc, corpus, 20_000, device)
    return text


def probe_causality_trained(name: str, device: torch.device, seed: int = 0) -> ProbeResult:
    """Causality on a briefly fitted encoder (BPE needs merges; BLT an entropy model)."""
    enc = tiny_encoder(name, seed)
    text = briefly_trained(enc, device)
    return probe_causality(enc, text, random.Random(seed))


def trainable_encoders() -> list[str]:
    """Registered encoders the probes can build and train (not those trained elsewhere, whose
    weights come from a checkpoint: ``harness.score.pretrained.admit`` probes those in a run)."""
    return [n for n in plugins.known_names("encoder")
            if not getattr(plugins.resolve("encoder", n, search_paths=[Path.cwd()]), "trained_elsewhere", False)]


__all__ = ["MarkovSource", "ProbeResult", "markov_trained", "probe_causality", "probe_markov", "probe_random_bytes",
           "trainable_encoders"]
