"""Bad command-line values are one line with exit code 2, before any work: --out naming a regular
file or an unwritable place, --limit below 1."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.cli import main


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not ln.startswith("tokbench: warning:")]
    assert len(err) == 1 and err[0].startswith("tokbench: error: "), err
    return err[0]


def test_out_is_a_regular_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reliability_suite import make_suite

    suite = make_suite(tmp_path)
    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["run", str(suite), "--out", str(f), "--quiet"]) == 2
    assert f"--out {f}: exists and is not a directory" in _one_error_line(capsys)
    assert main(["run", str(suite), "--out", str(f / "below"), "--quiet"]) == 2
    assert "is a file, not a directory" in _one_error_line(capsys)


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_out_is_not_writable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reliability_suite import make_suite

    suite = make_suite(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert main(["run", str(suite), "--out", str(ro / "run"), "--quiet"]) == 2
        assert f"{ro} is not writable" in _one_error_line(capsys)
    finally:
        ro.chmod(0o700)


def test_out_not_writable_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    from reliability_suite import make_suite

    import harness.pipeline.guards

    suite = make_suite(tmp_path)
    monkeypatch.setattr(harness.pipeline.guards.os, "access", lambda *a: False)  # as a non-root user sees it
    assert main(["run", str(suite), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert f"{tmp_path} is not writable" in _one_error_line(capsys)


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_limit_below_one_is_refused(limit: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reliability_suite import make_suite

    suite = make_suite(tmp_path)
    assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--limit", limit, "--quiet"]) == 2
    assert f"--limit {limit}: must be >= 1" in _one_error_line(capsys)
    assert not (tmp_path / "o").exists()


def test_limit_is_honoured(run_copy: tuple[Path, Path], tmp_path: Path) -> None:
    import csv

    suite, _ = run_copy
    assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--limit", "2", "--quiet", "--no-report"]) == 0
    with open(tmp_path / "o" / "results.csv", newline="") as f:
        assert {int(r["n_docs"]) for r in csv.DictReader(f) if r["mode"] == "full"} == {2}


def test_perturb_file_must_be_a_small_regular_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # /dev/zero was read without limit (MemoryError traceback); a FIFO hung
    assert main(["perturb", "case.upper", "--file", "/dev/zero"]) == 2
    assert "--file /dev/zero: not a regular file" in _one_error_line(capsys)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert main(["perturb", "case.upper", "--file", str(fifo)]) == 2  # returns at once: no writer needed
    assert f"--file {fifo}: not a regular file" in _one_error_line(capsys)
    assert main(["perturb", "case.upper", "--file", str(tmp_path)]) == 2
    assert f"--file {tmp_path}: a directory" in _one_error_line(capsys)
    big = tmp_path / "big.txt"
    with big.open("wb") as f:
        f.truncate(16 * 2**20 + 1)
    assert main(["perturb", "case.upper", "--file", str(big)]) == 2
    assert "larger than 16 MiB" in _one_error_line(capsys)
    ok = tmp_path / "ok.txt"
    ok.write_text("Hello world")
    assert main(["perturb", "case.upper", "--file", str(ok), "--severity", "1"]) == 0
    assert "HELLO WORLD" in capsys.readouterr().out
