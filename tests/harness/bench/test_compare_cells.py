"""benchmarks/compare_cells.py: per-cell BPB gaps between two runs, matched by cell key."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from bench_script import load_benchmark

compare = load_benchmark("compare_cells")

FIELDS = ["kind", *compare.KEY, "bpb"]


def _run(tmp: Path, name: str, rows: list[tuple[str, str, float]]) -> str:
    """A run's files under prefix tmp/name: rows of (encoder, perturbation_id, bpb), plus one
    baseline row that is not a model's."""
    prefix = tmp / name
    Path(f"{prefix}_run.json").write_text(json.dumps({"precision": {"score": "bfloat16"},
                                                      "timings": {"total_seconds": 3.0}}))
    with open(f"{prefix}_results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for enc, pert, bpb in rows:
            w.writerow({"kind": "model", "encoder": enc, "seed": 0, "dataset": "d", "perturbation_id": pert,
                        "severity": 0, "mode": "full", "permutation": "", "bpb": bpb})
        w.writerow({"kind": "baseline", "encoder": "gzip", "seed": 0, "dataset": "d", "perturbation_id": "clean",
                    "severity": 0, "mode": "full", "permutation": "", "bpb": 9.0 if name == "a" else 1.0})
    return str(prefix)


def test_gaps_per_encoder_and_the_bound(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _run(tmp_path, "a", [("x", "clean", 1.0), ("x", "typo", 2.0), ("y", "clean", 3.0)])
    b = _run(tmp_path, "b", [("x", "clean", 1.0001), ("x", "typo", 2.5), ("y", "clean", 3.0)])
    assert compare.main([a, b, "--bound", "1e-3"]) == 0
    out = capsys.readouterr().out
    # x: gaps 1e-4 (clean) and 0.5; y: 0. The baselines' 8.0 gap is not a model cell.
    assert "x            cells    2  median |ΔBPB| 2.50e-01  max 5.00e-01  max on clean cells 1.00e-04  within 0.001: 1" in out
    assert "y            cells    1  median |ΔBPB| 0.00e+00" in out
    assert "all: 2 of 3 cells within 0.001; max |ΔBPB| 5.00e-01" in out


def test_runs_with_other_cells_are_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _run(tmp_path, "a", [("x", "clean", 1.0)])
    b = _run(tmp_path, "b", [("x", "typo", 1.0)])
    assert compare.main([a, b]) == 2
    assert "the runs score different cells" in capsys.readouterr().err
