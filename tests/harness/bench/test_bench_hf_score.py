"""benchmarks/bench_hf_score.py at toy size on the CPU: both paths score the same windows to the
same NLL, and the FLOPs it divides by are the encoder's own count for those windows."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[3]


def test_tiny_run_prints_both_paths_with_equal_nll() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_hf_score.py"), "--tiny", "--device", "cpu",
                        "--mb", "0.01", "--context-bytes", "512", "--stride", "384"],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    rows = {m[1]: m.groups()[1:] for m in re.finditer(r"^(tokbench|plain)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)%\s+(\S+)$",
                                                    r.stdout, re.M)}
    assert set(rows) == {"tokbench", "plain"}, r.stdout
    assert rows["tokbench"][4] == rows["plain"][4]  # BPB, 4 decimals
    rel = float(re.search(r"NLL differs by (\S+) \(relative\)", r.stdout)[1])
    assert rel < 1e-5
    assert "FLOPs counted 1.0000x" in r.stdout
    assert all(float(v[1]) > 0 and float(v[3]) > 0 for v in rows.values())  # MB/s, MFU
