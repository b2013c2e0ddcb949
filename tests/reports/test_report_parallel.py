"""Figures drawn in forked worker processes: the same files as drawn in one process, and a pool
that fails on one line (never hangs) when a worker dies or a figure raises."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from reports import render_run
from reports.pool import ENV, MAX_PROCESSES, WorkerDied, fork_map, report_processes, usable_cpus

# few resamples: the statistics are not under test here, only where the figures are drawn
QUICK = dict(n_boot=20, n_perm=200)
# the one line of the HTML that depends on the clock (minute resolution)
_RENDERED = re.compile(rb"rendered \d{4}-\d\d-\d\d \d\d:\d\d UTC")


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_parallel_report_is_byte_identical(synthetic_run: Path, tmp_path: Path) -> None:
    serial = render_run(synthetic_run, tmp_path / "serial", processes=1, **QUICK).parent
    forked = render_run(synthetic_run, tmp_path / "forked", processes=2, **QUICK).parent
    a, b = _files(serial), _files(forked)
    assert sorted(a) == sorted(b)
    svgs = [k for k in a if k.endswith(".svg")]
    assert len(svgs) >= 5 and len([k for k in a if k.endswith(".png")]) == len(svgs)
    for name in a:
        x, y = a[name], b[name]
        if name == "report.html":
            x, y = _RENDERED.sub(b"", x), _RENDERED.sub(b"", y)
        assert x == y, f"{name} differs between 1 and 2 processes"


def _square(i: int) -> int:
    return i * i


def _die_on_two(i: int) -> int:
    if i == 2:
        os._exit(7)  # as a worker killed mid-figure: no exception, no message
    return i


def _raise_on_one(i: int) -> int:
    if i == 1:
        raise KeyError(f"no column {i}")
    return i


def test_fork_map_keeps_order() -> None:
    assert fork_map(_square, 7, 3) == [i * i for i in range(7)]
    assert fork_map(_square, 3, 1) == [0, 1, 4]  # serial
    assert fork_map(_square, 0, 4) == []
    pids = fork_map(lambda i: os.getpid(), 4, 2)  # a closure: fork needs no pickling of fn
    assert os.getpid() not in pids and len(set(pids)) <= 2
    assert fork_map(lambda i: os.getpid(), 2, 1) == [os.getpid()] * 2


def test_dead_worker_is_one_line_not_a_hang() -> None:
    t0 = time.monotonic()
    with pytest.raises(WorkerDied) as err:
        fork_map(_die_on_two, 4, 2)
    assert time.monotonic() - t0 < 20
    msg = str(err.value)
    assert "\n" not in msg and "died (exit code 7)" in msg and msg.startswith("report figure: worker")
    assert isinstance(err.value, OSError)  # the CLI prints OSErrors on one line, exit code 2


def test_worker_exception_keeps_its_type() -> None:
    with pytest.raises(KeyError, match="no column 1"):
        fork_map(_raise_on_one, 3, 2)


def test_report_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "1")
    assert report_processes() == 1
    monkeypatch.setenv(ENV, "3")
    assert report_processes() == 3
    monkeypatch.delenv(ENV)
    assert 1 <= report_processes() <= min(MAX_PROCESSES, usable_cpus())
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(ENV, bad)
        with pytest.raises(ValueError, match=ENV):
            report_processes()
