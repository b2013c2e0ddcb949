"""Process helpers shared by the tests that kill a multi-process job mid-run or check that a
pool's workers are gone."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest


def kill_when(cmd: list[str], cwd: Path, env: dict[str, str], done: Callable[[], int], what: str,
              poll: float = 0.1) -> int:
    """Start ``cmd`` in its own process group, kill -9 its leader once ``done()`` is nonzero
    (checked every ``poll`` seconds, for at most 240 s), and wait up to 60 s until every process
    of the group is gone (the children die with it); returns ``done()`` then. Fails the test if
    ``what`` (e.g. "the run") finished first or a child outlived the leader."""
    # its own process group, so the test can tell when every process of the job is gone
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 240
    while time.time() < deadline and not done() and proc.poll() is None:
        time.sleep(poll)
    assert proc.poll() is None, f"{what} finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("ranks outlived the killed launcher")
    return done()


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited (a zombie has: only its reaping is left)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def children() -> set[int]:
    """Live (non-zombie) child processes of this process."""
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                after = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if int(after[1]) == os.getpid() and after[0] != "Z":
                out.add(int(d.name))
    return out
