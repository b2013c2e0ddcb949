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

from core.segments import window_segments
from encoders.base import Encoder, UnitNLL
from harness.config.permutation import WindowPermuter, unpermute_segments
from harness.data.load import Window, char_boundary, cut_after, rolling_windows
from harness.infra.accel import Prefetcher, collate_processes, ordered_pool_map, pin
from harness.infra.watchdog import Watchdog
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


def _unpermute(values: np.ndarray, source: Sequence[int]) -> np.ndarray:
    """(n,) per-byte values of a fed stream -> (n,) in the window's order: out[source[j]] = v[j]."""
    out = np.empty_like(values)
    out[np.asarray(source, dtype=np.int64)] = values
    return out


def _to_host(units: UnitNLL) -> tuple[UnitNLL, Any]:
    """Start copying a batch's units to the host: on CUDA asynchronous copies into pinned memory
    (``UnitNLL.to``) and an event that says when they have landed (no sync here); on the CPU the
    same units and no event. Values are unchanged (fp64 conversion happens on the host)."""
    if units.nll.device.type == "cpu":
        return units, None
    host = units.to("cpu", non_blocking=True)
    ready = torch.cuda.Event(enable_timing=True)  # also ends the forward's span (``device_seconds``)
    ready.record()
    return host, ready


def _use_on_current_stream(made: Any, meta: dict[str, Any], device: torch.device) -> None:
    """Order the current stream after ``made`` (an event of the prefetch thread's side stream)
    and mark the device tensors that stream left in a batch's ``meta`` (BLT's patch starts) as
    used on the current stream too, so the caching allocator does not hand their memory back
    to the side stream while the forward may still read it."""
    stream = torch.cuda.current_stream(device)
    stream.wait_event(made)
    # a meta value, or an element of a tuple value (BLT's ``(key, starts, n)``); lists are not
    # walked: they hold host data (segments), thousands of elements a batch
    for v in meta.values():
        for x in v if isinstance(v, tuple) else (v,):
            if isinstance(x, torch.Tensor) and x.is_cuda:
                x.record_stream(stream)


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
    are the numbers (tests/harness/test_score_prestart.py)."""

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
    progress: Callable[[int], Any] | None = None
    on_started: Callable[[], Any] | None = None
    t_call = time.perf_counter()
    encoder.eval()
    # ``batch_windows`` counts a byte model's windows; token models take more (their sequences
    # are shorter), the same in every call for this encoder
    batch_windows = encoder.score_windows_per_batch(batch_windows)
    if mc_samples is not None and hasattr(encoder, "mc_samples"):
        encoder.mc_samples = mc_samples
    # Dedup holds under a permuter too: ``WindowPermuter.collate`` permutes a window by its bytes
    # alone (``permute_window(w, encoder.unit_lengths(w), perm, context, seed)``: the unit
    # lengths are the tokenizer's cut of those bytes, perm/context/seed fixed per permuter, and
    # MDM seeds a permuted window's masks by its fed bytes), never by its place in the batch or
    # the document — so equal windows are fed equal streams.
    if flat is None:
        fw = flatten_windows(items, dedup_enabled(dedup))
    else:
        fw = flat
        if fw.dedup != dedup_enabled(dedup) or len(fw.distinct_of) != sum(len(it.windows) for it in items):
            raise ValueError("score_items: `flat` was not made from these items with this dedup")
    flat, distinct, occurrences = fw.flat, fw.distinct, fw.occurrences
    # Longest windows first (stable): batches of similar lengths pad less (BPE, BLT). Indices
    # from here on are distinct windows; results are spread onto all occurrences at the end.
    order = sorted(range(len(distinct)), key=lambda d: -len(distinct[d][0]))
    per_window: list[np.ndarray | None] = [None] * len(distinct)
    per_window_units = [0] * len(distinct)
    per_window_var: list[float | None] = [None] * len(distinct)  # None: an exact score
    per_window_segs: list[list[int] | None] = [None] * len(distinct)
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if bf16 and device.type == "cuda"
        else torch.autocast("cpu", enabled=False)
    )
    fwd_flops = 0.0

    if permuter is not None and any(sf for _, _, sf in flat):
        raise ValueError("a permuted window must be scored whole (score_from = 0)")
    fed_of: dict[int, Any] = {}  # distinct index -> PermutedWindow (filled by the collating thread)
    group_flops: dict[str, float] = {}
    pinned = device.type == "cuda"

    def collate(idx: list[int]) -> tuple[list[int], Any, Any]:
        """Collate (tokenize, patch, permute) one batch of distinct windows: pure CPU work, in
        forked worker processes on CUDA (``ordered_pool_map``; results come back in order)."""
        wins = [distinct[d][0] for d in idx]
        if permuter is None:
            return idx, encoder.collate(wins, [distinct[d][1] for d in idx]), None
        batch, fed = permuter.collate(encoder, wins)
        return idx, batch, fed

    # The prefetch thread's device work (BLT's entropy model, patching a batch for its FLOP
    # count and its forward) runs on a stream of its own: on the loop's stream it queued behind
    # the forward in flight and then waited for it (patching reads the patch count on the host),
    # so the next batch came only after that forward had ended — the loop waited 4.9 s for
    # batches in BLT's scoring on an H100 (BENCHMARKS.md; on the side stream the
    # wait went, but BLT's scoring was no faster on one host: a tie, the loop's launches pace it).
    # The side stream first waits for what the caller queued before this call (the weights);
    # each batch then carries an event that the loop's stream waits for before its forward.
    side = torch.cuda.Stream(device=device) if pinned and stats is not None else None
    if side is not None:
        side.wait_stream(torch.cuda.current_stream(device))

    def prepare(collated: tuple[list[int], Any, Any]) -> tuple[list[int], list[bytes], list[int], Any, float, Any]:
        """Count a collated batch's FLOPs and pin it, in the prefetch thread: the loop below
        then only launches the forward and reads results back."""
        idx, batch, fed = collated
        wins = [distinct[d][0] for d in idx]
        sfrom = [distinct[d][1] for d in idx]
        if fed is not None:
            fed_of.update(zip(idx, fed))
        ready = None
        with torch.inference_mode():  # as in the loop (BLT patches here: its entropy model runs)
            if side is not None:
                with torch.cuda.stream(side):
                    flops = encoder.flops(batch)
                ready = torch.cuda.Event()
                ready.record(side)
            else:
                flops = encoder.flops(batch) if stats is not None else 0.0
        if stats is not None and groups is not None:
            n_fed = sum(len(w) for w in wins)
            for d, w in zip(idx, wins):
                # one forward served every occurrence: its FLOPs split evenly among them
                share = flops * len(w) / max(1, n_fed) / len(occurrences[d])
                for fi in occurrences[d]:
                    g = groups[flat[fi][0]]
                    group_flops[g] = group_flops.get(g, 0.0) + share
        return idx, wins, sfrom, pin(batch) if pinned else batch, flops, ready

    device_seconds = 0.0
    sync_seconds = 0.0  # the loop's thread waiting for a batch's results (``ready.synchronize``)
    sync_cpu = 0.0  # of which on a CPU (the driver may spin while it waits)

    def finish(idx: list[int], wins: list[bytes], sfrom: list[int], units: UnitNLL, ready: Any,
               started: Any) -> None:
        """Per-byte NLL, unit counts and segments of a batch whose results are on the host."""
        nonlocal device_seconds, sync_seconds, sync_cpu
        if ready is not None:
            t_sync, c_sync = time.perf_counter(), time.thread_time()
            ready.synchronize()  # the asynchronous copies of ``_to_host`` have landed
            sync_seconds += time.perf_counter() - t_sync
            sync_cpu += time.thread_time() - c_sync
            device_seconds += started.elapsed_time(ready) / 1e3
        nll = units.byte_nll_arrays([len(w) for w in wins], sfrom)
        if permuter is not None:  # fed order -> the window's byte order
            fed = [fed_of.pop(d) for d in idx]
            nll = [_unpermute(v, pw.source) for v, pw in zip(nll, fed)]
            if units.segments is not None:
                units.segments = [unpermute_segments(sg, pw) for sg, pw in zip(units.segments, fed)]
        # numpy: torch's CPU bincount scanned the (U,) windows for min and max first, ~8 ms a
        # 256-window batch on the scoring loop's thread (an H200's profile, BENCHMARKS.md)
        counts = np.bincount(units.window.cpu().numpy(), minlength=len(idx)).tolist()
        wvar = units.window_var.tolist() if units.window_var is not None else None
        # segments must tile the scored span like the units do (core.segments), checked per batch
        segs = (None if units.segments is None else
                window_segments(units.segments, [len(w) - f for w, f in zip(wins, sfrom)], type(encoder).__name__))
        for j, d in enumerate(idx):
            arr = nll[j]
            # shared by all occurrences of the window: read-only, so no consumer can change
            # another occurrence's numbers (documents get concatenated copies anyway)
            arr.flags.writeable = False
            per_window[d] = arr
            per_window_units[d] = counts[j]
            if wvar is not None:
                # MDM: masks and times are seeded by the scored bytes (``mdm_collate``), so an
                # occurrence forwarded on its own would have drawn this same estimate — the
                # occurrences share one error, which the assembly below counts as such
                per_window_var[d] = wvar[j]
            if segs is not None:
                per_window_segs[d] = segs[j]
        if progress is not None:
            progress(sum(len(occurrences[d]) for d in idx))

    # a distinct window is needed when any item it occurs in is; batches never depend on it
    need = None if needed is None else [any(needed[flat[fi][0]] for fi in occ) for occ in occurrences]
    chunks = (c for c in (order[b0 : b0 + batch_windows] for b0 in range(0, len(order), batch_windows))
              if need is None or any(need[d] for d in c))
    # On CUDA collation runs in worker processes, as training's does: in the prefetch thread it
    # held the GIL the loop below needs to launch each forward (an H200 spent 22-72 % of the
    # scoring wall outside the forwards, BENCHMARKS.md). On CPU: in the thread.
    # a forward or a read-back that never returns ends the run with one line (harness.infra.watchdog;
    # made before the pool and thread below, so a bad limit leaves none of them behind)
    dog = Watchdog(f"scoring ({type(encoder).__name__})")
    collated = ordered_pool_map(collate, chunks, collate_processes(device) if collate_workers is None else collate_workers,
                                stage="scoring-batch collation")
    feed = Prefetcher(collated, prepare, depth=2, name="scoring batches")
    # One batch in flight: the forward of batch k+1 is launched before the host spreads batch k's
    # NLL onto bytes, so on a GPU the host work overlaps the device's (same numbers, same order).
    # On CUDA each forward's span on the device's timeline (from an event queued before its
    # first kernel to the one after its copies) adds up to ``device_seconds``: the wall time the
    # GPU spends on forwards, idle gaps inside a forward included, gaps between forwards not.
    pending: tuple[list[int], list[bytes], list[int], UnitNLL, Any, Any] | None = None
    t_first = None
    # Where the loop's thread spends its time, per batch (run.json's ``loop_*_seconds``): waiting
    # for the next collated batch (after the first), launching its forward (the copy to the
    # device, the encoder's ops, the copies back), and finishing the batch before it — waiting
    # for its results (``sync_seconds``) and spreading them onto bytes. On a GPU whose forwards
    # leave it idle, the larger of the host parts is what paces the loop.
    # Beside each wall clock, the thread's own CPU time (``time.thread_time``): a part whose wall
    # is well above its CPU time waited — for the GIL, held by the prefetch thread or another,
    # or in the driver — rather than computed.
    loop = {"wait": 0.0, "launch": 0.0, "finish": 0.0}
    cpu = {"launch": 0.0, "finish": 0.0}
    t_next = c_next = 0.0
    t_setup = time.perf_counter()
    try:
        # Started: the pool's first workers are collating. The caller sends what ``run`` got
        # (or closes the generator: the finally below stops the thread and the pool).
        progress, on_started = yield
        # A job started ahead waited here for its turn: its clocks (first batch, seconds) start now.
        t0 = time.perf_counter()
        dog.start()
        for idx, wins, sfrom, cpu_batch, flops, made in feed:
            dog.beat()
            t_got, c_got = time.perf_counter(), time.thread_time()
            if t_first is None:
                t_first = t_got
            else:
                loop["wait"] += t_got - t_next
            fwd_flops += flops
            started = None
            if made is not None:  # what the side stream made for this batch, before its forward
                _use_on_current_stream(made, cpu_batch.meta, device)
            if pinned:
                started = torch.cuda.Event(enable_timing=True)
                started.record()
            with autocast:
                units = encoder(cpu_batch.to(device))
            host = _to_host(units)
            t_launched, c_launched = time.perf_counter(), time.thread_time()
            loop["launch"] += t_launched - t_got
            cpu["launch"] += c_launched - c_got
            if on_started is not None:  # once: the first forward is on its way (a hook of the caller's)
                on_started, hook = None, on_started
                hook()
                t_launched, c_launched = time.perf_counter(), time.thread_time()  # the hook's time is its own
            if pending is not None:
                finish(*pending)
            pending = (idx, wins, sfrom, *host, started)
            t_next, c_next = time.perf_counter(), time.thread_time()
            loop["finish"] += t_next - t_launched
            cpu["finish"] += c_next - c_launched
        if pending is not None:
            t_launched, c_launched = time.perf_counter(), time.thread_time()
            finish(*pending)
            loop["finish"] += time.perf_counter() - t_launched
            cpu["finish"] += time.thread_time() - c_launched
    finally:
        dog.stop()
        feed.close()
    t_loop = time.perf_counter()
    per_item_nll: list[list[np.ndarray]] = [[] for _ in items]
    per_item_units = [0] * len(items)
    # per item, per distinct estimate (``estimate_key``): (occurrences in the item, variance)
    per_item_var: list[dict[bytes, tuple[int, float]]] = [{} for _ in items]
    keys: dict[int, bytes] = {}  # distinct window -> its estimate_key, made once
    per_item_segs: list[list[int] | None] = [None] * len(items)
    for (i, w, sf), d in zip(flat, fw.distinct_of):  # windows back in document order
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
    if stats is not None:
        t_end = time.perf_counter()
        seconds = t_end - t0
        # every occurrence of a computed window is delivered; all but the first are duplicates
        done = [(flat[fi], k > 0) for d, a in enumerate(per_window) if a is not None
                for k, fi in enumerate(occurrences[d])]
        _add_stats(stats, fwd_flops, seconds, done)
        # where the wall outside the forwards' loop goes: windows flattened and sorted before it,
        # the first collated batch awaited, the per-document scores assembled after it
        for k, v in (("setup_seconds", t_setup - t_call), ("first_batch_seconds", (t_first or t_loop) - t0),
                     ("assemble_seconds", t_end - t_loop),
                     ("loop_wait_seconds", loop["wait"]), ("loop_launch_seconds", loop["launch"]),
                     ("loop_sync_seconds", sync_seconds), ("loop_finish_seconds", loop["finish"] - sync_seconds),
                     ("loop_launch_cpu_seconds", cpu["launch"]), ("loop_sync_cpu_seconds", sync_cpu),
                     ("loop_finish_cpu_seconds", cpu["finish"] - sync_cpu),
                     ("prefetch_cpu_seconds", feed.cpu_seconds)):
            stats[k] = stats.get(k, 0.0) + v
        if pinned:
            stats["device_seconds"] = stats.get("device_seconds", 0.0) + device_seconds
        if groups is not None:
            for g in sorted({groups[f[0]] for f, _ in done}):
                share = group_flops.get(g, 0.0) / fwd_flops if fwd_flops else 0.0
                _add_stats(stats.setdefault("groups", {}).setdefault(g, {}), group_flops.get(g, 0.0),
                           seconds * share, [x for x in done if groups[x[0][0]] == g])
    return out


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
