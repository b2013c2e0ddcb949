"""Damaged caches are never trusted and never crash: every model, partial checkpoint and cell is
sealed with an HMAC (harness.infra.cache); a file that fails is named on one warning line, removed and
recomputed, and the rerun gives the same results as the undamaged run. Stale .tmp files left by a
kill between write and rename are removed on the next run."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.infra.cache import CacheDamaged, read_sealed_json, read_sealed_torch, write_sealed_json


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])


def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _braces(p: Path) -> None:
    p.write_text("{}")


def _edit_bpb(p: Path) -> None:
    obj = json.loads(p.read_text())
    obj["payload"]["row"]["bpb"] = 0.001  # a plausible-looking forged number
    p.write_text(json.dumps(obj))


def _first(out: Path, pattern: str) -> Path:
    return sorted(out.glob(pattern))[0]


DAMAGE: dict[str, tuple[str, Callable[[Path], None]]] = {
    "truncated model .pt": ("models/*[0-9a-f].pt", _truncate),
    "empty model .pt": ("models/*[0-9a-f].pt", _empty),
    "truncated model .json": ("models/*.json", _truncate),
    "empty model .json": ("models/*.json", _empty),
    "truncated cell": ("cells/*.json", _truncate),
    "empty cell": ("cells/*.json", _empty),
    "{} cell": ("cells/*.json", _braces),
    "cell with an edited bpb": ("cells/*.json", _edit_bpb),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_cache_file_is_named_and_recomputed(
    case: str, run_copy: tuple[Path, Path], finished: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    suite, out = run_copy
    pattern, damage = DAMAGE[case]
    victim = _first(out, pattern)
    damage(victim)
    (out / "results.csv").unlink()
    capsys.readouterr()
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report"]) == 0
    err = capsys.readouterr().err
    warnings = [ln for ln in err.splitlines() if "[cache] warning" in ln]
    assert warnings and str(victim) in warnings[0] and "recomputing" in warnings[0]
    assert "Traceback" not in err
    assert (out / "results.csv").read_text() == (finished[1] / "results.csv").read_text()
    read_sealed_json(victim if victim.suffix == ".json" else victim.with_suffix(".json"))  # valid again


def test_sealed_json_roundtrips_awkward_values(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    payload = {"x": 0.1 + 0.2, "nan": float("nan"), "s": "caf\u00e9 \udcff", "t": (1, 2), "big": 2**70}
    write_sealed_json(p, payload)
    assert read_sealed_json(p) == {"x": 0.1 + 0.2, "nan": None, "s": "caf\u00e9 \udcff", "t": [1, 2], "big": 2**70}


def test_sealed_json_checked_in_place_and_in_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file as written is checked on its payload's text in place (no re-encoding); one whose
    payload text changed fails that check and the full one; one whose formatting alone changed
    (re-indented) fails in place and passes in full, as it always did."""
    import harness.infra.cache as cache

    p = tmp_path / "c.json"
    payload = {"row": {"bpb": 1.25, "s": "caf\u00e9 \udcff"}, "samples": [{"a": [1, 2]}] * 3}
    write_sealed_json(p, payload)
    full = []
    real = cache.dumps
    monkeypatch.setattr(cache, "dumps", lambda obj, *a, **k: full.append(1) or real(obj, *a, **k))
    assert read_sealed_json(p) == json.loads(json.dumps(payload)) and not full  # in place: no dumps
    raw = p.read_bytes()
    p.write_bytes(raw.replace(b"1.25", b"1.26"))  # same length, another number
    with pytest.raises(CacheDamaged, match="checksum mismatch"):
        read_sealed_json(p)
    assert full  # the full check ran, and failed
    obj = json.loads(raw)
    p.write_text(json.dumps(obj, indent=1))  # formatting only (and escapes)
    assert read_sealed_json(p)["row"]["bpb"] == 1.25
    p.write_bytes(raw[:-1])  # no final newline: not as written, checked in full (and fine)
    assert read_sealed_json(p)["row"]["bpb"] == 1.25


def test_unsealed_torch_file_is_not_trusted(tmp_path: Path) -> None:
    p = tmp_path / "m.pt"
    torch.save({"w": torch.zeros(2)}, p)  # a plain torch file: no checksum
    with pytest.raises(CacheDamaged, match="no checksum"):
        read_sealed_torch(p)


def test_truncated_partial_checkpoint_restarts_training(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from encoders.backbone import BackboneConfig
    from encoders.byte_baseline.model import ByteEncoder
    from harness.config.suite import BudgetConfig
    from harness.data.load import training_windows
    from harness.train.loop import Checkpointer, train_encoder
    from sources.base import Document

    docs = [Document(id=str(i), data=b"the quick brown fox jumps over the lazy dog. " * 20) for i in range(4)]
    budget = BudgetConfig(train_bytes=1024, context_bytes=64, batch_bytes=256, warmup_bytes=0)
    bb = BackboneConfig(layers=1, dim=16, heads=2)

    def trained(ck: Checkpointer | None) -> dict[str, torch.Tensor]:
        torch.manual_seed(0)
        enc = ByteEncoder(ByteEncoder.Config(), bb)
        train_encoder(enc, training_windows(docs, 1024, 64, 0), 1024, budget, torch.device("cpu"), checkpoint=ck)
        return enc.state_dict()

    ref = trained(None)
    ck = Checkpointer(tmp_path / "k.partial.pt", every_seconds=1e9, log=lambda s: print(s))
    ck.path.write_bytes(b"PK\x03\x04 torn write")
    got = trained(ck)
    assert f"[cache] warning: {ck.path}" in capsys.readouterr().out
    assert all(torch.equal(ref[k], got[k]) for k in ref)  # trained from scratch, same weights


def test_stale_tmp_files_are_removed(run_copy: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    suite, out = run_copy
    stale = [out / ".results.csv.abc123.tmp", out / "cells" / ".x.json.k9.tmp", out / "models" / ".y.pt.zz.tmp"]
    for p in stale:
        p.write_bytes(b"half a fi")
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report"]) == 0
    assert not any(p.exists() for p in stale)
    assert "removed 3 temporary file(s)" in capsys.readouterr().err


class Evil:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (print, ("pwned",))


def test_pickled_code_in_a_sealed_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """weights_only=True on both layers: a checkpoint that would run code on load is damaged."""
    import hashlib
    import hmac
    import io

    from harness.infra.cache import seal_key

    inner = io.BytesIO()
    torch.save({"w": Evil()}, inner)
    p = tmp_path / "m.pt"
    mac = hmac.new(seal_key(tmp_path), inner.getvalue(), hashlib.sha256).hexdigest()  # a valid seal
    torch.save({"hmac": mac, "payload": inner.getvalue()}, p)
    with pytest.raises(CacheDamaged, match="payload does not load"):
        read_sealed_torch(p)
    assert "pwned" not in capsys.readouterr().out
