"""Analyses: split the scored bytes of each document into buckets and sum NLL per bucket.

An analysis is a frozen config dataclass registered by name (suite key ``analyses: [{name: ...}]``).
The harness calls ``fit`` once per run (training documents and the trained encoders, so an analysis
may use e.g. the suite's BPE tokenizer to define buckets the same way for every encoder), then
``rows`` for every scored document of every cell. Rows are aggregated into ``buckets.csv``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sources.base import Document


@dataclass(frozen=True)
class BucketRow:
    """One bucket's share of one document: words counted, bytes and NLL (nats) summed."""

    bucket: str
    n_words: int
    n_bytes: int
    nll_nats: float


@dataclass(frozen=True, kw_only=True)
class Analysis:
    """Base class. ``datasets``: eval-set names it applies to (empty = all)."""

    datasets: tuple[str, ...] = ()

    def fit(self, train_docs: Sequence[Document], encoders: dict[str, Any]) -> None:  # noqa: B027
        """Called once before scoring with the training documents and {label: trained Encoder}."""

    def prepare(self, spans: Sequence[tuple[Document, bytes]]) -> None:  # noqa: B027
        """Called before the models score an eval set with every (document, scored bytes) that
        ``rows`` will see: precompute what depends on the text only (optional)."""

    def fit_encoders(self, labels: Sequence[tuple[str, str]]) -> list[str]:
        """Of the suite's encoders ((label, registered name) pairs), the labels whose *fit* state
        ``fit`` reads (a tokenizer, not trained weights): with those fitted alone, ``fit`` and
        ``prepare`` can run ahead of training (``harness.pipeline.run``'s plan-ahead process). Default:
        none."""
        return []

    def export_prepared(self) -> Any:
        """What ``prepare`` computed, tagged with what it depends on, for ``adopt_prepared`` in
        another process (None: nothing to hand over; the default)."""
        return None

    def adopt_prepared(self, prepared: Any) -> bool:
        """Take ``export_prepared``'s result from a process that fitted this analysis the same
        way; False (and nothing taken) when it was made under another fit. Default: False."""
        return False

    def rows(self, doc: Document, scored: bytes, byte_nll: np.ndarray) -> list[BucketRow]:
        """Buckets for one scored span. scored: the exact bytes scored (clean text in clean_target
        mode; the perturbed text in full mode); byte_nll: (len(scored),) float64 nats per byte."""
        raise NotImplementedError

    def cell_buckets(self, spans: Sequence[tuple[Document, bytes, np.ndarray]]) -> dict[str, tuple[int, int, float]]:
        """One cell's buckets: {bucket: (words, bytes, NLL nats)} summed over ``spans`` (document,
        scored bytes, per-byte NLL as in ``rows``) in their order — each document's ``rows`` added
        one after another, so the NLL sums are the same floats whoever computes them. A bucket
        is present when some document has words in it. Analyses may override this with a faster
        computation of the same numbers (``MorphologyAnalysis`` does)."""
        out: dict[str, list[Any]] = {}
        for doc, scored, byte_nll in spans:
            for r in self.rows(doc, scored, byte_nll):
                b = out.setdefault(r.bucket, [0, 0, 0.0])
                b[0] += r.n_words
                b[1] += r.n_bytes
                b[2] += r.nll_nats
        return {k: (v[0], v[1], v[2]) for k, v in out.items()}
