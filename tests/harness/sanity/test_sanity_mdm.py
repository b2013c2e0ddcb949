"""MDM sanity probes: the leak probe passes honest MDM encoders and catches both a model that sees
every masked value and one that masks only the unit it predicts; the known-entropy probe passes
an honest model and catches a leaky one."""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch

from encoders.backbone import BackboneConfig
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.infra import plugins
from harness.sanity.mdm import (
    mdm_leak_deltas,
    probe_mdm_entropy,
    probe_mdm_leak,
    probe_mdm_leak_trained,
    supports_mdm,
    tiny_mdm_encoder,
)
from harness.sanity.probes import fit_and_train
from harness.score.causality import causality_text

CPU = torch.device("cpu")
SMALL = BackboneConfig(layers=1, dim=32, heads=2)
MDM_ENCODERS = [n for n in plugins.known_names("encoder") if supports_mdm(n)]


class SeesEverything(ByteEncoder):
    """Leaky: the network gets the true value of every unit, masked or not."""

    def mdm_logits(self, ids: torch.Tensor, mask: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        return super().mdm_logits(ids, torch.zeros_like(mask), valid)

    def mdm_hidden(self, ids: torch.Tensor, mask: torch.Tensor, valid: torch.Tensor, **kw: Any) -> torch.Tensor:
        return super().mdm_hidden(ids, torch.zeros_like(mask), valid, **kw)


class OneAtATime(ByteEncoder):
    """Leaky in the subtle way: each masked unit is predicted in its own forward pass with only
    itself masked, so it never sees its own value but does see the other masked units'."""

    def mdm_logits(self, ids: torch.Tensor, mask: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        out = super().mdm_logits(ids, mask, valid)
        for r, n in mask.nonzero().tolist():
            single = torch.zeros_like(mask)
            single[r, n] = True
            out[r, n] = super().mdm_logits(ids, single, valid)[r, n]
        return out


def _model(cls: type[ByteEncoder]) -> ByteEncoder:
    torch.manual_seed(0)
    return cls(ByteConfig(objective="mdm"), SMALL).eval()


def test_leak_probe_passes_an_honest_model() -> None:
    r = probe_mdm_leak(_model(ByteEncoder), causality_text(), random.Random(0))
    assert r.ok and r.value <= 1e-5, r.detail


def test_leak_probe_catches_a_model_that_sees_masked_values() -> None:
    r = probe_mdm_leak(_model(SeesEverything), causality_text(), random.Random(0))
    assert not r.ok and r.value > 1e-3
    assert "changing one masked unit" in r.detail


def test_leak_probe_catches_one_at_a_time_masking() -> None:
    enc = _model(OneAtATime)
    r = probe_mdm_leak(enc, causality_text()[:60], random.Random(0))
    assert not r.ok
    # (a) alone passes: its own value is hidden; only (b), all masked values at once, catches it.
    one, all_, n = mdm_leak_deltas(enc, causality_text()[:60], random.Random(0))
    assert one <= 1e-5 and all_ > 1e-3 and n >= 2


@pytest.mark.parametrize("name", MDM_ENCODERS)
def test_leak_probe_on_every_mdm_encoder(name: str) -> None:
    r = probe_mdm_leak_trained(name, CPU)
    assert r.ok, r.detail


def test_bytes_and_bpe_support_mdm_and_others_do_not() -> None:
    assert {"bytes", "bpe"} <= set(MDM_ENCODERS)
    assert "fuzzytok" not in MDM_ENCODERS


def test_entropy_probe_passes_an_honest_model() -> None:
    r = probe_mdm_entropy("bytes", CPU, train_bytes=30_000, mc_samples=4)
    assert r.ok, r.detail


def test_entropy_probe_catches_a_model_that_sees_masked_values(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.sanity.mdm as sm

    monkeypatch.setattr(sm, "tiny_mdm_encoder", lambda name, seed=0: _model(SeesEverything).train())
    r = probe_mdm_entropy("bytes", CPU, train_bytes=60_000, mc_samples=4)
    assert not r.ok and "BEATS" in r.detail


def test_trained_mdm_learns_something() -> None:
    # A briefly trained MDM scores the training text far below the 8 bits/byte of a uniform guess.
    text = causality_text()
    enc = tiny_mdm_encoder("bytes")
    fit_and_train(enc, [text[i:] + text[:i] for i in range(0, len(text), 7)], 40_000, CPU)
    from harness.sanity.probes import score_bpb

    enc.mc_samples = 4
    bpb, _ = score_bpb(enc, [text], CPU, 64)
    assert bpb < 6.0


def test_tokbench_sanity_runs_the_leak_probe_for_mdm_encoders(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.sanity.command import run_sanity

    assert run_sanity(["bytes"], "cpu", quick=True)
    out = capsys.readouterr().out
    assert "bytes      causality" in out and "bytes[mdm] mdm_leak" in out
