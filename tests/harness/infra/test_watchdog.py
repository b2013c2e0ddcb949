"""A guarded loop without progress ends the process with one line and every thread's stack
(``harness.infra.watchdog``); beats keep it quiet. A bad limit is one line before any training:
``tests/harness/overlap/test_cells_behind.py::test_bad_env_is_one_line_exit_2_before_any_training``."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.infra.watchdog import Watchdog, stacks_name, stall_limit

ROOT = Path(__file__).resolve().parents[3]

STUCK = """
import sys, time
from pathlib import Path
from harness.infra import watchdog

watchdog.STACKS_DIR = Path(sys.argv[1])

def forward_that_never_returns():
    time.sleep(60)

with watchdog.Watchdog("scoring (Stuck)", limit=0.5) as dog:
    dog.beat()
    forward_that_never_returns()
print("not reached")
"""


def test_a_stuck_loop_is_one_line_exit_2_with_every_threads_stack(tmp_path: Path) -> None:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", STUCK, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert time.monotonic() - t0 < 30  # ended by the watchdog, not by the 60 s sleep
    assert p.returncode == 2
    assert "not reached" not in p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr
    stacks = tmp_path / "stacks.txt"
    assert re.fullmatch(
        r"tokbench: error: scoring \(Stuck\): no progress in \d+ s \(stuck; the limit, 0\.5 s, is set by "
        r"TOKBENCH_STALL_SECONDS\); "
        rf"every thread's stack is in {re.escape(str(stacks))}; finished models and cells are kept — run the "
        r"same command to resume", lines[0])
    text = stacks.read_text()
    assert "forward_that_never_returns" in text  # where the main thread waits
    assert "_watch" in text  # the watchdog's own thread is listed too


def test_beats_keep_it_quiet_and_silence_fires_once() -> None:
    fired: list[float] = []
    with Watchdog("training (Test)", limit=0.3, fire=fired.append) as dog:
        for _ in range(20):  # 1 s of steady beats, each well inside the limit
            time.sleep(0.05)
            dog.beat()
    assert fired == []
    done = threading.Event()
    with Watchdog("training (Test)", limit=0.3, fire=lambda idle: (fired.append(idle), done.set())):
        assert done.wait(10)
    assert len(fired) == 1 and fired[0] > 0.3


def test_the_default_limit_is_twice_the_pools_so_their_named_errors_come_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.infra.accel import stall_seconds

    monkeypatch.setenv("TOKBENCH_STALL_SECONDS", "7")
    assert stall_seconds() == stall_limit() == 7.0
    assert Watchdog("x").limit == 14.0
    monkeypatch.delenv("TOKBENCH_STALL_SECONDS")
    assert stall_limit() == 600.0
    for bad in ("0", "-3", "nan", "inf", "ten"):
        monkeypatch.setenv("TOKBENCH_STALL_SECONDS", bad)
        with pytest.raises(ValueError, match=rf"TOKBENCH_STALL_SECONDS='{bad}': expected a positive number of seconds"):
            stall_limit()


def test_each_rank_of_a_data_parallel_job_writes_its_own_stacks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RANK", raising=False)
    assert stacks_name() == "stacks.txt"
    monkeypatch.setenv("RANK", "0")
    assert stacks_name() == "stacks.txt"
    monkeypatch.setenv("RANK", "3")
    assert stacks_name() == "stacks-rank3.txt"
    monkeypatch.setenv("RANK", "../x")  # not a number: no path from the environment
    assert stacks_name() == "stacks-rankx.txt"
