"""Step losses from the device to the host: ``LossReadback`` reads each step's loss back without
waiting for the device, ``LossCurve`` turns them into the loss curve and the last steps' mean
(bits per byte) that ``harness.train.loop.train_encoder`` reports.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch

from core.metrics import LN2


class LossReadback:
    """Step losses from the device to the host without waiting for it, in step order.

    ``step(loss, scored_bytes, index)`` queues a step's loss (a 0-d tensor on ``device``, nats
    per scored byte); on CUDA it starts a non-blocking copy into pinned host memory and records
    an event after it. ``point(seen)`` queues a curve-point marker. ``ready(wait)`` yields the
    queue's head in order — ``("step", nats per byte, scored bytes, index)`` and ``("point",
    seen)`` — as far as the copies have landed (``wait=True``: all of it, waiting for the
    device). On CPU every loss is ready when queued.
    """

    def __init__(self, device: torch.device) -> None:
        self.cuda = device.type == "cuda"
        self.queue: list[tuple[Any, ...]] = []
        self.head = 0

    def step(self, loss: torch.Tensor, scored_bytes: int, index: int) -> None:
        if self.cuda:
            host = torch.empty((), dtype=loss.dtype, pin_memory=True)
            host.copy_(loss, non_blocking=True)
            done = torch.cuda.Event()
            done.record()
            self.queue.append(("step", host, scored_bytes, index, done))
        else:
            self.queue.append(("step", loss, scored_bytes, index, None))

    def point(self, seen: int) -> None:
        self.queue.append(("point", seen))

    def ready(self, wait: bool) -> Iterator[tuple[Any, ...]]:
        while self.head < len(self.queue):
            item = self.queue[self.head]
            if item[0] == "step":
                done = item[4]
                if done is not None and not done.query():
                    if not wait:
                        break
                    done.synchronize()
                item = ("step", float(item[1]), item[2], item[3])
            self.head += 1
            yield item
        if self.head == len(self.queue):  # all taken: start an empty queue
            self.queue.clear()
            self.head = 0


class LossCurve:
    """Step losses read back (``LossReadback``) into the loss curve and the last ten steps, bits/byte.

    Step losses are read on the host only once the device has computed them: on CUDA each step's
    loss is copied into pinned memory behind an event, and a curve point waits in the queue until
    every step before it has landed (``flush(wait=False)`` takes what has; a checkpoint and the end
    wait for all). Reading them at each curve point instead (every 1 % of the bytes: every 2-3 steps
    of the standard suite) made the host wait for the GPU that often, draining its queue; the
    values, points and order are the same either way.
    """

    def __init__(self, readback: LossReadback, curve: list[tuple[int, float]]) -> None:
        self.readback, self.curve = readback, curve  # ``curve``: appended to in place
        self.recent: list[float] = []
        self.window_loss, self.window_bytes = 0.0, 0
        self.last_lv = math.nan

    def flush(self, wait: bool = True) -> None:
        """Take the landed losses (``wait``: all, waiting for the device) into the curve; raises
        FloatingPointError on a loss that is not finite."""
        for item in self.readback.ready(wait):
            if item[0] == "point":  # every step before this curve point has been added
                self.curve.append((item[1], self.window_loss / self.window_bytes))
                self.window_loss, self.window_bytes = 0.0, 0
                continue
            _, v, nb, at = item
            lv = v / LN2
            if not math.isfinite(lv):
                raise FloatingPointError(f"training loss is {lv} at step {at}; lower budget.lr")
            self.recent = (self.recent + [lv])[-10:]
            # Each curve point is the byte-weighted mean loss since the previous point (a single
            # step's loss is too noisy to read, above all for large-vocabulary BPE).
            self.window_loss += lv * nb
            self.window_bytes += nb
            self.last_lv = lv
