"""The cell metrics of results.csv (BPB itself is ``core.metrics.bpb``, the one formula).

Units: NLL in nats; BPB in bits per UTF-8 byte. BPB is always ΣNLL / (ln 2 · Σ bytes) over the
text scored — never a mean of per-document or per-token values, never per token.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from core.metrics import bpb
from core.segments import bytes_per_segment

# Scripts written without spaces between words: word perplexity is undefined for them.
NO_SPACE_SCRIPTS = frozenset({"Hani", "Hira", "Kana", "Jpan", "Thai", "Laoo", "Khmr", "Mymr", "Tibt"})
_WORD = re.compile(r"\S+")


def count_words(text: str) -> int:
    """Whitespace-separated words (the unit of word perplexity)."""
    return len(_WORD.findall(text))


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

    def add(self, nll: float, n_bytes: int, n_bytes_clean: int, n_tokens: int, n_words: int,
            segments: Iterable[int] | None, edit_rate: float, nll_var: float = 0.0) -> None:
        self.nll_nats += nll
        self.nll_var += nll_var  # documents draw independent Monte Carlo samples
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
    bpb_se — the Monte Carlo standard error of bpb (√nll_var / (ln 2 · n_bytes); 0 for exact
    scores, NaN when the estimate had one sample per window).

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
