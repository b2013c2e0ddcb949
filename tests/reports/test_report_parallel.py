"""Figures drawn and tables' resampling run in forked worker processes: the same files as in one
process, and a pool that fails on one line (never hangs) when a worker dies or a task raises."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from reports import comparisons, render_run, tables
from reports.load import load_run
from reports.pool import (
    ENV,
    MAX_PROCESSES,
    WorkerDied,
    fork_map,
    one_blas_thread,
    report_processes,
    usable_cpus,
)

# few resamples: the statistics are not under test here, only where the figures are drawn
QUICK = dict(n_boot=20, n_perm=200)
# the one line of the HTML that depends on the clock (minute resolution)
_RENDERED = re.compile(rb"rendered \d{4}-\d\d-\d\d \d\d:\d\d UTC")


def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _same_report(run: Path, tmp_path: Path, **kw: int) -> dict[str, bytes]:
    """Render ``run`` with 1 and with 2 processes; assert every file is the same bytes (report.html
    without its "rendered" minute). Returns the serial files."""
    serial = render_run(run, tmp_path / "serial", processes=1, **kw).parent
    forked = render_run(run, tmp_path / "forked", processes=2, **kw).parent
    a, b = _files(serial), _files(forked)
    assert sorted(a) == sorted(b)
    svgs = [k for k in a if k.endswith(".svg")]
    assert len(svgs) >= 5 and len([k for k in a if k.endswith(".png")]) == len(svgs)
    for name in a:
        x, y = a[name], b[name]
        if name == "report.html":
            x, y = _RENDERED.sub(b"", x), _RENDERED.sub(b"", y)
        assert x == y, f"{name} differs between 1 and 2 processes"
    return a


def test_parallel_report_is_byte_identical(synthetic_run: Path, tmp_path: Path) -> None:
    assert (synthetic_run / "samples.jsonl").stat().st_size > 0  # so the tables resample too
    _same_report(synthetic_run, tmp_path, **QUICK)


def test_parallel_tables_are_identical(make_run, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The tables' bootstrap and permutation draws are keyed by group and comparison, so the
    numbers and the report do not depend on the process that computed them. Three encoders
    (three pairs) and 4 documents per eval set: 24 paired units per comparison, above the exact
    permutation limit, so the Monte Carlo permutation draws are exercised as well."""
    run = make_run("three", encoders=("bytes", "bpe-4096", "blt"), sample_docs=4)
    calls: list[tuple[str, int, int]] = []
    real = tables.fork_map

    def spy(fn: Callable[[int], Any], n: int, processes: int, what: str = "report figure"
            ) -> list[Any]:
        calls.append((what, n, processes))
        return real(fn, n, processes, what)

    monkeypatch.setattr(tables, "fork_map", spy)
    monkeypatch.setattr(comparisons, "fork_map", spy)  # the comparisons' pool
    data = load_run(run)
    one = tables.compute_tables(data, n_boot=50, n_perm=300, processes=1)
    two = tables.compute_tables(data, n_boot=50, n_perm=300, processes=2)
    kinds = {what for what, n, p in calls if p == 2 and n > 1}
    assert kinds == {"report table (groups)", "report table (comparisons)"}
    cmp = one.comparisons
    assert len(cmp) and cmp.n_units.min() > 14 and cmp.ci_lo.notna().all()
    assert one.groups.delta_lo.notna().any() and one.groups.p_delta.notna().any()
    for name in ("groups", "comparisons", "mean_tests", "languages", "scripts", "verdict",
                 "anomalies"):
        pd.testing.assert_frame_equal(getattr(one, name), getattr(two, name), check_exact=True,
                                      obj=name)
    assert one.verdict_lines == two.verdict_lines
    # and the whole report, tables in markdown and HTML included
    files = _same_report(run, tmp_path, n_boot=50, n_perm=300)
    assert {"report.md", "report.html"} <= set(files)


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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="finds OpenBLAS in /proc/self/maps")
def test_workers_use_one_blas_thread() -> None:
    """numpy's OpenBLAS is found and limited (in forked workers: this process keeps its threads)."""
    import numpy  # noqa: F401 - loads OpenBLAS, as the tables do

    assert all(n >= 1 for n in fork_map(lambda i: one_blas_thread(), 2, 2))


def test_render_records_its_phases_and_each_figures_seconds(synthetic_run: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from reports import render

    calls: list[tuple[str, int, int]] = []
    real = tables.fork_map

    def spy(fn: Callable[[int], Any], n: int, processes: int, what: str = "report figure") -> list[Any]:
        calls.append((what, n, processes))
        return real(fn, n, processes, what)

    monkeypatch.setattr(tables, "fork_map", spy)
    monkeypatch.setattr(comparisons, "fork_map", spy)  # the comparisons' pool
    for procs in (1, 2):
        calls.clear()
        render_run(synthetic_run, tmp_path / str(procs), processes=procs, **QUICK)
        # the figures are drawn in the comparisons' pool, ahead of them: one pool of both
        mixed = [n for what, n, p in calls if what == "report figure or table (comparisons)" and p == procs]
        assert len(mixed) == 1 and mixed[0] > len(render.LAST_TIMINGS["figure_seconds"]) > 0
        t = dict(render.LAST_TIMINGS)
        assert {"load", "tables", "other_tables", "figures", "page"} <= set(t)
        assert all(t[k] > 0 for k in ("load", "tables", "figures", "page"))
        figs = t["figure_seconds"]
        assert {"severity_full", "delta_heatmap", "loss_curves"} <= set(figs) and all(v >= 0 for v in figs.values())
        # drawn where they were timed: no figure outlasts the phase that drew them all
        assert max(figs.values()) <= t["figures"] + 1e-3
