"""Forged caches: a cell, model or cached plan changed and re-sealed by someone who does not
hold the cache's key (a plain sha256 as older seals were, or a key of their own) is detected,
named on one line and recomputed; a key file that is not private to the user is replaced; every
decompression of a cache file stops at its limit."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import stat
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.data.batchscore import PlanCache
from harness.infra.cache import (
    KEY_NAME,
    CacheDamaged,
    read_sealed_json,
    read_sealed_torch,
    seal_key,
    sealed_json_text,
    write_sealed_json,
    write_sealed_torch,
)
from harness.infra.writes import dumps, torch_bytes


def _plain_sha256_cell(p: Path) -> None:
    """Edit the cell's bpb and re-seal it as an unkeyed sha256 seal would be."""
    payload = read_sealed_json(p)
    payload["row"]["bpb"] = 8.36
    text = dumps(payload)
    p.write_text(json.dumps({"sha256": hashlib.sha256(text.encode()).hexdigest(), "payload": payload}))


def _own_key_cell(p: Path) -> None:
    """Edit the cell's bpb and re-seal it with the project's own function and a guessed key."""
    payload = read_sealed_json(p)
    payload["row"]["bpb"] = 8.36
    p.write_text(sealed_json_text(payload, os.urandom(32)))


def _zeroed_model(p: Path) -> None:
    """Zero every weight and re-seal the model with a plain sha256."""
    state = {k: torch.zeros_like(v) for k, v in read_sealed_torch(p).items()}
    data = torch_bytes(state)
    p.write_bytes(torch_bytes({"sha256": hashlib.sha256(data).hexdigest(), "payload": data}))


@pytest.mark.parametrize(("pattern", "forge", "reason"), [
    ("cells/*.json", _plain_sha256_cell, "sealed with a plain sha256"),
    ("cells/*.json", _own_key_cell, "checksum mismatch"),
    ("models/*[0-9a-f].pt", _zeroed_model, "sealed with a plain sha256"),
])
def test_a_re_sealed_forgery_is_detected_and_recomputed(
    run_copy: tuple[Path, Path], finished: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
    pattern: str, forge: object, reason: str,
) -> None:
    suite, out = run_copy
    victim = sorted(out.glob(pattern))[0]
    forge(victim)  # type: ignore[operator]
    (out / "results.csv").unlink()
    capsys.readouterr()
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report"]) == 0
    err = capsys.readouterr().err
    warnings = [ln for ln in err.splitlines() if "[cache] warning" in ln]
    assert warnings and str(victim) in warnings[0] and reason in warnings[0], err
    assert (out / "results.csv").read_text() == (finished[1] / "results.csv").read_text()


def test_the_key_is_private_and_created_once(tmp_path: Path) -> None:
    write_sealed_json(tmp_path / "a.json", {"x": 1})
    key = tmp_path / KEY_NAME
    st = key.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_size == 32 and st.st_uid == os.getuid()
    write_sealed_json(tmp_path / "b.json", {"x": 2})
    assert key.stat().st_ino == st.st_ino  # one key per directory
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("spoil", ["readable by others", "a symlink", "another owner", "wrong size"])
def test_a_key_file_not_private_to_the_user_is_replaced(tmp_path: Path, spoil: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Whoever can write the directory could plant a key they know; such a key is not used, and
    what it sealed fails (recomputed), so the planted key buys nothing."""
    import harness.infra.cache as cache

    d = tmp_path / "cells"
    d.mkdir()
    key = d / KEY_NAME
    planted = os.urandom(32)
    if spoil == "a symlink":
        (tmp_path / "elsewhere").write_bytes(planted)
        key.symlink_to(tmp_path / "elsewhere")
    else:
        key.write_bytes(planted if spoil != "wrong size" else planted[:16])
        os.chmod(key, 0o644 if spoil == "readable by others" else 0o600)
        if spoil == "another owner":
            if os.getuid() != 0:
                pytest.skip("changing a file's owner needs root")
            os.chown(key, 12345, 12345)
    (d / "c.json").write_text(sealed_json_text({"row": {"bpb": 0.1}}, planted))
    cache._KEYS.clear()
    with pytest.raises(CacheDamaged, match="checksum mismatch"):
        read_sealed_json(d / "c.json")
    assert "not a private 32-byte key file of this user; replaced" in capsys.readouterr().err
    assert not key.is_symlink() and stat.S_IMODE(key.stat().st_mode) == 0o600 and key.read_bytes() != planted
    if spoil == "a symlink":
        assert (tmp_path / "elsewhere").read_bytes() == planted  # the link's target left alone


def test_a_forged_plan_is_recomputed(tmp_path: Path) -> None:
    cache = PlanCache(tmp_path)
    key = cache.key(data="fp", id="typo", seed=0)
    cache.put(key, [("clean text", 0.0, 2)])
    path = cache.path(key)
    assert path is not None and cache.get(key) == [("clean text", 0.0, 2)]
    body = json.dumps([["forged text", 0.0, 2]]).encode()  # re-sealed with a recomputed sha256
    path.write_bytes(gzip.compress(hashlib.sha256(body).hexdigest().encode() + b"\n" + body))
    assert cache.get(key) is None


def test_a_plan_file_that_decompresses_past_its_limit_is_damage(tmp_path: Path) -> None:
    # stands for a 2 MB gzip of 2 GiB of zeros: the limit is lowered, not the bomb raised
    cache = PlanCache(tmp_path, max_bytes=10_000)
    key = cache.key(x=1)
    cache.put(key, [("a" * 100, 0.0, 1)])
    assert cache.get(key) == [("a" * 100, 0.0, 1)]
    path = cache.path(key)
    assert path is not None
    read = []
    real = gzip.GzipFile.read

    def spy(self: gzip.GzipFile, n: int = -1) -> bytes:
        read.append(n)
        return real(self, n)

    path.write_bytes(gzip.compress(bytes(5_000_000)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gzip.GzipFile, "read", spy)
        assert cache.get(key) is None
    assert read and all(0 <= n <= 10_066 for n in read)  # never a read without a bound
    cache.put(key, [("a" * 20_000, 0.0, 1)])  # a plan over the limit is not cached
    assert cache.get(key) is None


def test_sealed_files_of_one_directory_verify_with_its_key_only(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    write_sealed_torch(a / "m.pt", {"w": torch.ones(2)})
    (b / "m.pt").write_bytes((a / "m.pt").read_bytes())  # a valid file of another cache
    assert seal_key(a) != seal_key(b)
    with pytest.raises(CacheDamaged, match="checksum mismatch"):
        read_sealed_torch(b / "m.pt")
    assert torch.equal(read_sealed_torch(a / "m.pt")["w"], torch.ones(2))
