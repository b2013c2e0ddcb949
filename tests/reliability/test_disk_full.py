"""A full disk (ENOSPC) anywhere is one line saying how much space the run needs (an estimate) and
that it resumes; report.html / report.md / figures are written atomically, and the CLI never
announces a report that was not written. After space is freed, the same command finishes with the
same results."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

import core.files
import harness.infra.cache
from core.files import write_text_atomic
from harness.cli import main


def _full(*_: object, **__: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_disk_full_while_writing_cells_is_one_line_then_resumes(
    run_copy: tuple[Path, Path], finished: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    suite, out = run_copy
    for c in list((out / "cells").glob("*.json"))[:2]:
        c.unlink()
    (out / "results.csv").unlink()
    real = harness.infra.cache.atomic_write_bytes

    def write(path: Path, data: bytes) -> None:
        if path.parent.name == "cells":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, data)

    monkeypatch.setattr(harness.infra.cache, "atomic_write_bytes", write)
    capsys.readouterr()
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("tokbench: error:")]
    assert len(err) == 1
    assert "disk full writing" in err[0] and "MB more needed (estimate)" in err[0] and "resumes" in err[0]
    monkeypatch.setattr(harness.infra.cache, "atomic_write_bytes", real)
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report"]) == 0
    assert (out / "results.csv").read_text() == (finished[1] / "results.csv").read_text()


def test_disk_full_in_the_report_announces_nothing(
    run_copy: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    suite, out = run_copy
    (out / "report.html").write_text("<html>old</html>")  # an old report must not be announced
    monkeypatch.setattr(core.files.os, "fsync", _full)
    capsys.readouterr()
    assert main(["run", str(suite), "--out", str(out), "--quiet"]) == 2
    cap = capsys.readouterr()
    assert "report:" not in cap.out
    assert f"disk full writing {out}/" in cap.err and "Traceback" not in cap.err
    assert (out / "report.html").read_text() == "<html>old</html>"  # untouched, never cut
    assert not list(out.glob(".*.tmp")) and not list(out.glob("figures/.*.tmp"))


def test_atomic_report_write_keeps_the_old_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "report.html"
    write_text_atomic(p, "<p>whole</p>")
    monkeypatch.setattr(core.files.os, "fsync", _full)
    with pytest.raises(OSError) as e:
        write_text_atomic(p, "<p>" + "x" * 10_000)
    assert e.value.errno == errno.ENOSPC
    assert p.read_text() == "<p>whole</p>" and os.listdir(tmp_path) == ["report.html"]


def test_real_full_disk_on_a_tiny_tmpfs(finished: tuple[Path, Path], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A real ENOSPC (a 160 KiB tmpfs; needs root and mount, else skipped): one line, exit 2;
    after the file system grows, the same command finishes with the same results."""
    import subprocess

    suite, out_ok = finished
    mnt = tmp_path / "tiny_fs"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mnt)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        capsys.readouterr()
        assert main(["run", str(suite), "--out", str(mnt / "run"), "--quiet"]) == 2
        err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("tokbench: error:")]
        assert len(err) == 1 and "disk full writing" in err[0] and "resumes" in err[0]
        subprocess.run(["mount", "-o", "remount,size=20m", str(mnt)], check=True)
        assert main(["run", str(suite), "--out", str(mnt / "run"), "--quiet"]) == 0
        assert (mnt / "run" / "results.csv").read_text() == (out_ok / "results.csv").read_text()
        assert "<html" in (mnt / "run" / "report.html").read_text()[:200].lower()
        # the report's phases and each figure's seconds, from the render that just ran
        run = json.loads((mnt / "run" / "run.json").read_text())
        assert all(run["timings"][f"report_{k}_seconds"] > 0 for k in ("load", "tables", "figures", "page"))
        assert "severity_full" in run["report_figure_seconds"]
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
