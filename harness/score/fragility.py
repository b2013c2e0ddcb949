"""The context-fragility study's part of a run (issue #18): which windows a permuted suite
scores, the permuter of an encoder variant, and the compressor baseline cells.

    item = plan_partition(data, context)   # harness.score.items: context-free windows, stride = context
    cell = baseline_metrics("lzma", perm, docs, context, seed, dictionary, script)

Compressors read bytes, so their permutations move bytes (units of one byte), exactly as the
byte-level encoders' do; the scored bytes and their context are the ones the models get.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from core.metrics import LN2
from harness.config.permutation import Permutation, WindowPermuter, permute_window
from harness.data.compressors import conditional_bits, dictionary_from
from harness.score.items import ScoreItem
from harness.score.metrics import CellTotals, cell_metrics


def permuter_for(perm: Permutation, context: int, seed: int) -> WindowPermuter | None:
    """The permuter of an encoder variant (None for the original stream)."""
    return None if perm.is_identity else WindowPermuter(perm, context, seed)


def fed_windows(item: ScoreItem, perm: Permutation, context: int, seed: int) -> list[tuple[bytes, int]]:
    """(window bytes as fed, score_from) for each window of a document, permuted byte-wise."""
    out = []
    for w in item.windows:
        data = item.data[w.start : w.end]
        if not perm.is_identity:
            if w.score_from:
                raise ValueError("a permuted window must be scored whole (score_from = 0)")
            data = permute_window(data, [1] * len(data), perm, context, seed).data
        out.append((data, w.score_from))
    return out


def compressor_dictionary(windows: Iterable[bytes], perm: Permutation, context: int, seed: int,
                          n_bytes: int) -> bytes:
    """The compressors' dictionary under ``perm``: the first ``n_bytes`` of the training stream
    (``harness.data.load.training_windows``) permuted byte-wise like the scored windows — the
    compressor is primed on the same kind of stream the models learn."""
    if n_bytes <= 0:
        return b""
    fed = (w if perm.is_identity else permute_window(w, [1] * len(w), perm, context, seed).data
           for w in windows)
    return dictionary_from(fed, n_bytes)


def baseline_doc_bits(name: str, item: ScoreItem, perm: Permutation, context: int, seed: int,
                      dictionary: bytes = b"") -> int:
    """Bits compressor ``name`` spends on the scored bytes of one document: Σ over its windows
    of C(d ‖ context ‖ scored) − C(d ‖ context) (``harness.data.compressors.conditional_bits``)."""
    return sum(conditional_bits(name, data[:sf], data[sf:], dictionary)
               for data, sf in fed_windows(item, perm, context, seed))


@dataclass(frozen=True)
class BaselineDoc:
    """One document of a baseline cell: its plan and the facts the model rows carry too."""

    item: ScoreItem
    n_bytes_clean: int
    n_words: int
    edit_rate: float


def baseline_metrics(name: str, perm: Permutation, docs: Sequence[BaselineDoc], context: int,
                     seed: int, dictionary: bytes, script: str | None) -> dict[str, float | int | str]:
    """The results.csv metrics of one compressor cell, through the one metric implementation:
    NLL = bits · ln 2 nats, one prediction unit and one segment per byte."""
    totals = CellTotals()
    for d in docs:
        n = len(d.item.scored_bytes)
        bits = baseline_doc_bits(name, d.item, perm, context, seed, dictionary)
        totals.add(bits * LN2, n, d.n_bytes_clean, n, d.n_words, None, d.edit_rate)
    return {**cell_metrics(totals, script), "token_unit": "byte", "segment_unit": "byte"}


def permutation_columns(perm: Permutation) -> dict[str, str | int]:
    """The ``permutation`` and ``block_bytes`` columns of a results row."""
    return {"permutation": perm.kind, "block_bytes": "" if perm.block_bytes is None else perm.block_bytes}
