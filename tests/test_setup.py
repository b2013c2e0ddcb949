"""`make setup`'s system step: waits for / retries a held apt lock, never marks set-up done after
a failed apt step, and skips (exit 0) without root so CI without root still passes. apt-get and
id are stand-ins on PATH; nothing is installed."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "system_packages.sh"


def _exe(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _fake_bin(tmp: Path, uid: int, apt_failures: int) -> Path:
    """A bin folder with `id` printing ``uid`` and an `apt-get` that fails its first
    ``apt_failures`` calls the way a held lock does, logging every call."""
    b = tmp / "bin"
    b.mkdir(exist_ok=True)
    _exe(b / "id", f'echo {uid}\n')
    _exe(b / "apt-get", f'''n=$(cat "{tmp}/count" 2>/dev/null || echo 0); n=$((n + 1))
echo $n > "{tmp}/count"; echo "$@" >> "{tmp}/calls"
if [ "$n" -le {apt_failures} ]; then
  echo "E: Could not get lock /var/lib/dpkg/lock-frontend" >&2; exit 100
fi
''')
    return b


def _env(bin_dir: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SYSTEM_RETRY_SLEEP": "0",
            "SYSTEM_RETRIES": "3", **extra}


def test_held_apt_lock_is_retried(tmp_path: Path) -> None:
    b = _fake_bin(tmp_path, 0, apt_failures=2)
    r = subprocess.run(["sh", str(SCRIPT)], env=_env(b), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 4  # update fails twice, then update and install succeed
    assert all("DPkg::Lock::Timeout=" in c for c in calls)  # apt itself waits for the lock
    assert " install -y " in calls[-1] and "chromium" in calls[-1]
    assert "retrying" in r.stderr and "installed" in r.stdout


def test_apt_failure_exits_nonzero(tmp_path: Path) -> None:
    b = _fake_bin(tmp_path, 0, apt_failures=99)
    r = subprocess.run(["sh", str(SCRIPT)], env=_env(b), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1 and "NOT marked done" in r.stderr
    assert len((tmp_path / "calls").read_text().splitlines()) == 3  # SYSTEM_RETRIES


def test_without_root_it_skips(tmp_path: Path) -> None:
    b = _fake_bin(tmp_path, 1000, apt_failures=99)
    r = subprocess.run(["sh", str(SCRIPT)], env=_env(b), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "skipped" in r.stdout and not (tmp_path / "calls").exists()


@pytest.mark.skipif(shutil.which("make") is None, reason="make not installed")
@pytest.mark.parametrize(("uid", "failures", "system", "done"),
                         [(0, 99, "1", False), (0, 0, "1", True), (1000, 99, "1", True),
                          (0, 99, "0", True)])
def test_make_setup_marks_done_only_after_success(tmp_path: Path, uid: int, failures: int,
                                                  system: str, done: bool) -> None:
    b = _fake_bin(tmp_path, uid, apt_failures=failures)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    _exe(venv / "bin" / "pip", "exit 0\n")  # the Python steps succeed (stand-in)
    _exe(tmp_path / "py", "exit 0\n")  # `$(PY) -m venv` (the venv exists already)
    r = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "setup",
                        f"VENV={venv}", f"PY={tmp_path / 'py'}", f"SYSTEM={system}"],
                       env=_env(b), capture_output=True, text=True, timeout=120)
    assert (r.returncode == 0) == done, r.stdout + r.stderr
    assert (venv / ".installed").exists() == done
