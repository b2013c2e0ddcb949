"""One writer per run directory (harness/infra/lock.py): a second run on the same --out stops at once
with one line naming the holder (pid, host, since); a lock left by a dead process is taken over."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.infra.lock import RunLock, RunLocked

HOLD = """
import sys, time
from harness.infra.lock import RunLock
RunLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(120)
"""


def _holder(out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_second_run_says_who_holds_the_directory(run_copy: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    suite, out = run_copy
    proc = _holder(out)
    try:
        capsys.readouterr()
        assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report"]) == 2
        err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not ln.startswith("tokbench: warning:")]
        assert len(err) == 1 and f"pid {proc.pid} on " in err[0] and "since 20" in err[0]
    finally:
        proc.kill()
        proc.wait()
    # the holder died (kill -9): the kernel released the lock, the next run takes it over
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report"]) == 0
    assert f"taking over {out / '.lock'} from pid {proc.pid}" in capsys.readouterr().err


def test_stale_lock_file_from_a_dead_pid_is_taken_over(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    (tmp_path / ".lock").write_text(json.dumps({"pid": pid, "host": os.uname().nodename, "since": "2026-01-01T00:00:00Z"}))
    logs: list[str] = []
    with RunLock(tmp_path, log=logs.append):
        # another process sees us as the holder (the lock file is not opened here: a second
        # descriptor closed in this process would drop a POSIX lock)
        probe = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        assert f"pid {os.getpid()} on " in probe.stdout
    assert logs and "no longer running" in logs[0]


PROBE = """
import sys
from harness.infra.lock import RunLock, RunLocked
try:
    RunLock(sys.argv[1]).acquire()
    print("acquired")
except RunLocked as e:
    print(e)
"""

HOLD_AND_FORK = """
import os, sys, time
from harness.infra.lock import RunLock
RunLock(sys.argv[1]).acquire()
if os.fork() == 0:  # a worker process, as a perturbation pool forks
    time.sleep(60)
    os._exit(0)
print("held", flush=True)
time.sleep(120)
"""


def test_forked_workers_of_a_killed_run_do_not_keep_the_lock(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-c", HOLD_AND_FORK, str(tmp_path)], stdout=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        proc.kill()  # the run dies; its forked worker lives on
        proc.wait()
        logs: list[str] = []
        with RunLock(tmp_path, log=logs.append):
            pass
        assert logs and f"from pid {proc.pid}" in logs[0]
    finally:
        try:
            os.killpg(proc.pid, 9)  # the orphaned worker (same session)
        except ProcessLookupError:
            pass


def test_lock_is_exclusive_within_one_process(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with RunLock(tmp_path):
        with pytest.raises(RunLocked, match=f"pid {os.getpid()}"):
            RunLock(tmp_path).acquire()
        probe = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, env=env)
        assert "in use by" in probe.stdout  # the refused second lock did not drop the first
    with RunLock(tmp_path):  # released on exit
        pass


@pytest.mark.parametrize("command", ["report", "report-in-place", "compare"])
def test_a_report_never_writes_beside_a_live_run(command: str, run_copy: tuple[Path, Path], tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # report and compare take the run-directory lock on the folder they write: a second writer
    # beside `tokbench run` (report.html rewritten under it) is refused on one line
    _, out = run_copy
    target = out if command == "report-in-place" else tmp_path / "x"
    proc = _holder(target)
    argv = {"report": ["report", str(out), "--out", str(target)],
            "report-in-place": ["report", str(out)],
            "compare": ["compare", str(out), str(out), "--out", str(target)]}[command]
    try:
        capsys.readouterr()
        assert main([*argv, "--no-svg", "--bootstrap", "10"]) == 2
        err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not ln.startswith("tokbench: warning:")]
        assert len(err) == 1 and f"{target}: run directory is in use by pid {proc.pid} on " in err[0], err
        assert not (target / "report.html").exists() or command == "report-in-place"
    finally:
        proc.kill()
        proc.wait()
