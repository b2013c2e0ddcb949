"""The report rendered by a process started ahead (``harness.overlap.reportproc``, ``reports.serve``):
the same files as rendering in the run's process, errors carried back, a dead process noticed."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest

from harness.overlap import reportproc

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "reports"))

from synthetic_run import write_synthetic_run  # noqa: E402

FAST = {"n_boot": 200, "n_perm": 2000}


def test_wanted() -> None:
    assert reportproc.wanted("auto", "cuda") and not reportproc.wanted("auto", "cpu")
    assert reportproc.wanted(True, "cpu")
    assert not reportproc.wanted(False, "cuda")


def test_same_files_as_in_process(tmp_path: Path) -> None:
    from reports import render_run

    here = write_synthetic_run(tmp_path / "a" / "run")  # the report names its directory
    there = tmp_path / "b" / "run"
    shutil.copytree(here, there)
    render_run(here, **FAST)
    path, timings = reportproc.ReportProcess.start().render(there, **FAST)
    assert path == there.resolve() / "report.html"
    assert {"load", "tables", "figures", "page"} <= set(timings)
    for name in ("report.html", "report.md"):
        # the same bytes but the minute each was rendered at (two renders can straddle one)
        a, b = (re.sub(rb"rendered \d{4}-\d\d-\d\d \d\d:\d\d UTC", b"rendered T", (d / name).read_bytes())
                for d in (here, there))
        assert a == b, name


def test_errors_come_back(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(RuntimeError, match="results.csv: not found.*in the report process"):
        reportproc.ReportProcess.start().render(tmp_path / "empty")


def test_a_dead_process_is_noticed(tmp_path: Path) -> None:
    rp = reportproc.ReportProcess.start()
    rp.proc.kill()
    with pytest.raises(reportproc.ReportProcessFailed, match="ended"):
        rp.render(tmp_path)
    assert rp.proc.poll() is not None


def test_close_ends_an_idle_process() -> None:
    rp = reportproc.ReportProcess.start()
    rp.close()
    assert rp.proc.returncode == 0


def test_close_kills_a_rendering_process(tmp_path: Path) -> None:
    """Interrupted while the process renders (the run's Ctrl-C): close() ends it at once."""
    import signal

    rp = reportproc.ReportProcess.start()
    assert rp._answer().get("ready")
    assert rp.proc.stdin is not None
    rp.proc.stdin.write(json.dumps({"run_dir": str(write_synthetic_run(tmp_path / "run"))}) + "\n")
    rp.proc.stdin.flush()
    rp.busy = True
    rp.close()
    assert rp.proc.returncode == -signal.SIGKILL  # killed mid-render, not waited for
