"""benchmarks/pyspy_phases.py: seconds per thread, inclusive (once per stack, recursion included)
and exclusive per function, from py-spy's raw collapsed stacks, checked by hand."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_script import load_benchmark

bench = load_benchmark("pyspy_phases")

RAW = """\
thread (11): MainThread;<module> (run.py:3);train (run.py:10);step (run.py:20) 98
thread (11): MainThread;<module> (run.py:3);train (run.py:12);step (run.py:21);step (run.py:22) 49
thread (11): MainThread;<module> (run.py:3);score (run.py:30) 49
thread (12): prefetch;collate (c.py:5) 49
"""


def test_seconds_per_thread_and_function(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "pyspy.txt"
    p.write_text(RAW)
    assert bench.main([str(p), "--rate", "49"]) == 0
    out = capsys.readouterr().out
    lines = [ln.split() for ln in out.splitlines()]
    assert ["MainThread", "4.0"] in lines and ["prefetch", "1.0"] in lines
    # inclusive: train = 98 + 49 samples = 3 s; step, recursive in one stack, counted once: 3 s;
    # exclusive: step 3 s (innermost in both train stacks), score 1 s
    incl, excl = out.split("inclusive seconds")[1].split("exclusive seconds")
    assert "3.0  train (run.py)" in incl and "3.0  step (run.py)" in incl and "4.0  <module> (run.py)" in incl
    assert "3.0  step (run.py)" in excl and "1.0  score (run.py)" in excl and "train" not in excl
    assert bench.main([str(p), "--under", "score"]) == 0
    assert "MainThread, stacks through score: 1.0 s" in capsys.readouterr().out


def test_a_gzipped_file_reads_the_same(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import gzip

    plain, packed = tmp_path / "p.txt", tmp_path / "p.txt.gz"
    plain.write_text(RAW)
    packed.write_bytes(gzip.compress(RAW.encode()))
    assert bench.main([str(plain)]) == 0
    want = capsys.readouterr().out
    assert bench.main([str(packed)]) == 0
    assert capsys.readouterr().out == want


def test_a_file_without_stacks_is_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "empty.txt"
    p.write_text("nothing here\n")
    assert bench.main([str(p)]) == 2
