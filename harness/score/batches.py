"""A packed scoring job's batches (``harness.score.items``' ``_score_job`` drives them): its
distinct windows, longest first, collated in worker processes, FLOP-counted and pinned in the
prefetch thread, forwarded with one batch in flight, and the per-byte NLL (nats) each leaves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from core.segments import window_segments
from encoders.base import Encoder, UnitNLL
from harness.config.permutation import WindowPermuter, unpermute_segments
from harness.infra.accel import Prefetcher, collate_processes, ordered_pool_map, pin
from harness.infra.watchdog import Watchdog

# One prepared batch: (distinct indices, window bytes, score_from, pinned batch, FLOPs, the side
# stream's event or None).
Prepared = tuple[list[int], list[bytes], list[int], Any, float, Any]


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


@dataclass
class LoopTimes:
    """Where the forward loop's thread spent its time, in seconds (run.json's ``loop_*_seconds``):
    wall clocks (``time.perf_counter``) and the thread's CPU time (``time.thread_time``)."""

    first: float | None = None  # perf_counter when the first collated batch came; None: none came
    wait: float = 0.0
    launch: float = 0.0
    finish: float = 0.0
    launch_cpu: float = 0.0
    finish_cpu: float = 0.0


class PackedBatches:
    """A packed job's distinct windows in batches and what their forwards leave, per distinct
    window: per-byte NLL (``per_window``: read-only (n_scored,) float64 nats, None if never
    forwarded), unit counts, MC variances (nats², None: exact) and segments."""

    def __init__(self, encoder: Encoder, flat: list[tuple[int, bytes, int]], distinct: list[tuple[bytes, int]],
                 occurrences: list[list[int]], device: torch.device, bf16: bool, counting: bool,
                 permuter: WindowPermuter | None, groups: Sequence[str] | None) -> None:
        """The job's buffers, autocast and (CUDA, ``counting``: stats wanted) the prefetch thread's
        side stream; ``flat``/``distinct``/``occurrences`` as ``FlatWindows``'."""
        self.encoder, self.flat, self.distinct, self.occurrences = encoder, flat, distinct, occurrences
        self.device, self.counting, self.permuter, self.groups = device, counting, permuter, groups
        # Longest windows first (stable): batches of similar lengths pad less (BPE, BLT). Indices
        # from here on are distinct windows; results are spread onto all occurrences at the end.
        self.order = sorted(range(len(distinct)), key=lambda d: -len(distinct[d][0]))
        self.per_window: list[np.ndarray | None] = [None] * len(distinct)
        self.per_window_units = [0] * len(distinct)
        self.per_window_var: list[float | None] = [None] * len(distinct)  # None: an exact score
        self.per_window_segs: list[list[int] | None] = [None] * len(distinct)
        self.autocast = (
            torch.autocast("cuda", dtype=torch.bfloat16) if bf16 and device.type == "cuda"
            else torch.autocast("cpu", enabled=False)
        )
        self.fwd_flops = 0.0

        if permuter is not None and any(sf for _, _, sf in flat):
            raise ValueError("a permuted window must be scored whole (score_from = 0)")
        self.fed_of: dict[int, Any] = {}  # distinct index -> PermutedWindow (filled by the collating thread)
        self.group_flops: dict[str, float] = {}
        self.pinned = device.type == "cuda"

        # The prefetch thread's device work (BLT's entropy model, patching a batch for its FLOP
        # count and its forward) runs on a stream of its own: on the loop's stream it queued behind
        # the forward in flight and then waited for it (patching reads the patch count on the host),
        # so the next batch came only after that forward had ended — the loop waited 4.9 s for
        # batches in BLT's scoring on an H100 (BENCHMARKS.md; on the side stream the
        # wait went, but BLT's scoring was no faster on one host: a tie, the loop's launches pace it).
        # The side stream first waits for what the caller queued before this call (the weights);
        # each batch then carries an event that the loop's stream waits for before its forward.
        self.side = torch.cuda.Stream(device=device) if self.pinned and counting else None
        if self.side is not None:
            self.side.wait_stream(torch.cuda.current_stream(device))

        self.device_seconds = 0.0
        self.sync_seconds = 0.0  # the loop's thread waiting for a batch's results (``ready.synchronize``)
        self.sync_cpu = 0.0  # of which on a CPU (the driver may spin while it waits)
        self.progress: Callable[[int], Any] | None = None
        self.times = LoopTimes()

    def start(self, batch_windows: int, needed: Sequence[bool] | None,
              collate_workers: int | None) -> tuple[Watchdog, Prefetcher]:
        """Start collating batches of ``batch_windows`` distinct windows (those with a ``needed``
        item, per item): the watchdog (not started yet) and the prefetch feed of ``Prepared``."""
        flat, occurrences, order = self.flat, self.occurrences, self.order
        # a distinct window is needed when any item it occurs in is; batches never depend on it
        need = None if needed is None else [any(needed[flat[fi][0]] for fi in occ) for occ in occurrences]
        chunks = (c for c in (order[b0 : b0 + batch_windows] for b0 in range(0, len(order), batch_windows))
                  if need is None or any(need[d] for d in c))
        # On CUDA collation runs in worker processes, as training's does: in the prefetch thread it
        # held the GIL the loop below needs to launch each forward (an H200 spent 22-72 % of the
        # scoring wall outside the forwards, BENCHMARKS.md). On CPU: in the thread.
        # a forward or a read-back that never returns ends the run with one line (harness.infra.watchdog;
        # made before the pool and thread below, so a bad limit leaves none of them behind)
        dog = Watchdog(f"scoring ({type(self.encoder).__name__})")
        collated = ordered_pool_map(self.collate, chunks,
                                    collate_processes(self.device) if collate_workers is None else collate_workers,
                                    stage="scoring-batch collation")
        feed = Prefetcher(collated, self.prepare, depth=2, name="scoring batches")
        return dog, feed

    def collate(self, idx: list[int]) -> tuple[list[int], Any, Any]:
        """Collate (tokenize, patch, permute) one batch of distinct windows: pure CPU work, in
        forked worker processes on CUDA (``ordered_pool_map``; results come back in order)."""
        distinct = self.distinct
        wins = [distinct[d][0] for d in idx]
        if self.permuter is None:
            return idx, self.encoder.collate(wins, [distinct[d][1] for d in idx]), None
        batch, fed = self.permuter.collate(self.encoder, wins)
        return idx, batch, fed

    def prepare(self, collated: tuple[list[int], Any, Any]) -> Prepared:
        """Count a collated batch's FLOPs and pin it, in the prefetch thread: the loop
        (``forward_all``) then only launches the forward and reads results back."""
        idx, batch, fed = collated
        distinct, encoder, side = self.distinct, self.encoder, self.side
        wins = [distinct[d][0] for d in idx]
        sfrom = [distinct[d][1] for d in idx]
        if fed is not None:
            self.fed_of.update(zip(idx, fed))
        ready = None
        with torch.inference_mode():  # as in the loop (BLT patches here: its entropy model runs)
            if side is not None:
                with torch.cuda.stream(side):
                    flops = encoder.flops(batch)
                ready = torch.cuda.Event()
                ready.record(side)
            else:
                flops = encoder.flops(batch) if self.counting else 0.0
        if self.counting and self.groups is not None:
            groups, flat, occurrences, group_flops = self.groups, self.flat, self.occurrences, self.group_flops
            n_fed = sum(len(w) for w in wins)
            for d, w in zip(idx, wins):
                # one forward served every occurrence: its FLOPs split evenly among them
                share = flops * len(w) / max(1, n_fed) / len(occurrences[d])
                for fi in occurrences[d]:
                    g = groups[flat[fi][0]]
                    group_flops[g] = group_flops.get(g, 0.0) + share
        return idx, wins, sfrom, pin(batch) if self.pinned else batch, flops, ready

    def forward_all(self, feed: Iterator[Prepared], dog: Watchdog, progress: Callable[[int], Any] | None,
                    on_started: Callable[[], Any] | None) -> None:
        """Forward every batch of ``feed`` with one in flight, into the per-window buffers;
        ``progress(n)`` after each batch is finished, ``on_started()`` once the first is launched."""
        self.progress = progress
        times, encoder, device, autocast, pinned = self.times, self.encoder, self.device, self.autocast, self.pinned
        # One batch in flight: the forward of batch k+1 is launched before the host spreads batch k's
        # NLL onto bytes, so on a GPU the host work overlaps the device's (same numbers, same order).
        # On CUDA each forward's span on the device's timeline (from an event queued before its
        # first kernel to the one after its copies) adds up to ``device_seconds``: the wall time the
        # GPU spends on forwards, idle gaps inside a forward included, gaps between forwards not.
        pending: tuple[list[int], list[bytes], list[int], UnitNLL, Any, Any] | None = None
        # Where the loop's thread spends its time, per batch (``LoopTimes``): waiting
        # for the next collated batch (after the first), launching its forward (the copy to the
        # device, the encoder's ops, the copies back), and finishing the batch before it — waiting
        # for its results (``sync_seconds``) and spreading them onto bytes. On a GPU whose forwards
        # leave it idle, the larger of the host parts is what paces the loop.
        # Beside each wall clock, the thread's own CPU time (``time.thread_time``): a part whose wall
        # is well above its CPU time waited — for the GIL, held by the prefetch thread or another,
        # or in the driver — rather than computed.
        t_next = c_next = 0.0
        for idx, wins, sfrom, cpu_batch, flops, made in feed:
            dog.beat()
            t_got, c_got = time.perf_counter(), time.thread_time()
            if times.first is None:
                times.first = t_got
            else:
                times.wait += t_got - t_next
            self.fwd_flops += flops
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
            times.launch += t_launched - t_got
            times.launch_cpu += c_launched - c_got
            if on_started is not None:  # once: the first forward is on its way (a hook of the caller's)
                on_started, hook = None, on_started
                hook()
                t_launched, c_launched = time.perf_counter(), time.thread_time()  # the hook's time is its own
            if pending is not None:
                self.finish(*pending)
            pending = (idx, wins, sfrom, *host, started)
            t_next, c_next = time.perf_counter(), time.thread_time()
            times.finish += t_next - t_launched
            times.finish_cpu += c_next - c_launched
        if pending is not None:
            t_launched, c_launched = time.perf_counter(), time.thread_time()
            self.finish(*pending)
            times.finish += time.perf_counter() - t_launched
            times.finish_cpu += time.thread_time() - c_launched

    def finish(self, idx: list[int], wins: list[bytes], sfrom: list[int], units: UnitNLL, ready: Any,
               started: Any) -> None:
        """Per-byte NLL (nats, (len(w) - score_from,) float64 per window), unit counts and segments
        of a batch whose results are on the host (once ``ready``), into the per-window buffers."""
        if ready is not None:
            t_sync, c_sync = time.perf_counter(), time.thread_time()
            ready.synchronize()  # the asynchronous copies of ``_to_host`` have landed
            self.sync_seconds += time.perf_counter() - t_sync
            self.sync_cpu += time.thread_time() - c_sync
            self.device_seconds += started.elapsed_time(ready) / 1e3
        nll = units.byte_nll_arrays([len(w) for w in wins], sfrom)
        if self.permuter is not None:  # fed order -> the window's byte order
            fed = [self.fed_of.pop(d) for d in idx]
            nll = [_unpermute(v, pw.source) for v, pw in zip(nll, fed)]
            if units.segments is not None:
                units.segments = [unpermute_segments(sg, pw) for sg, pw in zip(units.segments, fed)]
        # numpy: torch's CPU bincount scanned the (U,) windows for min and max first, ~8 ms a
        # 256-window batch on the scoring loop's thread (an H200's profile, BENCHMARKS.md)
        counts = np.bincount(units.window.cpu().numpy(), minlength=len(idx)).tolist()
        wvar = units.window_var.tolist() if units.window_var is not None else None
        # segments must tile the scored span like the units do (core.segments), checked per batch
        segs = (None if units.segments is None else
                window_segments(units.segments, [len(w) - f for w, f in zip(wins, sfrom)], type(self.encoder).__name__))
        per_window, per_window_units = self.per_window, self.per_window_units
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
                # occurrences share one error, which the assembly counts as such
                self.per_window_var[d] = wvar[j]
            if segs is not None:
                self.per_window_segs[d] = segs[j]
        if self.progress is not None:
            self.progress(sum(len(self.occurrences[d]) for d in idx))
