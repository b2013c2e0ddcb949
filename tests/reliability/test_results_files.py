"""Damaged or hostile results files read by ``report`` and ``compare`` are one line naming the file,
the row (line) and the column (key), exit code 2 — checked when the files are loaded
(reports/load.py), never a numpy error, a ZeroDivisionError or a RecursionError later."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from harness.cli import main


def _line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not ln.startswith("tokbench: warning:")]
    assert len(err) == 1 and err[0].startswith("tokbench: error: "), err
    return err[0]


def _set_cell(path: Path, column: str, value: str) -> None:
    """Replace ``column`` of the first data row (line 2) of a CSV file."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
        fields = list(rows[0])
    rows[0][column] = value
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def _report(out: Path, tmp_path: Path) -> int:
    return main(["report", str(out), "--out", str(tmp_path / "rep"), "--no-svg", "--bootstrap", "10"])


@pytest.mark.parametrize("column,value", [("nll_nats", "inf"), ("nll_nats", "1e400"), ("n_bytes", "inf"),
                                          ("nll_nats", "-Infinity")])
def test_non_finite_results_cells(column: str, value: str, run_copy: tuple[Path, Path], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run_copy
    _set_cell(out / "results.csv", column, value)
    assert _report(out, tmp_path) == 2
    assert f"{out / 'results.csv'}: column {column!r} row 2: not a finite number: {value!r}" in _line(capsys)


def test_bad_seed_and_zero_bytes_in_results(run_copy: tuple[Path, Path], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run_copy
    _set_cell(out / "results.csv", "seed", "0.5")
    assert _report(out, tmp_path) == 2
    assert "results.csv: column 'seed' row 2: not a seed (an integer >= 0): 0.5" in _line(capsys)
    _set_cell(out / "results.csv", "seed", "zero")
    assert _report(out, tmp_path) == 2
    assert "results.csv: column 'seed' row 2: not a number: 'zero'" in _line(capsys)
    _set_cell(out / "results.csv", "seed", "0")
    _set_cell(out / "results.csv", "n_bytes", "0")
    assert _report(out, tmp_path) == 2
    assert "results.csv: column 'n_bytes' row 2: must be > 0, got 0" in _line(capsys)


def test_header_only_results(run_copy: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run_copy
    res = out / "results.csv"
    res.write_text(res.read_text().splitlines()[0] + "\n")
    assert _report(out, tmp_path) == 2
    assert f"{res}: no rows (a header without cells)" in _line(capsys)


def test_deeply_nested_run_json(run_copy: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run_copy
    (out / "run.json").write_text("[" * 100_000)
    assert _report(out, tmp_path) == 2
    assert f"{out / 'run.json'}: JSON nested too deeply" in _line(capsys)


def _samples_line(out: Path, n: int, change: dict | None = None, raw: str | None = None) -> None:
    """Replace line ``n`` (1-based) of samples.jsonl by ``raw`` or by itself with ``change`` applied."""
    p = out / "samples.jsonl"
    lines = p.read_text().splitlines()
    lines[n - 1] = raw if raw is not None else json.dumps({**json.loads(lines[n - 1]), **(change or {})})
    p.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("change,raw,expect", [
    (None, "[" * 100_000, "JSON nested too deeply"),
    ({"seed": "zero"}, None, "key 'seed': expected an integer >= 0, got 'zero'"),
    ({"byte_nll": ["a"]}, None, "key 'byte_nll': expected a list of numbers (or nulls) or null, got a list holding 'a'"),
    ({"nll_nats": 1e400}, None, "key 'nll_nats': expected a finite number, got inf"),
    ({"n_bytes": 0}, None, "key 'n_bytes': expected a finite number > 0, got 0"),
    ({"mode": "sideways"}, None, "key 'mode': expected one of clean_target, full, got 'sideways'"),
])
def test_bad_samples_lines(change: dict | None, raw: str | None, expect: str, run_copy: tuple[Path, Path],
                           tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run_copy
    _samples_line(out, 2, change, raw)
    assert _report(out, tmp_path) == 2
    assert f"{out / 'samples.jsonl'}: line 2: {expect}" in _line(capsys)


def test_compare_names_the_damaged_run(run_copy: tuple[Path, Path], finished: tuple[Path, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    _, out = run_copy
    _set_cell(out / "results.csv", "n_bytes", "inf")
    assert main(["compare", str(finished[1]), str(out), "--out", str(tmp_path / "cmp"), "--no-svg",
                 "--bootstrap", "10"]) == 2
    assert f"{out / 'results.csv'}: column 'n_bytes' row 2: not a finite number" in _line(capsys)
