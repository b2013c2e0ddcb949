"""harness.config.scaling.flops_per_byte counts as the training loop counts: the probe cut into steps
and micro-batches, each padded on its own. The plan turns a FLOP budget into bytes with it, so a
BPE point must read the bytes it planned (the plan padded the 8-step probe as one batch:
BPE ran ~10 % past its planned bytes and past the end of its LR schedule)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from encoders.backbone import BackboneConfig, causal_attention_cost
from encoders.base import FitContext
from encoders.bpe import BpeConfig, BpeEncoder
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.config.scaling import HEADLINE_ATTENTION, flops_per_byte
from harness.config.suite import BudgetConfig
from harness.train.loop import train_encoder

DOCS = [p.read_bytes() for p in sorted(Path(json.__file__).parent.glob("*.py"))]
# 8 windows a step, micro-batches of 4: the loop pads each micro-batch to its own longest window
BUDGET = BudgetConfig(train_bytes=8 * 8 * 128, context_bytes=128, batch_bytes=8 * 128, micro_batch_bytes=4 * 128,
                      lr=1e-3, warmup_bytes=128)


def windows() -> list[bytes]:
    # windows of varied text so token counts differ between micro-batches
    text = b"".join(DOCS)
    return [text[i * 700: i * 700 + 128] for i in range(64)]


def bpe() -> BpeEncoder:
    torch.manual_seed(0)
    enc = BpeEncoder(BpeConfig(vocab_size=300), BackboneConfig(layers=1, dim=16, heads=2))
    enc.fit(FitContext(train_docs=lambda: iter(DOCS), train_bytes=40_000, context_bytes=128, seed=0,
                       device=torch.device("cpu"), train=lambda e, n: {}, log=lambda m: None))
    return enc


@pytest.mark.parametrize("make", [bpe, lambda: ByteEncoder(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2))],
                         ids=["bpe", "bytes"])
def test_planned_flops_per_byte_is_what_the_loop_spends(make: object) -> None:
    enc = make()  # type: ignore[operator]
    probe = windows()
    with causal_attention_cost(HEADLINE_ATTENTION):
        half, full = flops_per_byte(enc, probe, BUDGET.windows_per_step, BUDGET.windows_per_micro_batch)
        stats = train_encoder(enc, iter(probe), sum(map(len, probe)), BUDGET, torch.device("cpu"))
    assert stats["steps"] == 8
    # the loop's own count, FLOPs over scored bytes, to float rounding
    assert half == pytest.approx(stats["flops"] / stats["bytes"], rel=1e-12)
    assert full > half  # attention at full cost is more


def test_bpe_flops_per_byte_do_not_depend_on_how_windows_are_batched() -> None:
    """BPE's FLOPs count each window's own tokens, not the padding up to the batch's longest
    window: one big probe batch and the loop's micro-batches give the same FLOPs per byte."""
    enc, probe = bpe(), windows()
    with causal_attention_cost(HEADLINE_ATTENTION):
        loop = flops_per_byte(enc, probe, BUDGET.windows_per_step, BUDGET.windows_per_micro_batch)[0]
        one_batch = flops_per_byte(enc, probe, len(probe), len(probe))[0]
    assert one_batch == pytest.approx(loop, rel=1e-12)


def test_planned_bytes_match_the_bytes_a_bpe_point_reads() -> None:
    """A FLOP budget → planned bytes (budget / FLOPs per byte) → the loop under that budget reads
    those bytes to within one step."""
    enc, probe = bpe(), windows()
    with causal_attention_cost(HEADLINE_ATTENTION):
        half, _ = flops_per_byte(enc, probe[:32], BUDGET.windows_per_step, BUDGET.windows_per_micro_batch)
        budget = half * 6 * BUDGET.batch_bytes  # about six steps' worth
        planned = budget / half
        stats = train_encoder(enc, iter(probe), int(planned), BUDGET, torch.device("cpu"), max_flops=budget)
    assert abs(stats["bytes"] - planned) <= BUDGET.batch_bytes
