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

import hashlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from encoders.base import Encoder
from harness.config.permutation import WindowPermuter
from harness.data.load import Window, char_boundary, cut_after, rolling_windows
from harness.score.batches import PackedBatches
from harness.score.metrics import McVariance, add_term
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
    """Result for one document. nll in nats; byte_nll (n_scored,) float64 nats per scored byte;
    nll_var: Monte Carlo variance (nats²) of ``nll`` when it is an estimate (MDM): an
    ``McVariance`` (Σ over distinct windows of occurrences² · window variance, with the windows'
    keys, so a cell counts windows shared between documents as one estimate too), else 0."""

    nll: float
    n_units: int
    segments: list[int] | None
    byte_nll: np.ndarray
    nll_var: float = 0.0


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


def plan_partition(data: bytes, context: int) -> ScoreItem:
    """Full mode for permutations: windows of <= ``context`` bytes cut at the same places as
    ``plan_full`` with stride = context, but with no left context, so each window is scored
    whole and a permutation never mixes context and scored bytes."""
    return ScoreItem(data, [Window(w.score_start, w.score_start, w.end) for w in rolling_windows(data, context, context)])


def estimate_key(window: bytes, score_from: int) -> bytes:
    """16-byte key of a window's Monte Carlo estimate (``McVariance.terms``): equal (bytes,
    score_from) give one estimate — the same masks and times (``encoders.mdm`` seeds them by the
    window's bytes) on the same input — whether dedup forwarded it once or each occurrence on its
    own, in this call or another. A digest, not the bytes: a cell's totals keep one per window."""
    h = hashlib.blake2b(digest_size=16)
    h.update(score_from.to_bytes(8, "little"))
    h.update(window)
    return h.digest()


# Each distinct window forwarded once per packed job; False forwards every window (to compare).
DEDUP = True
# The next model's packed job started while this one's forwards run; False starts each at its turn.
PRESTART = True


def dedup_enabled(dedup: bool = True) -> bool:
    """Whether ``score_items`` forwards each distinct window once: ``dedup`` and ``DEDUP``."""
    return dedup and DEDUP


def score_prestart_wanted() -> bool:
    """Whether the run starts the next model's packed scoring job while this one's forwards
    run (``ScoreJob``): ``PRESTART``."""
    return PRESTART


@dataclass
class FlatWindows:
    """The windows of many items, flattened, and the distinct ones among them.

    flat: per window in document order, (item index, window bytes, score_from).
    distinct: per distinct window, (window bytes, score_from), in order of first occurrence.
    occurrences: per distinct window, the indices into ``flat`` of its windows (the first one is
    the one "forwarded", the others are duplicates served from its results).
    distinct_of: per window of ``flat``, the index of its distinct window.
    """

    flat: list[tuple[int, bytes, int]]
    distinct: list[tuple[bytes, int]]
    occurrences: list[list[int]]
    distinct_of: list[int]
    dedup: bool = True  # whether equal windows share a distinct window (``flatten_windows``)


def flatten_windows(items: Sequence[ScoreItem], dedup: bool = True) -> FlatWindows:
    """Flatten the windows of ``items``; with ``dedup``, windows with equal (bytes, score_from)
    share one distinct window, else every window is its own."""
    flat: list[tuple[int, bytes, int]] = []
    distinct: list[tuple[bytes, int]] = []
    occurrences: list[list[int]] = []
    distinct_of: list[int] = []
    first: dict[tuple[bytes, int], int] = {}
    for i, it in enumerate(items):
        for w in it.windows:
            key = (it.data[w.start : w.end], w.score_from)
            d = first.setdefault(key, len(distinct)) if dedup else len(distinct)
            if d == len(distinct):
                distinct.append(key)
                occurrences.append([])
            occurrences[d].append(len(flat))
            distinct_of.append(d)
            flat.append((i, *key))
    return FlatWindows(flat, distinct, occurrences, distinct_of, dedup)


def score_items(encoder: Encoder, items: Sequence[ScoreItem], device: torch.device, batch_windows: int = 32,
                bf16: bool = False, *, progress: Callable[[int], Any] | None = None,
                started: Callable[[], Any] | None = None, **options: Any) -> list[DocScore | None]:
    """Per-document scores of ``items`` (each a document's windows with their ``score_from``):
    a ``DocScore`` per item (NLL in nats summed over its scored bytes, per-byte NLL, unit and
    segment counts, MC variance), or None for an item not ``needed``.

    Windows of all items are batched together, longest first,
    ``encoder.score_windows_per_batch(batch_windows)`` a forward; a window's numbers do not depend
    on its batch (beyond float rounding), and equal windows are forwarded once (``dedup``). Options
    (``start_scoring``'s): ``needed`` (per item), ``dedup``, ``stats`` (dict: FLOPs, seconds, bytes
    and windows added in, per ``groups`` label too), ``mc_samples``, ``permuter`` (windows fed
    permuted, NLL put back in byte order), ``groups`` (a label per item), ``flat`` (the items'
    ``flatten_windows``, made once for several models), ``collate_workers``. ``progress(n)`` is
    called after each forward with the windows it served; ``started()`` once, right after the
    first forward is launched. Same as ``start_scoring(...).run(progress, started)``.
    """
    return start_scoring(encoder, items, device, batch_windows, bf16, **options).run(progress, started)


class ScoreJob:
    """A ``score_items`` call made in two steps: ``start_scoring`` does its set-up and starts its
    collation (the pool's workers fork and collate, the prefetch thread counts FLOPs and pins the
    first batches, in the background); ``run`` forwards every batch and returns the scores;
    ``close`` ends a job that will not run (its pool and thread), and is a no-op after ``run``.

    Why: each of a run's packed scoring jobs (one per model and eval set) waited 0.5-1.3 s for its
    first collated batch while the GPU idled (run.json ``speed.score.*.first_batch_seconds``: 7.0
    s of a standard seed on the H200), so the run starts the next model's job while this
    one's forwards run (``harness.pipeline.run``). The batches and their order are the same either way, so
    are the numbers (tests/harness/score/test_score_prestart.py)."""

    def __init__(self, gen: Any) -> None:
        self._gen = gen
        self._done = False

    def run(self, progress: Callable[[int], Any] | None = None,
            started: Callable[[], Any] | None = None) -> list[DocScore | None]:
        """Forward every batch (``score_items``' ``progress`` and ``started``); once only."""
        if self._done:
            raise RuntimeError("ScoreJob.run: this job has run or was closed")
        self._done = True
        try:
            with torch.inference_mode():
                self._gen.send((progress, started))
        except StopIteration as e:
            return e.value
        raise RuntimeError("ScoreJob.run: the scoring generator yielded twice")  # pragma: no cover

    def close(self) -> None:
        """Stop a job that has not run: its watchdog, prefetch thread and collation workers."""
        if not self._done:
            self._done = True
            self._gen.close()


def start_scoring(
    encoder: Encoder,
    items: Sequence[ScoreItem],
    device: torch.device,
    batch_windows: int = 32,
    bf16: bool = False,
    stats: dict[str, Any] | None = None,
    needed: Sequence[bool] | None = None,
    mc_samples: int | None = None,
    permuter: WindowPermuter | None = None,
    groups: Sequence[str] | None = None,
    dedup: bool = True,
    collate_workers: int | None = None,
    flat: FlatWindows | None = None,
) -> ScoreJob:
    """``score_items``' set-up, and its collation started (``ScoreJob``); the arguments are
    ``score_items``' (documented there) but ``progress`` and ``started``, which go to ``ScoreJob.run``. The caller must ``run`` or
    ``close`` the job (a job never run keeps its pool's workers until then)."""
    gen = _score_job(encoder, items, device, batch_windows, bf16, stats, needed, mc_samples, permuter,
                     groups, dedup, collate_workers, flat)
    with torch.inference_mode():
        next(gen)  # the set-up, up to the loop: collation is under way when this returns
    return ScoreJob(gen)


def _score_job(encoder: Encoder, items: Sequence[ScoreItem], device: torch.device, batch_windows: int,
               bf16: bool, stats: dict[str, Any] | None, needed: Sequence[bool] | None, mc_samples: int | None,
               permuter: WindowPermuter | None, groups: Sequence[str] | None, dedup: bool,
               collate_workers: int | None, flat: FlatWindows | None) -> Any:
    """``score_items``' body as a generator: it runs the set-up, yields once (collation started)
    and, sent ``(progress, started)``, scores and returns the scores (``ScoreJob``)."""
    t_call = time.perf_counter()
    encoder.eval()
    # ``batch_windows`` counts a byte model's windows; token models take more (their sequences
    # are shorter), the same in every call for this encoder
    batch_windows = encoder.score_windows_per_batch(batch_windows)
    if mc_samples is not None and hasattr(encoder, "mc_samples"):
        encoder.mc_samples = mc_samples
    fw = _job_windows(items, dedup, flat)
    job = PackedBatches(encoder, fw.flat, fw.distinct, fw.occurrences, device, bf16, stats is not None,
                        permuter, groups)
    dog, feed = job.start(batch_windows, needed, collate_workers)
    t_setup = time.perf_counter()
    try:
        # Started: the pool's first workers are collating. The caller sends what ``run`` got
        # (or closes the generator: the finally below stops the thread and the pool).
        progress, on_started = yield
        # A job started ahead waited here for its turn: its clocks (first batch, seconds) start now.
        t0 = time.perf_counter()
        dog.start()
        job.forward_all(feed, dog, progress, on_started)
    finally:
        dog.stop()
        feed.close()
    t_loop = time.perf_counter()
    out = _assemble(items, needed, fw, job)
    if stats is not None:
        _job_stats(stats, job, fw.flat, fw.occurrences, groups, feed.cpu_seconds, (t_call, t_setup, t0, t_loop))
    return out


def _job_windows(items: Sequence[ScoreItem], dedup: bool, flat: FlatWindows | None) -> FlatWindows:
    """The packed job's windows: ``flat`` when given (ValueError unless made from ``items``
    with this ``dedup``), else ``flatten_windows(items)`` made here."""
    # Dedup holds under a permuter too: ``WindowPermuter.collate`` permutes a window by its bytes
    # alone (``permute_window(w, encoder.unit_lengths(w), perm, context, seed)``: the unit
    # lengths are the tokenizer's cut of those bytes, perm/context/seed fixed per permuter, and
    # MDM seeds a permuted window's masks by its fed bytes), never by its place in the batch or
    # the document — so equal windows are fed equal streams.
    if flat is None:
        return flatten_windows(items, dedup_enabled(dedup))
    if flat.dedup != dedup_enabled(dedup) or len(flat.distinct_of) != sum(len(it.windows) for it in items):
        raise ValueError("score_items: `flat` was not made from these items with this dedup")
    return flat


def _assemble(items: Sequence[ScoreItem], needed: Sequence[bool] | None, fw: FlatWindows,
              job: PackedBatches) -> list[DocScore | None]:
    """Per item, its windows' results in document order: a ``DocScore`` (NLL nats, (n_scored,)
    float64 per-byte NLL, units, segments, MC variance), or None for an item not ``needed``."""
    per_window, per_window_units = job.per_window, job.per_window_units
    per_window_var, per_window_segs = job.per_window_var, job.per_window_segs
    per_item_nll: list[list[np.ndarray]] = [[] for _ in items]
    per_item_units = [0] * len(items)
    # per item, per distinct estimate (``estimate_key``): (occurrences in the item, variance)
    per_item_var: list[dict[bytes, tuple[int, float]]] = [{} for _ in items]
    keys: dict[int, bytes] = {}  # distinct window -> its estimate_key, made once
    per_item_segs: list[list[int] | None] = [None] * len(items)
    for (i, w, sf), d in zip(fw.flat, fw.distinct_of):  # windows back in document order
        arr = per_window[d]
        if arr is None:  # in a skipped batch: its item is not needed
            continue
        per_item_nll[i].append(arr)
        per_item_units[i] += per_window_units[d]
        v = per_window_var[d]
        if v is not None:
            # keyed by content, not by ``d``: without dedup equal windows are distinct here but
            # still one estimate (the first occurrence's variance stands for them all)
            if d not in keys:
                keys[d] = estimate_key(w, sf)
            add_term(per_item_var[i], keys[d], 1, v)
        segs_w = per_window_segs[d]
        if segs_w is not None:  # copied into the item's own list (extend), never shared
            segs = per_item_segs[i] if per_item_segs[i] is not None else []
            segs.extend(segs_w)
            per_item_segs[i] = segs
    out: list[DocScore | None] = []
    for i in range(len(items)):
        if needed is not None and not needed[i]:
            out.append(None)
            continue
        bn = np.concatenate(per_item_nll[i]) if per_item_nll[i] else np.zeros(0)
        var = McVariance(per_item_var[i]) if per_item_var[i] else 0.0
        out.append(DocScore(float(bn.sum()), per_item_units[i], per_item_segs[i], bn, var))
    return out


def _job_stats(stats: dict[str, Any], job: PackedBatches, flat: list[tuple[int, bytes, int]],
               occurrences: list[list[int]], groups: Sequence[str] | None, prefetch_cpu: float,
               clocks: tuple[float, float, float, float]) -> None:
    """Add a packed job's FLOPs, seconds, windows and loop times to ``stats`` (per group too).
    clocks: ``time.perf_counter`` at the call, the set-up's end, the loop's start and its end."""
    t_call, t_setup, t0, t_loop = clocks
    t_end = time.perf_counter()
    seconds = t_end - t0
    fwd_flops, group_flops, times = job.fwd_flops, job.group_flops, job.times
    sync_seconds, sync_cpu = job.sync_seconds, job.sync_cpu
    # every occurrence of a computed window is delivered; all but the first are duplicates
    done = [(flat[fi], k > 0) for d, a in enumerate(job.per_window) if a is not None
            for k, fi in enumerate(occurrences[d])]
    _add_stats(stats, fwd_flops, seconds, done)
    # where the wall outside the forwards' loop goes: windows flattened and sorted before it,
    # the first collated batch awaited, the per-document scores assembled after it
    for k, v in (("setup_seconds", t_setup - t_call), ("first_batch_seconds", (times.first or t_loop) - t0),
                 ("assemble_seconds", t_end - t_loop),
                 ("loop_wait_seconds", times.wait), ("loop_launch_seconds", times.launch),
                 ("loop_sync_seconds", sync_seconds), ("loop_finish_seconds", times.finish - sync_seconds),
                 ("loop_launch_cpu_seconds", times.launch_cpu), ("loop_sync_cpu_seconds", sync_cpu),
                 ("loop_finish_cpu_seconds", times.finish_cpu - sync_cpu),
                 ("prefetch_cpu_seconds", prefetch_cpu)):
        stats[k] = stats.get(k, 0.0) + v
    if job.pinned:
        stats["device_seconds"] = stats.get("device_seconds", 0.0) + job.device_seconds
    if groups is not None:
        for g in sorted({groups[f[0]] for f, _ in done}):
            share = group_flops.get(g, 0.0) / fwd_flops if fwd_flops else 0.0
            _add_stats(stats.setdefault("groups", {}).setdefault(g, {}), group_flops.get(g, 0.0),
                       seconds * share, [x for x in done if groups[x[0][0]] == g])


def _add_stats(stats: dict[str, Any], flops: float, seconds: float,
               done: list[tuple[tuple[int, bytes, int], bool]]) -> None:
    """Add a packed job's forward FLOPs and seconds, and the scored bytes, windows and duplicate
    windows it delivered, to ``stats``. done: per delivered window, ((item, bytes, score_from),
    whether it was served from another window's forward)."""
    stats["forward_flops"] = stats.get("forward_flops", 0.0) + flops
    stats["seconds"] = stats.get("seconds", 0.0) + seconds
    stats["scored_bytes"] = stats.get("scored_bytes", 0.0) + sum(len(w) - s for (_, w, s), _ in done)
    stats["windows"] = stats.get("windows", 0.0) + len(done)
    stats["duplicate_windows"] = stats.get("duplicate_windows", 0.0) + sum(dup for _, dup in done)
