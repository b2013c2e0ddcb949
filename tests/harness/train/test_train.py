"""The one training loop: schedule, determinism, and resume after a kill."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from encoders.backbone import BackboneConfig
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.config.suite import BudgetConfig
from harness.data.load import training_windows
from harness.train.loop import Checkpointer, lr_at, train_encoder
from sources.base import Document

BUDGET = BudgetConfig(train_bytes=6_000, context_bytes=64, batch_bytes=512, lr=1e-2, warmup_bytes=1_000)
DOCS = [Document(f"d{i}", (f"sample text number {i}, with words. " * 8).encode()) for i in range(20)]


def model() -> ByteEncoder:
    torch.manual_seed(0)
    return ByteEncoder(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2))


def test_lr_schedule_by_hand() -> None:
    b = BudgetConfig(lr=1.0, warmup_bytes=100, min_lr_ratio=0.1, schedule="cosine")
    assert lr_at(b, 0, 1100) == pytest.approx(0.01)
    assert lr_at(b, 99, 1100) == pytest.approx(1.0)
    assert lr_at(b, 600, 1100) == pytest.approx(0.55)  # halfway through the cosine
    assert lr_at(b, 1100, 1100) == pytest.approx(0.1)
    lin = BudgetConfig(lr=1.0, warmup_bytes=0, min_lr_ratio=0.0, schedule="linear")
    assert lr_at(lin, 250, 1000) == pytest.approx(0.75)


def test_training_is_deterministic_and_counts_bytes_and_flops() -> None:
    dev = torch.device("cpu")
    a, b = model(), model()
    sa = train_encoder(a, training_windows(DOCS, 6_000, 64, 0), 6_000, BUDGET, dev)
    train_encoder(b, training_windows(DOCS, 6_000, 64, 0), 6_000, BUDGET, dev)
    assert sa["bytes"] == 6_000
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)
    # FLOPs: 3 x the encoder's analytic forward count, summed over steps.
    from harness.train.loop import batched

    expected = sum(3 * a.flops(a.collate(ch, [0] * len(ch))) for ch in batched(training_windows(DOCS, 6_000, 64, 0), 8))
    assert sa["flops"] == pytest.approx(expected)


class Killed(Exception):
    pass


def test_a_killed_training_run_resumes_to_the_same_weights(tmp_path: Path) -> None:
    dev = torch.device("cpu")
    ref = model()
    train_encoder(ref, training_windows(DOCS, 6_000, 64, 0), 6_000, BUDGET, dev)

    ck = Checkpointer(tmp_path / "m.partial.pt", every_seconds=0.0)

    def kill_at_half(seen: int, n: int, loss: float) -> None:
        if seen > n // 2:
            raise Killed

    first = model()
    with pytest.raises(Killed):
        train_encoder(first, training_windows(DOCS, 6_000, 64, 0), 6_000, BUDGET, dev, checkpoint=ck,
                      progress=kill_at_half)
    assert ck.path.exists()
    resumed = model()  # a fresh process would build a fresh model
    stats = train_encoder(resumed, training_windows(DOCS, 6_000, 64, 0), 6_000, BUDGET, dev, checkpoint=ck)
    assert stats["bytes"] == 6_000
    assert not ck.path.exists()  # the partial checkpoint is removed when training finishes
    for pa, pb in zip(ref.parameters(), resumed.parameters()):
        assert torch.allclose(pa, pb, atol=1e-6)


def test_the_loop_hands_clipping_one_parameter_list_made_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gradient clipping gets the same list object every step (made once per ``train_encoder``
    call), holding every parameter in ``parameters()`` order, so it clips as before."""
    seen: list[object] = []
    clip = torch.nn.utils.clip_grad_norm_

    def spy(parameters: object, max_norm: float, *a: object, **kw: object) -> torch.Tensor:
        seen.append(parameters)
        return clip(parameters, max_norm, *a, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", spy)
    m = model()
    stats = train_encoder(m, training_windows(DOCS, 6_000, 64, 0), 6_000, BUDGET, torch.device("cpu"))
    assert len(seen) == stats["steps"] > 10  # ~6000 bytes in steps of 8 windows of <= 64 bytes
    assert all(s is seen[0] for s in seen)
    assert isinstance(seen[0], list) and [id(p) for p in seen[0]] == [id(p) for p in m.parameters()]


def test_train_step_with_a_parameter_list_equals_the_default() -> None:
    from harness.train.loop import autocast_for, make_optimizer, train_step

    dev = torch.device("cpu")
    b = BudgetConfig(context_bytes=64, batch_bytes=512, lr=1e-2, grad_clip=0.05)  # clipping bites
    batch = model().collate(list(training_windows(DOCS, 512, 64, 0)), [0] * 8)
    out = []
    for listed in (False, True):
        m = model()
        opt = make_optimizer(m, b, dev)
        for _ in range(3):
            train_step(m, batch, opt, b.lr, b, autocast_for(b, dev), dev,
                       clip_params=list(m.parameters()) if listed else None)
        out.append([p.detach().clone() for p in m.parameters()])
    assert all(torch.equal(x, y) for x, y in zip(*out))


def test_curve_points_are_byte_weighted_means_of_the_step_losses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Step k returns a loss of k nats per byte; ~26-32-byte steps against a curve point every
    60 bytes (1 % of 6000): the first step is a point of its own, then each point is the
    byte-weighted mean of the steps since the one before, in bits."""
    import harness.train.loop as tr

    steps: list[int] = []  # scored bytes of each step

    def fake_step(encoder, batches, *a, **k):  # type: ignore[no-untyped-def]
        steps.append(sum(b.scored_bytes for b in batches))
        return torch.tensor(float(len(steps) - 1))

    monkeypatch.setattr(tr, "train_step", fake_step)
    b = BudgetConfig(train_bytes=6_000, context_bytes=32, batch_bytes=32, lr=1e-2, warmup_bytes=0)
    st = train_encoder(model(), training_windows(DOCS, 6_000, 32, 0), 6_000, b, torch.device("cpu"))
    ln2 = 0.6931471805599453
    expected, seen, last, num, den = [], 0, -1, 0.0, 0
    for k, nb in enumerate(steps):
        seen += nb
        num, den = num + k * nb, den + nb
        if last < 0 or seen - last >= 60:
            expected.append((seen, num / den / ln2))
            last, num, den = seen, 0.0, 0
    assert st["steps"] == len(steps) > 100 and len(expected) > 50
    assert st["loss_curve"] == [(s, pytest.approx(v)) for s, v in expected]
    assert st["final_loss_bpb"] == pytest.approx(sum(range(len(steps) - 10, len(steps))) / 10 / ln2)


class FakeEvent:
    """A CUDA event stand-in: ``landed`` says whether the device has passed it."""

    def __init__(self) -> None:
        self.landed = False
        self.waited = False

    def query(self) -> bool:
        return self.landed

    def synchronize(self) -> None:
        self.waited = True
        self.landed = True


def test_loss_readback_yields_in_order_and_waits_only_when_asked() -> None:
    from harness.train.loop import LossReadback

    rb = LossReadback(torch.device("cpu"))
    events = [FakeEvent() for _ in range(3)]
    for i, ev in enumerate(events):  # as on CUDA: each loss behind its own event
        rb.queue.append(("step", torch.tensor(float(i)), 10 * (i + 1), i, ev))
        if i == 0:
            rb.point(10)
    assert list(rb.ready(False)) == []  # nothing landed: nothing read, nothing waited for
    events[0].landed = True
    assert list(rb.ready(False)) == [("step", 0.0, 10, 0), ("point", 10)]
    events[2].landed = True  # a later step landed first: still read in step order
    assert list(rb.ready(False)) == []
    assert list(rb.ready(True)) == [("step", 1.0, 20, 1), ("step", 2.0, 30, 2)]
    assert events[1].waited and not events[2].waited
    assert rb.queue == [] and rb.head == 0
