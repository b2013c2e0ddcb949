"""``kill -USR1`` makes a running tokbench print every thread's stack and go on
(``harness.cli.stacks_on_sigusr1``): a stuck run says where it waits without being stopped."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import sys, threading, time
from harness.cli import stacks_on_sigusr1

def parked_helper_thread():
    time.sleep(30)

threading.Thread(target=parked_helper_thread, daemon=True).start()
print(stacks_on_sigusr1(), flush=True)
sys.stdin.readline()  # the parent signals, then writes a line
print("still running", flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signal")
def test_sigusr1_prints_every_thread_and_the_process_goes_on() -> None:
    p = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdin is not None
    assert p.stdout.readline().strip() == "True"
    p.send_signal(signal.SIGUSR1)
    out, err = p.communicate("go\n", timeout=60)
    assert p.returncode == 0, err
    assert "still running" in out
    # both threads, each with the function it is parked in
    assert "parked_helper_thread" in err
    assert err.count("Thread 0x") + err.count("Current thread 0x") >= 2
