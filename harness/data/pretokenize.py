"""Training batches cut from windows tokenized in bulk, so tokenization leaves the per-step path.

    feed = pretokenized_batches(encoder, windows, per_step, micro, skip, processes)
    for micro_batches in feed: ...      # None when the encoder collates per step (byte encoders)

An encoder that ``can_pretokenize`` (BPE) tokenizes blocks of ``steps_per_task`` steps' windows
at once (``tokenize_windows``: flat numpy arrays, in worker processes on CUDA), and each step's
micro-batches are array slices of a block (``collate_tokenized``): tens of µs of numpy a
micro-batch instead of tens of ms of tokenization, and no per-step tensors or Python lists
crossing between processes. Same windows, same order, same micro-batch split, and each batch
equals ``encoder.collate(window slice, [0] * n)`` tensor for tensor
(tests/harness/data/test_pretokenize.py), so training computes the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import closing
from itertools import islice
from typing import Any

from encoders.base import Encoder, TensorBatch
from harness.data.load import batched
from harness.infra.accel import ordered_pool_map


def pretokenized_batches(encoder: Encoder, windows: Iterable[bytes], per_step: int, micro: int, skip: int,
                         processes: int, steps_per_task: int = 8) -> Iterator[list[TensorBatch]] | None:
    """Each training step's micro-batches (windows ``[j, j + micro)`` of the step's
    ``per_step``), skipping the first ``skip`` steps (a resumed run); None when ``encoder``
    cannot pretokenize, so the caller collates per step. ``processes``: worker processes that
    tokenize (``harness.infra.accel.ordered_pool_map``; 0 = in this thread)."""
    if not encoder.can_pretokenize():
        return None

    def tokenize(block: list[list[bytes]]) -> tuple[Any, list[int]]:
        return encoder.tokenize_windows([w for step in block for w in step]), [len(s) for s in block]

    def feed() -> Iterator[list[TensorBatch]]:
        steps = batched(windows, per_step)
        for _ in islice(steps, skip):  # consumed by the interrupted run
            pass
        # closed with this generator (early stop), in the thread that runs it: the workers end there
        with closing(ordered_pool_map(tokenize, batched(steps, steps_per_task), processes)) as blocks:
            for tokens, sizes in blocks:
                lo = 0
                for n in sizes:
                    yield [encoder.collate_tokenized(tokens, j, min(j + micro, lo + n)) for j in range(lo, lo + n, micro)]
                    lo += n

    return feed()
