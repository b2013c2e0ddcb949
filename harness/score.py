"""The one scoring function: per-byte NLL of documents under an encoder, in rolling windows that
are identical in bytes for every encoder, each byte scored exactly once.

Modes (see ``plan_full`` / ``plan_clean_target``):
  * full — score the whole (perturbed) document.
  * clean_target — cut the document at the first whitespace at or after character
    ⌊context_fraction·n⌋, perturb only the part before the cut, and score the first
    ``target_bytes`` bytes of the untouched continuation in one window whose left context is the
    tail of the (perturbed) prefix. Robustness = ΔBPB against the same cell with a clean prefix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from core.segments import check_tiling
from encoders.base import Encoder
from harness.data import Window, char_boundary, cut_after, rolling_windows
from harness.permutation import WindowPermuter, unpermute_segments
from sources.base import Document

_WS = frozenset(" \t\n\r\x0b\x0c")


@dataclass
class ScoreItem:
    """One document to score: the bytes fed to the model and the windows over them."""

    data: bytes
    windows: list[Window]

    @property
    def scored_bytes(self) -> bytes:
        return b"".join(self.data[w.score_start : w.end] for w in self.windows)


@dataclass(frozen=True)
class PlanRow:
    """One document of a cell plan: what every encoder scores for it, and the facts of its row.

    text: the clean document text. ptext: the text as the model sees it (full: the perturbed
    document; clean_target: the perturbed prefix + the clean target). n_bytes_clean: UTF-8 bytes of
    the clean counterpart of what is scored (full: the whole document; clean_target: the target).
    edit_rate: character edit rate of the perturbation (0 for clean). n_words: words of the clean
    text scored (full: the document; clean_target: the target).
    """

    doc: Document
    item: ScoreItem
    text: str
    ptext: str
    n_bytes_clean: int
    edit_rate: float
    n_words: int


@dataclass
class DocScore:
    """Result for one document. nll in nats; byte_nll (n_scored,) float64 nats per scored byte."""

    nll: float
    n_units: int
    segments: list[int] | None
    byte_nll: np.ndarray


def plan_full(data: bytes, context: int, stride: int) -> ScoreItem:
    return ScoreItem(data, rolling_windows(data, context, stride))


def split_for_target(text: str, fraction: float) -> tuple[str, str]:
    """(prefix, continuation): cut at the first whitespace at or after character ⌊fraction·n⌋
    (the whitespace starts the continuation); texts without such whitespace are cut at the
    character itself."""
    n = len(text)
    k = min(n, math.floor(fraction * n))
    cut = next((i for i in range(k, n) if text[i] in _WS), k)
    return text[:cut], text[cut:]


def plan_clean_target(prefix: bytes, continuation: bytes, context: int, target_bytes: int) -> ScoreItem | None:
    """One window: tail of ``prefix`` (starting at a word boundary) + the first ``target_bytes``
    bytes of ``continuation`` (cut at a character boundary), scoring only the continuation part.
    None when the continuation is empty."""
    if len(continuation) > target_bytes:
        continuation = continuation[: char_boundary(continuation, target_bytes) or target_bytes]
    if not continuation:
        return None
    room = context - len(continuation)
    start = 0 if room >= len(prefix) else cut_after(prefix, len(prefix) - room, len(prefix))
    data = prefix[start:] + continuation
    return ScoreItem(data, [Window(0, len(prefix) - start, len(data))])


def _unpermute(values: torch.Tensor, source: Sequence[int]) -> torch.Tensor:
    """(n,) per-byte values of a fed stream -> (n,) in the window's order: out[source[j]] = v[j]."""
    out = torch.empty_like(values)
    out[torch.tensor(source, dtype=torch.long)] = values
    return out


def plan_partition(data: bytes, context: int) -> ScoreItem:
    """Full mode for permutations: windows of <= ``context`` bytes cut at the same places as
    ``plan_full`` with stride = context, but with no left context, so each window is scored
    whole and a permutation never mixes context and scored bytes."""
    return ScoreItem(data, [Window(w.score_start, w.score_start, w.end) for w in rolling_windows(data, context, context)])


@torch.no_grad()
def score_items(
    encoder: Encoder,
    items: Sequence[ScoreItem],
    device: torch.device,
    batch_windows: int = 32,
    bf16: bool = False,
    permuter: WindowPermuter | None = None,
) -> list[DocScore]:
    """Score documents: windows of all items are batched together (``batch_windows`` per
    forward), per-unit NLL is spread onto bytes (``UnitNLL.byte_nll``, which also checks that
    units tile the scored bytes exactly once) and summed per document.

    With a ``permuter`` each window (all of it scored: ``score_from`` must be 0) is fed
    permuted, and its per-byte NLL is put back in the document's byte order."""
    encoder.eval()
    flat: list[tuple[int, bytes, int]] = []  # (item index, window bytes, score_from)
    for i, it in enumerate(items):
        for w in it.windows:
            flat.append((i, it.data[w.start : w.end], w.score_from))
    per_item_nll: list[list[np.ndarray]] = [[] for _ in items]
    per_item_units = [0] * len(items)
    per_item_segs: list[list[int] | None] = [None] * len(items)
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if bf16 and device.type == "cuda"
        else torch.autocast("cpu", enabled=False)
    )
    for b0 in range(0, len(flat), batch_windows):
        chunk = flat[b0 : b0 + batch_windows]
        wins = [c[1] for c in chunk]
        sfrom = [c[2] for c in chunk]
        fed = None
        if permuter is None:
            batch = encoder.collate(wins, sfrom).to(device)
        else:
            if any(sfrom):
                raise ValueError("a permuted window must be scored whole (score_from = 0)")
            batch, fed = permuter.collate(encoder, wins)
            batch = batch.to(device)
        with autocast:
            units = encoder(batch)
        per_window = units.byte_nll([len(w) for w in wins], sfrom)
        if fed is not None:  # fed order -> the window's byte order
            per_window = [_unpermute(v, pw.source) for v, pw in zip(per_window, fed)]
            if units.segments is not None:
                units.segments = [unpermute_segments(sg, pw) for sg, pw in zip(units.segments, fed)]
        counts = torch.bincount(units.window.cpu(), minlength=len(chunk)).tolist()
        for j, (i, _, _) in enumerate(chunk):
            per_item_nll[i].append(per_window[j].numpy())
            per_item_units[i] += counts[j]
            if units.segments is not None:
                # segments must tile the scored span like the units do (core.segments)
                check_tiling(units.segments[j], len(wins[j]) - sfrom[j], type(encoder).__name__)
                segs = per_item_segs[i] if per_item_segs[i] is not None else []
                segs.extend(units.segments[j])
                per_item_segs[i] = segs
    out = []
    for i in range(len(items)):
        bn = np.concatenate(per_item_nll[i]) if per_item_nll[i] else np.zeros(0)
        out.append(DocScore(float(bn.sum()), per_item_units[i], per_item_segs[i], bn))
    return out
