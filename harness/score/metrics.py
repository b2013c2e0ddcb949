"""The cell metrics of results.csv (BPB itself is ``core.metrics.bpb``, the one formula).

Units: NLL in nats; BPB in bits per UTF-8 byte. BPB is always ΣNLL / (ln 2 · Σ bytes) over the
text scored — never a mean of per-document or per-token values, never per token.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from core.metrics import bpb
from core.segments import bytes_per_segment

# Scripts written without spaces between words: word perplexity is undefined for them.
NO_SPACE_SCRIPTS = frozenset({"Hani", "Hira", "Kana", "Jpan", "Thai", "Laoo", "Khmr", "Mymr", "Tibt"})
_WORD = re.compile(r"\S+")


def count_words(text: str) -> int:
    """Whitespace-separated words (the unit of word perplexity)."""
    return len(_WORD.findall(text))


class McVariance(float):
    """The Monte Carlo variance (nats²) of a sum of MDM window estimates, which knows its parts.

    terms: per distinct estimate, keyed by ``harness.score.items.estimate_key`` (a digest of the
    window's score_from and bytes), (k, v): how many times the sum counts it, and its variance.
    Equal windows are ONE estimate, not k independent ones: scoring masks and times are seeded by
    the window's bytes (``encoders.mdm``) and dedup forwards it once, so its k copies carry the
    same error, and it adds k²·v to the variance of the sum (k·v would count its error as k
    independent draws). The float value is therefore Σ_e k_e²·v_e (fsum: independent of order).

    A float so that every reader of ``DocScore.nll_var`` (plain arithmetic, ``math.isnan``)
    works unchanged, while ``CellTotals.add`` reads ``terms`` to count an estimate that several
    documents of a cell share (duplicate documents, boilerplate windows) once across them too."""

    __slots__ = ("terms",)
    terms: dict[bytes, tuple[int, float]]

    def __new__(cls, terms: Mapping[bytes, tuple[int, float]]) -> McVariance:
        obj = super().__new__(cls, math.fsum(k * k * v for k, v in terms.values()))  # NaN stays NaN
        obj.terms = dict(terms)
        return obj

    def __reduce__(self) -> tuple[type[McVariance], tuple[dict[bytes, tuple[int, float]]]]:
        return McVariance, (self.terms,)  # float's own reduce would call __new__ with the value


def add_term(terms: dict[bytes, tuple[int, float]], key: bytes, k: int, v: float) -> float:
    """Count ``k`` more occurrences of the Monte Carlo estimate ``key`` (variance ``v``) in
    ``terms`` (key -> (count, variance)); returns how much the variance of the total grows. An
    estimate already counted k0 times is the same error again, so the total's variance goes from
    k0²·v to (k0 + k)²·v (v of its first occurrence)."""
    k0, v0 = terms.get(key, (0, v))
    terms[key] = (k0 + k, v0)
    return ((k0 + k) ** 2 - k0 * k0) * v0


@dataclass
class CellTotals:
    """Sums over the documents of one cell."""

    nll_nats: float = 0.0
    n_bytes: int = 0
    n_bytes_clean: int = 0
    n_tokens: int = 0
    n_segments: int = 0
    segment_bytes: int = 0
    n_words: int = 0
    n_docs: int = 0
    edit_rate_sum: float = 0.0
    nll_var: float = 0.0  # Monte Carlo variance of nll_nats (nats²; MDM), 0 for exact scores
    # per distinct MDM estimate added so far (``McVariance.terms``' keys): (times counted, variance)
    mc_terms: dict[bytes, tuple[int, float]] = field(default_factory=dict, repr=False)

    def add(self, nll: float, n_bytes: int, n_bytes_clean: int, n_tokens: int, n_words: int,
            segments: Iterable[int] | None, edit_rate: float, nll_var: float = 0.0) -> None:
        """Add one document. nll_var: its Monte Carlo variance (nats²); an ``McVariance`` (MDM
        scores) is merged estimate by estimate, so the cell's variance is Σ_e k_e²·v_e with k_e
        counted over all the cell's documents; a plain float is taken as independent of the rest
        (0 for exact scores)."""
        self.nll_nats += nll
        if isinstance(nll_var, McVariance):
            for key, (k, v) in nll_var.terms.items():
                self.nll_var += add_term(self.mc_terms, key, k, v)
        else:
            self.nll_var += nll_var
        self.n_bytes += n_bytes
        self.n_bytes_clean += n_bytes_clean
        self.n_tokens += n_tokens
        self.n_words += n_words
        self.n_docs += 1
        self.edit_rate_sum += edit_rate
        if segments is None:  # byte-level encoder: every byte is its own segment
            self.n_segments += n_bytes
            self.segment_bytes += n_bytes
        else:
            segs = list(segments)
            self.n_segments += len(segs)
            self.segment_bytes += sum(segs)


def cell_metrics(t: CellTotals, script: str | None) -> dict[str, float | int | str]:
    """Derived metrics of a cell: bpb, bpb_clean, byte/word/token perplexity, edit rate, and
    bpb_se — the Monte Carlo standard error of bpb (√nll_var / (ln 2 · n_bytes), an estimate shared
    by equal windows counted as one: ``CellTotals.add``; 0 for exact scores, NaN when the estimate
    had one sample per window).

    word_ppl is left empty (NaN) for scripts written without spaces; token_ppl is per prediction
    unit of that encoder and is NOT comparable across encoders (results mark the unit)."""
    b = bpb(t.nll_nats, t.n_bytes)
    no_space = script in NO_SPACE_SCRIPTS
    return {
        "n_docs": t.n_docs,
        "n_bytes": t.n_bytes,
        "n_bytes_clean": t.n_bytes_clean,
        "nll_nats": t.nll_nats,
        "bpb": b,
        "bpb_se": bpb(math.sqrt(t.nll_var), t.n_bytes),  # NaN stays NaN
        "bpb_clean": bpb(t.nll_nats, t.n_bytes_clean),
        "byte_ppl": 2.0**b if not math.isnan(b) else math.nan,
        "word_ppl": math.exp(min(t.nll_nats / t.n_words, 700.0)) if t.n_words and not no_space else math.nan,
        "token_ppl": math.exp(min(t.nll_nats / t.n_tokens, 700.0)) if t.n_tokens else math.nan,
        "n_tokens": t.n_tokens,
        "n_segments": t.n_segments,
        "bytes_per_segment": bytes_per_segment(t.segment_bytes, t.n_segments),
        "n_words": t.n_words,
        "edit_rate": t.edit_rate_sum / t.n_docs if t.n_docs else math.nan,
    }
