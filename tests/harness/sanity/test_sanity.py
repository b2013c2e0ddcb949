"""The sanity probes, for every registered encoder — and proof that they catch a leak."""

from __future__ import annotations

import random

import pytest
import torch

from encoders.backbone import BackboneConfig
from encoders.base import TensorBatch, UnitNLL, byte_unit_nll
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.sanity.probes import (
    MarkovSource,
    causality_text,
    fit_and_train,
    probe_causality,
    probe_causality_trained,
    probe_markov,
    probe_random_bytes,
    trainable_encoders,
    window_context_lengths,
)

CPU = torch.device("cpu")
ENCODERS = trainable_encoders()  # an encoder trained elsewhere is probed in a run (tests/encoders/test_hf_encoder.py)


class PeekingBytes(ByteEncoder):
    """A deliberately leaky model: position t sees byte t itself (its own target)."""

    def logits(self, inputs: torch.Tensor) -> torch.Tensor:
        shifted = torch.roll(inputs, -1, dims=1)  # inputs[t+1] == byte t
        return super().logits(shifted)

    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        return byte_unit_nll(self.logits(batch["inputs"]), batch["targets"])


def test_causality_probe_catches_a_model_that_sees_its_target() -> None:
    torch.manual_seed(0)
    enc = PeekingBytes(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2))
    r = probe_causality(enc, causality_text(), random.Random(0))
    assert not r.ok and r.value > 1e-3


def test_markov_probe_catches_a_model_that_beats_its_source(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.sanity.probes as sanity

    monkeypatch.setattr(sanity, "tiny_encoder", lambda name, seed=0: PeekingBytes(ByteConfig(), BackboneConfig(layers=1, dim=32, heads=2)))
    r = probe_markov("bytes", CPU, train_bytes=60_000)
    assert not r.ok and "BEATS" in r.detail


def test_markov_oracle_by_hand() -> None:
    src = MarkovSource(b"ab", torch.tensor([[[0.5, 0.5], [0.9, 0.1]], [[0.2, 0.8], [0.5, 0.5]]]).numpy())
    nll = src.oracle_nll(b"abab", window_context_lengths(b"abab", 64))
    # position 2 ('a' after 'ab'): P[a,b,a] = 0.9; position 3 ('b' after 'ba'): P[b,a,b] = 0.8
    assert nll[2] == pytest.approx(-torch.log(torch.tensor(0.9)).item())
    assert nll[3] == pytest.approx(-torch.log(torch.tensor(0.8)).item())


@pytest.mark.parametrize("name", ENCODERS)
def test_causality(name: str) -> None:
    r = probe_causality_trained(name, CPU)
    assert r.ok, r.detail


@pytest.mark.slow
@pytest.mark.parametrize("name", ENCODERS)
def test_random_bytes_score_at_least_7_98(name: str) -> None:
    r = probe_random_bytes(name, CPU)
    assert r.ok, r.detail


@pytest.mark.slow
@pytest.mark.parametrize("name", ENCODERS)
def test_markov_source_within_10_percent_and_never_below(name: str) -> None:
    r = probe_markov(name, CPU)
    assert r.ok, r.detail


def test_fit_and_train_uses_the_harness_loop() -> None:
    torch.manual_seed(0)
    enc = ByteEncoder(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2))
    stats = fit_and_train(enc, [b"abc " * 100], 2_000, CPU)
    assert stats["bytes"] == 2_000 and stats["steps"] > 0
